//! Records lost at a repair: `sessions/<id>/records-lost.json`, the durable note
//! [`Store::quarantine`] writes before it changes a damaged record log, so that later
//! readers (and `verify`) say what was lost instead of taking what is left for the whole.

use super::*;

/// File name of the note of lost records in a session's directory.
pub const LOST_NOTE: &str = "records-lost.json";

/// Version of the note this build writes and reads.
const NOTE_VERSION: u32 = 1;

/// One loss of a session's records at a repair (see [`Store::records_lost`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordsLost {
    /// The session whose records were lost.
    pub session_id: String,
    /// When the repair ran, ms since the Unix epoch.
    pub at_ms: u64,
    /// Bytes of the log kept in the session (its readable frames before the damage, the
    /// header included); 0 when nothing could be kept.
    pub kept_bytes: u64,
    /// Bytes of the log from there on that are no longer read: the damage and every frame
    /// after it.
    pub lost_bytes: u64,
    /// Store-relative path of the damaged log's copy in the quarantine (all of its bytes).
    pub quarantined: String,
    /// What was wrong with the log.
    pub detail: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Note {
    v: u32,
    losses: Vec<RecordsLost>,
}

/// The losses a note records, read from its bytes. A note this build cannot read still
/// says that records were lost (one entry naming why it cannot be read).
fn parse_note(id: &str, path: &Path, bytes: &[u8]) -> Vec<RecordsLost> {
    let unreadable = |why: String| RecordsLost {
        session_id: id.to_string(),
        at_ms: 0,
        kept_bytes: 0,
        lost_bytes: 0,
        quarantined: String::new(),
        detail: format!("the note {} is {why}", show(path)),
    };
    match serde_json::from_slice::<Note>(bytes) {
        Ok(n) if n.v > NOTE_VERSION => vec![unreadable(format!(
            "of version {}, newer than this build reads",
            n.v
        ))],
        Ok(n) if n.losses.is_empty() => vec![unreadable("empty".into())],
        Ok(n) => n.losses,
        Err(e) => vec![unreadable(format!("unreadable: {e}"))],
    }
}

impl Store {
    /// The losses of session `session_id`'s records that repairs noted, oldest first
    /// (empty when none). The note stays with the session until the session is removed.
    pub fn records_lost(&self, session_id: &str) -> Result<Vec<RecordsLost>, QueryError> {
        let Ok(enc) = encode_id(session_id) else {
            return Ok(Vec::new());
        };
        let path = Path::new("sessions").join(enc).join(LOST_NOTE);
        Ok(match self.inner.fs.read_opt(&path)? {
            Some(bytes) => parse_note(session_id, &path, &bytes),
            None => Vec::new(),
        })
    }

    /// Adds `loss` to the note in session directory `sdir` (written atomically).
    pub(super) fn note_records_lost(
        &self,
        sdir: &Path,
        loss: &RecordsLost,
    ) -> Result<(), FsFailure> {
        let fs = &self.inner.fs;
        let path = sdir.join(LOST_NOTE);
        let mut losses = match fs.read_opt(&path)? {
            Some(bytes) => parse_note(&loss.session_id, &path, &bytes),
            None => Vec::new(),
        };
        losses.push(loss.clone());
        let note = Note {
            v: NOTE_VERSION,
            losses,
        };
        let bytes = serde_json::to_vec_pretty(&note).unwrap_or_default();
        fs.write_atomic(&path, &bytes)
    }
}

/// The warnings a note in a session's directory gives `verify`.
pub(super) fn note_warnings(id: &str, rel: &Path, bytes: &[u8]) -> Vec<Warning> {
    parse_note(id, rel, bytes)
        .into_iter()
        .map(|loss| Warning::RecordsLost {
            note: show(rel),
            loss,
        })
        .collect()
}
