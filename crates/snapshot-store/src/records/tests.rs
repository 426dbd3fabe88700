use super::fold::{PARALLEL_FOLD, fold_frames_one, fold_frames_split};
use super::*;
use crate::format::{BeforeState, SkipReason};
use crate::fsio::{DiskMeta, FileKind};
use crate::path::RelPath;

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn entry(r: &mut Rng, order: u64) -> Entry {
    let path =
        RelPath::from_bytes(format!("d{}/f{}", r.next(3), r.next(6)).as_bytes()).expect("path");
    let before = match r.next(4) {
        0 => BeforeState::Absent,
        1 => BeforeState::File {
            sha256: format!("{:064x}", r.next(1 << 40)),
            size: r.next(100),
            mode: 0o644,
        },
        2 => BeforeState::Uncovered { size: r.next(9) },
        _ => BeforeState::Skipped {
            reason: SkipReason::Symlink,
        },
    };
    Entry {
        path,
        order,
        before,
    }
}

fn known(r: &mut Rng) -> Known {
    match r.next(3) {
        0 => Known::Unknown,
        1 => Known::Absent,
        _ => Known::Present {
            meta: DiskMeta {
                kind: FileKind::File,
                size: r.next(50),
                mode: 0o600,
                nlink: 1,
                ino: r.next(1000),
                dev: 3,
                mtime_s: 5,
                mtime_ns: 6,
                ctime_s: -7,
                ctime_ns: 8,
            },
            sha256: (r.next(2) == 0).then(|| format!("{:064x}", r.next(99))),
            recorded: r.next(2) == 0,
        },
    }
}

fn records(seed: u64, n: usize) -> Vec<Record> {
    let mut r = Rng(seed);
    let mut out = vec![Record::Session {
        session_id: "s".into(),
    }];
    for i in 0..n as u64 {
        let call = format!("c{}", r.next(5));
        out.push(match r.next(9) {
            8 => {
                // A few distinct contents, so that some are kept twice.
                let content = format!("content {}", r.next(4));
                Record::Blob {
                    sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(content.as_bytes())),
                    bytes: crate::codec::Shared::copy_of(content.as_bytes()),
                }
            }
            0 | 1 => Record::Staged {
                call_id: call,
                entry: entry(&mut r, i),
                anchor: (r.next(2) == 0).then(|| r.next(4)),
            },
            2 => Record::Dropped { call_id: call },
            3 => Record::Group {
                anchor_seq: r.next(4),
                source: match r.next(3) {
                    0 => EntrySource::Recheck,
                    1 => EntrySource::Outside,
                    _ => EntrySource::Tool { call_id: call },
                },
                entries: (0..r.next(3)).map(|k| entry(&mut r, i * 10 + k)).collect(),
            },
            4 | 5 => Record::Tracked {
                paths: (0..1 + r.next(3))
                    .map(|_| TrackedUpdate {
                        path: RelPath::from_bytes(format!("d1/f{}", r.next(6)).as_bytes())
                            .expect("path"),
                        known: known(&mut r),
                        since: (r.next(2) == 0).then(|| r.next(5)),
                    })
                    .collect(),
            },
            6 => Record::Boundary {
                anchor_seq: r.next(5),
            },
            _ => Record::Pruned {
                anchors: vec![r.next(4)],
            },
        });
    }
    out
}

/// The index as folded record by record from fully decoded frames.
fn reference(bytes: &[u8], start: usize, idx: &mut Index) {
    let d = crate::log::decode_frames(bytes, start).expect("decode");
    for (rec, n) in d.records {
        idx.apply(rec, n).expect("apply");
    }
}

