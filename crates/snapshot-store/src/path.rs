//! Workspace-relative paths as raw bytes, and the encoding of ids into file names.

use std::ffi::OsStr;
use std::fmt;
use std::hash::Hasher;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A validated path relative to a session's workspace (its cwd).
///
/// Stored as raw bytes: components joined by `/`, none empty, none `.` or `..`,
/// no NUL byte anywhere. Non-UTF-8 names are kept exactly. In JSON a path is a
/// plain string when it is valid UTF-8 and `{"hex": "...", "lossy": "..."}` otherwise.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(Vec<u8>);

/// Why a byte string is not a valid [`RelPath`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelPathError {
    /// The path is empty (it would name the workspace root itself).
    #[error("empty path")]
    Empty,
    /// The path contains a NUL byte.
    #[error("path contains a NUL byte")]
    Nul,
    /// The path is absolute.
    #[error("path is absolute")]
    Absolute,
    /// A component is empty, `.` or `..`.
    #[error("path has an empty, '.' or '..' component")]
    BadComponent,
    /// A `hex:` spelling whose digits are not an even number of hex digits.
    #[error("`hex:` must be followed by an even number of hex digits")]
    BadHex,
}

/// The prefix of a path spelled by its bytes in hex (see [`RelPath::spelling`]).
pub const HEX_SPELLING: &str = "hex:";

impl RelPath {
    /// Validates raw bytes (`a/b/c`) as a relative path.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RelPathError> {
        Self::check(bytes)?;
        Ok(Self(bytes.to_vec()))
    }

    /// Whether raw bytes are a valid relative path (what [`RelPath::from_bytes`]
    /// accepts), without building one.
    pub(crate) fn check(bytes: &[u8]) -> Result<(), RelPathError> {
        if bytes.is_empty() {
            return Err(RelPathError::Empty);
        }
        if bytes.contains(&0) {
            return Err(RelPathError::Nul);
        }
        if bytes[0] == b'/' {
            return Err(RelPathError::Absolute);
        }
        for c in bytes.split(|b| *b == b'/') {
            if matches!(c, [] | [b'.'] | [b'.', b'.']) {
                return Err(RelPathError::BadComponent);
            }
        }
        Ok(())
    }

    /// Builds a path from a relative [`Path`]; `.` components are dropped,
    /// anything else that is not a normal component is refused.
    pub fn from_path(path: &Path) -> Result<Self, RelPathError> {
        let mut out: Vec<u8> = Vec::new();
        for c in path.components() {
            match c {
                Component::Normal(n) => {
                    if !out.is_empty() {
                        out.push(b'/');
                    }
                    out.extend_from_slice(n.as_bytes());
                }
                Component::CurDir => {}
                Component::ParentDir => return Err(RelPathError::BadComponent),
                Component::RootDir | Component::Prefix(_) => return Err(RelPathError::Absolute),
            }
        }
        Self::from_bytes(&out)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The path as an [`OsStr`]-backed [`Path`] (exact bytes).
    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// A lossy UTF-8 form for display and JSON previews.
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// Whether the path is valid UTF-8 (its [`RelPath::display`] form is then exact).
    pub fn is_utf8(&self) -> bool {
        std::str::from_utf8(&self.0).is_ok()
    }

    /// The path's exact spelling as text: the path itself when it is valid UTF-8 and does not
    /// begin with [`HEX_SPELLING`], else `hex:` and its bytes in lowercase hex
    /// (`hex:6eff2e747874` for `n\xff.txt`). [`RelPath::from_spelling`] reads it back to the
    /// same bytes, so two different paths never share a spelling.
    pub fn spelling(&self) -> String {
        match std::str::from_utf8(&self.0) {
            Ok(text) if !text.starts_with(HEX_SPELLING) => text.to_owned(),
            _ => format!("{HEX_SPELLING}{}", hex::encode(&self.0)),
        }
    }

    /// The bytes a spelling names (see [`RelPath::spelling`]): after `hex:`, an even number of
    /// hex digits (either case); any other text stands for its own UTF-8 bytes. `None` for a
    /// `hex:` spelling whose digits are not hex. The bytes are not validated as a path.
    pub fn spelled_bytes(spelling: &str) -> Option<Vec<u8>> {
        match spelling.strip_prefix(HEX_SPELLING) {
            Some(digits) => hex::decode(digits).ok(),
            None => Some(spelling.as_bytes().to_vec()),
        }
    }

    /// The path a spelling names (see [`RelPath::spelling`]).
    pub fn from_spelling(spelling: &str) -> Result<Self, RelPathError> {
        let bytes = Self::spelled_bytes(spelling).ok_or(RelPathError::BadHex)?;
        Self::from_bytes(&bytes)
    }

    /// A form for people that tells every path apart: valid UTF-8 runs as they are, a
    /// backslash doubled, each byte that is not UTF-8 as `\xNN` (`n\xff.txt`). Equal to
    /// [`RelPath::display`] for a UTF-8 path without a backslash.
    pub fn escaped(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for chunk in self.0.utf8_chunks() {
            out.push_str(&chunk.valid().replace('\\', "\\\\"));
            for b in chunk.invalid() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
        out
    }

    /// The components (each non-empty, never `.`/`..`, no `/`, no NUL).
    pub fn components(&self) -> impl Iterator<Item = &[u8]> {
        self.0.split(|b| *b == b'/')
    }

    /// Splits into parent components and the final name.
    pub fn split_last(&self) -> (Vec<&[u8]>, &[u8]) {
        let mut comps: Vec<&[u8]> = self.components().collect();
        let last = comps.pop().unwrap_or_default();
        (comps, last)
    }

    /// `other` lies under this path (`a` is an ancestor of `a/b`, not of `ab` or `a`).
    pub fn is_ancestor_of(&self, other: &RelPath) -> bool {
        other.0.len() > self.0.len()
            && other.0.starts_with(&self.0)
            && other.0[self.0.len()] == b'/'
    }

    /// The relative path of the first `n` components (`n` ≥ 1).
    pub fn prefix(&self, n: usize) -> Option<RelPath> {
        let comps: Vec<&[u8]> = self.components().take(n).collect();
        if comps.is_empty() {
            return None;
        }
        Some(RelPath(comps.join(&b'/')))
    }
}

// The derived order, equality and hash are those of the bytes, so maps keyed by
// `RelPath` can be searched with a borrowed `[u8]`.
impl std::borrow::Borrow<[u8]> for RelPath {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.display())
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

#[derive(Serialize, Deserialize)]
struct HexPath {
    hex: String,
    #[serde(default)]
    lossy: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PathRepr {
    Text(String),
    Hex(HexPath),
}

impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => HexPath {
                hex: hex::encode(&self.0),
                lossy: self.display(),
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RelPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes = match PathRepr::deserialize(d)? {
            PathRepr::Text(t) => t.into_bytes(),
            PathRepr::Hex(h) => hex::decode(&h.hex).map_err(D::Error::custom)?,
        };
        RelPath::from_bytes(&bytes).map_err(D::Error::custom)
    }
}

/// Maximum length of an id accepted by [`encode_id`] (bytes, before encoding).
pub const MAX_ID_LEN: usize = 160;

/// Why an id (session, call or operation id) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id is empty.
    #[error("id is empty")]
    Empty,
    /// The id is longer than [`MAX_ID_LEN`] bytes.
    #[error("id is longer than {MAX_ID_LEN} bytes")]
    TooLong,
}

