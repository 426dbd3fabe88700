//! Reading a payload back: every field checked (a bad one is a named error, never
//! a guess), and the partial readers the fold uses to leave parts encoded.

use super::*;

/// Decodes one payload; the error says what is wrong.
pub(crate) fn decode(bytes: &[u8]) -> Result<Record, String> {
    let mut r = Reader { b: bytes, o: 0 };
    let rec = match r.u8()? {
        SESSION => Record::Session {
            session_id: r.string()?,
        },
        FORMAT => Record::Format {
            format: match r.u8()? {
                0 => None,
                1 => Some(r.string()?),
                t => return Err(format!("bad option tag {t}")),
            },
        },
        STAGED => Record::Staged {
            call_id: r.string()?,
            entry: r.entry()?,
            anchor: None,
        },
        STAGED_AT => {
            let call_id = r.string()?;
            let anchor = Some(r.u()?);
            Record::Staged {
                call_id,
                entry: r.entry()?,
                anchor,
            }
        }
        DROPPED => Record::Dropped {
            call_id: r.string()?,
        },
        GROUP => {
            // The entries stay encoded until asked for (opening a long session reads
            // only what the index needs); their framing is checked here.
            let (anchor_seq, source, span) = r.group()?;
            Record::GroupRaw {
                anchor_seq,
                source,
                raw: Shared::copy_of(&bytes[span]),
            }
        }
        TRACKED => {
            let n = r.count()?;
            let mut paths = Vec::with_capacity(n);
            for _ in 0..n {
                let path = r.path()?;
                let known = r.known()?;
                let since = match r.u8()? {
                    0 => None,
                    1 => Some(r.u()?),
                    t => return Err(format!("bad option tag {t}")),
                };
                paths.push(TrackedUpdate { path, known, since });
            }
            Record::Tracked { paths }
        }
        BOUNDARY => Record::Boundary { anchor_seq: r.u()? },
        PRUNED => {
            let n = r.count()?;
            let mut anchors = Vec::with_capacity(n);
            for _ in 0..n {
                anchors.push(r.u()?);
            }
            Record::Pruned { anchors }
        }
        BLOB => {
            let (sha256, data) = blob_body(&mut r)?;
            Record::Blob {
                sha256,
                bytes: Shared::copy_of(data),
            }
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    if r.o != bytes.len() {
        return Err(format!("{} bytes after the record", bytes.len() - r.o));
    }
    Ok(rec)
}

/// The call id, the anchor (`staged_at`) and the encoded entry of a `staged` or
/// `staged_at` payload, checked as [`decode()`]
/// checks them (the entry is decoded later by [`decode_entry`], if ever).
pub(crate) fn staged_parts(bytes: &[u8]) -> Result<(&str, Option<u64>, &[u8]), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let call = r.str_ref()?;
    let anchor = match bytes.first() {
        Some(&STAGED_AT) => Some(r.u()?),
        _ => None,
    };
    let start = r.o;
    r.check_entry()?;
    r.end()?;
    Ok((call, anchor, &bytes[start..]))
}

/// Decodes an entry returned by [`staged_parts`].
pub(crate) fn decode_entry(bytes: &[u8]) -> Result<Entry, String> {
    let mut r = Reader { b: bytes, o: 0 };
    let e = r.entry()?;
    r.end()?;
    Ok(e)
}

/// The name and the bytes of a `blob` payload, checked as [`decode()`] checks them.
pub(crate) fn blob_parts(bytes: &[u8]) -> Result<(String, &[u8]), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let (sha, data) = blob_body(&mut r)?;
    r.end()?;
    Ok((sha, data))
}

/// A blob's name (a valid SHA-256: a blob is only ever named by one) and its bytes.
fn blob_body<'a>(r: &mut Reader<'a>) -> Result<(String, &'a [u8]), String> {
    let sha = r.sha()?;
    if !crate::path::valid_sha(&sha) {
        return Err(format!("blob record named `{sha}`, not a SHA-256"));
    }
    Ok((sha, r.bytes()?))
}

/// The call id of a `dropped` payload.
pub(crate) fn dropped_call(bytes: &[u8]) -> Result<&str, String> {
    let mut r = Reader { b: bytes, o: 1 };
    let call = r.str_ref()?;
    r.end()?;
    Ok(call)
}

/// One update of a `tracked` payload: path and known state still encoded (both
/// checked), and `since`.
pub(crate) type TrackedRef<'a> = (&'a [u8], &'a [u8], Option<u64>);

