//! The one mapping of Raft-layer errors to `tonic::Status`, shared by every replicated
//! service; the refusal format itself (reason and leader hint) is [`rozone_rpc`]'s.

use tonic::Status;

use crate::error::RaftGroupError;

pub use rozone_rpc::{is_retryable, leader_hint, retry_reason};

/// Maps a Raft-layer error to a status; `service` names the ring in messages ("SCM", "OM").
pub fn raft_status(service: &str, e: RaftGroupError) -> Status {
    match e {
        RaftGroupError::NotLeader { leader } => match &leader {
            Some((id, n)) => rozone_rpc::not_leader(
                format!(
                    "not the {service} leader; leader is {id} at {}",
                    n.client_addr
                ),
                Some(&n.client_addr),
            ),
            None => {
                rozone_rpc::not_leader(format!("not the {service} leader; leader unknown"), None)
            }
        },
        RaftGroupError::LeaderNotReady => rozone_rpc::leader_not_ready(format!(
            "{service} leader not ready yet: it has not applied an entry of its own term"
        )),
        // Retryable like a not-leader refusal, with no hint: this node does not know who leads.
        RaftGroupError::NoLease(reason) => {
            rozone_rpc::not_leader(format!("not a serving {service} leader: {reason}"), None)
        }
        RaftGroupError::Timeout(_) => Status::deadline_exceeded(e.to_string()),
        RaftGroupError::JoinRefused(r) => match r {
            crate::join::Refusal::OtherAddress(m) => Status::already_exists(m),
            r => Status::failed_precondition(r.to_string()),
        },
        other => Status::internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeInfo;

    #[test]
    fn not_leader_carries_the_leaders_client_address() {
        let s = raft_status(
            "OM",
            RaftGroupError::NotLeader {
                leader: Some((2, NodeInfo::new("127.0.0.1:1", "127.0.0.1:2"))),
            },
        );
        assert_eq!(leader_hint(&s).as_deref(), Some("127.0.0.1:2"));
        assert_eq!(retry_reason(&s), Some(rozone_rpc::REASON_NOT_LEADER));
        let s = raft_status("OM", RaftGroupError::LeaderNotReady);
        assert_eq!(retry_reason(&s), Some(rozone_rpc::REASON_LEADER_NOT_READY));
    }
}
