//! [`ScmLogic`]: how each SCM applies a committed [`ScmRequest`] to its state.
//!
//! Every decision reads only rows of this state (through the batch's `Txn`, so an entry
//! sees earlier entries of the same batch) and fields of the request, so every member
//! reaches the same answer. An `Err` is reserved for local storage failures (including
//! stored bytes that do not decode): it stops this Raft node rather than letting it diverge.

use std::io;

use rozone_kv::u64_key;
use rozone_raft::codec::encode;
use rozone_raft::{LogId, Rows, StateMachineLogic, Txn};

use super::request::{ScmRequest, ScmResponse};
use super::types::{ContainerInfo, ContainerState, DeletedBlocksTxn, PipelineInfo, PipelineState};
use super::{
    is_sequence_name, CF_CLUSTER, CF_CONTAINERS, CF_DELETED_BLOCKS, CF_PIPELINES, CF_SEQUENCE_IDS,
    COLUMN_FAMILIES, KEY_CLUSTER_ID,
};

/// The SCM state machine. Stateless in memory: everything lives in the database, so a
/// snapshot install needs no rebuild.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScmLogic;

impl StateMachineLogic for ScmLogic {
    type Request = ScmRequest;
    type Response = ScmResponse;

    fn column_families(&self) -> Vec<&'static str> {
        COLUMN_FAMILIES.to_vec()
    }

    fn apply(
        &mut self,
        txn: &mut Txn<'_>,
        _log_id: &LogId,
        req: ScmRequest,
    ) -> io::Result<ScmResponse> {
        match req {
            ScmRequest::SetClusterId { cluster_id } => set_cluster_id(txn, cluster_id),
            ScmRequest::AllocateBatch {
                name,
                expected_last,
                new_last,
            } => allocate_batch(txn, name, expected_last, new_last),
            ScmRequest::CreateContainer(info) => create_container(txn, info),
            ScmRequest::UpdateContainer { id, event } => {
                let Some(mut c) = get_container(txn, id)? else {
                    return Ok(ScmResponse::ContainerNotFound { id });
                };
                let Some(next) = c.state.next(event) else {
                    return Ok(ScmResponse::InvalidTransition {
                        id,
                        from: c.state,
                        event,
                    });
                };
                c.state = next;
                put_container(txn, &c)?;
                Ok(ScmResponse::ContainerUpdated { id, state: next })
            }
            ScmRequest::UpdateContainerUsage {
                id,
                used_bytes,
                key_count,
                bcsid,
            } => {
                let Some(mut c) = get_container(txn, id)? else {
                    return Ok(ScmResponse::ContainerNotFound { id });
                };
                // A stale report must not lower the BCSID: replication decisions trust it
                // to say which replicas have every committed block.
                if bcsid < c.bcsid {
                    return Ok(ScmResponse::BcsidRegression {
                        id,
                        current: c.bcsid,
                        requested: bcsid,
                    });
                }
                c.used_bytes = used_bytes;
                c.key_count = key_count;
                c.bcsid = bcsid;
                put_container(txn, &c)?;
                Ok(ScmResponse::UsageUpdated { id, bcsid })
            }
            ScmRequest::CreatePipeline(p) => {
                let id = p.id;
                if let Err(reason) = p.validate() {
                    return Ok(ScmResponse::InvalidPipeline { id, reason });
                }
                if get_pipeline(txn, id)?.is_some() {
                    return Ok(ScmResponse::PipelineExists { id });
                }
                put_pipeline(txn, &p)?;
                Ok(ScmResponse::PipelineCreated { id })
            }
            ScmRequest::ClosePipeline { id } => {
                let Some(mut p) = get_pipeline(txn, id)? else {
                    return Ok(ScmResponse::PipelineNotFound { id });
                };
                if p.state != PipelineState::Closed {
                    p.state = PipelineState::Closed;
                    put_pipeline(txn, &p)?;
                }
                Ok(ScmResponse::PipelineClosed { id })
            }
            ScmRequest::AddDeletedBlocks {
                txn_id,
                container_id,
                local_ids,
            } => {
                let key = u64_key(txn_id);
                if txn.get(CF_DELETED_BLOCKS, &key)?.is_some() {
                    return Ok(ScmResponse::DeletedBlocksTxnExists { txn_id });
                }
                let row = DeletedBlocksTxn {
                    txn_id,
                    container_id,
                    local_ids,
                };
                txn.put(CF_DELETED_BLOCKS, key, encode(&row)?);
                Ok(ScmResponse::DeletedBlocksAdded { txn_id })
            }
            ScmRequest::RemoveDeletedBlocks { txn_ids } => {
                let mut removed = 0;
                for t in txn_ids {
                    let key = u64_key(t);
                    if txn.get(CF_DELETED_BLOCKS, &key)?.is_some() {
                        txn.delete(CF_DELETED_BLOCKS, key);
                        removed += 1;
                    }
                }
                Ok(ScmResponse::DeletedBlocksRemoved { removed })
            }
            ScmRequest::RecordDatanode(rec) => super::registry::record_datanode(txn, rec),
            ScmRequest::RecordSafeModeLeft { term } => {
                super::registry::record_safe_mode_left(txn, term)
            }
            ScmRequest::AddSecretKey(k) => super::secret_keys::add(txn, k),
            ScmRequest::RemoveExpiredSecretKeys { now_ms } => {
                super::secret_keys::remove_expired(txn, now_ms)
            }
            ScmRequest::AddJoinToken(t) => super::join_tokens::add(txn, t),
            ScmRequest::RedeemJoinToken { digest, now_ms } => {
                super::join_tokens::redeem(txn, &digest, now_ms)
            }
        }
    }
}

