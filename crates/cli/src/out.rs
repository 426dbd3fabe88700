//! Writing the output. A reader that went away before the end (`dsh-rewind history --json |
//! head -1` closes the pipe after one line) ends the output quietly: the command still exits
//! with its own code, and nothing is printed about it.

use std::io::{self, Write};

/// Writes `text` to stdout. A closed pipe (`EPIPE`) drops the rest of the output quietly;
/// any other write error is named on stderr.
pub(crate) fn stdout(text: &str) {
    let mut o = io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => stderr(&format!("dsh-rewind: cannot write the output: {e}\n")),
    }
}

/// Writes `text` to stderr; an error (a closed pipe too) is dropped: there is nowhere left
/// to say it.
pub(crate) fn stderr(text: &str) {
    let mut e = io::stderr().lock();
    let _ = e.write_all(text.as_bytes()).and_then(|()| e.flush());
}