/// Encodes an id as a single safe file-name component.
///
/// `[A-Za-z0-9_-]` pass through; every other byte (including `.`, `/`, `%` and NUL)
/// becomes `%XX`. The result never contains `/`, is never `.` or `..`, and the
/// mapping is one-to-one, so a hostile id can never name anything outside its slot.
pub fn encode_id(id: &str) -> Result<String, IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > MAX_ID_LEN {
        return Err(IdError::TooLong);
    }
    Ok(encode_unchecked(id))
}

/// [`encode_id`] without its length checks.
pub(crate) fn encode_unchecked(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push('%');
            out.push_str(&format!("{b:02X}"));
        }
    }
    out
}

/// Inverse of [`encode_id`]; `None` for a name [`encode_id`] cannot produce.
pub fn decode_id(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hexs = name.get(i + 1..i + 3)?;
            let v = u8::from_str_radix(hexs, 16).ok()?;
            if v.is_ascii_alphanumeric()
                || v == b'_'
                || v == b'-'
                || hexs.to_ascii_uppercase() != hexs
            {
                return None;
            }
            out.push(v);
            i += 3;
        } else if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b);
            i += 1;
        } else {
            return None;
        }
    }
    let s = String::from_utf8(out).ok()?;
    if s.is_empty() { None } else { Some(s) }
}

/// A fast hasher for paths and ids (eight bytes per step, mixed at the end), for
/// maps keyed by the workspace's own file names or the store's own records (not
/// input from the network).
#[derive(Default, Clone, Copy)]
pub(crate) struct BytesHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl BytesHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for BytesHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // A final avalanche (murmur3's) so that the high bits depend on every byte.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A `HashMap` keyed by bytes (or text), hashed with [`BytesHasher`].
pub(crate) type BytesMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<BytesHasher>>;