/// Reads a `tracked` payload into `out`, checked as [`decode()`] checks it; the known
/// states are decoded later by [`decode_known`], if ever.
pub(crate) fn decode_tracked<'a>(
    bytes: &'a [u8],
    out: &mut Vec<TrackedRef<'a>>,
) -> Result<(), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let n = r.count()?;
    out.reserve(n);
    for _ in 0..n {
        let path = r.bytes()?;
        RelPath::check(path).map_err(|e| format!("bad path: {e:?}"))?;
        let start = r.o;
        r.check_known()?;
        let known = &bytes[start..r.o];
        let since = match r.u8()? {
            0 => None,
            1 => Some(r.u()?),
            t => return Err(format!("bad option tag {t}")),
        };
        out.push((path, known, since));
    }
    r.end()
}

/// Decodes a known state returned by [`decode_tracked`].
pub(crate) fn decode_known(bytes: &[u8]) -> Result<Known, String> {
    let mut r = Reader { b: bytes, o: 0 };
    let k = r.known()?;
    r.end()?;
    Ok(k)
}

/// Lowercase hex of raw bytes.
pub(super) fn hex_lower(raw: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(raw.len() * 2);
    for b in raw {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Reads a `group` payload as [`decode()`] does: anchor, source and the entries, still
/// encoded (their framing checked).
pub(crate) fn group_parts(bytes: &[u8]) -> Result<(u64, EntrySource, &[u8]), String> {
    let mut r = Reader { b: bytes, o: 1 };
    let (anchor_seq, source, span) = r.group()?;
    r.end()?;
    Ok((anchor_seq, source, &bytes[span]))
}

/// Decodes the entries of a group payload kept encoded ([`Record::GroupRaw`]).
pub(crate) fn decode_entries(raw: &[u8]) -> Result<Vec<Entry>, String> {
    let mut r = Reader { b: raw, o: 0 };
    let n = r.count()?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(r.entry()?);
    }
    if r.o != raw.len() {
        return Err(format!("{} bytes after the entries", raw.len() - r.o));
    }
    Ok(entries)
}

/// The number of entries of a group payload kept encoded.
pub(crate) fn count_entries(raw: &[u8]) -> usize {
    let mut r = Reader { b: raw, o: 0 };
    r.u().map(|n| n as usize).unwrap_or(0)
}

pub(super) struct Reader<'a> {
    b: &'a [u8],
    o: usize,
}

