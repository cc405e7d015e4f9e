//! Follower side of snapshot transfer: download a checkpoint into a staging directory,
//! verify it, retry with a pause. Nothing here touches the live state: a failure at any step
//! leaves only a staging directory, which is removed.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rozone_proto::raft::snapshot_chunk::Kind;
use rozone_proto::raft::snapshot_service_client::SnapshotServiceClient;
use rozone_proto::raft::FetchSnapshotRequest;
use tokio::io::AsyncWriteExt;

use crate::network::PeerChannels;
use crate::snapshot::{self, Manifest};
use crate::snapshot::{Checkpoint, SnapshotStore};
use crate::state_machine::{install_checkpoint, read_applied, StateDb};
use crate::types::SnapshotMeta;

/// How a follower fetches checkpoints.
#[derive(Debug, Clone)]
pub struct DownloadPolicy {
    /// Attempts within one snapshot offer before the leader is told to back off.
    pub attempts: u32,
    /// Pause between attempts.
    pub pause: Duration,
    /// An attempt fails when no data arrives for this long; there is no bound on a whole
    /// download that keeps making progress.
    pub stall: Duration,
}

impl Default for DownloadPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            pause: Duration::from_secs(1),
            stall: Duration::from_secs(30),
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Streams the snapshot `snapshot_id` of `group_id` from `source_addr` into `staging`
/// (`staging/db/*` and `staging/MANIFEST.json`), checking offsets and per-file CRCs. Adds
/// every byte written to `progress`; fails when nothing arrives for `stall`.
pub async fn fetch_checkpoint(
    channels: &PeerChannels,
    source_addr: &str,
    group_id: &str,
    snapshot_id: &str,
    staging: &Path,
    progress: &AtomicU64,
    stall: Duration,
) -> io::Result<Manifest> {
    if !snapshot_id.is_empty() {
        snapshot::check_name("snapshot id", snapshot_id)?;
    }
    let ch = channels
        .get(source_addr)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut client = SnapshotServiceClient::new(ch).max_decoding_message_size(16 << 20);
    let stalled = || {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no snapshot data from {source_addr} for {stall:?}"),
        )
    };
    let call = client.fetch_snapshot(FetchSnapshotRequest {
        group_id: group_id.to_string(),
        snapshot_id: snapshot_id.to_string(),
    });
    let mut stream = tokio::time::timeout(stall, call)
        .await
        .map_err(|_| stalled())?
        .map_err(|s| io::Error::new(io::ErrorKind::ConnectionRefused, s.to_string()))?
        .into_inner();

    let db_dir = staging.join(snapshot::DB_DIR);
    tokio::fs::create_dir_all(&db_dir).await?;
    let mut manifest: Option<Manifest> = None;
    let mut open: Option<(String, tokio::fs::File, u64)> = None;
    let mut chunks = 0u64;
    while let Some(item) = tokio::time::timeout(stall, stream.next())
        .await
        .map_err(|_| stalled())?
    {
        let chunk = item.map_err(|s| io::Error::new(io::ErrorKind::BrokenPipe, s.to_string()))?;
        match chunk.kind {
            Some(Kind::Manifest(b)) => {
                let m: Manifest = serde_json::from_slice(&b)
                    .map_err(|e| invalid(format!("bad snapshot manifest: {e}")))?;
                for f in &m.files {
                    snapshot::check_name("file name", &f.name)?;
                }
                snapshot::check_name("snapshot id", &m.snapshot_id)?;
                if !snapshot_id.is_empty() && m.snapshot_id != snapshot_id {
                    return Err(invalid(format!(
                        "asked for snapshot {snapshot_id}, got {}",
                        m.snapshot_id
                    )));
                }
                manifest = Some(m);
            }
            Some(Kind::File(fc)) => {
                chunks += 1;
                fail::fail_point!("raft-snapshot-transfer", chunks > 1, |_| Err(
                    io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "failpoint raft-snapshot-transfer: connection cut midway"
                    )
                ));
                let _ = chunks; // only read by the failpoint
                let Some(m) = &manifest else {
                    return Err(invalid("snapshot file data before its manifest".into()));
                };
                if !m.files.iter().any(|f| f.name == fc.name) {
                    return Err(invalid(format!(
                        "file {:?} is not in the manifest",
                        fc.name
                    )));
                }
                let switch = open.as_ref().is_none_or(|(n, _, _)| *n != fc.name);
                if switch {
                    if let Some((_, mut f, _)) = open.take() {
                        f.flush().await?;
                        f.sync_all().await?;
                    }
                    if fc.offset != 0 {
                        return Err(invalid(format!("file {:?} does not start at 0", fc.name)));
                    }
                    let f = tokio::fs::File::create(db_dir.join(&fc.name)).await?;
                    open = Some((fc.name.clone(), f, 0));
                }
                if let Some((_, f, written)) = open.as_mut() {
                    if fc.offset != *written {
                        return Err(invalid(format!(
                            "file {:?}: chunk at offset {} after {} bytes",
                            fc.name, fc.offset, written
                        )));
                    }
                    f.write_all(&fc.data).await?;
                    *written += fc.data.len() as u64;
                    progress.fetch_add(fc.data.len() as u64, Ordering::Relaxed);
                }
            }
            None => return Err(invalid("empty snapshot chunk".into())),
        }
    }
    if let Some((_, mut f, _)) = open.take() {
        f.flush().await?;
        f.sync_all().await?;
    }
    let m = manifest.ok_or_else(|| invalid("snapshot stream had no manifest".into()))?;
    // Files that are empty have no chunk: create them.
    for f in &m.files {
        let p = db_dir.join(&f.name);
        if f.size == 0 && !p.exists() {
            tokio::fs::File::create(&p).await?;
        }
    }
    snapshot::write_manifest(staging, &m)?;
    Ok(m)
}

