//! [`ScmError`], what the SCM's core refuses (the leader's work in [`crate::leader`], the
//! ring in [`crate::service::ring`]), and its one mapping to `tonic::Status`.
//!
//! Clients branch on the gRPC code, so each variant keeps one code: a Raft refusal goes out
//! as the Raft layer words it (`rozone_raft::status::raft_status("SCM", ..)`: not the
//! leader or not ready yet is `UNAVAILABLE` in `rozone_rpc`'s retryable format, with the
//! leader's client address when known), a bad field is `INVALID_ARGUMENT`, an unknown id
//! `NOT_FOUND`, a wrong state (safe mode included) `FAILED_PRECONDITION`.

use rozone_raft::ring::RingOpError;
use rozone_raft::RaftGroupError;
use tonic::Status;

use crate::state::{ScmResponse, SequenceIdError};

/// The ring's name in Raft refusals.
pub const SERVICE_NAME: &str = "SCM";

/// A request field that is missing or invalid (checked before anything changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// A refusal of the SCM's core.
#[derive(Debug, thiserror::Error)]
pub enum ScmError {
    /// The Raft layer refused or failed: not the leader (retryable, with a leader hint),
    /// leader not ready, timeout, stopped.
    #[error(transparent)]
    Raft(#[from] RaftGroupError),
    /// A ring operation (leadership transfer) refused or failed, as the ring layer words it.
    #[error(transparent)]
    Ring(#[from] RingOpError),
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// The object is in the wrong state for the call (safe mode included).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A replicated write the state machine refused (the same answer on every member).
    #[error("{what}: refused by the SCM state: {response:?}")]
    Refused {
        what: &'static str,
        response: ScmResponse,
    },
    /// Nothing to serve the call with yet (no usable pipeline).
    #[error("{0}")]
    Exhausted(String),
    /// Sequence ids could not be had for now (their batch was lost with the leadership).
    #[error("{0}")]
    Unavailable(String),
    /// A credential was refused (a join token unknown, used or expired).
    #[error("{0}")]
    Denied(String),
    #[error("SCM state database: {0}")]
    Storage(#[from] std::io::Error),
    #[error("{0}")]
    Internal(String),
}

impl ScmError {
    pub fn refused(what: &'static str, response: ScmResponse) -> Self {
        Self::Refused { what, response }
    }
}

impl From<SequenceIdError<RaftGroupError>> for ScmError {
    fn from(e: SequenceIdError<RaftGroupError>) -> Self {
        match e {
            SequenceIdError::Propose { source, .. } => Self::Raft(source),
            other => Self::Unavailable(other.to_string()),
        }
    }
}

/// The one mapping of the SCM's errors to gRPC statuses.
impl From<ScmError> for Status {
    fn from(e: ScmError) -> Self {
        let msg = e.to_string();
        match e {
            ScmError::Raft(r) => rozone_raft::status::raft_status(SERVICE_NAME, r),
            ScmError::Ring(r) => rozone_raft::ring::ring_op_status(SERVICE_NAME, r),
            ScmError::Invalid(_) => Status::invalid_argument(msg),
            ScmError::NotFound(_) => Status::not_found(msg),
            ScmError::AlreadyExists(_) => Status::already_exists(msg),
            ScmError::FailedPrecondition(_) | ScmError::Refused { .. } => {
                Status::failed_precondition(msg)
            }
            ScmError::Exhausted(_) => Status::resource_exhausted(msg),
            ScmError::Unavailable(_) => Status::unavailable(msg),
            ScmError::Denied(_) => Status::permission_denied(msg),
            ScmError::Storage(_) | ScmError::Internal(_) => Status::internal(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use rozone_raft::NodeInfo;
    use tonic::Code;

    use super::*;

    #[test]
    fn each_kind_keeps_its_code_and_message() {
        let cases = [
            (
                ScmError::from(Invalid("count".into())),
                Code::InvalidArgument,
            ),
            (ScmError::NotFound("container 7".into()), Code::NotFound),
            (ScmError::AlreadyExists("SCM 2".into()), Code::AlreadyExists),
            (
                ScmError::FailedPrecondition("safe".into()),
                Code::FailedPrecondition,
            ),
            (
                ScmError::Exhausted("no pipeline".into()),
                Code::ResourceExhausted,
            ),
            (ScmError::Unavailable("batch".into()), Code::Unavailable),
            (ScmError::Internal("x".into()), Code::Internal),
        ];
        for (e, code) in cases {
            let msg = e.to_string();
            let s = Status::from(e);
            assert_eq!((s.code(), s.message()), (code, msg.as_str()));
        }
        let s = Status::from(ScmError::refused(
            "create pipeline",
            ScmResponse::PipelineClosed { id: 3 },
        ));
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert_eq!(
            s.message(),
            "create pipeline: refused by the SCM state: PipelineClosed { id: 3 }"
        );
        // Ring operations keep the ring layer's codes.
        let s = Status::from(ScmError::from(RingOpError::NotFound("SCM 9".into())));
        assert_eq!((s.code(), s.message()), (Code::NotFound, "SCM 9"));
        let s = Status::from(ScmError::from(RingOpError::Refused("leader".into())));
        assert_eq!(s.code(), Code::FailedPrecondition);
        let s = Status::from(ScmError::from(std::io::Error::other("disk")));
        assert_eq!(
            (s.code(), s.message()),
            (Code::Internal, "SCM state database: disk")
        );
    }

    /// Not the leader: retryable, with the leader's client address, as the Raft layer words it.
    #[test]
    fn raft_refusals_go_out_as_the_raft_layer_words_them() {
        let e = || RaftGroupError::NotLeader {
            leader: Some((2, NodeInfo::new("127.0.0.1:1", "127.0.0.1:2"))),
        };
        let want = rozone_raft::status::raft_status(SERVICE_NAME, e());
        let got = Status::from(ScmError::from(e()));
        assert_eq!(got.code(), Code::Unavailable);
        assert_eq!(got.message(), want.message());
        assert_eq!(
            rozone_rpc::leader_hint(&got).as_deref(),
            Some("127.0.0.1:2")
        );
        assert_eq!(
            rozone_rpc::retry_reason(&got),
            Some(rozone_rpc::REASON_NOT_LEADER)
        );
    }
}
