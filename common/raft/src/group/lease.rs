//! The write and read paths of a group and the leader gate they pass: a leader serves
//! only while it holds its lease ([`crate::gate`]); anything else is refused with the error
//! a client retries on. (The vote grace of a restarted member is in [`super::restart`].)

use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::errors::{ClientWriteError, RaftError};
use openraft::raft::ReadPolicy;

use crate::codec::decode;
use crate::contact::{leader_ready, ContactRecord};
use crate::error::RaftGroupError;
use crate::gate::{self, LeaderInput, LeaseInput, LogLimit, Role};
use crate::state_machine::StateMachineLogic;
use crate::types::{AppRequest, RaftMetrics, TypeConfig};

use super::*;

impl<L: StateMachineLogic> RaftGroup<L> {
    /// Proposes a command and returns its response once applied on this (leader) node.
    pub async fn write(&self, req: L::Request) -> Result<L::Response, RaftGroupError> {
        // A leader without a lease may still be the leader, but more likely it is cut off:
        // refusing now sends the client to the ring instead of waiting out a timeout.
        self.leader_gate()?;
        // A write proposed for a client's call carries the call's id, so a retry of the
        // call is answered from the retry cache rather than applied again.
        let call = rozone_rpc::call::current();
        let tagged = call.is_some();
        let sealed = match call {
            Some((id, sub)) => crate::envelope::seal_call(
                &crate::envelope::CallTag {
                    client: id.client,
                    seq: id.seq,
                    sub,
                    low: id.low,
                    stamp_ms: now_ms(),
                },
                &req,
            )?,
            None => crate::envelope::seal(&req)?,
        };
        let resp = self
            .raft
            .client_write(AppRequest(sealed))
            .await
            .map_err(|e| self.write_error(e))?;
        // The answer of a committed write lost on its way back, as when a leader is deposed
        // after appending: the client resends the call (tests of the retry cache).
        fail::fail_point!("raft-call-reply-lost", tagged, |_| {
            Err(RaftGroupError::NotLeader { leader: None })
        });
        Ok(decode(&resp.data.0)?)
    }

    /// Waits until a read on this node sees every write committed before the call
    /// (openraft's read index, then wait for apply). Leader only; the read index confirms
    /// leadership with a quorum round of its own, so this needs no lease.
    pub async fn read_barrier(&self) -> Result<(), RaftGroupError> {
        if !leader_ready(&self.metrics()) {
            return Err(self.not_leader_error());
        }
        self.raft
            .ensure_linearizable(ReadPolicy::ReadIndex)
            .await
            .map_err(|e| match e {
                RaftError::APIError(openraft::errors::LinearizableReadError::ForwardToLeader(
                    _,
                )) => self.not_leader_error(),
                other => RaftGroupError::Other(other.to_string()),
            })?;
        Ok(())
    }

    /// The error to return to a client on a node that cannot serve as leader right now.
    pub fn not_leader_error(&self) -> RaftGroupError {
        let m = self.metrics();
        if m.state == openraft::ServerState::Leader {
            return match gate::leader(&self.leader_input(&m)) {
                Err(gate::Refused::LeaderNotReady) | Ok(()) => RaftGroupError::LeaderNotReady,
                Err(reason) => RaftGroupError::NoLease(reason),
            };
        }
        let leader = m.current_leader.and_then(|id| {
            m.membership_config
                .membership()
                .get_node(&id)
                .map(|n| (id, n.clone()))
        });
        RaftGroupError::NotLeader { leader }
    }

    pub(super) fn write_error(
        &self,
        e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>,
    ) -> RaftGroupError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                RaftGroupError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node),
                }
            }
            RaftError::APIError(other) => RaftGroupError::Other(other.to_string()),
            RaftError::Fatal(f) => RaftGroupError::Fatal(f.to_string()),
        }
    }

    /// A leader that may serve now: it applied an entry of its own term and holds its lease
    /// (see [`gate`]). What `/ready`, roles and every leader-only service check.
    pub fn is_ready_leader(&self) -> bool {
        self.leader_gate().is_ok()
    }

    /// `Ok` on a leader that holds its lease; otherwise the refusal a client retries on.
    pub fn leader_gate(&self) -> Result<(), RaftGroupError> {
        if self.serves_as_leader(&self.metrics()) {
            Ok(())
        } else {
            Err(self.not_leader_error())
        }
    }

    /// Whether this member leads and holds its lease now (without copying the metrics: this
    /// runs for every append it sends, see [`crate::contact::Echoes`]).
    pub(crate) fn holds_lease_now(&self) -> bool {
        let w = self.raft.metrics();
        let m = w.borrow_watched();
        self.serves_as_leader(&m)
    }

    /// Whether these metrics (of this member) show a leader that holds its lease: what
    /// roles and ring info report as "leader ready".
    pub fn serves_as_leader(&self, m: &RaftMetrics) -> bool {
        m.state == openraft::ServerState::Leader && gate::leader(&self.leader_input(m)).is_ok()
    }

    /// This leader's lease input from `m` (meaningful only while `m` says Leader).
    pub fn leader_input(&self, m: &RaftMetrics) -> LeaderInput {
        use openraft::Instant as _;
        let membership = m.membership_config.membership();
        let mut voters = membership.voter_ids();
        let sole_voter = voters.next() == Some(self.cfg.node_id) && voters.next().is_none();
        LeaderInput {
            ready: leader_ready(m),
            sole_voter,
            quorum_ack_age: m.last_quorum_acked.as_ref().map(|t| t.elapsed()),
            lease: self.cfg.leader_lease(),
            transferring: self.transfer_term.load(Ordering::Acquire) == m.current_term + 1,
        }
    }

    /// The LOCAL_LEASE input of this member: its role (with the leader's lease input), its
    /// leader-contact record and applied index.
    pub fn lease_input(&self, lease_time: Duration, log_limit: LogLimit) -> LeaseInput {
        use openraft::ServerState as S;
        let m = self.metrics();
        let role = match m.state {
            S::Leader => Role::Leader(self.leader_input(&m)),
            S::Follower => Role::Follower,
            S::Candidate => Role::Candidate,
            S::Learner => Role::Learner,
            S::Shutdown => Role::Shutdown,
        };
        let contact = self.leader_contact().map(|c| gate::Contact {
            age: c.lease_age(),
            leader: c.leader,
            term: c.term,
            leader_commit: c
                .leader_commit
                .as_ref()
                .map(|l| (l.committed_leader_id().term, l.index())),
        });
        LeaseInput {
            role,
            known_leader: m.current_leader,
            contact,
            applied_index: m.last_applied.map(|l| l.index()),
            lease_time,
            log_limit,
        }
    }

    /// The last accepted append from a leader, if any.
    pub fn leader_contact(&self) -> Option<ContactRecord> {
        self.contact.last()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
