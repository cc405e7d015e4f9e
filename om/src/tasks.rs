//! Background work of an OM: the leader's cleanup (expired open keys and block reservations are removed and
//! expired multipart uploads aborted through the log; blocks no key refers to are handed to the SCM, then their rows are purged
//! through the log), and every member's watch over the Raft membership, which warns about
//! members the local config lacks (their address from the membership is used: applying a
//! membership change never needs the local config, so it can never crash on a gap in it).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::node::{now_ms, OmNode};
use crate::state::types::BlockId;
use crate::state::{read, OmRequest, OmResponse};

/// Most open keys expired, or deleted-block rows handed over, per round.
const BATCH: usize = 1000;

/// Runs the leader's cleanup every `om.cleanup_interval` until `stop`.
pub async fn cleanup_loop(node: Arc<OmNode>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(node.config.om.cleanup_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !node.group.is_ready_leader() {
            continue;
        }
        if let Err(e) = expire_open_keys(&node).await {
            debug!(error = %e, "expiring open keys");
        }
        if let Err(e) = expire_reservations(&node).await {
            debug!(error = %e, "expiring reserved blocks");
        }
        if let Err(e) = abort_expired_uploads(&node).await {
            debug!(error = %e, "aborting expired multipart uploads");
        }
        if let Err(e) = hand_over_deleted_blocks(&node).await {
            debug!(error = %e, "handing deleted blocks to the SCM");
        }
    }
}

/// One round of open-key expiry; returns how many were removed.
pub async fn expire_open_keys(node: &OmNode) -> anyhow::Result<u64> {
    let now = now_ms();
    let ids = read::expired_open_keys(&node.group.db(), now, BATCH)?;
    if ids.is_empty() {
        return Ok(0);
    }
    match node
        .propose(OmRequest::ExpireOpenKeys { ids, now_ms: now })
        .await?
    {
        OmResponse::OpenKeysExpired { count } => {
            node.metrics
                .open_keys_expired
                .fetch_add(count, std::sync::atomic::Ordering::Relaxed);
            info!(count, "expired open keys removed");
            Ok(count)
        }
        other => anyhow::bail!("unexpected response {other:?}"),
    }
}

/// One round of reservation expiry: blocks the pool fetched that no open key or commit took
/// by their expiry go to deletion through the log; returns how many.
pub async fn expire_reservations(node: &OmNode) -> anyhow::Result<u64> {
    let now = now_ms();
    let ids = read::expired_reservations(&node.group.db(), now, BATCH)?;
    if ids.is_empty() {
        return Ok(0);
    }
    match node
        .propose(OmRequest::ExpireReserved { ids, now_ms: now })
        .await?
    {
        OmResponse::ReservationsExpired { count } => {
            node.metrics
                .reservations_expired
                .fetch_add(count, std::sync::atomic::Ordering::Relaxed);
            info!(count, "expired reserved blocks queued for deletion");
            Ok(count)
        }
        other => anyhow::bail!("unexpected response {other:?}"),
    }
}

/// One round of multipart-upload expiry: uploads older than `om.s3_upload_expiry` are
/// aborted through the log (their parts' blocks queued for deletion); returns how many.
/// An upload completed or aborted meanwhile is refused by the apply and not counted.
pub async fn abort_expired_uploads(node: &OmNode) -> anyhow::Result<u64> {
    let expiry = u64::try_from(node.config.om.s3_upload_expiry.as_millis()).unwrap_or(u64::MAX);
    let Some(created_before) = now_ms().checked_sub(expiry) else {
        return Ok(0);
    };
    let uploads = read::expired_uploads(&node.group.db(), created_before, BATCH)?;
    let mut aborted = 0;
    for upload in uploads {
        let shown = format!("{}/{}/{}", upload.volume, upload.bucket, upload.key);
        let id = upload.upload_id.clone();
        match node.propose(OmRequest::S3AbortUpload { upload }).await? {
            OmResponse::S3UploadAborted => {
                aborted += 1;
                info!(key = %shown, upload_id = %id, "expired multipart upload aborted");
            }
            other => {
                debug!(key = %shown, upload_id = %id, response = ?other, "expired upload not aborted")
            }
        }
    }
    if aborted > 0 {
        node.metrics
            .s3_uploads_expired
            .fetch_add(aborted, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(aborted)
}

/// One round of block deletion: the SCM takes the blocks first, then the rows go.
pub async fn hand_over_deleted_blocks(node: &OmNode) -> anyhow::Result<u64> {
    let rows = read::deleted_blocks(&node.group.db(), BATCH)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let blocks: Vec<BlockId> = rows
        .iter()
        .flat_map(|(_, r)| r.blocks.iter().copied())
        .collect();
    let n = blocks.len() as u64;
    node.scm.delete_blocks(blocks).await?;
    let ids = rows.iter().map(|(id, _)| *id).collect();
    node.propose(OmRequest::PurgeDeletedBlocks { ids }).await?;
    node.metrics
        .blocks_deleted
        .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    debug!(blocks = n, "deleted blocks handed to the SCM");
    Ok(n)
}

/// Warns (once per member and address) about ring members that the local `[[peers]]`
/// lacks or lists at another address; the membership's address is the one used.
pub async fn watch_membership(node: Arc<OmNode>, stop: CancellationToken) {
    let mut warned: BTreeMap<u64, String> = BTreeMap::new();
    let mut was_member = false;
    loop {
        let v = node.group.ring_view();
        let me = node.id();
        let member_now = v.member(me).is_some();
        if was_member && !member_now {
            warn!(
                node_id = me,
                "this OM is no longer a member of the ring (decommissioned); stop it"
            );
        }
        was_member = member_now;
        for n in &v.members {
            let id = n.id;
            let configured = node.config.peers.iter().find(|p| p.id == id);
            let problem = match configured {
                None => Some("is not in this OM's [[peers]] config"),
                Some(p) if p.peer_addr != n.peer_addr || p.client_addr != n.client_addr => {
                    Some("is in this OM's [[peers]] config at other addresses")
                }
                Some(_) => None,
            };
            let shown = format!("peer {} / client {}", n.peer_addr, n.client_addr);
            if let Some(problem) = problem {
                if warned.get(&id) != Some(&shown) {
                    warn!(
                        member = id,
                        address = %shown,
                        "ring member {id} {problem}; using the address from the Raft membership (add a [[peers]] entry for it)"
                    );
                    warned.insert(id, shown);
                }
            }
        }
        let changed = node
            .group
            .wait_membership_change(&v, std::time::Duration::from_secs(3600));
        tokio::select! {
            _ = stop.cancelled() => return,
            r = changed => {
                // An error with Raft stopped would return at once again: end the watch.
                if r.is_err() && node.group.is_stopped() {
                    return;
                }
            }
        }
    }
}
