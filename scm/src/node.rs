//! [`ScmNode`], the core handle the SCM's services share: the Raft group, the sequence-id
//! generator and the leader's in-memory view. The leader's work on it lives in
//! [`crate::leader`].
//!
//! The in-memory state belongs to one leader term: the first call in a new term replaces it
//! and invalidates the id batches, so nothing a previous leadership handed out is reused.
//! What it is replaced with follows [`safemode::start`]: after a cold start of the ring, an
//! empty registry in safe mode; on a failover, the ring's datanode records outside safe
//! mode, so block allocation goes on at once on the pipelines the previous leader kept
//! open. Only a leader that holds its lease answers (`RaftGroup::leader_gate`); any other
//! member refuses with [`ScmError::Raft`] (retryable, with a hint when it knows one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rozone_raft::RaftGroup;

use crate::cluster::commands::DatanodeCommand;
use crate::cluster::safemode::{self, Start};
use crate::cluster::ClusterState;
use crate::config::ScmSection;
use crate::error::ScmError;
use crate::state::{
    read, registry, ContainerEvent, ContainerInfo, ScmLogic, ScmRequest, ScmResponse,
    SequenceIdGenerator,
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
    /// CLOSING containers no replica ever wrote, closed as empty ([`crate::cluster::closing`]).
    pub containers_closed_empty: AtomicU64,
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
    /// Term of the first leader this process heard from or was (0: none yet); see
    /// [`safemode::start`]. In memory only: a restart forgets it.
    first_leader_term: AtomicU64,
    /// Runs the leader's background pass before its next tick: a datanode registered, so
    /// pipelines may be made (and safe mode left) now rather than up to a tick later.
    pub wake: tokio::sync::Notify,
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
            first_leader_term: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ClusterState> {
        // The state is left consistent between statements, so a poisoned lock is usable.
        self.mem.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes the first leader this process hears from (an append it accepted) or is (a
    /// lease it earned). Called by the leader's loop on every tick and by [`Self::lead`].
    pub fn observe_leader(&self) {
        if self.first_leader_term.load(Ordering::Acquire) != 0 {
            return;
        }
        let term = if self.group.is_ready_leader() {
            Some(self.group.ring_view().term)
        } else {
            self.group.leader_contact().map(|c| c.term)
        };
        if let Some(t) = term.filter(|t| *t > 0) {
            let _ =
                self.first_leader_term
                    .compare_exchange(0, t, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Checks that this node is the ready leader (it holds its lease) and returns its
    /// in-memory state, new if the term changed since it was last used.
    pub fn lead(&self) -> Result<MutexGuard<'_, ClusterState>, ScmError> {
        self.group.leader_gate()?;
        let term = self.group.ring_view().term;
        let mut m = self.lock();
        if m.term != term {
            self.observe_leader();
            *m = self.new_term(term)?;
            self.ids.invalidate();
        }
        Ok(m)
    }

    /// The in-memory state a leader of `term` starts with ([`safemode::start`]).
    fn new_term(&self, term: u64) -> Result<ClusterState, ScmError> {
        let db = self.group.db();
        let left = registry::safe_mode_left_term(&db)?;
        let first = Some(self.first_leader_term.load(Ordering::Acquire)).filter(|t| *t > 0);
        let now = Instant::now();
        Ok(match safemode::start(first, left) {
            Start::Cold => {
                tracing::info!(
                    term,
                    first_leader_term = first,
                    safe_mode_left_term = left,
                    "SCM leader after a cold start: safe mode until datanodes report"
                );
                ClusterState::new(term, now)
            }
            Start::Failover => {
                let records = registry::datanodes(&db)?;
                tracing::info!(
                    term,
                    datanodes = records.len(),
                    "SCM leader taking over: no safe mode, datanodes as the ring last knew them"
                );
                ClusterState::taken_over(term, now, records)
            }
        })
    }

    /// Leaves safe mode for this term (if in it) and records the term in the ring as out of
    /// safe mode (once), in that order of effect: the record is committed before the first
    /// allocation outside safe mode, so a next leader always knows the ring was running
    /// ([`safemode::start`]). Returns whether it was in safe mode.
    pub async fn leave_safe_mode(&self, forced: bool) -> Result<bool, ScmError> {
        let term = {
            let m = self.lead()?;
            if !m.safe_mode.in_safe_mode && m.safe_mode.recorded {
                return Ok(false);
            }
            m.term
        };
        self.write(ScmRequest::RecordSafeModeLeft { term }).await?;
        let mut m = self.lead()?;
        if m.term != term {
            return Ok(false);
        }
        let was = m.safe_mode.in_safe_mode;
        m.safe_mode.in_safe_mode = false;
        m.safe_mode.recorded = true;
        if was && forced {
            m.safe_mode.forced_exit = true;
            tracing::warn!("SCM safe mode ended by ForceExitSafeMode");
        } else if was {
            tracing::info!("SCM left safe mode");
        }
        Ok(was)
    }

    /// Records datanode `r` as the leader now knows it, unless the ring already has exactly
    /// that (registrations repeat the same details; health changes are rare).
    pub async fn record_datanode(&self, r: crate::state::DatanodeRecord) -> Result<(), ScmError> {
        if registry::datanode(&self.group.db(), r.datanode.id)?.as_ref() == Some(&r) {
            return Ok(());
        }
        let id = r.datanode.id;
        match self.write(ScmRequest::RecordDatanode(r)).await? {
            ScmResponse::DatanodeRecorded { .. } => Ok(()),
            other => {
                tracing::warn!(datanode = id, response = ?other, "datanode record refused");
                Err(ScmError::refused("record datanode", other))
            }
        }
    }

    /// The in-memory state if this node still holds it for the current term (read-only
    /// uses such as metrics, which must not reset it).
    pub fn peek<R>(&self, f: impl FnOnce(&ClusterState) -> R) -> Option<R> {
        let term = self.group.ring_view().term;
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
        let cmd = DatanodeCommand::CloseContainer {
            container_id: id,
            pipeline_id: c.pipeline_id,
            force,
        };
        for dn in targets {
            let alive = m
                .nodes
                .health(dn)
                .is_some_and(|h| h != crate::cluster::nodes::NodeHealth::Dead);
            if alive {
                m.commands.push_once(dn, cmd.clone());
            }
        }
        Ok(())
    }
}