impl<'a> Reader<'a> {
    /// The fields of a `group` payload after its kind: anchor, source, and the span of
    /// its entries, left encoded (their framing checked).
    fn group(&mut self) -> Result<(u64, EntrySource, std::ops::Range<usize>), String> {
        let anchor_seq = self.u()?;
        let source = self.source()?;
        let start = self.o;
        let n = self.count()?;
        for _ in 0..n {
            self.skip_entry()?;
        }
        Ok((anchor_seq, source, start..self.o))
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, String> {
        let v = *self.b.get(self.o).ok_or("record ends early")?;
        self.o += 1;
        Ok(v)
    }

    #[inline]
    fn u(&mut self) -> Result<u64, String> {
        // Most values fit in one byte.
        if let Some(&b) = self.b.get(self.o) {
            if b & 0x80 == 0 {
                self.o += 1;
                return Ok(u64::from(b));
            }
        }
        self.u_long()
    }

    fn u_long(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    #[inline]
    fn i(&mut self) -> Result<i64, String> {
        let u = self.u()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, String> {
        u32::try_from(self.u()?).map_err(|_| "value out of range".to_string())
    }

    /// A count of items that each take at least one byte.
    #[inline]
    fn count(&mut self) -> Result<usize, String> {
        let n = self.u()?;
        if n > (self.b.len() - self.o) as u64 {
            return Err(format!("count {n} exceeds the record"));
        }
        Ok(n as usize)
    }

    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.count()?;
        let s = &self.b[self.o..self.o + n];
        self.o += n;
        Ok(s)
    }

    fn string(&mut self) -> Result<String, String> {
        self.str_ref().map(str::to_string)
    }

    #[inline]
    fn str_ref(&mut self) -> Result<&'a str, String> {
        let b = self.bytes()?;
        std::str::from_utf8(b).map_err(|_| "text is not UTF-8".to_string())
    }

    /// Nothing left after the record.
    fn end(&self) -> Result<(), String> {
        if self.o != self.b.len() {
            return Err(format!("{} bytes after the record", self.b.len() - self.o));
        }
        Ok(())
    }

    /// Checks a hash as [`Reader::sha`] would read it.
    fn check_sha(&mut self) -> Result<(), String> {
        self.pass_sha(true)
    }

    /// Steps over a hash (32 raw bytes, or its text form — checked as UTF-8 with `utf8`).
    fn pass_sha(&mut self, utf8: bool) -> Result<(), String> {
        match self.u8()? {
            0 => {
                let end = self.o + 32;
                if end > self.b.len() {
                    return Err("record ends early".into());
                }
                self.o = end;
            }
            1 if utf8 => {
                self.str_ref()?;
            }
            1 => {
                self.bytes()?;
            }
            t => return Err(format!("bad hash tag {t}")),
        }
        Ok(())
    }

    /// Checks a known state as [`Reader::known`] would read it, building nothing.
    fn check_known(&mut self) -> Result<(), String> {
        match self.u8()? {
            0 | 1 => Ok(()),
            2 => {
                if self.u8()? > 3 {
                    return Err(format!("bad file kind {}", self.b[self.o - 1]));
                }
                self.u()?;
                self.u32()?;
                self.u()?;
                self.u()?;
                self.u()?;
                self.i()?;
                self.u32()?;
                self.i()?;
                self.u32()?;
                match self.u8()? {
                    0 => {}
                    1 => self.check_sha()?,
                    t => return Err(format!("bad option tag {t}")),
                }
                match self.u8()? {
                    0 | 1 => Ok(()),
                    t => Err(format!("bad flag {t}")),
                }
            }
            t => Err(format!("bad known-state tag {t}")),
        }
    }

    /// Checks one entry as [`Reader::entry`] would read it, building nothing
    /// (a skip reason, rare, is parsed).
    fn check_entry(&mut self) -> Result<(), String> {
        let path = self.bytes()?;
        RelPath::check(path).map_err(|e| format!("bad path: {e:?}"))?;
        self.u()?;
        match self.u8()? {
            0 => {}
            1 => {
                self.check_sha()?;
                self.u()?;
                self.u32()?;
            }
            2 => {
                self.u()?;
            }
            3 => {
                self.json::<SkipReason>()?;
            }
            t => return Err(format!("bad before-state tag {t}")),
        }
        Ok(())
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
        let b = self.bytes()?;
        serde_json::from_slice(b).map_err(|e| e.to_string())
    }

    fn path(&mut self) -> Result<RelPath, String> {
        let b = self.bytes()?;
        RelPath::from_bytes(b).map_err(|e| format!("bad path: {e:?}"))
    }

    fn sha(&mut self) -> Result<String, String> {
        match self.u8()? {
            0 => {
                let end = self.o + 32;
                let raw = self.b.get(self.o..end).ok_or("record ends early")?;
                self.o = end;
                Ok(hex_lower(raw))
            }
            1 => self.string(),
            t => Err(format!("bad hash tag {t}")),
        }
    }

    /// Skips one entry, checking its framing (lengths, tags) without building it.
    fn skip_entry(&mut self) -> Result<(), String> {
        self.bytes()?;
        self.u()?;
        match self.u8()? {
            0 => {}
            1 => {
                self.pass_sha(false)?;
                self.u()?;
                self.u32()?;
            }
            2 => {
                self.u()?;
            }
            3 => {
                self.bytes()?;
            }
            t => return Err(format!("bad before-state tag {t}")),
        }
        Ok(())
    }

    fn entry(&mut self) -> Result<Entry, String> {
        let path = self.path()?;
        let order = self.u()?;
        let before = match self.u8()? {
            0 => BeforeState::Absent,
            1 => BeforeState::File {
                sha256: self.sha()?,
                size: self.u()?,
                mode: self.u32()?,
            },
            2 => BeforeState::Uncovered { size: self.u()? },
            3 => BeforeState::Skipped {
                reason: self.json::<SkipReason>()?,
            },
            t => return Err(format!("bad before-state tag {t}")),
        };
        Ok(Entry {
            path,
            order,
            before,
        })
    }

    fn source(&mut self) -> Result<EntrySource, String> {
        match self.u8()? {
            0 => Ok(EntrySource::Tool {
                call_id: self.string()?,
            }),
            1 => Ok(EntrySource::Recheck),
            255 => self.json(),
            t => Err(format!("bad source tag {t}")),
        }
    }

    fn known(&mut self) -> Result<Known, String> {
        match self.u8()? {
            0 => Ok(Known::Unknown),
            1 => Ok(Known::Absent),
            2 => {
                let kind = match self.u8()? {
                    0 => FileKind::File,
                    1 => FileKind::Dir,
                    2 => FileKind::Symlink,
                    3 => FileKind::Other,
                    t => return Err(format!("bad file kind {t}")),
                };
                let meta = DiskMeta {
                    kind,
                    size: self.u()?,
                    mode: self.u32()?,
                    nlink: self.u()?,
                    ino: self.u()?,
                    dev: self.u()?,
                    mtime_s: self.i()?,
                    mtime_ns: self.u32()?,
                    ctime_s: self.i()?,
                    ctime_ns: self.u32()?,
                };
                let sha256 = match self.u8()? {
                    0 => None,
                    1 => Some(self.sha()?),
                    t => return Err(format!("bad option tag {t}")),
                };
                let recorded = match self.u8()? {
                    0 => false,
                    1 => true,
                    t => return Err(format!("bad flag {t}")),
                };
                Ok(Known::Present {
                    meta,
                    sha256,
                    recorded,
                })
            }
            t => Err(format!("bad known-state tag {t}")),
        }
    }
}
