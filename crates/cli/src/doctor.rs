//! `dsh-rewind doctor`: what this build can do with a DSH home, offline.
//!
//! The host plugin's `/rewind doctor` looks at the live host; this is its offline half. It reads
//! only headers and markers — no session log is parsed whole and nothing is written:
//!
//! * the session logs under `sessions/`: how many of each session format (the header's
//!   `version`; the log file's generation name `session.jsonl` / `session.vN.jsonl[.zstd]`), which
//!   DSH releases wrote that format, and whether this build reads it;
//! * the snapshot store (`rewind-snapshots/store.json`): present, its layout version, readable by
//!   this build or written by a newer one;
//! * the rewind history (`rewind-history/`): present or not.
//!
//! Exit 0 when this build can read everything there; 6 when a log or the store is newer than
//! this build; 5 when a header or the store marker cannot be read.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::fail::{Code, Fail};
use crate::home::Logs;
use crate::show::safe;

/// The DSH releases that write a session format (from the public DSH source; see `docs/compat.md`).
fn releases(format: u64) -> &'static str {
    match format {
        0 => "DSH 0.1.0 / 0.1.1",
        1 => "a DSH pre-release",
        2 => "DSH 0.1.2 to 0.1.4",
        3 => "DSH 0.1.5 / 0.1.6",
        4 => "DSH 0.1.7 to 0.2.x",
        _ => "a DSH newer than this build knows",
    }
}

/// What the doctor found.
struct Findings {
    /// Sessions by header version: (count, zstd-encoded count).
    formats: BTreeMap<u64, (usize, usize)>,
    /// Logs whose header could not be read.
    unreadable: Vec<String>,
    /// The store marker's version (`None`: no store yet).
    store: Result<Option<u64>, String>,
    history: bool,
}

fn store_version(root: &Path) -> Result<Option<u64>, String> {
    let path = root.join(snapshot_store::usage::STORE_MARKER);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("store_version").and_then(Value::as_u64))
        .map(Some)
        .ok_or_else(|| format!("{} is corrupt (no numeric store_version)", path.display()))
}

fn find(home: &Path, logs: &Logs) -> Findings {
    let mut formats: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    let mut unreadable = Vec::new();
    for (id, file) in &logs.by_id {
        match &file.header {
            Some(h) => {
                let e = formats.entry(h.version).or_default();
                e.0 += 1;
                if file.compressed {
                    e.1 += 1;
                }
            }
            None => unreadable.push(format!("{} ({})", safe(id), file.path.display())),
        }
    }
    Findings {
        formats,
        unreadable,
        store: store_version(&home.join("rewind-snapshots")),
        history: home.join("rewind-history").is_dir(),
    }
}

/// Run the doctor over `home`: prints the report, returns the exit code.
pub fn run(home: &Path, logs: &Logs, json_out: bool) -> Result<u8, Fail> {
    let f = find(home, logs);
    let known_log = rewind_plan::KNOWN_HEADER_VERSION;
    let known_store = u64::from(snapshot_store::STORE_VERSION);
    let mut code: Option<Code> = None;
    let mut worst = |c: Code| {
        code = Some(match (code, c) {
            (Some(Code::Newer), _) | (_, Code::Newer) => Code::Newer,
            _ => c,
        })
    };
    let mut text = format!(
        "dsh-rewind doctor: {}\nThis build reads session formats 0 to {known_log} and snapshot store layout {known_store}.\n\nSession logs ({}):\n",
        home.display(),
        logs.by_id.len()
    );
    let mut formats = Vec::new();
    if f.formats.is_empty() && f.unreadable.is_empty() {
        text.push_str("- none\n");
    }
    for (version, (count, zstd)) in &f.formats {
        let readable = *version <= known_log;
        if !readable {
            worst(Code::Newer);
        }
        text.push_str(&format!(
            "{} format {version} ({}): {count} session(s){} — {}\n",
            if readable { "✓" } else { "✗" },
            releases(*version),
            if *zstd > 0 { format!(", {zstd} zstd-encoded") } else { String::new() },
            if readable { "read and planned" } else { "newer than this build: not read (its checkpoints still list, its restores need the log)" },
        ));
        formats.push(json!({"version": version, "releases": releases(*version), "sessions": count, "zstd": zstd, "readable": readable}));
    }
    if !f.unreadable.is_empty() {
        worst(Code::Corrupt);
        text.push_str(&format!(
            "✗ {} log(s) whose header cannot be read:\n",
            f.unreadable.len()
        ));
        for u in &f.unreadable {
            text.push_str(&format!("  - {u}\n"));
        }
    }
    text.push_str("\nSnapshot store:\n");
    let store = match &f.store {
        Ok(None) => {
            text.push_str("- none yet (created at the first backup)\n");
            json!({"present": false})
        }
        Ok(Some(v)) if *v > known_store => {
            worst(Code::Newer);
            text.push_str(&format!(
                "✗ layout {v}, written by a newer build: this build changes nothing in it\n"
            ));
            json!({"present": true, "version": v, "readable": false})
        }
        Ok(Some(v)) => {
            text.push_str(&format!(
                "✓ layout {v}: readable (`dsh-rewind verify` checks every record and blob)\n"
            ));
            json!({"present": true, "version": v, "readable": true})
        }
        Err(e) => {
            worst(Code::Corrupt);
            text.push_str(&format!("✗ {e}\n"));
            json!({"present": true, "error": e})
        }
    };
    text.push_str(&format!(
        "\nRewind history: {}\n",
        if f.history { "present" } else { "none yet" }
    ));
    text.push_str("\nWhat the live host offers (log readers, settings, the web server) is checked by `/rewind doctor` in a DSH session.\n");
    let value = json!({
        "ok": code.is_none(),
        "home": home,
        "knownSessionFormat": known_log,
        "knownStoreVersion": known_store,
        "sessionFormats": formats,
        "unreadableLogs": f.unreadable,
        "store": store,
        "history": f.history,
    });
    if json_out {
        crate::out::stdout(&format!("{value:#}\n"));
    } else {
        crate::out::stdout(&text);
    }
    Ok(code.map_or(0, Code::exit))
}
