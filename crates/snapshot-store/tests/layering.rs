//! The crate's top-level modules import each other without a cycle: every module
//! names (through `crate::` paths) only modules below it, so each can be read, and
//! changed, knowing only what is under it. `docs/architecture.md` draws the layers.
//!
//! A module's files are its `src/<name>.rs` or everything under `src/<name>/`; its
//! own `#[cfg(test)] mod tests` and comments do not count. A name the crate root
//! re-exports (`crate::Session`) counts as the module it comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Top-level modules declared by `lib.rs`.
fn modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))?;
            rest.strip_suffix(';').map(str::to_string)
        })
        .collect()
}

/// Names re-exported by `lib.rs` (`pub use m::{A, B};`), mapped to their module.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = lib;
    while let Some(i) = rest.find("pub use ") {
        rest = &rest[i + "pub use ".len()..];
        let end = rest.find(';').expect("a `pub use` ends with `;`");
        let item = &rest[..end];
        rest = &rest[end..];
        let Some((module, names)) = item.split_once("::") else {
            continue;
        };
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for n in names.split(',') {
            let n = n.trim();
            let n = n.rsplit("::").next().unwrap_or(n);
            if !n.is_empty() {
                out.insert(n.to_string(), module.trim().to_string());
            }
        }
    }
    out
}

fn files_of(module: &str) -> Vec<PathBuf> {
    let file = src().join(format!("{module}.rs"));
    if file.is_file() {
        return vec![file];
    }
    let mut out = Vec::new();
    let mut stack = vec![src().join(module)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    assert!(!out.is_empty(), "module `{module}` has no source file");
    out
}

/// The file's code: no comments, no trailing `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if l.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod tests"))
        {
            break;
        }
        let l = match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        };
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The first segment of every `crate::` path in `code`, groups (`crate::{a, b}`) included.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `my_crate::`, not this crate
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name = ident(part.trim());
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mods = modules(&lib);
    let names = reexports(&lib);
    let known: BTreeSet<&String> = mods.iter().collect();
    let mut g = BTreeMap::new();
    for m in &mods {
        let mut deps = BTreeSet::new();
        for f in files_of(m) {
            let text = std::fs::read_to_string(&f).unwrap();
            for seg in crate_paths(&code(&text)) {
                let dep = if known.contains(&seg) {
                    seg
                } else if let Some(owner) = names.get(&seg) {
                    owner.clone()
                } else {
                    continue; // a macro or a crate-root item
                };
                if dep != *m {
                    deps.insert(dep);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

/// A cycle in `g`, as the modules along it, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                0 => {
                    if let Some(c) = visit(d, g, state, path) {
                        return Some(c);
                    }
                }
                1 => {
                    let start = path.iter().position(|p| p == d).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let g = graph();
    assert!(g.len() > 10, "lib.rs lists the crate's modules: {g:?}");
    if let Some(c) = find_cycle(&g) {
        panic!("module import cycle: {}", c.join(" -> "));
    }
}

#[test]
fn the_store_and_the_session_base_know_no_concern() {
    let g = graph();
    let concerns = [
        "capture",
        "commit",
        "recheck",
        "plan",
        "chain",
        "journal",
        "prune",
        "scan_record",
        "diff_view",
        "gc",
        "offline",
    ];
    for base in ["store", "session", "records", "scan"] {
        let deps = &g[base];
        let wrong: Vec<_> = concerns.iter().filter(|c| deps.contains(**c)).collect();
        assert!(wrong.is_empty(), "`{base}` imports {wrong:?}");
    }
}

#[test]
fn the_checker_finds_a_cycle() {
    let mut g = BTreeMap::new();
    let set = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    g.insert("a".to_string(), set(&["b"]));
    g.insert("b".to_string(), set(&["c"]));
    g.insert("c".to_string(), set(&[]));
    assert_eq!(find_cycle(&g), None);
    g.insert("c".to_string(), set(&["a"]));
    assert_eq!(
        find_cycle(&g).map(|c| c.join(" -> ")),
        Some("a -> b -> c -> a".to_string())
    );
    assert_eq!(
        crate_paths("use crate::{x::Y, z};\nfn f() { crate::w::f(); my_crate::q(); }"),
        set(&["w", "x", "z"])
    );
}
