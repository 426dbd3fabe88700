//! The index's entries and the object store, read natively, against the `git` CLI on real
//! repositories: loose objects, packs with deltas after `git gc`, index version 4.

use std::path::Path;
use std::process::Command;

use git_state::{EntriesError, Odb, blob_oid, read_entries};

use rewind_test_support::git::git_out as git;

fn oid(hex_id: &str) -> [u8; 20] {
    let mut o = [0u8; 20];
    hex::decode_to_slice(hex_id.trim(), &mut o).expect("hex id");
    o
}

/// A repository with a file of many revisions (so `git gc` stores deltas), a few others,
/// and a binary file.
fn repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(d.join("src/deep")).unwrap();
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!(
            "line {i} of a file that grows a little at every revision\n"
        ));
    }
    for rev in 0..30 {
        text.push_str(&format!("revision {rev}\n"));
        let t2 = text.replace(&format!("line {rev} "), &format!("LINE {rev} "));
        std::fs::write(d.join("src/deep/grow.txt"), &t2).unwrap();
        std::fs::write(d.join("a.txt"), format!("a {rev}\n")).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", &format!("r{rev}")]);
    }
    let bin: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(d.join("bin.dat"), &bin).unwrap();
    std::fs::write(d.join("empty"), b"").unwrap();
    git(d, &["add", "-A"]);
    git(d, &["commit", "-q", "-m", "bin"]);
    t
}

/// Every blob of every commit, with the id `git rev-list --objects` gives it.
fn all_blobs(d: &Path) -> Vec<[u8; 20]> {
    let list = git(d, &["rev-list", "--objects", "--all"]);
    let mut out = Vec::new();
    for line in list.lines() {
        let id = &line[..40];
        if git(d, &["cat-file", "-t", id]).trim() == "blob" {
            out.push(oid(id));
        }
    }
    out
}

fn check_all(d: &Path, blobs: &[[u8; 20]]) {
    let odb = Odb::open(&d.join(".git"));
    for b in blobs {
        let got = odb.read_blob(b).expect("read").expect("present");
        let want = Command::new("git")
            .args(["cat-file", "blob", &hex::encode(b)])
            .current_dir(d)
            .output()
            .unwrap()
            .stdout;
        assert_eq!(got, want, "blob {}", hex::encode(b));
        assert_eq!(blob_oid(&got), *b);
        assert!(odb.contains(b).unwrap());
    }
}

#[test]
fn blobs_read_loose_and_packed_with_deltas_are_gits() {
    let t = repo();
    let d = t.path();
    let blobs = all_blobs(d);
    assert!(blobs.len() > 60, "{} blobs", blobs.len());
    check_all(d, &blobs);
    git(d, &["gc", "-q", "--aggressive", "--prune=now"]);
    let loose = std::fs::read_dir(d.join(".git/objects"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().len() == 2)
        .count();
    assert_eq!(loose, 0, "everything packed");
    // Deltas exist in the pack (`git verify-pack` lists a chain length for them).
    let idx = std::fs::read_dir(d.join(".git/objects/pack"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .unwrap();
    let vp = git(d, &["verify-pack", "-v", idx.to_str().unwrap()]);
    assert!(vp.contains("chain length = "), "no deltas: {vp}");
    check_all(d, &blobs);
    // A missing object is `None`, not an error; a tree is refused as no blob.
    let odb = Odb::open(&d.join(".git"));
    assert!(odb.read_blob(&[0xab; 20]).unwrap().is_none());
    assert!(!odb.contains(&[0xab; 20]).unwrap());
    let tree = oid(&git(d, &["rev-parse", "HEAD^{tree}"]));
    assert!(odb.read_blob(&tree).is_err());
}

#[test]
fn a_damaged_loose_object_is_an_error_not_content() {
    let t = repo();
    let d = t.path();
    let id = git(d, &["rev-parse", "HEAD:a.txt"]);
    let id = id.trim();
    let p = d.join(".git/objects").join(&id[..2]).join(&id[2..]);
    // Replace it with another blob's (valid) object: the id check refuses it.
    let other = git(d, &["rev-parse", "HEAD:empty"]);
    let other = other.trim();
    let q = d.join(".git/objects").join(&other[..2]).join(&other[2..]);
    let bytes = std::fs::read(&q).unwrap();
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(&p, perm).unwrap();
    std::fs::write(&p, bytes).unwrap();
    let odb = Odb::open(&d.join(".git"));
    assert!(odb.read_blob(&oid(id)).is_err());
}

#[test]
fn index_entries_match_ls_files_in_versions_2_3_and_4_and_leave_out_intent_to_add() {
    let t = repo();
    let d = t.path();
    // An intent-to-add entry (extended flags: the index is written as version 3 at least)
    // says nothing of the file's content: left out.
    std::fs::write(d.join("ita.txt"), "later\n").unwrap();
    git(d, &["add", "-N", "ita.txt"]);
    for v in ["3", "4"] {
        git(d, &["update-index", "--index-version", v]);
        let bytes = std::fs::read(d.join(".git/index")).unwrap();
        let ix = read_entries(&bytes).expect("entries");
        assert_eq!(ix.version.to_string(), v);
        let ls = git(d, &["ls-files", "-s"]);
        let want: Vec<(String, String, String)> = ls
            .lines()
            .filter(|l| !l.ends_with("\tita.txt"))
            .map(|l| {
                let (meta, path) = l.split_once('\t').unwrap();
                let mut m = meta.split(' ');
                let mode = m.next().unwrap().to_string();
                let id = m.next().unwrap().to_string();
                (path.to_string(), mode, id)
            })
            .collect();
        let got: Vec<(String, String, String)> = ix
            .entries
            .iter()
            .map(|e| {
                (
                    String::from_utf8(e.path.clone()).unwrap(),
                    format!("{:o}", e.mode),
                    hex::encode(e.oid),
                )
            })
            .collect();
        assert_eq!(got, want, "index version {v}");
        let e = ix.get(b"src/deep/grow.txt").expect("entry");
        let meta = std::fs::symlink_metadata(d.join("src/deep/grow.txt")).unwrap();
        assert_eq!(u64::from(e.size), meta.len());
    }
    git(d, &["rm", "-q", "--cached", "ita.txt"]);
    git(d, &["update-index", "--index-version", "2"]);
    let ix = read_entries(&std::fs::read(d.join(".git/index")).unwrap()).expect("v2");
    assert_eq!(ix.version, 2);
    assert_eq!(ix.entries.len(), git(d, &["ls-files"]).lines().count());
    // A required extension this reader does not know is refused (checksum resealed).
    let mut bytes = std::fs::read(d.join(".git/index")).unwrap();
    let end = bytes.len() - 20;
    bytes.truncate(end);
    bytes.extend_from_slice(b"zzzz\0\0\0\0");
    let sum = <sha1::Sha1 as sha1::Digest>::digest(&bytes);
    bytes.extend_from_slice(&sum);
    assert_eq!(
        read_entries(&bytes).unwrap_err(),
        EntriesError::Extension("zzzz".into())
    );
}