/// Checks a downloaded checkpoint: every file against the manifest, the manifest's meta
/// against the offer, and the applied log id and membership *inside* the database against
/// the offer.
pub fn verify_staged(
    staging: &Path,
    m: &Manifest,
    offered: &SnapshotMeta,
    state: &StateDb,
) -> io::Result<()> {
    fail::fail_point!("raft-snapshot-verify", |_| Err(invalid(
        "failpoint raft-snapshot-verify".into()
    )));
    let db_dir = staging.join(snapshot::DB_DIR);
    snapshot::verify_files(&db_dir, m)?;
    if &m.meta != offered {
        return Err(invalid(format!(
            "snapshot {} manifest meta differs from the offered meta",
            m.snapshot_id
        )));
    }
    let cfs: Vec<&str> = state.column_families().iter().map(|s| s.as_str()).collect();
    let db = rozone_kv::open_read_only(&db_dir, &cfs)?;
    let (applied, membership) = read_applied(&db)?;
    if applied != offered.last_log_id {
        return Err(invalid(format!(
            "snapshot {} holds applied log id {:?}, offer says {:?}",
            m.snapshot_id, applied, offered.last_log_id
        )));
    }
    if membership != offered.last_membership {
        return Err(invalid(format!(
            "snapshot {} holds a different membership than offered",
            m.snapshot_id
        )));
    }
    Ok(())
}

/// Downloads snapshot `snapshot_id` of `group_id` (empty: the newest) from `source_addr`
/// into a staging directory of `state` and verifies it against `expect` (the offered meta;
/// `None`: the manifest's own meta, for a node joining by checkpoint). A failed attempt is
/// reported to `on_failure`, its staging directory removed, and retried after
/// `policy.pause`, up to `policy.attempts` times. Returns the verified checkpoint, or the
/// last error. Bytes received are added to `progress`. However it ends, even when the
/// future is dropped midway (the leader withdrew its offer), no staging directory is left
/// behind but the one returned.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn download_verified(
    channels: &PeerChannels,
    state: &Arc<StateDb>,
    source_addr: &str,
    group_id: &str,
    snapshot_id: &str,
    expect: Option<&SnapshotMeta>,
    policy: &DownloadPolicy,
    progress: &AtomicU64,
    on_failure: impl Fn(u32, &io::Error),
) -> Result<(Manifest, Checkpoint), io::Error> {
    let attempts = policy.attempts.max(1);
    let mut last_err = io::Error::other("no attempt made");
    let tag = if snapshot_id.is_empty() {
        "newest"
    } else {
        snapshot_id
    };
    for attempt in 1..=attempts {
        let staging = state.staging_dir(&format!("{tag}-{attempt}"));
        snapshot::remove_path(&staging);
        let guard = StagingGuard(Some(staging.clone()));
        let res: io::Result<Manifest> = async {
            let m = fetch_checkpoint(
                channels,
                source_addr,
                group_id,
                snapshot_id,
                &staging,
                progress,
                policy.stall,
            )
            .await?;
            let expect = expect.cloned().unwrap_or_else(|| m.meta.clone());
            let (st, stg, m2) = (state.clone(), staging.clone(), m.clone());
            tokio::task::spawn_blocking(move || verify_staged(&stg, &m2, &expect, &st))
                .await
                .map_err(io::Error::other)??;
            Ok(m)
        }
        .await;
        match res {
            Ok(m) => {
                guard.keep();
                let cp = Checkpoint {
                    id: m.snapshot_id.clone(),
                    dir: staging,
                };
                return Ok((m, cp));
            }
            Err(e) => {
                drop(guard);
                on_failure(attempt, &e);
                last_err = e;
                if attempt < attempts {
                    tokio::time::sleep(policy.pause).await;
                }
            }
        }
    }
    Err(last_err)
}

