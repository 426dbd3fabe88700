use super::*;

fn rt(rec: Record) {
    let mut b = Vec::new();
    encode(&rec, &mut b);
    let back = match decode(&b).expect("decode") {
        Record::GroupRaw {
            anchor_seq,
            source,
            raw,
        } => {
            // Re-encoding the kept bytes gives the same payload.
            let mut again = Vec::new();
            encode(
                &Record::GroupRaw {
                    anchor_seq,
                    source: source.clone(),
                    raw: raw.clone(),
                },
                &mut again,
            );
            assert_eq!(again, b);
            Record::Group {
                anchor_seq,
                source,
                entries: decode_entries(&raw).expect("entries"),
            }
        }
        r => r,
    };
    assert_eq!(back, rec);
    // Every strict prefix is refused, never misread.
    for cut in 0..b.len() {
        assert!(decode(&b[..cut]).is_err(), "prefix {cut} of {rec:?}");
    }
}

fn p(s: &str) -> RelPath {
    RelPath::from_bytes(s.as_bytes()).expect("path")
}

#[test]
fn every_record_kind_round_trips() {
    let sha = "ab".repeat(32);
    let meta = DiskMeta {
        kind: FileKind::File,
        size: 16384,
        mode: 0o644,
        nlink: 1,
        ino: u64::MAX,
        dev: 2049,
        mtime_s: -5,
        mtime_ns: 999_999_999,
        ctime_s: 1_764_440_000,
        ctime_ns: 0,
    };
    let entries = vec![
        Entry {
            path: p("a/b.txt"),
            order: 1_764_440_000_000_000_000,
            before: BeforeState::File {
                sha256: sha.clone(),
                size: 3,
                mode: 0o755,
            },
        },
        Entry {
            path: RelPath::from_bytes(b"bin/\xff\xfe").expect("raw"),
            order: 2,
            before: BeforeState::Absent,
        },
        Entry {
            path: p("big"),
            order: 3,
            before: BeforeState::Uncovered { size: 9 << 30 },
        },
        Entry {
            path: p("link"),
            order: 4,
            before: BeforeState::Skipped {
                reason: SkipReason::HardLink { nlink: 3 },
            },
        },
    ];
    rt(Record::Session {
        session_id: "s/ü%".into(),
    });
    rt(Record::Format { format: None });
    rt(Record::Format {
        format: Some("dsh-session-v0".into()),
    });
    rt(Record::Staged {
        call_id: "c1".into(),
        entry: entries[0].clone(),
        anchor: None,
    });
    rt(Record::Staged {
        call_id: "c2".into(),
        entry: entries[1].clone(),
        anchor: Some(300),
    });
    rt(Record::Dropped {
        call_id: "c1".into(),
    });
    rt(Record::Group {
        anchor_seq: 12,
        source: EntrySource::Tool {
            call_id: "c1".into(),
        },
        entries: entries.clone(),
    });
    rt(Record::Group {
        anchor_seq: u64::MAX,
        source: EntrySource::Recheck,
        entries,
    });
    rt(Record::Tracked {
        paths: vec![
            TrackedUpdate {
                path: p("a"),
                known: Known::Unknown,
                since: None,
            },
            TrackedUpdate {
                path: p("b"),
                known: Known::Absent,
                since: Some(7),
            },
            TrackedUpdate {
                path: p("c"),
                known: Known::Present {
                    meta,
                    sha256: Some(sha),
                    recorded: true,
                },
                since: Some(0),
            },
            TrackedUpdate {
                path: p("d"),
                known: Known::Present {
                    meta,
                    sha256: None,
                    recorded: false,
                },
                since: None,
            },
        ],
    });
    rt(Record::Boundary { anchor_seq: 300 });
    rt(Record::Pruned {
        anchors: vec![1, 2, 1 << 40],
    });
    rt(Record::Blob {
        sha256: "ab".repeat(32),
        bytes: Shared::copy_of(b"small file\n"),
    });
    rt(Record::Blob {
        sha256: "00".repeat(32),
        bytes: Shared::copy_of(b""),
    });
}

#[test]
fn damaged_payloads_are_refused_with_a_reason() {
    assert_eq!(decode(&[99]).unwrap_err(), "unknown record kind 99");
    let mut b = Vec::new();
    encode(&Record::Boundary { anchor_seq: 5 }, &mut b);
    b.push(0);
    assert!(decode(&b).unwrap_err().contains("after the record"));
    // A blob is named by a SHA-256 only (a name kept as text is refused).
    let mut b = Vec::new();
    encode(
        &Record::Blob {
            sha256: "../escape".into(),
            bytes: Shared::copy_of(b"x"),
        },
        &mut b,
    );
    assert!(decode(&b).unwrap_err().contains("not a SHA-256"));
    assert!(blob_parts(&b).is_err());
    // A count larger than the record cannot make the reader allocate or overrun.
    let mut g = vec![GROUP, 1, 1];
    put_u(&mut g, u64::MAX);
    assert!(decode(&g).unwrap_err().contains("exceeds"));
}
