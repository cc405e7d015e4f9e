//! Pipeline directories on disk, and what a start makes of what it finds there.
//!
//! `<root>/<id>/` holds a pipeline's Raft group beside `pipeline.json`, and that file is
//! what makes the directory a pipeline. What a crash or a failed removal can leave behind
//! is cleaned up or set aside, never taken for a pipeline, and never stops the datanode
//! (RELIABILITY.md, finding 6: a closed pipeline's half-removed log stopped every start):
//! - Closing first renames the directory to `.closed-<id>`, one atomic step that is synced,
//!   then removes it. A removal cut short (a crash, or a file still being written) leaves
//!   that tombstone, and the next start removes it.
//! - A directory named by an id without `pipeline.json` is removed. Creation writes the
//!   file right after making the directory, so such a directory never held a started
//!   group; the other source is a removal from before tombstones.
//! - A pipeline whose group cannot be opened (a damaged log, an unreadable
//!   `pipeline.json`) is set aside as `.broken-<id>` and reported to the SCM as a pipeline
//!   to close. The datanode starts with the others. Its containers live in the volumes,
//!   not here, so their data stays served, and the SCM re-replicates what the closed
//!   pipeline leaves short. The SCM's close removes the set-aside directory.

use std::io;
use std::path::Path;

use super::PipelineFile;
// Logs a failure: what a failed removal leaves is already never taken for a pipeline.
use crate::store::volume::remove;

pub(super) const FILE: &str = "pipeline.json";
const CLOSED: &str = ".closed-";
const BROKEN: &str = ".broken-";

/// What a start found under the root.
#[derive(Default)]
pub(super) struct Found {
    /// Pipelines to reopen.
    pub files: Vec<PipelineFile>,
    /// Pipelines set aside (now or at an earlier start), with why.
    pub broken: Vec<(u64, String)>,
}

/// Reads the root: removes tombstones and directories without `pipeline.json`, sets aside
/// directories whose `pipeline.json` cannot be read, and returns the rest. Entries whose
/// names are not ours are left alone.
pub(super) fn scan(root: &Path) -> io::Result<Found> {
    std::fs::create_dir_all(root)?;
    let mut found = Found::default();
    for e in std::fs::read_dir(root)? {
        let e = e?;
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(CLOSED) {
            tracing::info!(path = %path.display(), "removing a closed pipeline's leftovers");
            remove(&path);
            continue;
        }
        if let Some(id) = name.strip_prefix(BROKEN).and_then(|s| s.parse().ok()) {
            found
                .broken
                .push((id, "its log could not be opened at an earlier start".into()));
            continue;
        }
        let Ok(id) = name.parse::<u64>() else {
            continue;
        };
        let file = path.join(FILE);
        if !file.is_file() {
            tracing::warn!(path = %path.display(), "removing a pipeline directory without {FILE}");
            remove(&path);
            continue;
        }
        match read_file(&file) {
            Ok(f) if f.id == id => found.files.push(f),
            Ok(f) => {
                let why = format!("{} names pipeline {}", file.display(), f.id);
                found.broken.push((id, set_aside(root, id, &why)));
            }
            Err(why) => found.broken.push((id, set_aside(root, id, &why))),
        }
    }
    found.files.sort_by_key(|f| f.id);
    Ok(found)
}

fn read_file(file: &Path) -> Result<PipelineFile, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("read {}: {e}", file.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("parse {}: {e}", file.display()))
}

/// Moves pipeline `id`'s directory aside as `.broken-<id>` (replacing an older one) and
/// returns the reason to report. A move that fails is logged: the pipeline is still not
/// started, and the next start tries again.
pub(super) fn set_aside(root: &Path, id: u64, why: &str) -> String {
    let to = root.join(format!("{BROKEN}{id}"));
    // An older one left in place makes the rename fail, which is logged below.
    remove(&to);
    let moved =
        std::fs::rename(root.join(id.to_string()), &to).and_then(|()| rozone_raft::sync_dir(root));
    if let Err(e) = moved {
        tracing::warn!(pipeline_id = id, error = %e, "could not set the pipeline's directory aside");
    }
    tracing::error!(
        pipeline_id = id,
        path = %to.display(),
        error = why,
        "pipeline cannot be opened: set aside, the SCM is asked to close it"
    );
    format!("pipeline {id} cannot be opened on this datanode: {why}")
}

/// Removes a closed pipeline's directory: the rename makes it a tombstone in one step, so
/// whatever the removal leaves is never taken for a pipeline (a failed removal is logged;
/// the next start removes the rest). A set-aside directory of the same id goes too.
pub(super) fn remove_closed(root: &Path, id: u64) -> io::Result<()> {
    let tomb = root.join(format!("{CLOSED}{id}"));
    match std::fs::rename(root.join(id.to_string()), &tomb) {
        Ok(()) => rozone_raft::sync_dir(root)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    remove(&tomb);
    remove(&root.join(format!("{BROKEN}{id}")));
    Ok(())
}
