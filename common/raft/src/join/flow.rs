//! The joining node's half, one procedure for every ring: [`prepare`] before Raft opens
//! (read the record, decide the start, find the leader, record "joining" or "founding"),
//! then the daemon starts its Raft group with the peer port closed to the ring and calls
//! [`finish`] (initialise, or ask the leader to add it, then record "member" and open the
//! peer port). A node whose data has no member record never answers the ring's Raft RPCs
//! before a leader admitted it, so a wiped member cannot answer appends with an empty log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use tonic::{Code, Status};
use tracing::{info, warn};

use super::decide::{plan, Plan, StartMode};
use super::record::{JoinRecord, Origin, RingId, Stage};
use crate::group::RaftGroup;
use crate::state_machine::StateMachineLogic;
use crate::types::NodeId;

/// What a joining node sends with `AddMember`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinAsk {
    /// The ring id its data held before this join began (`None`: never a member, or wiped).
    pub ring_id: Option<RingId>,
    pub last_log_index: Option<u64>,
    /// Only ask whether the leader would admit it; change nothing.
    pub check_only: bool,
}

/// What each daemon supplies: how to find its leader and how to call its `AddMember`.
pub trait JoinHooks: Send + Sync {
    /// Finds the ring's leader (client address) and the ring id it reports, after any
    /// daemon-specific check (the OM's peer-config check).
    fn find_leader(&self) -> BoxFuture<'_, anyhow::Result<(String, RingId)>>;
    /// Sends `AddMember` for this node to `leader`.
    fn add_member<'a>(
        &'a self,
        leader: &'a str,
        ask: &'a JoinAsk,
    ) -> BoxFuture<'a, Result<(), Status>>;
}

/// How often and how patiently a joining node asks.
#[derive(Debug, Clone, Copy)]
pub struct JoinPolicy {
    pub attempts: u32,
    pub pause: Duration,
}

/// A start decided before Raft opens.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub plan: Plan,
    /// The ring this node is in or joins (unknown only for [`Plan::Legacy`]).
    pub ring_id: Option<RingId>,
    /// The leader to ask, for a join.
    pub leader: Option<String>,
    dir: PathBuf,
    node_id: NodeId,
    service: String,
}

impl Prepared {
    /// Whether this start joins a ring (fresh or resumed).
    pub fn joins(&self) -> bool {
        matches!(self.plan, Plan::Join | Plan::ResumeJoin { .. })
    }
}

/// Whether Raft has ever run in `group_dir` (its log database appears at the first start).
pub fn has_raft_data(group_dir: &Path) -> bool {
    group_dir.join("log").exists()
}

/// Step 1, before Raft opens: decides the start and records what it begins.
pub async fn prepare(
    service: &str,
    group_dir: &Path,
    node_id: NodeId,
    mode: StartMode,
    hooks: &dyn JoinHooks,
) -> anyhow::Result<Prepared> {
    let record = JoinRecord::load(group_dir)?;
    let plan = plan(
        mode,
        node_id,
        record.as_ref(),
        has_raft_data(group_dir),
        service,
    )
    .map_err(anyhow::Error::msg)?;
    let mut p = Prepared {
        plan: plan.clone(),
        ring_id: record.as_ref().map(|r| r.ring_id),
        leader: None,
        dir: group_dir.to_path_buf(),
        node_id,
        service: service.to_string(),
    };
    let store = |ring_id, stage| {
        JoinRecord {
            ring_id,
            node_id,
            stage,
        }
        .store(group_dir)
    };
    match plan {
        Plan::Found => {
            let ring = RingId::random();
            store(ring, Stage::Founding)?;
            info!(ring_id = %ring, "new {service} ring stamped");
            p.ring_id = Some(ring);
        }
        Plan::Join | Plan::ResumeJoin { .. } => {
            let (leader, ring) = hooks.find_leader().await?;
            if let Plan::ResumeJoin { ring_id } = plan {
                if ring != ring_id {
                    bail!(
                        "this data dir started joining ring {ring_id}, but the {service} leader \
                         at {leader} leads ring {ring}: wipe the data dir to join that ring"
                    );
                }
                info!(ring_id = %ring, leader = %leader, "resuming the join of the {service} ring");
            }
            // Before Raft creates anything: a later start knows this dir began a join.
            store(
                ring,
                Stage::Joining {
                    leader: leader.clone(),
                },
            )?;
            p.ring_id = Some(ring);
            p.leader = Some(leader);
        }
        Plan::Founding { .. } | Plan::Member { .. } | Plan::Legacy => {}
    }
    Ok(p)
}

/// What [`finish`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// This start initialised a new ring (and leads it).
    Created,
    /// This start joined the ring (learner, then voter).
    Joined,
    /// A member restarted.
    Restarted,
}

