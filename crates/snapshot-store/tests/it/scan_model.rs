//! Property: after random shell-like mutations over several turns (writes, binary
//! overwrites, chmod, deletes, `rm -rf`, renames, generated trees, changes between
//! calls), a plan + restore to any earlier message brings the tree back exactly:
//! bytes and executable bits, and directories created since are gone. The same with the
//! write tools' calls among the shell's, over files the message's scan has settled, and
//! changes no scan sees made to a file (or creating it) just before a write tool edits it.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use snapshot_store::{ScanPhase, ScanRequest, Session};

use crate::common::Env;

type Files = BTreeMap<PathBuf, (Vec<u8>, bool)>;

#[derive(Debug, Clone)]
enum Op {
    Write(usize, Vec<u8>),
    Chmod(usize, bool),
    Delete(usize),
    RmDir(usize),
    Rename(usize, usize),
    Tree(usize, u8),
}

const PATHS: [&str; 10] = [
    "f", "g.sh", "a/f", "a/g.sh", "a/b/f", "a/b/h", "b/f", "b/c/d/f", "c/x", "c/y/z",
];
const DIRS: [&str; 5] = ["a", "a/b", "b", "b/c", "c"];

fn op() -> impl Strategy<Value = Op> {
    let i = 0..PATHS.len();
    prop_oneof![
        3 => (i.clone(), prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(p, b)| Op::Write(p, b)),
        1 => (i.clone(), any::<bool>()).prop_map(|(p, x)| Op::Chmod(p, x)),
        1 => i.clone().prop_map(Op::Delete),
        1 => (0..DIRS.len()).prop_map(Op::RmDir),
        1 => (i.clone(), i).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (0..DIRS.len(), 1u8..6).prop_map(|(d, n)| Op::Tree(d, n)),
    ]
}

/// One call: changes between calls (unscanned), then the call's own changes.
type Call = (Vec<Op>, Vec<Op>);

fn turns() -> impl Strategy<Value = Vec<Vec<Call>>> {
    let call = (
        prop::collection::vec(op(), 0..2),
        prop::collection::vec(op(), 1..5),
    );
    prop::collection::vec(prop::collection::vec(call, 1..3), 1..4)
}

/// Whether `rel` can be created as a file: no prefix is a file, it is not a directory.
fn creatable(root: &Path, rel: &str) -> bool {
    let p = root.join(rel);
    if p.is_dir() {
        return false;
    }
    let mut cur = root.to_path_buf();
    for c in Path::new(rel)
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
    {
        cur.push(c);
        if cur.exists() && !cur.is_dir() {
            return false;
        }
    }
    true
}

fn apply(root: &Path, op: &Op) {
    match op {
        Op::Write(i, b) => {
            if creatable(root, PATHS[*i]) {
                let p = root.join(PATHS[*i]);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::fs::write(p, b).expect("write");
            }
        }
        Op::Chmod(i, x) => {
            let p = root.join(PATHS[*i]);
            if p.is_file() {
                let m = if *x { 0o755 } else { 0o644 };
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
            }
        }
        Op::Delete(i) => {
            let p = root.join(PATHS[*i]);
            if p.is_file() {
                std::fs::remove_file(p).expect("rm");
            }
        }
        Op::RmDir(d) => {
            let _ = std::fs::remove_dir_all(root.join(DIRS[*d]));
        }
        Op::Rename(a, b) => {
            let (from, to) = (root.join(PATHS[*a]), PATHS[*b]);
            if from.is_file() && a != b && creatable(root, to) {
                let t = root.join(to);
                std::fs::create_dir_all(t.parent().expect("parent")).expect("mkdir");
                std::fs::rename(from, t).expect("mv");
            }
        }
        Op::Tree(d, n) => {
            let base = root.join(DIRS[*d]).join("gen");
            if creatable(root, &format!("{}/gen/x", DIRS[*d])) {
                for i in 0..*n {
                    let p = base.join(format!("k{}", i % 2)).join(format!("t{i}"));
                    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                    std::fs::write(p, [i; 3]).expect("write");
                }
            }
        }
    }
}

