//! [`ScmNode`], the core handle the SCM's services share: the Raft group, the sequence-id
//! generator and the leader's in-memory view. The leader's work on it lives in
//! [`crate::leader`].
//!
//! [`ScmNode`] holds the Raft group, the sequence-id generator and the in-memory
//! [`ClusterState`]. The in-memory state belongs to one leader term: the first call in a new
//! term replaces it with an empty one and invalidates the id batches, so nothing a previous
//! leadership knew (or handed out) is trusted. Only a ready leader answers; a follower
//! refuses with [`ScmError::Raft`] (not the leader, with a hint).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rozone_proto::scm::scm_command::Command;
use rozone_proto::scm::CloseContainerCommand;
use rozone_raft::RaftGroup;

use crate::cluster::ClusterState;
use crate::config::ScmSection;
use crate::error::ScmError;
use crate::state::{
    read, ContainerEvent, ContainerInfo, ScmLogic, ScmRequest, ScmResponse, SequenceIdGenerator,
};

/// Counters kept across leader terms, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    pub registrations: AtomicU64,
    pub heartbeats: AtomicU64,
    pub commands_sent: AtomicU64,
    pub blocks_allocated: AtomicU64,
    pub containers_created: AtomicU64,
    pub containers_closed: AtomicU64,
    pub pipelines_created: AtomicU64,
    pub pipelines_closed: AtomicU64,
    pub replicate_commands: AtomicU64,
    pub delete_container_commands: AtomicU64,
    pub deleted_block_txns_done: AtomicU64,
    pub rm_runs: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

pub type Group = Arc<RaftGroup<ScmLogic>>;

pub struct ScmNode {
    pub group: Group,
    pub ids: SequenceIdGenerator<Group>,
    pub cfg: ScmSection,
    pub counters: Counters,
    mem: Mutex<ClusterState>,
    /// Serialises allocation and pipeline/container creation, so two callers do not both
    /// open a container for the same room.
    pub alloc: tokio::sync::Mutex<()>,
}

/// Milliseconds since the Unix epoch (stamped before proposing, never in apply).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl ScmNode {
    pub fn new(group: Group, cfg: ScmSection) -> Arc<Self> {
        Arc::new(Self {
            ids: SequenceIdGenerator::new(group.clone(), crate::state::DEFAULT_BATCH_SIZE),
            group,
            cfg,
            counters: Counters::default(),
            mem: Mutex::new(ClusterState::new(0, Instant::now())),
            alloc: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ClusterState> {
        // The state is left consistent between statements, so a poisoned lock is usable.
        self.mem.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks that this node is the ready leader and returns its in-memory state, fresh
    /// if the term changed since it was last used.
    pub fn lead(&self) -> Result<MutexGuard<'_, ClusterState>, ScmError> {
        if !self.group.is_ready_leader() {
            return Err(self.group.not_leader_error().into());
        }
        let term = self.group.metrics().current_term;
        let mut m = self.lock();
        if m.term != term {
            tracing::info!(term, "SCM leader: starting with an empty datanode registry");
            *m = ClusterState::new(term, Instant::now());
            self.ids.invalidate();
        }
        Ok(m)
    }

    /// The in-memory state if this node still holds it for the current term (read-only
    /// uses such as metrics, which must not reset it).
    pub fn peek<R>(&self, f: impl FnOnce(&ClusterState) -> R) -> Option<R> {
        let term = self.group.metrics().current_term;
        let m = self.lock();
        (m.term == term && self.group.is_ready_leader()).then(|| f(&m))
    }

    pub async fn write(&self, req: ScmRequest) -> Result<ScmResponse, ScmError> {
        Ok(self.group.write(req).await?)
    }

    pub fn container(&self, id: u64) -> Result<Option<ContainerInfo>, ScmError> {
        Ok(read::container(&self.group.db(), id)?)
    }

    /// OPEN → CLOSING, then a close command to every live member of its pipeline and every
    /// datanode holding a replica. Returns the state after the call.
    pub async fn finalize_container(&self, id: u64, why: &str) -> Result<ScmResponse, ScmError> {
        let r = self
            .write(ScmRequest::UpdateContainer {
                id,
                event: ContainerEvent::Finalize,
            })
            .await?;
        if let ScmResponse::ContainerUpdated { .. } = r {
            tracing::info!(container = id, reason = why, "container closing");
            Counters::add(&self.counters.containers_closed, 1);
            self.send_close_commands(id, false)?;
        }
        Ok(r)
    }

    /// Queues close commands for container `id` to its pipeline members and replica holders
    /// (skipping datanodes that already have the same command waiting).
    pub fn send_close_commands(&self, id: u64, force: bool) -> Result<(), ScmError> {
        let Some(c) = self.container(id)? else {
            return Ok(());
        };
        let members = read::pipeline(&self.group.db(), c.pipeline_id)?
            .map(|p| p.members)
            .unwrap_or_default();
        let mut m = self.lead()?;
        let mut targets: Vec<u64> = members;
        targets.extend(m.replicas.replicas(id).iter().map(|r| r.datanode));
        targets.sort_unstable();
        targets.dedup();
        let cmd = Command::CloseContainer(CloseContainerCommand {
            container_id: id,
            pipeline_id: c.pipeline_id,
            force,
        });
        for dn in targets {
            let alive = m
                .nodes
                .health(dn)
                .is_some_and(|h| h != crate::cluster::nodes::NodeHealth::Dead);
            if alive && !m.commands.has_queued(dn, &cmd) {
                m.commands.push(dn, cmd.clone());
            }
        }
        Ok(())
    }
}
