//! Block allocation for the OM and queuing of deleted blocks.
//!
//! A block is (container id, local id) in an OPEN container of the caller's owner on an
//! OPEN pipeline whose three members are HEALTHY. The leader keeps
//! `open_containers_per_pipeline` such containers per pipeline and spreads blocks over
//! them; bytes handed out are counted in memory, and a container that cannot take another
//! full block is closed (Finalize + close commands). Local ids come from the replicated
//! `localId` sequence, so they never repeat, across leaders too.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Invalid, ScmError};
use crate::leader::types::{AllocatedBlock, BlockRequest};
use crate::node::{now_ms, Counters, ScmNode};
use crate::state::{
    read, ContainerInfo, ContainerState, PipelineInfo, PipelineState, ReplicationFactor,
    ScmRequest, ScmResponse, SEQ_CONTAINER_ID, SEQ_DEL_TXN_ID, SEQ_LOCAL_ID,
};

/// Most blocks one AllocateBlock call may ask for.
pub const MAX_BLOCKS_PER_CALL: u32 = 1000;
/// Most blocks one DeleteBlocks call may carry.
pub const MAX_DELETES_PER_CALL: usize = 100_000;

impl ScmNode {
    pub async fn allocate_blocks(&self, r: BlockRequest) -> Result<Vec<AllocatedBlock>, ScmError> {
        let block_size = self.cfg.block_size.as_u64();
        if r.count == 0 || r.count > MAX_BLOCKS_PER_CALL {
            return Err(Invalid(format!(
                "count must be 1..={MAX_BLOCKS_PER_CALL}, got {}",
                r.count
            ))
            .into());
        }
        if r.size > block_size {
            return Err(Invalid(format!(
                "size {} exceeds the SCM block size {block_size}",
                r.size
            ))
            .into());
        }
        if r.owner.is_empty() {
            return Err(Invalid("owner is missing (e.g. the OM service id)".into()).into());
        }
        let size = if r.size == 0 { block_size } else { r.size };
        {
            let m = self.lead()?;
            if m.safe_mode.in_safe_mode {
                return Err(ScmError::FailedPrecondition(format!(
                    "SCM is in safe mode, block allocation is refused until it exits: {}",
                    m.safe_mode_detail
                )));
            }
        }
        let _alloc = self.alloc.lock().await;
        let mut blocks = Vec::with_capacity(r.count as usize);
        for _ in 0..r.count {
            let (c, p) = self
                .pick_container(
                    &r.owner,
                    size,
                    &r.exclude_datanodes,
                    &r.exclude_pipelines,
                    &r.exclude_containers,
                )
                .await?;
            let local_id = self.ids.next_id(SEQ_LOCAL_ID).await?;
            let (pipeline, full) = {
                let mut m = self.lead()?;
                let used = m.allocated.entry(c.id).or_insert(c.used_bytes);
                *used += size;
                let full = used.saturating_add(block_size) > self.cfg.container_size.as_u64();
                (m.pipeline_view(&p), full)
            };
            blocks.push(AllocatedBlock {
                container_id: c.id,
                local_id,
                pipeline,
                max_size: size,
            });
            if full {
                self.finalize_container(c.id, "full").await?;
            }
        }
        Counters::add(&self.counters.blocks_allocated, blocks.len() as u64);
        Ok(blocks)
    }

