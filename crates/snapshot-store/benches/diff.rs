//! The line diff a rewind's confirm dialog shows, against a raw baseline measured in
//! the same run. Results go to `target/bench-results/snapshot-store-diff.md`.
//!
//! * the diff of a 10,000-line file against the same file with one line changed
//!   (`diff_texts`: counts and unified hunks), vs a plain line-by-line equality scan
//!   of the two texts (the least any line diff must do);
//! * the same through `Session::diff_action` (the workspace file and the backup blob
//!   read, the blob's hash checked, then diffed) — what the `diff` RPC pays — vs
//!   reading the two files.

#[path = "../../../benches/support/timing.rs"]
mod timing;

use std::path::Path;

use snapshot_store::{DiffLimits, Store, StoreOptions, diff_texts};

fn text(lines: usize, changed: Option<usize>) -> String {
    (0..lines)
        .map(|i| {
            if Some(i) == changed {
                format!("line {i}: changed by the agent\n")
            } else {
                format!("line {i}: fn item_{i}(x: u32) -> u32 {{ x + {i} }}\n")
            }
        })
        .collect()
}

fn main() {
    let mut report = timing::Report::new(
        "snapshot-store-diff",
        "snapshot-store: the line diff of the confirm dialog",
        "The diff of a 10,000-line file (about 500 KB) against the same file with one line changed. \
         `diff_texts`: `+/−` counts and unified hunks (similar's Myers diff, 3 lines of context), vs a plain \
         line-by-line equality scan of the two texts. `diff_action`: the same diff as the `diff` RPC computes it \
         (the workspace file read without following symlinks, the backup blob read and its hash checked), vs \
         reading the two files. The absolute goal is ≤ 20 ms for the diff.",
    );
    let old = text(10_000, Some(5_000));
    let new = text(10_000, None);
    let limits = DiffLimits::default();
    let (subject, baseline) = timing::pair(
        30,
        || {
            let d = diff_texts("f.rs", &old, &new, &limits);
            assert_eq!((d.added, d.removed), (Some(1), Some(1)));
        },
        || {
            let same = old.lines().zip(new.lines()).filter(|(a, b)| a == b).count();
            assert_eq!(same, 9_999);
        },
    );
    let against_goal = |case: &str, subject: std::time::Duration| {
        let met = if subject.as_secs_f64() <= 0.020 {
            "met"
        } else {
            "**not met**"
        };
        format!("{case} (absolute goal ≤ 20 ms: {met})")
    };
    report.row(
        &against_goal("diff_texts, 10,000 lines, 1 changed", subject),
        subject,
        baseline,
        None,
    );

    // Through the store: a session whose tool call changed one line of the file.
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("f.rs"), &new).unwrap();
    let store = Store::open(&tmp.path().join("store"), StoreOptions::default()).unwrap();
    let s = store.session("bench", &ws).unwrap();
    s.capture_before("c1", Path::new("f.rs")).unwrap();
    std::fs::write(ws.join("f.rs"), &old).unwrap();
    s.commit("c1", 1, true).unwrap();
    let plan = s.plan_restore(1).unwrap();
    let action = plan.actions.first().unwrap().clone();
    let blob = tmp
        .path()
        .join("store")
        .join("blobs")
        .join(match &action.action {
            snapshot_store::Action::Write { sha256, .. } => sha256.clone(),
            _ => unreachable!(),
        });
    let (subject, baseline) = timing::pair(
        30,
        || {
            let d = s.diff_action(&action, &limits).unwrap();
            assert_eq!((d.added, d.removed), (Some(1), Some(1)));
        },
        || {
            let a = std::fs::read(ws.join("f.rs")).unwrap();
            let b = std::fs::read(&blob).unwrap();
            assert_eq!(a.len() + b.len(), old.len() + new.len());
        },
    );
    report.row(
        &against_goal(
            "diff_action (files read, blob checked), 10,000 lines",
            subject,
        ),
        subject,
        baseline,
        None,
    );
    report.write();
}