#[test]
fn folding_frames_gives_the_index_of_decoding_then_applying_each_record() {
    for seed in 0..40 {
        let recs = records(seed, 120);
        let bytes = encode_log(&recs);
        let (got, valid, torn) = fold_log(Path::new("records.log"), bytes.clone()).expect("fold");
        assert_eq!((valid, torn), (bytes.len() as u64, 0));
        let mut want = Index::default();
        reference(&bytes, HEADER_LEN, &mut want);
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "seed {seed}");
        // Folded in two parts (another handle's appends), with the groups' paths
        // merged in between.
        let cut = encode_log(&recs[..60]).len();
        let (mut a, _, _) =
            fold_log(Path::new("records.log"), bytes[..cut].to_vec()).expect("fold");
        let mut b = a.clone();
        a.merge_group_paths().expect("merge");
        b.merge_group_paths().expect("merge");
        fold_frames(
            &mut a,
            Path::new("records.log"),
            &std::sync::Arc::new(bytes[cut..].to_vec()),
            0,
        )
        .expect("tail");
        reference(&bytes[cut..], 0, &mut b);
        assert_eq!(
            format!("{a:?}"),
            format!("{b:?}"),
            "seed {seed}, in two parts"
        );
    }
}

#[test]
fn a_large_log_folds_on_two_threads_as_on_one() {
    let recs = records(11, 32_000);
    let full = encode_log(&recs);
    assert!(full.len() > PARALLEL_FOLD, "{}", full.len());
    let fold = |b: &[u8], split: bool| {
        let mut idx = Index::default();
        let all = std::sync::Arc::new(b.to_vec());
        let path = Path::new("records.log");
        let r = if split {
            fold_frames_split(&mut idx, path, &all, HEADER_LEN)
        } else {
            fold_frames_one(&mut idx, path, &all, HEADER_LEN)
        };
        match r {
            Ok(v) => format!("{v:?} {idx:?}"),
            Err(e) => format!("error: {e}"),
        }
    };
    let mut cases = vec![full.clone(), full[..full.len() - 7].to_vec()];
    let mut zeroed = full.clone();
    zeroed.extend_from_slice(&[0u8; 64]);
    cases.push(zeroed);
    for at in [
        HEADER_LEN + 20,
        full.len() / 3,
        full.len() / 2 + 5,
        full.len() - 2,
    ] {
        for bit in [0x01u8, 0x40] {
            let mut flipped = full.clone();
            flipped[at] ^= bit;
            cases.push(flipped);
        }
    }
    // A record naming another session late in the log, then (checksum fixed up)
    // an unknown kind after it, and a damaged checksum after that.
    let mut bad = recs.clone();
    bad.insert(
        24_000,
        Record::Session {
            session_id: "other".into(),
        },
    );
    let bad = encode_log(&bad);
    cases.push(bad.clone());
    let mut unknown = bad.clone();
    let payload = [200u8, 1];
    unknown.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    unknown.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
    unknown.extend_from_slice(&crate::log::crc32(&payload).to_le_bytes());
    unknown.extend_from_slice(&payload);
    unknown.extend_from_slice(&encode_log(&recs[1..40])[HEADER_LEN..]);
    cases.push(unknown.clone());
    let mut both = unknown;
    both[bad.len() - 30] ^= 0x08;
    cases.push(both);
    for (i, b) in cases.iter().enumerate() {
        assert_eq!(fold(b, true), fold(b, false), "case {i}");
    }
    assert!(!fold(&cases[0], true).starts_with("error"));
}

#[test]
fn damage_is_reported_before_a_contradicting_record() {
    let mut recs = records(7, 30);
    recs.insert(
        5,
        Record::Session {
            session_id: "other".into(),
        },
    );
    let mut bytes = encode_log(&recs);
    match fold_log(Path::new("records.log"), bytes.clone()) {
        Err(Fault::Corrupt(c)) => assert!(c.detail.contains("other"), "{c:?}"),
        other => panic!("{other:?}"),
    }
    // An unknown record kind after it (checksum fixed up): that damage wins.
    let mut extra = Vec::new();
    let payload = [200u8, 1];
    extra.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    extra.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
    extra.extend_from_slice(&crate::log::crc32(&payload).to_le_bytes());
    extra.extend_from_slice(&payload);
    bytes.extend_from_slice(&extra);
    bytes.extend_from_slice(&encode_log(&recs[1..3])[HEADER_LEN..]);
    match fold_log(Path::new("records.log"), bytes.clone()) {
        Err(Fault::Corrupt(c)) => {
            assert!(c.detail.contains("unreadable record"), "{c:?}")
        }
        other => panic!("{other:?}"),
    }
}
