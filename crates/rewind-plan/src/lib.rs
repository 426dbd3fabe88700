//! # rewind-plan
//!
//! The pure planning half of an in-place conversation rewind for DeepSeek
//! Harness (DSH) session logs. It reads a session log of any format DSH has
//! written (0 in 0.1.0-rc.8 through 4 in 0.2.x), folds the model-visible
//! surface exactly as DSH does, lists the human messages a rewind can target,
//! parses `@<seq>` / index targets, and plans the one `user/message` marker
//! whose surface replace hides the target and everything after it. Given the
//! host's own surface (`session.surface.nodes`), it plans on that and keeps its
//! own fold as a cross-check (`*_on` functions).
//!
//! The crate does no I/O and knows nothing of napi or of a running host: the
//! caller hands it the log (a JSONL file's text or bytes, zstd-encoded or not,
//! or a JSON array of events) and appends the marker itself.
//!
//! ```
//! use rewind_plan::{SessionLog, parse_target, plan_rewind, list_candidates};
//!
//! let jsonl = r#"{"type":"session","version":0,"id":"s1","createdAt":0}
//! {"type":"user/message","seq":0,"time":1,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"make a file"}],"source":{"kind":"user"}},"surfaceOp":"append"}
//! {"type":"assistant/message","seq":1,"time":2,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"done"}]}},"surfaceOp":"append","sourceEventSeqs":[]}
//! {"type":"user/message","seq":2,"time":3,"data":{"id":"m2","role":"user","content":[{"type":"text","text":"now undo it"}],"source":{"kind":"user"}},"surfaceOp":"append"}
//! "#;
//! let log = SessionLog::from_jsonl(jsonl).unwrap();
//! let candidates = list_candidates(&log).unwrap();
//! assert_eq!(candidates[0].preview, "now undo it");
//! let plan = plan_rewind(&log, parse_target("2").unwrap()).unwrap();
//! assert_eq!(plan.target_seq, 0);
//! assert_eq!(plan.shadowed_seqs, vec![0, 1, 2]);
//! ```

pub mod event;
pub mod fork;
pub mod log;
pub mod plan;
pub mod surface;
pub mod target;

pub use event::{
    MessageSource, ReplaceSpelling, SessionEvent, SessionHeader, SourceSeqs, SurfaceOp, UserMessage,
};
pub use fork::{ForkError, ForkPlan, plan_fork, plan_fork_on, plan_fork_with};
pub use log::{KNOWN_HEADER_VERSION, ReadError, SessionLog};
pub use plan::{
    Candidate, CandidateList, LEGACY_MARKER_SOURCE_KIND, MARKER_SOURCE_KIND, MARKER_TEXT, Marker,
    PlanError, RewindPlan, SurfaceMismatch, is_marker_kind, list_candidates, list_candidates_on,
    plan_rewind, plan_rewind_on, plan_rewind_with,
};
pub use surface::{Replacement, Surface, SurfaceError, SurfaceFold, fold_surface};
pub use target::{Target, TargetError, parse_target};
