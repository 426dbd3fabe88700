//! Text formatting: sizes, times, control characters, workspace paths.

/// `1.5 KiB`, `12 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Parses `123`, `10K`, `2GiB`, `1.5G`, `500MB` (binary units) into bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 500M, 2GiB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{s}` (use K, M, G or T)"
            ));
        }
    };
    if !n.is_finite() || n < 0.0 || n * mult as f64 > u64::MAX as f64 {
        return Err(format!("`{s}` is out of range"));
    }
    Ok((n * mult as f64) as u64)
}

/// `--json` output in one case style: every object key in camelCase (`blob_bytes` →
/// `blobBytes`), the keys of the store's own records (snake_case fields) included. Values are
/// left alone; no object the tool prints is keyed by data (paths, ids are values).
pub fn camel_keys(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (camel(&k), camel_keys(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(camel_keys).collect()),
        other => other,
    }
}

/// `snake_case` → `snakeCase`; a key without `_` is kept as it is.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut up = false;
    for c in key.chars() {
        if c == '_' && !out.is_empty() {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `2026-11-30 15:20 UTC` from ms since the Unix epoch.
pub fn time(ms: u64) -> String {
    rewind_durable::utc_minute(ms)
}

/// A path or message made safe for one line of output: control characters escaped.
pub fn safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A workspace path for people: its text (control characters escaped); for a name that is not
/// valid UTF-8, its display form, then its bytes escaped and the spelling that chooses it —
/// `n\u{fffd}.txt (n\\xff.txt, hex:6eff2e747874)` — so two names alike on screen are told
/// apart and each can be given to `--only`, `--keep` or `--take`.
pub fn shown(p: &snapshot_store::RelPath) -> String {
    if p.is_utf8() {
        safe(&p.display())
    } else {
        format!(
            "{} ({}, {})",
            safe(&p.display()),
            safe(&p.escaped()),
            p.spelling()
        )
    }
}

/// [`shown`] for a path the engine hands over spelled (`hex:…` for a name that is not UTF-8).
pub fn shown_spelled(spelling: &str) -> String {
    snapshot_store::RelPath::from_spelling(spelling)
        .map(|p| shown(&p))
        .unwrap_or_else(|_| safe(spelling))
}

/// A path the engine hands over spelled, in the JSON path form of `docs/format.md` (a string,
/// or `{hex, lossy}` for a name that is not UTF-8).
pub fn json_spelled(spelling: &str) -> serde_json::Value {
    snapshot_store::RelPath::from_spelling(spelling)
        .ok()
        .and_then(|p| serde_json::to_value(p).ok())
        .unwrap_or_else(|| serde_json::Value::String(spelling.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keys_are_camel_case() {
        let v = serde_json::json!({"blob_bytes": 1, "sessions": [{"session_id": "s_1", "lastActivityMs": 2}], "ok": true});
        assert_eq!(
            camel_keys(v),
            serde_json::json!({"blobBytes": 1, "sessions": [{"sessionId": "s_1", "lastActivityMs": 2}], "ok": true})
        );
    }

    #[test]
    fn sizes_round_trip_through_units() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("17"), Ok(17));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3X").is_err());
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(12), "12 B");
    }

    #[test]
    fn times_are_civil_utc() {
        assert_eq!(time(0), "1970-01-01 00:00 UTC");
        assert_eq!(time(1_764_516_000_000), "2025-11-30 15:20 UTC");
        assert_eq!(time(951_782_400_000), "2000-02-29 00:00 UTC");
    }

    #[test]
    fn control_characters_cannot_forge_lines() {
        assert_eq!(safe("a\nb\tc"), "a\\nb\\tc");
    }
}