fn set_cluster_id(txn: &mut Txn<'_>, cluster_id: String) -> io::Result<ScmResponse> {
    let existing: Option<String> = txn.get_row(CF_CLUSTER, KEY_CLUSTER_ID)?;
    match existing {
        Some(e) if e != cluster_id => Ok(ScmResponse::ClusterIdMismatch { existing: e }),
        Some(_) => Ok(ScmResponse::ClusterIdSet { cluster_id }),
        None => {
            txn.put(CF_CLUSTER, KEY_CLUSTER_ID, encode(&cluster_id)?);
            Ok(ScmResponse::ClusterIdSet { cluster_id })
        }
    }
}

/// The compare-and-set every member judges against its own row; rows only ever change
/// here, so members that applied the same log hold the same rows.
fn allocate_batch(
    txn: &mut Txn<'_>,
    name: String,
    expected_last: u64,
    new_last: u64,
) -> io::Result<ScmResponse> {
    if !is_sequence_name(&name) {
        return Ok(ScmResponse::UnknownSequence { name });
    }
    if new_last <= expected_last {
        return Ok(ScmResponse::InvalidBatch {
            name,
            expected_last,
            new_last,
        });
    }
    let current: u64 = txn.get_row(CF_SEQUENCE_IDS, name.as_bytes())?.unwrap_or(0);
    if current != expected_last {
        return Ok(ScmResponse::CasFailed { name, current });
    }
    txn.put(CF_SEQUENCE_IDS, name.as_bytes(), encode(&new_last)?);
    Ok(ScmResponse::BatchAllocated {
        name,
        first: expected_last + 1,
        last: new_last,
    })
}

fn create_container(txn: &mut Txn<'_>, info: ContainerInfo) -> io::Result<ScmResponse> {
    let id = info.id;
    if info.state != ContainerState::Open {
        return Ok(ScmResponse::InvalidContainer {
            id,
            reason: format!("a new container must be OPEN, not {}", info.state),
        });
    }
    if get_container(txn, id)?.is_some() {
        return Ok(ScmResponse::ContainerExists { id });
    }
    put_container(txn, &info)?;
    Ok(ScmResponse::ContainerCreated { id })
}

fn get_container(txn: &Txn<'_>, id: u64) -> io::Result<Option<ContainerInfo>> {
    txn.get_row(CF_CONTAINERS, &u64_key(id))
}

fn put_container(txn: &mut Txn<'_>, c: &ContainerInfo) -> io::Result<()> {
    txn.put(CF_CONTAINERS, u64_key(c.id), encode(c)?);
    Ok(())
}

fn get_pipeline(txn: &Txn<'_>, id: u64) -> io::Result<Option<PipelineInfo>> {
    txn.get_row(CF_PIPELINES, &u64_key(id))
}

fn put_pipeline(txn: &mut Txn<'_>, p: &PipelineInfo) -> io::Result<()> {
    txn.put(CF_PIPELINES, u64_key(p.id), encode(p)?);
    Ok(())
}

#[cfg(test)]
mod tests;