    /// An OPEN container of `owner` with room for `size` on a usable pipeline, opening a
    /// new one when a usable pipeline has fewer than `open_containers_per_pipeline`.
    async fn pick_container(
        &self,
        owner: &str,
        size: u64,
        exclude_dn: &BTreeSet<u64>,
        exclude_p: &BTreeSet<u64>,
        exclude_c: &BTreeSet<u64>,
    ) -> Result<(ContainerInfo, PipelineInfo), ScmError> {
        let db = self.group.db();
        let pipelines: BTreeMap<u64, PipelineInfo> = read::pipelines(&db)?
            .into_iter()
            .filter(|p| p.state == PipelineState::Open && !exclude_p.contains(&p.id))
            .filter(|p| !p.members.iter().any(|d| exclude_dn.contains(d)))
            .map(|p| (p.id, p))
            .collect();
        let open = read::containers(&db, Some(ContainerState::Open))?;
        drop(db);
        let cap = self.cfg.container_size.as_u64();
        let per_pipeline = self.cfg.open_containers_per_pipeline as usize;
        let (choice, new_on) = {
            let mut m = self.lead()?;
            let usable: Vec<&PipelineInfo> = pipelines
                .values()
                // A member whose volumes all failed or are full takes no new blocks.
                .filter(|p| p.members.iter().all(|d| m.nodes.accepts_data(*d)))
                .collect();
            if usable.is_empty() {
                return Err(ScmError::Exhausted(format!(
                    "no OPEN pipeline of three HEALTHY datanodes to allocate blocks on \
                     ({} healthy datanodes registered; pipelines are created once 3 are)",
                    m.nodes.healthy_ids().len()
                )));
            }
            let mut per: BTreeMap<u64, usize> = usable.iter().map(|p| (p.id, 0)).collect();
            let mut room = Vec::new();
            for c in open.iter().filter(|c| c.owner == owner) {
                if let Some(n) = per.get_mut(&c.pipeline_id) {
                    *n += 1;
                    let used = *m.allocated.get(&c.id).unwrap_or(&c.used_bytes);
                    if !exclude_c.contains(&c.id) && used.saturating_add(size) <= cap {
                        room.push(c.clone());
                    }
                }
            }
            // Open another container where a pipeline has fewer than wanted.
            let thin = per
                .iter()
                .filter(|(_, n)| **n < per_pipeline)
                .min_by_key(|(id, n)| (**n, **id))
                .map(|(id, _)| *id);
            match (thin, room.is_empty()) {
                (Some(p), _) => (None, Some(p)),
                (None, false) => {
                    m.next_pick = m.next_pick.wrapping_add(1);
                    let c = room[(m.next_pick as usize) % room.len()].clone();
                    (Some(c), None)
                }
                (None, true) => {
                    // Every container is full or excluded: open one more on the least used.
                    let p = per
                        .iter()
                        .min_by_key(|(id, n)| (**n, **id))
                        .map(|(id, _)| *id);
                    (None, p)
                }
            }
        };
        if let Some(c) = choice {
            let p = pipelines[&c.pipeline_id].clone();
            return Ok((c, p));
        }
        let pid = new_on.ok_or_else(|| ScmError::Internal("no pipeline chosen".into()))?;
        let id = self.ids.next_id(SEQ_CONTAINER_ID).await?;
        let info = ContainerInfo {
            id,
            state: ContainerState::Open,
            replication: ReplicationFactor::Three,
            owner: owner.to_string(),
            pipeline_id: pid,
            used_bytes: 0,
            key_count: 0,
            bcsid: 0,
            created_at: now_ms(),
        };
        let r = self
            .write(ScmRequest::CreateContainer(info.clone()))
            .await?;
        if r != (ScmResponse::ContainerCreated { id }) {
            return Err(ScmError::refused("create container", r));
        }
        tracing::info!(container = id, pipeline = pid, owner, "container opened");
        Counters::add(&self.counters.containers_created, 1);
        Ok((info, pipelines[&pid].clone()))
    }

    /// Queues deleted blocks (`(container id, local id)` pairs), one transaction per
    /// container. Every container must exist (else nothing is queued).
    pub async fn delete_blocks(&self, blocks: &[(u64, u64)]) -> Result<Vec<u64>, ScmError> {
        if blocks.is_empty() || blocks.len() > MAX_DELETES_PER_CALL {
            return Err(Invalid(format!(
                "blocks must hold 1..={MAX_DELETES_PER_CALL} block ids, got {}",
                blocks.len()
            ))
            .into());
        }
        let mut by_container: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for &(container_id, local_id) in blocks {
            if container_id == 0 || local_id == 0 {
                return Err(Invalid(format!(
                    "block ({container_id}, {local_id}): container_id and local_id must be above 0"
                ))
                .into());
            }
            by_container.entry(container_id).or_default().push(local_id);
        }
        drop(self.lead()?);
        for id in by_container.keys() {
            match self.container(*id)? {
                None => return Err(ScmError::NotFound(format!("container {id} does not exist"))),
                // Deleted only once every replica was empty: its blocks are gone.
                Some(c)
                    if matches!(c.state, ContainerState::Deleting | ContainerState::Deleted) =>
                {
                    return Err(ScmError::FailedPrecondition(format!(
                        "container {id} is {}: its blocks are gone already",
                        c.state
                    )))
                }
                Some(_) => {}
            }
        }
        let mut txn_ids = Vec::new();
        for (container_id, mut local_ids) in by_container {
            local_ids.sort_unstable();
            local_ids.dedup();
            let txn_id = self.ids.next_id(SEQ_DEL_TXN_ID).await?;
            let r = self
                .write(ScmRequest::AddDeletedBlocks {
                    txn_id,
                    container_id,
                    local_ids,
                })
                .await?;
            if r != (ScmResponse::DeletedBlocksAdded { txn_id }) {
                return Err(ScmError::refused("add deleted blocks", r));
            }
            txn_ids.push(txn_id);
        }
        Ok(txn_ids)
    }
}
