use super::*;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

#[derive(Default)]
struct Collect(Vec<(Vec<u8>, Stat)>);

impl Sink for Collect {
    fn file(&mut self, rel: &[u8], stat: Stat) {
        self.0.push((rel.to_vec(), stat));
    }
}

fn write(root: &Path, rel: &str, body: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, body).expect("write");
}

/// What the `ignore` crate's walker (the scan's walker before this one) keeps,
/// with the `lstat` of each entry.
fn reference(root: &Path) -> BTreeMap<Vec<u8>, (u32, u64, u64)> {
    let mut b = ignore::WalkBuilder::new(root);
    b.hidden(false)
        .follow_links(false)
        .same_file_system(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .threads(1);
    b.filter_entry(|e| e.file_name() != ".git");
    let mut out = BTreeMap::new();
    for e in b.build() {
        let e = e.expect("entry");
        if e.depth() == 0 || e.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let m = e.metadata().expect("lstat");
        let rel = e.path().strip_prefix(root).expect("under root");
        out.insert(
            rel.as_os_str().as_bytes().to_vec(),
            (m.mode(), m.size(), m.ino()),
        );
    }
    out
}

#[test]
fn keeps_exactly_what_the_ignore_crate_walker_keeps() {
    let tmp = tempfile::tempdir().expect("tmp");
    let parent = tmp.path().join("parent");
    let root = parent.join("ws");
    write(
        &parent,
        ".gitignore",
        b"from-parent.txt\n/ws/anchored-parent\n",
    );
    write(
        &root,
        ".gitignore",
        b"*.log\n!keep.log\n/build\nnested/deep/\nlogs/\n",
    );
    write(&root, ".ignore", b"!important.log\nscratch*\n");
    write(&root, ".git/info/exclude", b"excluded.txt\n");
    write(&root, ".git/HEAD", b"ref\n");
    for f in [
        "a.log",
        "keep.log",
        "important.log",
        "build/x",
        "sub/build/y",
        "sub/z.log",
        "sub/local.txt",
        "sub/deeper/local.txt",
        "sub/deeper/w.log",
        "nested/deep/f",
        "nested/deepfile",
        "scratch1",
        "sub/scratch2",
        "excluded.txt",
        "sub/excluded.txt",
        "from-parent.txt",
        "sub/from-parent.txt",
        "anchored-parent",
        "logs/x",
        ".hidden/h",
        "plain/p.txt",
        "other/.ignore",
        "other/q.txt",
    ] {
        write(&root, f, f.as_bytes());
    }
    write(&root, "sub/.gitignore", b"!*.log\nlocal.txt\n");
    write(&root, "sub/.git", b"gitdir: elsewhere\n");
    write(&root, "sub/logs", b"a file, not a directory");
    write(&root, "other/.ignore", b"*\n!keep-me\n");
    write(&root, "other/keep-me", b"k");
    std::os::unix::fs::symlink("sub", root.join("dirlink")).expect("symlink");
    std::fs::write(root.join(OsStr::from_bytes(b"caf\xe9.txt")), b"x").expect("odd");

    let want = reference(&root);
    // The tree exercises each kind of rule (checked on the reference itself).
    for kept in [
        "keep.log",
        "important.log",
        "sub/z.log",
        "sub/build/y",
        "sub/logs",
        "nested/deepfile",
        "other/keep-me",
        "dirlink",
        ".hidden/h",
    ] {
        assert!(want.contains_key(kept.as_bytes()), "{kept} kept");
    }
    for gone in [
        "a.log",
        "build/x",
        "sub/local.txt",
        "sub/deeper/local.txt",
        "nested/deep/f",
        "scratch1",
        "sub/scratch2",
        "excluded.txt",
        "sub/excluded.txt",
        "from-parent.txt",
        "sub/from-parent.txt",
        "logs/x",
        "other/q.txt",
        ".git/HEAD",
    ] {
        assert!(!want.contains_key(gone.as_bytes()), "{gone} ignored");
    }
    // Threads, and the entries over which a directory's are shared out among them (1 and 2:
    // every directory's, in parts of up to `PART`).
    for (threads, split_at) in [(1, 2 * PART), (2, 2 * PART), (4, 2 * PART), (2, 1), (4, 2)] {
        let mut opts = WalkOptions::new(u64::MAX);
        opts.threads = threads;
        opts.split_at = split_at;
        let (w, sinks) = walk(&root, &opts, Collect::default);
        assert!(w.dir_errors.is_empty() && w.entry_errors.is_empty());
        assert!(!w.over_limit);
        let got: BTreeMap<Vec<u8>, (u32, u64, u64)> = sinks
            .into_iter()
            .flat_map(|c| c.0)
            .map(|(p, s)| (p, (s.mode, s.size, s.ino)))
            .collect();
        assert_eq!(
            got.keys()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            want.keys()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            "{threads} threads, split over {split_at}"
        );
        assert_eq!(got, want);
        // Every entry of every directory listed to its end is accounted for once: a file
        // passed on, a directory listed, or an entry not walked on (ignored, `.git`).
        let listed: std::collections::BTreeSet<&[u8]> = w.listed.iter().map(|d| &d[..]).collect();
        let unlisted: std::collections::BTreeSet<&[u8]> =
            w.unlisted.iter().map(|d| &d[..]).collect();
        assert!(listed.contains(&b""[..]) && listed.contains(&b"sub"[..]));
        for gone in [".git", "scratch1", "sub/scratch2", "logs", "excluded.txt"] {
            assert!(unlisted.contains(gone.as_bytes()), "{gone}");
        }
        for d in &listed {
            for e in std::fs::read_dir(root.join(OsStr::from_bytes(d)))
                .expect("list")
                .flatten()
            {
                let mut rel = d.to_vec();
                if !rel.is_empty() {
                    rel.push(b'/');
                }
                rel.extend_from_slice(e.file_name().as_bytes());
                let seen = [
                    got.contains_key(&rel),
                    listed.contains(&rel[..]),
                    unlisted.contains(&rel[..]),
                ];
                assert_eq!(
                    seen.iter().filter(|x| **x).count(),
                    1,
                    "{}: {seen:?}",
                    String::from_utf8_lossy(&rel)
                );
            }
        }
    }
}

#[test]
fn stops_at_the_limit() {
    let tmp = tempfile::tempdir().expect("tmp");
    for i in 0..50 {
        write(tmp.path(), &format!("d{}/f{i}", i % 5), b"x");
    }
    let (w, _) = walk(tmp.path(), &WalkOptions::new(20), Collect::default);
    assert!(w.over_limit);
    let (w, sinks) = walk(tmp.path(), &WalkOptions::new(50), Collect::default);
    assert!(!w.over_limit);
    assert_eq!(sinks.iter().map(|c| c.0.len()).sum::<usize>(), 50);
}

#[test]
fn a_large_directory_is_examined_by_every_thread_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let n = 5 * PART + 7;
    for i in 0..n {
        write(tmp.path(), &format!("big/f{i}"), b"x");
    }
    write(tmp.path(), "big/.gitignore", b"f1*\n");
    std::fs::create_dir(tmp.path().join("big/sub")).expect("mkdir");
    write(tmp.path(), "big/sub/g", b"y");
    let want = reference(tmp.path());
    for threads in [1, 2, 3] {
        let mut opts = WalkOptions::new(u64::MAX);
        opts.threads = threads;
        let (w, sinks) = walk(tmp.path(), &opts, Collect::default);
        assert!(!w.over_limit && w.dir_errors.is_empty() && w.entry_errors.is_empty());
        let mut got: Vec<Vec<u8>> = sinks
            .into_iter()
            .flat_map(|c| c.0)
            .map(|(p, _)| p)
            .collect();
        got.sort();
        let before = got.len();
        got.dedup();
        assert_eq!(
            got.len(),
            before,
            "a file passed on twice ({threads} threads)"
        );
        assert_eq!(
            got,
            want.keys().cloned().collect::<Vec<_>>(),
            "{threads} threads"
        );
        let mut listed: Vec<&[u8]> = w.listed.iter().map(|d| &d[..]).collect();
        listed.sort();
        assert_eq!(listed, [&b""[..], b"big", b"big/sub"], "{threads} threads");
        // The ignored names, once each.
        let ignored = w
            .unlisted
            .iter()
            .filter(|u| u.starts_with(b"big/f1"))
            .count();
        let names = (0..n).filter(|i| i.to_string().starts_with('1')).count();
        assert_eq!(ignored, names, "{threads} threads");
    }
    // The limit still stops a walk whose large directory is shared out.
    let mut opts = WalkOptions::new(3 * PART as u64);
    opts.threads = 2;
    assert!(walk(tmp.path(), &opts, Collect::default).0.over_limit);
}
