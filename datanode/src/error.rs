//! Datanode errors that clients branch on, and the one mapping to `tonic::Status`.
//!
//! Every refusal carries a stable result code (the `Result` enum of datanode.proto) in the
//! `x-rozone-result` metadata; leadership refusals additionally use `rozone_rpc`'s format.

use serde::{Deserialize, Serialize};
use tonic::metadata::MetadataValue;
use tonic::Status;

/// Metadata key carrying the result code name.
pub const RESULT_KEY: &str = "x-rozone-result";

/// Stable result codes (names equal datanode.proto's `Result` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Code {
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
}

impl Code {
    pub const ALL: [Code; 14] = [
        Code::ContainerNotFound,
        Code::ClosedContainerIo,
        Code::ChecksumMismatch,
        Code::NoSuchBlock,
        Code::NotLeader,
        Code::LeaderNotReady,
        Code::OutOfRange,
        Code::ContainerUnhealthy,
        Code::PipelineNotFound,
        Code::PipelineUnhealthy,
        Code::InvalidArgument,
        Code::ContainerNotEmpty,
        Code::IoError,
        Code::DiskFull,
    ];

    /// The stable name (as in the proto enum and the metadata).
    pub fn name(self) -> &'static str {
        match self {
            Code::ContainerNotFound => "CONTAINER_NOT_FOUND",
            Code::ClosedContainerIo => "CLOSED_CONTAINER_IO",
            Code::ChecksumMismatch => "CHECKSUM_MISMATCH",
            Code::NoSuchBlock => "NO_SUCH_BLOCK",
            Code::NotLeader => "NOT_LEADER",
            Code::LeaderNotReady => "LEADER_NOT_READY",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::ContainerUnhealthy => "CONTAINER_UNHEALTHY",
            Code::PipelineNotFound => "PIPELINE_NOT_FOUND",
            Code::PipelineUnhealthy => "PIPELINE_UNHEALTHY",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::ContainerNotEmpty => "CONTAINER_NOT_EMPTY",
            Code::IoError => "IO_ERROR",
            Code::DiskFull => "DISK_FULL",
        }
    }

    pub fn from_name(s: &str) -> Option<Code> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    fn grpc(self) -> tonic::Code {
        use tonic::Code as G;
        match self {
            Code::ContainerNotFound | Code::NoSuchBlock | Code::PipelineNotFound => G::NotFound,
            Code::ClosedContainerIo
            | Code::ContainerUnhealthy
            | Code::PipelineUnhealthy
            | Code::ContainerNotEmpty => G::FailedPrecondition,
            Code::ChecksumMismatch => G::DataLoss,
            Code::NotLeader | Code::LeaderNotReady => G::Unavailable,
            Code::OutOfRange => G::OutOfRange,
            Code::InvalidArgument => G::InvalidArgument,
            Code::IoError => G::Internal,
            Code::DiskFull => G::ResourceExhausted,
        }
    }
}

/// A refused datanode operation: a code plus a message naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{}: {message}", code.name())]
pub struct DnError {
    pub code: Code,
    pub message: String,
}

impl DnError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn container_not_found(cid: u64) -> Self {
        Self::new(
            Code::ContainerNotFound,
            format!("container {cid} does not exist on this datanode"),
        )
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, msg)
    }

    pub fn io(what: &str, e: impl std::fmt::Display) -> Self {
        Self::new(Code::IoError, format!("{what}: {e}"))
    }
}

impl From<std::io::Error> for DnError {
    fn from(e: std::io::Error) -> Self {
        Self::io("local storage", e)
    }
}

impl From<rozone_kv::KvError> for DnError {
    fn from(e: rozone_kv::KvError) -> Self {
        Self::io("container database", e)
    }
}

impl From<rozone_kv::rocksdb::Error> for DnError {
    fn from(e: rozone_kv::rocksdb::Error) -> Self {
        Self::io("container database", e)
    }
}

/// The one mapping of datanode errors to gRPC statuses.
pub fn to_status(e: DnError) -> Status {
    let mut s = Status::new(e.code.grpc(), e.to_string());
    s.metadata_mut()
        .insert(RESULT_KEY, MetadataValue::from_static(e.code.name()));
    s
}

/// Raft-layer refusals of a pipeline (not leader, not ready, ...), with the result code.
pub fn raft_to_status(e: rozone_raft::RaftGroupError) -> Status {
    let code = match &e {
        rozone_raft::RaftGroupError::NotLeader { .. } => Some(Code::NotLeader),
        rozone_raft::RaftGroupError::LeaderNotReady => Some(Code::LeaderNotReady),
        _ => None,
    };
    let mut s = rozone_raft::status::raft_status("pipeline", e);
    if let Some(c) = code {
        s.metadata_mut()
            .insert(RESULT_KEY, MetadataValue::from_static(c.name()));
    }
    s
}

/// The result code a status carries, if any (for clients and tests).
pub fn result_code(s: &Status) -> Option<Code> {
    s.metadata()
        .get(RESULT_KEY)
        .and_then(|v| v.to_str().ok())
        .and_then(Code::from_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_a_status() {
        for c in Code::ALL {
            let s = to_status(DnError::new(c, "x"));
            assert_eq!(result_code(&s), Some(c));
            assert_eq!(Code::from_name(c.name()), Some(c));
        }
        let s = to_status(DnError::container_not_found(7));
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert!(s.message().contains("container 7"));
    }

    #[test]
    fn names_match_the_proto_enum() {
        for c in Code::ALL {
            assert!(
                rozone_proto::datanode::Result::from_str_name(c.name()).is_some(),
                "{} missing from datanode.proto",
                c.name()
            );
        }
    }
}
