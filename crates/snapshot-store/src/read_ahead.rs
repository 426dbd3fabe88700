//! The content of files tools wrote, read into the store while the session is quiet,
//! so that the next message's re-check need not read them.

use crate::codec::Record;
use crate::error::RecheckError;
use crate::format::{BeforeState, Known};
use crate::fsio::FileKind;
use crate::recheck::Changed;
use crate::session::Session;

impl Session {
    /// Reads into the store the content of up to `max` files that tools wrote since the
    /// last message boundary and that nothing changed since (their content is otherwise
    /// read by the next [`Session::recheck_tracked`], which keeps each such file's state
    /// at that boundary). A host calls this while a session is quiet, between the bursts
    /// of tool calls: the re-check at the next message then takes the content read here
    /// for every file that still shows the metadata it had when read, and reads only the
    /// others. Only files the log keeps (up to 16 KiB) are read ahead. Records nothing but
    /// the content itself; what it read is remembered by this handle only.
    ///
    /// Returns how many such files are left unread (call again to read them). A file found
    /// changed since the tool wrote it, or unreadable, is left to the re-check and not
    /// counted again.
    pub fn read_ahead(&self, max: usize) -> Result<usize, RecheckError> {
        let mut st = self.lock_state();
        if st.log.is_none() {
            return Ok(0);
        }
        self.sync(&mut st)?;
        let mut todo = Vec::new();
        let mut left = 0;
        for (rel, t) in &st.idx.tracked {
            let Known::Present {
                meta,
                sha256: None,
                recorded: false,
            } = &t.known
            else {
                continue;
            };
            if meta.kind != FileKind::File
                || meta.size > crate::blob::KEEP_IN_LOG as u64
                || st.ahead.get(rel).is_some_and(|(m, _)| m == meta)
            {
                continue;
            }
            if todo.len() == max {
                left += 1;
                continue;
            }
            todo.push(Changed {
                rel: rel.clone(),
                known: t.known.clone(),
                since: t.since,
                order: 0,
                tool_content: true,
                regular: true,
            });
        }
        if todo.is_empty() {
            return Ok(left);
        }
        let _g = self.lock_shared()?;
        let log_len = st.log.as_ref().map_or(0, |h| h.len);
        let sink = crate::blob::LogSink::new(&st.idx.inline, log_len);
        let refs: Vec<&Changed> = todo.iter().collect();
        let read = self.recheck().capture_changed(&refs, Some(&sink));
        let blobs = sink.records();
        let mut got = Vec::new();
        for (c, r) in todo.into_iter().zip(read) {
            let Known::Present { meta, .. } = c.known else {
                continue;
            };
            // Only what still shows the metadata the tool left: anything else (changed
            // since, unreadable) is the re-check's to find, and is not tried again.
            let sha = match r {
                Ok((BeforeState::File { sha256, .. }, Known::Present { meta: now, .. }))
                    if now == meta =>
                {
                    Some(sha256)
                }
                _ => None,
            };
            got.push((c.rel, meta, sha));
        }
        // Content read from a file changed since is not kept.
        let wanted: std::collections::HashSet<&str> = got
            .iter()
            .filter_map(|(_, _, sha)| sha.as_deref())
            .collect();
        let blobs: Vec<Record> = blobs
            .into_iter()
            .filter(
                |r| matches!(r, Record::Blob { sha256, .. } if wanted.contains(sha256.as_str())),
            )
            .collect();
        if !blobs.is_empty() {
            self.append(&mut st, blobs)?;
        }
        for (rel, meta, sha) in got {
            st.ahead.insert(rel, (meta, sha));
        }
        Ok(left)
    }
}
