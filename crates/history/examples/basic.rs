//! Record a rewind, check undo eligibility, mark it undone.
//! (The example of the crate README.)

use rewind_history::{
    Entry, HistoryStore, JournalState, Outcome, Paths, UndoMode, UndoOutcome, UndoRequest,
    WorkspaceKey, require_unchanged, undo_eligibility,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?; // or <dsh home>
    let store = HistoryStore::open(dir.path().join("rewind-history"))?.with_limit(10);
    let key = WorkspaceKey::for_workspace("7f3a")?; // "ws-7f3a"; WorkspaceKey::unknown() for "_unknown"

    // Record a rewind.
    let paths = Paths {
        restored: vec!["src/lib.rs".into()],
        ..Paths::default()
    };
    store.append(
        &key,
        Entry::new(
            "op-1",
            "session-a",
            &key,
            42,
            1_764_400_000_000,
            Outcome::Done,
            paths,
        ),
    )?;

    // May the user undo it? (the journal state comes from the snapshot store)
    let partition = store.read(&key)?;
    let request = UndoRequest {
        op_id: "op-1",
        active_session: "session-a",
        active_workspace: &key,
        journal: JournalState::Completed,
    };
    let entry = undo_eligibility(&partition, &request)?;
    require_unchanged(&[])?; // the paths the store found changed since the rewind
    // ... run the undo, then:
    store.mark_undone(
        &key,
        &entry.op_id,
        UndoOutcome::Ok,
        UndoMode::Files,
        1_764_400_060_000,
    )?;
    Ok(())
}
