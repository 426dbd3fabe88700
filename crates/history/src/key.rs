//! Workspace keys: the name of one history partition directory.

use std::fmt;

/// Longest workspace id accepted after the `ws-` prefix.
pub const MAX_WORKSPACE_ID_LEN: usize = 128;

/// The key of the partition for sessions no workspace accounts for.
pub const UNKNOWN_KEY: &str = "_unknown";

/// Prefix of the key of a known workspace (`ws-<workspace id>`).
pub const WORKSPACE_PREFIX: &str = "ws-";

/// A validated partition key: `_unknown` or `ws-<id>` where `<id>` is 1 to
/// [`MAX_WORKSPACE_ID_LEN`] characters of `A-Z a-z 0-9 _ . -` and is not made
/// of dots only.
///
/// A key is always one plain path component, so a partition directory can
/// never be outside the history root, whatever the host passes in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkspaceKey(String);

/// A rejected partition key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key is neither `_unknown` nor starts with `ws-`.
    #[error("workspace key {key:?} must be \"_unknown\" or start with \"ws-\"")]
    BadPrefix {
        /// The rejected key.
        key: String,
    },
    /// The workspace id part is empty or longer than [`MAX_WORKSPACE_ID_LEN`].
    #[error("workspace id in key {key:?} must be 1 to {MAX_WORKSPACE_ID_LEN} characters long")]
    BadLength {
        /// The rejected key.
        key: String,
    },
    /// The workspace id holds a character outside `A-Z a-z 0-9 _ . -`, or only dots.
    #[error("workspace id in key {key:?} may only hold A-Z a-z 0-9 _ . - and not only dots")]
    BadCharacter {
        /// The rejected key.
        key: String,
    },
}

impl KeyError {
    /// The stable error code of this error (`rewind/bad-request`).
    pub fn code(&self) -> &'static str {
        "rewind/bad-request"
    }
}

fn valid_id(id: &str) -> bool {
    id.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        && !id.bytes().all(|b| b == b'.')
}

impl WorkspaceKey {
    /// The key of the `_unknown` partition.
    pub fn unknown() -> Self {
        Self(UNKNOWN_KEY.to_owned())
    }

    /// The key `ws-<id>` of a workspace id, validated.
    pub fn for_workspace(id: &str) -> Result<Self, KeyError> {
        Self::parse(&format!("{WORKSPACE_PREFIX}{id}"))
    }

    /// Validates a full key (`_unknown` or `ws-<id>`).
    pub fn parse(key: &str) -> Result<Self, KeyError> {
        if key == UNKNOWN_KEY {
            return Ok(Self::unknown());
        }
        let Some(id) = key.strip_prefix(WORKSPACE_PREFIX) else {
            return Err(KeyError::BadPrefix {
                key: key.to_owned(),
            });
        };
        if id.is_empty() || id.len() > MAX_WORKSPACE_ID_LEN {
            return Err(KeyError::BadLength {
                key: key.to_owned(),
            });
        }
        if !valid_id(id) {
            return Err(KeyError::BadCharacter {
                key: key.to_owned(),
            });
        }
        Ok(Self(key.to_owned()))
    }

    /// The key as a string (also the partition directory name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkspaceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for WorkspaceKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_keys() {
        assert_eq!(
            WorkspaceKey::parse("_unknown").map(|k| k.0),
            Ok("_unknown".to_owned())
        );
        assert_eq!(
            WorkspaceKey::for_workspace("abc-1.2_3").map(|k| k.0),
            Ok("ws-abc-1.2_3".to_owned())
        );
        assert!(WorkspaceKey::parse("ws-...a").is_ok());
    }

    #[test]
    fn rejects_hostile_keys() {
        for bad in [
            "",
            "..",
            ".",
            "/etc",
            "ws-",
            "ws-..",
            "ws-.",
            "ws-a/b",
            "ws-a\\b",
            "ws-a\0",
            "ws-../x",
            "x-abc",
            "_unknown/..",
            "ws-é",
        ] {
            assert!(WorkspaceKey::parse(bad).is_err(), "{bad:?} accepted");
        }
        let long = format!("ws-{}", "a".repeat(MAX_WORKSPACE_ID_LEN + 1));
        assert!(matches!(
            WorkspaceKey::parse(&long),
            Err(KeyError::BadLength { .. })
        ));
        assert!(WorkspaceKey::parse(&long[..long.len() - 1]).is_ok());
    }
}
