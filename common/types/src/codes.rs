//! The error-code vocabulary on the wire: every refusal of the OM and the datanode carries
//! a stable code in a metadata entry, named here once for the services that attach it and
//! the clients that read it. (Leadership refusals, `x-rozone-retry` and `x-rozone-leader`,
//! are `rozone-rpc`'s.)

use serde::{Deserialize, Serialize};
use tonic::metadata::MetadataValue;
use tonic::Status;

pub use rozone_proto::om::OmErrorCode;

/// Metadata key naming the `rozone.om.v1.OmErrorCode` of an OM refusal.
pub const OM_ERROR: &str = "x-rozone-om-error";

/// Metadata key naming the `rozone.datanode.v1.Result` of a datanode refusal.
pub const DN_RESULT: &str = "x-rozone-result";

/// `s` with the OM error code attached.
pub fn with_om_error(mut s: Status, code: OmErrorCode) -> Status {
    s.metadata_mut()
        .insert(OM_ERROR, MetadataValue::from_static(code.as_str_name()));
    s
}

/// The OM error code a status carries, if any.
pub fn om_error(s: &Status) -> Option<OmErrorCode> {
    s.metadata()
        .get(OM_ERROR)
        .and_then(|v| v.to_str().ok())
        .and_then(OmErrorCode::from_str_name)
}

/// A datanode's stable result code (the names are datanode.proto's `Result` values).
/// Kept as our own enum (not the proto one) because datanode errors are part of replicated
/// pipeline responses and must encode stably.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DnCode {
    ContainerNotFound,
    ClosedContainerIo,
    ChecksumMismatch,
    NoSuchBlock,
    NotLeader,
    LeaderNotReady,
    OutOfRange,
    ContainerUnhealthy,
    PipelineNotFound,
    PipelineUnhealthy,
    InvalidArgument,
    ContainerNotEmpty,
    IoError,
    DiskFull,
    /// Appended (the enum is part of replicated responses): a refused block token.
    BlockTokenVerificationFailed,
}

impl DnCode {
    pub const ALL: [DnCode; 15] = [
        DnCode::ContainerNotFound,
        DnCode::ClosedContainerIo,
        DnCode::ChecksumMismatch,
        DnCode::NoSuchBlock,
        DnCode::NotLeader,
        DnCode::LeaderNotReady,
        DnCode::OutOfRange,
        DnCode::ContainerUnhealthy,
        DnCode::PipelineNotFound,
        DnCode::PipelineUnhealthy,
        DnCode::InvalidArgument,
        DnCode::ContainerNotEmpty,
        DnCode::IoError,
        DnCode::DiskFull,
        DnCode::BlockTokenVerificationFailed,
    ];

    /// The stable name (as in the proto enum and the metadata).
    pub fn name(self) -> &'static str {
        match self {
            DnCode::ContainerNotFound => "CONTAINER_NOT_FOUND",
            DnCode::ClosedContainerIo => "CLOSED_CONTAINER_IO",
            DnCode::ChecksumMismatch => "CHECKSUM_MISMATCH",
            DnCode::NoSuchBlock => "NO_SUCH_BLOCK",
            DnCode::NotLeader => "NOT_LEADER",
            DnCode::LeaderNotReady => "LEADER_NOT_READY",
            DnCode::OutOfRange => "OUT_OF_RANGE",
            DnCode::ContainerUnhealthy => "CONTAINER_UNHEALTHY",
            DnCode::PipelineNotFound => "PIPELINE_NOT_FOUND",
            DnCode::PipelineUnhealthy => "PIPELINE_UNHEALTHY",
            DnCode::InvalidArgument => "INVALID_ARGUMENT",
            DnCode::ContainerNotEmpty => "CONTAINER_NOT_EMPTY",
            DnCode::IoError => "IO_ERROR",
            DnCode::DiskFull => "DISK_FULL",
            DnCode::BlockTokenVerificationFailed => "BLOCK_TOKEN_VERIFICATION_FAILED",
        }
    }

    pub fn from_name(s: &str) -> Option<DnCode> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The gRPC status code a refusal with this result goes out with.
    pub fn grpc(self) -> tonic::Code {
        use tonic::Code as G;
        match self {
            DnCode::ContainerNotFound | DnCode::NoSuchBlock | DnCode::PipelineNotFound => {
                G::NotFound
            }
            DnCode::ClosedContainerIo
            | DnCode::ContainerUnhealthy
            | DnCode::PipelineUnhealthy
            | DnCode::ContainerNotEmpty => G::FailedPrecondition,
            DnCode::ChecksumMismatch => G::DataLoss,
            DnCode::NotLeader | DnCode::LeaderNotReady => G::Unavailable,
            DnCode::OutOfRange => G::OutOfRange,
            DnCode::InvalidArgument => G::InvalidArgument,
            DnCode::IoError => G::Internal,
            DnCode::DiskFull => G::ResourceExhausted,
            DnCode::BlockTokenVerificationFailed => G::PermissionDenied,
        }
    }
}

/// `s` with the datanode result code attached.
pub fn with_dn_result(mut s: Status, code: DnCode) -> Status {
    s.metadata_mut()
        .insert(DN_RESULT, MetadataValue::from_static(code.name()));
    s
}

/// The datanode result code a status carries, if any.
pub fn dn_result(s: &Status) -> Option<DnCode> {
    s.metadata()
        .get(DN_RESULT)
        .and_then(|v| v.to_str().ok())
        .and_then(DnCode::from_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_datanode_code_round_trips_and_matches_the_proto_enum() {
        for c in DnCode::ALL {
            let s = with_dn_result(Status::new(c.grpc(), "x"), c);
            assert_eq!(dn_result(&s), Some(c));
            assert_eq!(DnCode::from_name(c.name()), Some(c));
            assert!(
                rozone_proto::datanode::Result::from_str_name(c.name()).is_some(),
                "{} missing from datanode.proto",
                c.name()
            );
        }
    }

    #[test]
    fn om_codes_round_trip() {
        let s = with_om_error(Status::not_found("x"), OmErrorCode::KeyNotFound);
        assert_eq!(om_error(&s), Some(OmErrorCode::KeyNotFound));
        assert_eq!(om_error(&Status::not_found("x")), None);
    }
}