fn files(root: &Path) -> (Files, BTreeSet<PathBuf>) {
    let mut f = Files::new();
    let mut d = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).expect("under").to_path_buf();
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            if m.is_dir() {
                d.insert(rel);
                stack.push(p);
            } else {
                let exec = m.permissions().mode() & 0o111 != 0;
                f.insert(rel, (std::fs::read(&p).expect("read"), exec));
            }
        }
    }
    (f, d)
}

/// The directories that hold at least one of `files`.
fn holding(files: &Files) -> BTreeSet<PathBuf> {
    files
        .keys()
        .flat_map(|p| {
            p.ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .map(Path::to_path_buf)
        })
        .collect()
}

fn scan(s: &Session, phase: ScanPhase, anchor: u64, call: Option<String>) {
    let mut r = ScanRequest::new(phase, anchor);
    r.call_id = call;
    let rep = s.scan(&r).expect("scan");
    assert!(rep.not_covered.is_empty(), "{:?}", rep.not_covered);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn plan_and_restore_bring_the_tree_back(
        init in prop::collection::vec(op(), 0..6),
        turns in turns(),
        pick in any::<prop::sample::Index>(),
    ) {
        let (env, s) = session_over(&init);
        let mut at = Vec::new();
        let mut n = 0;
        for (t, calls) in turns.iter().enumerate() {
            let anchor = message(&s, &env.cwd, t, &mut at);
            for (between, ops) in calls {
                for o in between {
                    apply(&env.cwd, o);
                }
                n += 1;
                shell_call(&s, &env.cwd, anchor, format!("call-{n}"), ops);
            }
        }
        restore_checked(&s, &env.cwd, &at[pick.index(at.len())])?;
    }

    #[test]
    fn write_tools_and_shell_calls_over_settled_files_restore_exactly(
        init in prop::collection::vec(op(), 1..8),
        turns in prop::collection::vec(prop::collection::vec(step(), 1..4), 1..4),
        pick in any::<prop::sample::Index>(),
    ) {
        // The write tools' first edits of files the message's scan stored name the index's
        // content instead of reading the file (docs/format.md, "A file the workspace scan
        // stored"): every change is made older than the scan's racy window before each
        // message, so those captures find the index's entries trusted.
        let (env, s) = session_over(&init);
        let mut at = Vec::new();
        let mut n = 0;
        for (t, steps) in turns.iter().enumerate() {
            std::thread::sleep(std::time::Duration::from_millis(60));
            let anchor = message(&s, &env.cwd, t, &mut at);
            for step in steps {
                n += 1;
                let id = format!("call-{n}");
                match step {
                    Step::Shell(ops) => shell_call(&s, &env.cwd, anchor, id, ops),
                    Step::Tool(i, bytes, quick, between) => {
                        // An editor or a job changes (or creates) the file the tool is about
                        // to edit, with no scan in between.
                        if let Some(o) = between {
                            apply(&env.cwd, &o.on(*i));
                        }
                        if !creatable(&env.cwd, PATHS[*i]) {
                            continue;
                        }
                        let rel = Path::new(PATHS[*i]);
                        let now = match quick {
                            true => s.try_capture_before_at(&id, rel, anchor, 1 << 20),
                            false => None,
                        };
                        now.unwrap_or_else(|| s.capture_before_at(&id, rel, anchor))
                            .expect("capture");
                        apply(&env.cwd, &Op::Write(*i, bytes.clone()));
                        s.commit(&id, anchor, true).expect("commit");
                    }
                }
            }
        }
        restore_checked(&s, &env.cwd, &at[pick.index(at.len())])?;
    }
}

/// The tree at each message: the message's anchor and the files and directories there.
type AtMessages = Vec<(u64, (Files, BTreeSet<PathBuf>))>;