/// Removes a staging directory when dropped, unless [`StagingGuard::keep`] was called: the
/// one cleanup for every way a download can end (error, panic, or its future dropped).
struct StagingGuard(Option<PathBuf>);

impl StagingGuard {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for StagingGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            snapshot::remove_path(&p);
        }
    }
}

/// Why joining by checkpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// Every attempt to download (or verify) the leader's checkpoint failed.
    #[error("checkpoint download from {source_addr} failed after {attempts} attempt(s): {last_error}; not joining without the leader's checkpoint")]
    Download {
        source_addr: String,
        attempts: u32,
        last_error: String,
    },
    /// The downloaded checkpoint is not ahead of this node's state.
    #[error("checkpoint {snapshot_id} from {source_addr} (applied {remote:?}) is not ahead of this node's state (applied {local:?})")]
    NotAhead {
        snapshot_id: String,
        source_addr: String,
        remote: Option<crate::types::LogId>,
        local: Option<crate::types::LogId>,
    },
    #[error("local storage: {0}")]
    Io(#[from] io::Error),
}

/// Gives a node that is about to join a group the leader's newest checkpoint as its state,
/// before its Raft starts: the node then joins with everything the leader's database holds,
/// including rows its log does not explain (Ozone's HDDS-16899), and never by replaying the
/// log from the start. A failed download or verification is retried after `policy.pause`,
/// up to `policy.attempts` times; nothing local changes until a checkpoint verified.
///
/// `group_dir` is the group's `GroupConfig::dir`; `app_cfs` the application's column
/// families. Must run while the group is not started (it opens the state database).
pub async fn bootstrap_from_checkpoint(
    group_dir: &Path,
    app_cfs: &[&str],
    channels: &PeerChannels,
    source_addr: &str,
    group_id: &str,
    policy: &DownloadPolicy,
) -> Result<Manifest, BootstrapError> {
    let state = Arc::new(StateDb::open(&group_dir.join("sm"), app_cfs)?);
    let snapshots = SnapshotStore::open(&group_dir.join("snapshots"))?;
    let (local, _) = read_applied(&state.db())?;
    let (m, cp) = download_verified(
        channels,
        &state,
        source_addr,
        group_id,
        "",
        None,
        policy,
        &AtomicU64::new(0),
        |attempt, e| {
            tracing::error!(group = %group_id, source = %source_addr, attempt, error = %e,
                "checkpoint download for joining failed; not joining without it");
        },
    )
    .await
    .map_err(|e| BootstrapError::Download {
        source_addr: source_addr.to_string(),
        attempts: policy.attempts.max(1),
        last_error: e.to_string(),
    })?;
    if m.meta.last_log_id <= local {
        snapshot::remove_path(&cp.dir);
        return Err(BootstrapError::NotAhead {
            snapshot_id: m.snapshot_id,
            source_addr: source_addr.to_string(),
            remote: m.meta.last_log_id,
            local,
        });
    }
    let m = install_checkpoint(&state, &snapshots, &cp)?;
    tracing::info!(group = %group_id, snapshot = %m.snapshot_id, source = %source_addr,
        "state taken from the leader's checkpoint");
    Ok(m)
}
