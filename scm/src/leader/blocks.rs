//! Block allocation for the OM and queuing of deleted blocks.
//!
//! A block is (container id, local id) in an OPEN container of the caller's owner on an
//! OPEN pipeline whose three members are HEALTHY. The leader keeps
//! `open_containers_per_pipeline` such containers per pipeline and spreads blocks over
//! them; bytes handed out are counted in memory (the asked size, or
//! [`UNKNOWN_LENGTH_RESERVATION`] for a block of unknown length), and a container that
//! cannot take another full block is closed (Finalize + close commands). The candidates come
//! from an in-memory [`OpenIndex`] of one scan, not from a scan of every container per
//! block. Local ids come from the replicated `localId` sequence, so they never repeat,
//! across leaders too.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::OpenIndex;
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

/// Bytes counted against a container for a block of unknown length (`size = 0`: a key
/// opened without a size, or a stream), shared with the OM and clients. Counting a whole
/// block for each, as before, closed a 5 GiB container every 20 metadata-only keys (two or
/// three SCM Raft writes each, under the allocation lock). Ozone counts nothing at
/// allocation and closes a container once its replicas report it full; the replica reports
/// here do that too ([`crate::cluster::lifecycle::react`]), so a stream that does fill its
/// block is caught.
pub use rozone_types::UNKNOWN_LENGTH_RESERVATION;
/// How long one full scan of the OPEN pipelines and containers serves allocations. A
/// pipeline opened meanwhile is used once it expires; a container or pipeline closed
/// meanwhile is never handed out (every pick is re-read by id).
const OPEN_INDEX_TTL: Duration = Duration::from_secs(1);

/// The ids one AllocateBlock call must avoid.
struct Excluded {
    datanodes: BTreeSet<u64>,
    pipelines: BTreeSet<u64>,
    containers: BTreeSet<u64>,
}