/// A workspace made by `init`, and a session over it.
fn session_over(init: &[Op]) -> (Env, Session) {
    let env = Env::new();
    for o in init {
        apply(&env.cwd, o);
    }
    let s = env.session(&env.store());
    (env, s)
}

/// The message of turn `t` (its re-check and scan); the tree there is added to `at`.
fn message(s: &Session, root: &Path, t: usize, at: &mut AtMessages) -> u64 {
    let anchor = 10 * (t as u64 + 1);
    s.recheck_tracked(anchor).expect("recheck");
    scan(s, ScanPhase::Boundary, anchor, None);
    at.push((anchor, files(root)));
    anchor
}

/// A shell call `id`: the workspace scanned before and after its changes `ops`.
fn shell_call(s: &Session, root: &Path, anchor: u64, id: String, ops: &[Op]) {
    scan(s, ScanPhase::Before, anchor, Some(id.clone()));
    for o in ops {
        apply(root, o);
    }
    scan(s, ScanPhase::After, anchor, Some(id));
}

/// A write tool's call (path, content, made in the form that never waits, a change made to
/// the file just before it without a scan) or a shell call.
#[derive(Debug, Clone)]
enum Step {
    Shell(Vec<Op>),
    Tool(usize, Vec<u8>, bool, Option<Unseen>),
}

/// A change to one file that no scan sees.
#[derive(Debug, Clone)]
enum Unseen {
    Write(Vec<u8>),
    Chmod(bool),
    Delete,
}

impl Unseen {
    fn on(&self, i: usize) -> Op {
        match self {
            Unseen::Write(b) => Op::Write(i, b.clone()),
            Unseen::Chmod(x) => Op::Chmod(i, *x),
            Unseen::Delete => Op::Delete(i),
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    let unseen = prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Unseen::Write),
        1 => any::<bool>().prop_map(Unseen::Chmod),
        1 => Just(Unseen::Delete),
    ];
    prop_oneof![
        1 => prop::collection::vec(op(), 1..4).prop_map(Step::Shell),
        2 => (
            0..PATHS.len(),
            prop::collection::vec(any::<u8>(), 0..40),
            any::<bool>(),
            prop::option::of(unseen),
        )
            .prop_map(|(p, b, q, u)| Step::Tool(p, b, q, u)),
    ]
}

/// Plans and restores `s` to the message of `target`, then checks the tree is the one seen
/// there: the same files, bytes and executable bits, the directories that hold them, and
/// none that the restore emptied.
fn restore_checked(
    s: &Session,
    root: &Path,
    target: &(u64, (Files, BTreeSet<PathBuf>)),
) -> Result<(), TestCaseError> {
    let (anchor, (want_files, want_dirs)) = target;
    let plan = s.plan_restore(*anchor).expect("plan");
    prop_assert!(plan.outside.is_empty(), "{:?}", plan.outside);
    let (pre_files, _) = files(root);
    let out = s.restore(&plan, "op").expect("restore");
    prop_assert!(out.failed.is_empty(), "{:?}", out.failed);
    let (got_files, got_dirs) = files(root);
    prop_assert_eq!(&got_files, want_files);
    // Directories holding files at the target are there; none created since remains.
    let needed = holding(want_files);
    prop_assert!(
        needed.is_subset(&got_dirs),
        "missing dirs: {:?}",
        needed.difference(&got_dirs).collect::<Vec<_>>()
    );
    // An extra directory may only be one the agent itself left empty (directories
    // are not recorded, see docs/tracking-boundary.md); none the restore emptied.
    let held = holding(&pre_files);
    let emptied: Vec<_> = got_dirs
        .difference(want_dirs)
        .filter(|d| held.contains(*d))
        .collect();
    prop_assert!(
        emptied.is_empty(),
        "directories the restore emptied remain: {:?}",
        emptied
    );
    Ok(())
}