/// Validates a lowercase 64-hex SHA-256 string.
pub(crate) fn valid_sha(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The name of the spare kept beside store file `name` (`.<name>.spare`, see
/// `StoreFs::write_replacing`).
pub(crate) fn spare_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut spare = std::ffi::OsString::from(".");
    spare.push(name);
    spare.push(".spare");
    spare
}

/// Whether a directory entry is the spare of a store file (see [`spare_name`]): hidden, but
/// kept on purpose, not a temporary file.
pub(crate) fn is_spare(name: &std::ffi::OsStr) -> bool {
    is_hidden(name) && name.as_encoded_bytes().ends_with(b".spare")
}

/// Whether a directory entry is hidden (a name starting with a dot: temp files, locks).
pub(crate) fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

/// The paths as one comma-separated line of text, for messages.
pub(crate) fn list_paths(paths: &[RelPath]) -> String {
    paths
        .iter()
        .map(|p| p.display())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relpath_rules() {
        assert!(RelPath::from_bytes(b"a/b").is_ok());
        assert_eq!(RelPath::from_bytes(b""), Err(RelPathError::Empty));
        assert_eq!(
            RelPath::from_bytes(b"a/../b"),
            Err(RelPathError::BadComponent)
        );
        assert_eq!(
            RelPath::from_bytes(b"a//b"),
            Err(RelPathError::BadComponent)
        );
        assert_eq!(RelPath::from_bytes(b"/a"), Err(RelPathError::Absolute));
        assert_eq!(RelPath::from_bytes(b"a\0b"), Err(RelPathError::Nul));
        assert_eq!(
            RelPath::from_path(Path::new("./a/./b")).map(|p| p.display()),
            Ok("a/b".into())
        );
    }

    #[test]
    fn relpath_json_round_trip_non_utf8() {
        let p = RelPath::from_bytes(b"dir/\xff\xfename").unwrap_or_else(|e| panic!("{e}"));
        let j = serde_json::to_string(&p).unwrap_or_default();
        assert!(j.contains("\"hex\""), "{j}");
        let back: RelPath = serde_json::from_str(&j).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, p);
        let q = RelPath::from_bytes("ünï/c.txt".as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            serde_json::to_string(&q).unwrap_or_default(),
            "\"ünï/c.txt\""
        );
    }

    #[test]
    fn spellings_tell_every_path_apart_and_read_back() {
        let p = |b: &[u8]| RelPath::from_bytes(b).unwrap_or_else(|e| panic!("{e}"));
        let ff = p(b"n\xff.txt");
        let fe = p(b"n\xfe.txt");
        assert_eq!(ff.display(), fe.display(), "the lossy forms are alike");
        assert_eq!(ff.spelling(), "hex:6eff2e747874");
        assert_eq!(ff.escaped(), "n\\xff.txt");
        assert_ne!(ff.escaped(), fe.escaped());
        assert_eq!(p(b"a\\b").escaped(), "a\\\\b");
        assert_eq!(p(b"plain/f.txt").spelling(), "plain/f.txt");
        // A UTF-8 name that looks like a spelling is spelled by its bytes too.
        let literal = p(b"hex:61");
        assert_eq!(literal.spelling(), "hex:6865783a3631");
        for path in [ff, fe, literal, p("d/\u{e9}.txt".as_bytes())] {
            assert_eq!(RelPath::from_spelling(&path.spelling()), Ok(path.clone()));
        }
        assert_eq!(
            RelPath::from_spelling("hex:6EFF2E747874"),
            Ok(p(b"n\xff.txt"))
        );
        assert_eq!(RelPath::from_spelling("hex:6ef"), Err(RelPathError::BadHex));
        assert_eq!(RelPath::from_spelling("hex:zz"), Err(RelPathError::BadHex));
        assert_eq!(RelPath::from_spelling("hex:"), Err(RelPathError::Empty));
    }

    #[test]
    fn id_encoding_is_safe_and_reversible() {
        for id in ["abc-DEF_1", "..", ".", "a/b", "%41", "x\0y", "日本", "a.b"] {
            let e = encode_id(id).unwrap_or_else(|err| panic!("{err}"));
            assert!(
                !e.contains('/') && e != "." && e != ".." && !e.starts_with('.'),
                "{e}"
            );
            assert_eq!(decode_id(&e).as_deref(), Some(id));
        }
        assert_eq!(encode_id(""), Err(IdError::Empty));
        assert_eq!(decode_id("%41"), None, "non-canonical encoding refused");
        assert_eq!(decode_id("a.b"), None);
    }
}