/// Step 2, with the group started (peer port closed) and the node's servers up.
pub async fn finish<L: StateMachineLogic>(
    p: Prepared,
    g: &Arc<RaftGroup<L>>,
    hooks: &dyn JoinHooks,
    policy: JoinPolicy,
    init_wait: Duration,
) -> anyhow::Result<Finished> {
    let service = p.service.as_str();
    let store = |ring_id, stage| {
        JoinRecord {
            ring_id,
            node_id: p.node_id,
            stage,
        }
        .store(&p.dir)
    };
    let initialized = g.is_initialized().await?;
    match p.plan {
        Plan::Member { ring_id } => {
            g.set_ring_id(ring_id);
            g.serve_peers();
            Ok(Finished::Restarted)
        }
        Plan::Legacy => {
            if !initialized {
                bail!(
                    "this data dir holds {service} Raft data but no ring membership (a join \
                     that never finished, written by an older version): wipe the data dir and \
                     --bootstrap again (if the ring lists this node, `rozone admin {} remove \
                     {}` first)",
                    service.to_lowercase(),
                    p.node_id
                );
            }
            let ring = RingId::random();
            store(
                ring,
                Stage::Member {
                    origin: Origin::Legacy,
                },
            )?;
            warn!(ring_id = %ring, "data from an older version: stamped as a member of its ring");
            g.set_legacy_ring_id(ring);
            g.serve_peers();
            Ok(Finished::Restarted)
        }
        Plan::Found | Plan::Founding { .. } => {
            let ring = p.ring_id.context("founding without a ring id")?;
            let may_init = matches!(
                p.plan,
                Plan::Found
                    | Plan::Founding {
                        may_initialize: true,
                        ..
                    }
            );
            g.set_ring_id(ring);
            if !initialized && !may_init {
                bail!(
                    "the --init that created ring {ring} in this data dir did not finish: run \
                     it again with --init"
                );
            }
            if !initialized {
                let me = g.node_info().clone();
                g.initialize(std::collections::BTreeMap::from([(p.node_id, me)]))
                    .await
                    .with_context(|| format!("initialise the {service} ring"))?;
            }
            store(
                ring,
                Stage::Member {
                    origin: Origin::Init,
                },
            )?;
            g.serve_peers();
            if initialized {
                return Ok(Finished::Restarted);
            }
            g.wait_for(init_wait, "lead the new ring", crate::leader_ready)
                .await
                .with_context(|| format!("lead the new {service} ring"))?;
            info!(ring_id = %ring, "new {service} ring created");
            Ok(Finished::Created)
        }
        Plan::Join | Plan::ResumeJoin { .. } => {
            let ring = p.ring_id.context("joining without a ring id")?;
            let leader = p.leader.clone().context("joining without a leader")?;
            g.set_ring_id(ring);
            let prior = match p.plan {
                Plan::ResumeJoin { ring_id } => Some(ring_id),
                _ => None,
            };
            let check = JoinAsk {
                ring_id: prior,
                last_log_index: g.metrics().last_log_index,
                check_only: true,
            };
            let leader = ask(service, hooks, leader, &check, policy).await?;
            // Admitted: from here on the leader may replicate to this node.
            g.serve_peers();
            let add = JoinAsk {
                ring_id: Some(ring),
                check_only: false,
                ..check
            };
            let leader = ask(service, hooks, leader, &add, policy).await?;
            store(
                ring,
                Stage::Member {
                    origin: Origin::Join,
                },
            )?;
            info!(ring_id = %ring, leader = %leader, "joined the {service} ring");
            Ok(Finished::Joined)
        }
    }
}

/// Asks `leader`, following leader hints and retrying what is retryable; returns the
/// leader that answered.
async fn ask(
    service: &str,
    hooks: &dyn JoinHooks,
    mut leader: String,
    ask: &JoinAsk,
    policy: JoinPolicy,
) -> anyhow::Result<String> {
    let mut last = String::new();
    for attempt in 1..=policy.attempts.max(1) {
        match hooks.add_member(&leader, ask).await {
            Ok(()) => return Ok(leader),
            // A client-side timeout (Cancelled) is retried too: the leader may still be
            // waiting for this node to catch up.
            Err(s) if rozone_rpc::is_retryable(&s) || s.code() == Code::Cancelled => {
                last = s.message().to_string();
                if let Some(h) = rozone_rpc::leader_hint(&s) {
                    leader = h;
                }
                warn!(attempt, leader = %leader, error = %last, "leader could not add this {service} yet");
                tokio::time::sleep(policy.pause).await;
            }
            Err(s) => bail!(
                "the {service} leader at {leader} refused to add this {service}: {}",
                s.message()
            ),
        }
    }
    bail!("the {service} leader at {leader} did not add this {service}: {last}")
}
