//! Errors of the OM's services and their one mapping to `tonic::Status`.
//!
//! Every refusal carries the metadata entry `rozone_types::codes::OM_ERROR` with the name
//! of its `rozone.om.v1.OmErrorCode`, so clients branch on a stable code, never on text. Raft
//! errors go through `rozone_raft::status::raft_status("OM", ..)` (retryable refusals with a
//! leader hint).

use rozone_raft::RaftGroupError;
use rozone_types::codes::{with_om_error as with_code, OmErrorCode};
use tonic::{Code, Status};

use crate::state::Refusal;

#[derive(Debug, thiserror::Error)]
pub enum OmError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("{0}")]
    InvalidName(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("LOCAL_LEASE reads are not enabled on this OM (om.local_lease_enabled)")]
    LocalLeaseDisabled,
    /// A LOCAL_LEASE read this follower may not serve: retry on another OM.
    #[error("LOCAL_LEASE read refused: {reason}")]
    LeaseRefused {
        reason: rozone_raft::gate::Refused,
        leader_client_addr: Option<String>,
    },
    #[error("SCM: {0}")]
    Scm(String),
    /// The SCM refused in a way worth retrying (e.g. no leader yet).
    #[error("SCM unavailable: {0}")]
    ScmUnavailable(String),
    /// Another OM (the leader, asked for a read index) refused or could not be reached.
    #[error("OM {0}: {msg}", msg = .1.message())]
    Upstream(u64, Status),
    #[error(transparent)]
    Raft(#[from] RaftGroupError),
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
    /// A block named without a valid token for it (a deferred open's commit).
    #[error("block {block}: {error}")]
    BlockToken {
        block: rozone_types::BlockId,
        error: rozone_rpc::block_token::TokenError,
    },
    #[error("{0}")]
    Internal(String),
}

fn refusal_status(r: &Refusal) -> Status {
    use OmErrorCode as C;
    let msg = r.to_string();
    let (code, c) = match r {
        Refusal::VolumeNotFound { .. } => (Code::NotFound, C::VolumeNotFound),
        Refusal::VolumeExists { .. } => (Code::AlreadyExists, C::VolumeAlreadyExists),
        Refusal::VolumeNotEmpty { .. } => (Code::FailedPrecondition, C::VolumeNotEmpty),
        Refusal::BucketNotFound { .. } => (Code::NotFound, C::BucketNotFound),
        Refusal::BucketExists { .. } => (Code::AlreadyExists, C::BucketAlreadyExists),
        Refusal::BucketNotEmpty { .. } => (Code::FailedPrecondition, C::BucketNotEmpty),
        Refusal::KeyNotFound { .. } => (Code::NotFound, C::KeyNotFound),
        Refusal::KeyExists { .. } => (Code::AlreadyExists, C::KeyAlreadyExists),
        Refusal::OpenKeyNotFound { .. } => (Code::NotFound, C::OpenKeyNotFound),
        Refusal::WrongClientId { .. } => (Code::FailedPrecondition, C::WrongClientId),
        // A client-id collision is the leader's to retry; reaching a client means a bug.
        Refusal::OpenKeyExists { .. } => (Code::Aborted, C::InvalidArgument),
        Refusal::InvalidBlockList { .. } => (Code::InvalidArgument, C::InvalidBlockList),
        Refusal::QuotaExceeded { .. } => (Code::FailedPrecondition, C::QuotaExceeded),
        Refusal::TooManyBlocks { .. } => (Code::ResourceExhausted, C::RequestTooLarge),
        Refusal::PreconditionFailed { .. } => (Code::FailedPrecondition, C::PreconditionFailed),
        Refusal::S3SecretNotFound { .. } => (Code::NotFound, C::S3SecretNotFound),
        Refusal::NoSuchUpload { .. } => (Code::NotFound, C::NoSuchUpload),
        Refusal::InvalidPart { .. } => (Code::InvalidArgument, C::InvalidPart),
        Refusal::PartTooSmall { .. } => (Code::InvalidArgument, C::EntityTooSmall),
        Refusal::PermissionDenied { .. } => (Code::PermissionDenied, C::PermissionDenied),
    };
    with_code(Status::new(code, msg), c)
}

impl From<OmError> for Status {
    fn from(e: OmError) -> Self {
        use OmErrorCode as C;
        match e {
            OmError::Refused(r) => refusal_status(&r),
            OmError::InvalidName(m) => with_code(Status::invalid_argument(m), C::InvalidName),
            OmError::InvalidArgument(m) => {
                with_code(Status::invalid_argument(m), C::InvalidArgument)
            }
            OmError::TooLarge(m) => with_code(Status::resource_exhausted(m), C::RequestTooLarge),
            OmError::LocalLeaseDisabled => with_code(
                Status::failed_precondition(e.to_string()),
                C::LocalLeaseDisabled,
            ),
            OmError::LeaseRefused {
                reason,
                leader_client_addr,
            } => {
                let msg = format!("LOCAL_LEASE read refused: {reason}");
                if reason == rozone_raft::gate::Refused::LeaderNotReady {
                    rozone_rpc::leader_not_ready(msg)
                } else {
                    rozone_rpc::not_leader(msg, leader_client_addr.as_deref())
                }
            }
            OmError::Scm(m) => with_code(Status::internal(format!("SCM: {m}")), C::ScmError),
            OmError::ScmUnavailable(m) => with_code(
                Status::unavailable(format!("SCM unavailable: {m}")),
                C::ScmError,
            ),
            OmError::Upstream(id, s) => {
                let msg = format!("read index from the OM leader {id}: {}", s.message());
                if rozone_rpc::is_retryable(&s) {
                    rozone_rpc::not_leader(msg, rozone_rpc::leader_hint(&s).as_deref())
                } else {
                    Status::internal(msg)
                }
            }
            OmError::Raft(r) => rozone_raft::status::raft_status("OM", r),
            OmError::Io(io) => Status::internal(format!("OM storage: {io}")),
            OmError::BlockToken { .. } => with_code(
                Status::permission_denied(e.to_string()),
                C::PermissionDenied,
            ),
            OmError::Internal(m) => Status::internal(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use rozone_types::codes::om_error as error_code;

    use super::*;

    #[test]
    fn refusals_carry_a_stable_code() {
        let s: Status = OmError::Refused(Refusal::BucketNotFound {
            volume: "v".into(),
            bucket: "b".into(),
        })
        .into();
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(error_code(&s), Some(OmErrorCode::BucketNotFound));
        assert_eq!(s.message(), "bucket v/b not found");
        let s: Status = OmError::LeaseRefused {
            reason: rozone_raft::gate::Refused::NoLeader,
            leader_client_addr: None,
        }
        .into();
        assert_eq!(
            rozone_rpc::retry_reason(&s),
            Some(rozone_rpc::REASON_NOT_LEADER)
        );
        let s: Status = OmError::LeaseRefused {
            reason: rozone_raft::gate::Refused::LeaderNotReady,
            leader_client_addr: None,
        }
        .into();
        assert_eq!(
            rozone_rpc::retry_reason(&s),
            Some(rozone_rpc::REASON_LEADER_NOT_READY)
        );
    }
}