/// What [`ScmNode::choose`] picked: a container in the index, or a pipeline to open one on.
enum Choice {
    Existing(u64),
    NewOn(u64),
}

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
        // A block of unknown length may still be filled: it may hold a whole block.
        let (max_size, reserve) = match r.size {
            0 => (block_size, UNKNOWN_LENGTH_RESERVATION.min(block_size)),
            n => (n, n),
        };
        {
            let m = self.lead()?;
            if m.safe_mode.in_safe_mode {
                return Err(ScmError::FailedPrecondition(format!(
                    "SCM is in safe mode, block allocation is refused until it exits: {}",
                    m.safe_mode_detail
                )));
            }
        }
        let exclude = Excluded {
            datanodes: r.exclude_datanodes.clone(),
            pipelines: r.exclude_pipelines.clone(),
            containers: r.exclude_containers.clone(),
        };
        let _alloc = self.alloc.lock().await;
        let mut blocks = Vec::with_capacity(r.count as usize);
        for _ in 0..r.count {
            let (c, p) = self.pick_container(&r.owner, reserve, &exclude).await?;
            let local_id = self.ids.next_id(SEQ_LOCAL_ID).await?;
            let (pipeline, full) = {
                let mut m = self.lead()?;
                let used = m.allocated.entry(c.id).or_insert(c.used_bytes);
                // Replica reports may have counted more than was handed out.
                *used = (*used).max(c.used_bytes).saturating_add(reserve);
                let full = used.saturating_add(block_size) > self.cfg.container_size.as_u64();
                if full {
                    m.open_index = None;
                }
                (m.pipeline_view(&p), full)
            };
            blocks.push(AllocatedBlock {
                container_id: c.id,
                local_id,
                pipeline,
                max_size,
            });
            if full {
                self.finalize_container(c.id, "full").await?;
            }
        }
        Counters::add(&self.counters.blocks_allocated, blocks.len() as u64);
        Ok(blocks)
    }

    /// An OPEN container of `owner` with room for `size` on a usable pipeline, opening a
    /// new one when a usable pipeline has fewer than `open_containers_per_pipeline`. Picks
    /// from the [`OpenIndex`]; a pick the index had stale rebuilds it and picks again.
    async fn pick_container(
        &self,
        owner: &str,
        size: u64,
        exclude: &Excluded,
    ) -> Result<(ContainerInfo, PipelineInfo), ScmError> {
        for rebuild in [false, true] {
            let index = self.open_index(rebuild)?;
            match self.choose(&index, owner, size, exclude)? {
                Choice::Existing(id) => {
                    if let Some(found) = self.still_open(id)? {
                        return Ok(found);
                    }
                }
                Choice::NewOn(pid) => {
                    let pipeline = read::pipeline(&self.group.db(), pid)?;
                    if let Some(p) = pipeline.filter(|p| p.state == PipelineState::Open) {
                        return self.open_container(owner, p).await;
                    }
                }
            }
        }
        Err(ScmError::Unavailable(
            "the OPEN containers and pipelines changed between two scans in a row; retry".into(),
        ))
    }

    /// The index of this term, or a new one from a full scan when there is none, it is
    /// older than [`OPEN_INDEX_TTL`] or `rebuild` is set.
    fn open_index(&self, rebuild: bool) -> Result<Arc<OpenIndex>, ScmError> {
        if !rebuild {
            let m = self.lead()?;
            if let Some(ix) = m.open_index.as_ref() {
                if ix.built.elapsed() < OPEN_INDEX_TTL {
                    return Ok(ix.clone());
                }
            }
        }
        let db = self.group.db();
        let pipelines = read::pipelines(&db)?
            .into_iter()
            .filter(|p| p.state == PipelineState::Open)
            .map(|p| (p.id, p))
            .collect();
        let containers = read::containers(&db, Some(ContainerState::Open))?;
        drop(db);
        let ix = Arc::new(OpenIndex {
            built: Instant::now(),
            pipelines,
            containers,
        });
        self.lead()?.open_index = Some(ix.clone());
        Ok(ix)
    }

    /// The choice among what `index` lists (in memory, under the leader state's lock).
    fn choose(
        &self,
        index: &OpenIndex,
        owner: &str,
        size: u64,
        exclude: &Excluded,
    ) -> Result<Choice, ScmError> {
        let cap = self.cfg.container_size.as_u64();
        let per_pipeline = self.cfg.open_containers_per_pipeline as usize;
        let mut m = self.lead()?;
        let usable: Vec<&PipelineInfo> = index
            .pipelines
            .values()
            .filter(|p| !exclude.pipelines.contains(&p.id))
            .filter(|p| !p.members.iter().any(|d| exclude.datanodes.contains(d)))
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
        for c in index.containers.iter().filter(|c| c.owner == owner) {
            if let Some(n) = per.get_mut(&c.pipeline_id) {
                *n += 1;
                let used = *m.allocated.get(&c.id).unwrap_or(&c.used_bytes);
                if !exclude.containers.contains(&c.id) && used.saturating_add(size) <= cap {
                    room.push(c.id);
                }
            }
        }
        // Open another container where a pipeline has fewer than wanted.
        let thin = per
            .iter()
            .filter(|(_, n)| **n < per_pipeline)
            .min_by_key(|(id, n)| (**n, **id))
            .map(|(id, _)| *id);
        let least_used = || {
            per.iter()
                .min_by_key(|(id, n)| (**n, **id))
                .map(|(id, _)| *id)
        };
        let choice = match (thin, room.is_empty()) {
            (Some(p), _) => Choice::NewOn(p),
            (None, false) => {
                m.next_pick = m.next_pick.wrapping_add(1);
                Choice::Existing(room[(m.next_pick as usize) % room.len()])
            }
            // Every container is full or excluded: open one more on the least used.
            (None, true) => Choice::NewOn(
                least_used().ok_or_else(|| ScmError::Internal("no pipeline chosen".into()))?,
            ),
        };
        Ok(choice)
    }

    /// Container `id` and its pipeline as stored now, if both are still OPEN.
    fn still_open(&self, id: u64) -> Result<Option<(ContainerInfo, PipelineInfo)>, ScmError> {
        let db = self.group.db();
        let Some(c) = read::container(&db, id)?.filter(|c| c.state == ContainerState::Open) else {
            return Ok(None);
        };
        Ok(read::pipeline(&db, c.pipeline_id)?
            .filter(|p| p.state == PipelineState::Open)
            .map(|p| (c, p)))
    }

    /// Creates a new OPEN container of `owner` on pipeline `p`.
    async fn open_container(
        &self,
        owner: &str,
        p: PipelineInfo,
    ) -> Result<(ContainerInfo, PipelineInfo), ScmError> {
        let id = self.ids.next_id(SEQ_CONTAINER_ID).await?;
        let info = ContainerInfo {
            id,
            state: ContainerState::Open,
            replication: ReplicationFactor::Three,
            owner: owner.to_string(),
            pipeline_id: p.id,
            used_bytes: 0,
            key_count: 0,
            bcsid: 0,
            created_at: now_ms(),
        };
        let r = self
            .write(ScmRequest::CreateContainer(info.clone()))
            .await?;
        // The next pick sees the new container.
        self.lead()?.open_index = None;
        if r != (ScmResponse::ContainerCreated { id }) {
            return Err(ScmError::refused("create container", r));
        }
        tracing::info!(container = id, pipeline = p.id, owner, "container opened");
        Counters::add(&self.counters.containers_created, 1);
        Ok((info, p))
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
