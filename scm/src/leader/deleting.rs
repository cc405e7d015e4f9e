//! Deletion of empty CLOSED containers on the leader, run with each ReplicationManager pass
//! (so after a takeover it waits, like the ReplicationManager, until every HEALTHY datanode
//! registered): [`crate::cluster::deletion::step`] decides; CLOSED → DELETING and
//! DELETING → DELETED are replicated `UpdateContainer` events (`Delete`, `Cleanup`);
//! `DeleteContainerCommand`s (not forced: a datanode refuses to delete a replica holding
//! blocks) go to every datanode still reporting a replica, tracked in flight like the
//! ReplicationManager's deletes, and sent again after `scm.replication_inflight_timeout`.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::cluster::commands::DatanodeCommand;

use crate::cluster::deletion::{self, Step};
use crate::cluster::replication::ContainerView;
use crate::cluster::{ClusterState, Inflight};
use crate::error::ScmError;
use crate::node::{Counters, ScmNode};
use crate::state::{ContainerEvent, ContainerInfo, ContainerState, ScmRequest, ScmResponse};

/// What a pass decided to replicate once the leader's state is unlocked.
#[derive(Debug, Default)]
pub struct Transitions {
    /// CLOSED → DELETING.
    pub start: Vec<u64>,
    /// DELETING → DELETED.
    pub finish: Vec<u64>,
}

impl ScmNode {
    /// The deletion step of `c` (CLOSED or DELETING); sends delete commands now and returns
    /// whether the container starts deleting (then the ReplicationManager leaves it).
    pub(super) fn deletion_step(
        &self,
        m: &mut ClusterState,
        c: &ContainerInfo,
        pending: &BTreeSet<u64>,
        deadline: Instant,
        out: &mut Transitions,
    ) -> bool {
        if !matches!(c.state, ContainerState::Closed | ContainerState::Deleting) {
            return false;
        }
        let replicas = m.replica_views(c.id);
        let deleting: Vec<u64> = m
            .inflight
            .get(&c.id)
            .map(|v| v.iter().filter(|i| !i.add).map(|i| i.datanode).collect())
            .unwrap_or_default();
        match deletion::step(
            &ContainerView::of(c),
            &replicas,
            pending.contains(&c.id),
            &deleting,
        ) {
            Step::Nothing => false,
            Step::StartDeleting => {
                out.start.push(c.id);
                true
            }
            Step::Finish => {
                out.finish.push(c.id);
                false
            }
            Step::DeleteReplicas(dns) => {
                for dn in dns {
                    let command_id = m.commands.push(
                        dn,
                        DatanodeCommand::DeleteContainer {
                            container_id: c.id,
                            force: false,
                        },
                    );
                    m.inflight.entry(c.id).or_default().push(Inflight {
                        add: false,
                        datanode: dn,
                        command_id,
                        deadline,
                    });
                    Counters::add(&self.counters.delete_container_commands, 1);
                    tracing::info!(
                        container = c.id,
                        datanode = dn,
                        "deleting a replica of a DELETING container"
                    );
                }
                false
            }
        }
    }

    /// Replicates the transitions a pass decided.
    pub(super) async fn replicate_deletions(&self, t: Transitions) -> Result<(), ScmError> {
        for (ids, event) in [
            (t.start, ContainerEvent::Delete),
            (t.finish, ContainerEvent::Cleanup),
        ] {
            for id in ids {
                match self
                    .write(ScmRequest::UpdateContainer { id, event })
                    .await?
                {
                    ScmResponse::ContainerUpdated { state, .. } => {
                        tracing::info!(container = id, %state, "empty container deletion");
                    }
                    r => tracing::warn!(container = id, response = ?r, "deletion step refused"),
                }
            }
        }
        Ok(())
    }
}
