//! Follower side of snapshot transfer: download a checkpoint into a staging directory,
//! verify it, retry with a pause. Nothing here touches the live state: a failure at any step
//! leaves only a staging directory, which is removed.

use std::io;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use rozone_proto::raft::snapshot_chunk::Kind;
use rozone_proto::raft::snapshot_service_client::SnapshotServiceClient;
use rozone_proto::raft::FetchSnapshotRequest;
use tokio::io::AsyncWriteExt;

use crate::network::PeerChannels;
use crate::snapshot::{self, Manifest};
use crate::state_machine::{read_applied, StateDb};
use crate::types::SnapshotMeta;

/// How a follower fetches checkpoints.
#[derive(Debug, Clone)]
pub struct DownloadPolicy {
    /// Attempts within one snapshot offer before the leader is told to back off.
    pub attempts: u32,
    /// Pause between attempts.
    pub pause: Duration,
}

impl Default for DownloadPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            pause: Duration::from_secs(1),
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Streams the snapshot `snapshot_id` of `group_id` from `source_addr` into `staging`
/// (`staging/db/*` and `staging/MANIFEST.json`), checking offsets and per-file CRCs.
pub async fn fetch_checkpoint(
    channels: &PeerChannels,
    source_addr: &str,
    group_id: &str,
    snapshot_id: &str,
    staging: &Path,
) -> io::Result<Manifest> {
    snapshot::check_name("snapshot id", snapshot_id)?;
    let ch = channels
        .get(source_addr)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut client = SnapshotServiceClient::new(ch).max_decoding_message_size(16 << 20);
    let mut stream = client
        .fetch_snapshot(FetchSnapshotRequest {
            group_id: group_id.to_string(),
            snapshot_id: snapshot_id.to_string(),
        })
        .await
        .map_err(|s| io::Error::new(io::ErrorKind::ConnectionRefused, s.to_string()))?
        .into_inner();

    let db_dir = staging.join(snapshot::DB_DIR);
    tokio::fs::create_dir_all(&db_dir).await?;
    let mut manifest: Option<Manifest> = None;
    let mut open: Option<(String, tokio::fs::File, u64)> = None;
    let mut chunks = 0u64;
    while let Some(item) = stream.next().await {
        let chunk = item.map_err(|s| io::Error::new(io::ErrorKind::BrokenPipe, s.to_string()))?;
        match chunk.kind {
            Some(Kind::Manifest(b)) => {
                let m: Manifest = serde_json::from_slice(&b)
                    .map_err(|e| invalid(format!("bad snapshot manifest: {e}")))?;
                for f in &m.files {
                    snapshot::check_name("file name", &f.name)?;
                }
                if m.snapshot_id != snapshot_id {
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
