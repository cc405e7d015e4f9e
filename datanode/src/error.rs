//! [`DnError`], the error of every datanode operation that callers branch on, and its one
//! mapping to `tonic::Status` (`From<DnError> for Status`).
//!
//! A refusal carries a stable result code ([`DnCode`], datanode.proto's `Result`) in the
//! `x-rozone-result` metadata. A refusal of a pipeline's Raft layer (not the leader, leader
//! not ready) is also in `rozone_rpc`'s retryable format (reason and leader hint), worded
//! by the Raft layer; a Raft timeout or failure goes out without a result code, as
//! `DEADLINE_EXCEEDED` or `INTERNAL`.
//!
//! `DnError` is part of replicated pipeline responses: it serializes as its code and its
//! message only.

use rozone_raft::RaftGroupError;
use rozone_types::codes::{with_dn_result, DnCode};
use rozone_types::Invalid;
use serde::{Deserialize, Serialize};
use tonic::Status;

/// A refused datanode operation: a code plus a message naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{}: {message}", code.name())]
pub struct DnError {
    pub code: DnCode,
    pub message: String,
    /// How the error goes out beyond its code. Never serialized: an error replicated in a
    /// pipeline response is always a plain result.
    #[serde(skip)]
    delivery: Delivery,
}

/// How a [`DnError`] goes out as a status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Delivery {
    /// The gRPC code of the result code; the message is the error's display.
    #[default]
    Result,
    /// Not the pipeline's leader: retryable, with the leader's client address when known.
    NotLeader(Option<String>),
    /// The pipeline's leader has not applied an entry of its own term yet: retryable.
    LeaderNotReady,
    /// No result code: this gRPC code and the bare message (a Raft timeout or failure, a
    /// worker that died).
    Plain(tonic::Code),
}

impl DnError {
    pub fn new(code: DnCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            delivery: Delivery::Result,
        }
    }

    pub fn container_not_found(cid: u64) -> Self {
        Self::new(
            DnCode::ContainerNotFound,
            format!("container {cid} does not exist on this datanode"),
        )
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::new(DnCode::InvalidArgument, msg)
    }

    pub fn io(what: &str, e: impl std::fmt::Display) -> Self {
        Self::new(DnCode::IoError, format!("{what}: {e}"))
    }

    /// A blocking worker that did not finish (it panicked): `INTERNAL`, no result code.
    pub fn worker(e: impl std::fmt::Display) -> Self {
        Self {
            code: DnCode::IoError,
            message: format!("worker failed: {e}"),
            delivery: Delivery::Plain(tonic::Code::Internal),
        }
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

/// A missing or malformed request field: `INVALID_ARGUMENT`, naming the field.
impl From<Invalid> for DnError {
    fn from(e: Invalid) -> Self {
        Self::invalid(e.to_string())
    }
}

/// A refusal of a pipeline's Raft layer. The Raft layer words it
/// ([`rozone_raft::status::raft_status`]); the pipeline adds its result code.
impl From<RaftGroupError> for DnError {
    fn from(e: RaftGroupError) -> Self {
        let code = match &e {
            RaftGroupError::NotLeader { .. } => Some(DnCode::NotLeader),
            RaftGroupError::LeaderNotReady => Some(DnCode::LeaderNotReady),
            _ => None,
        };
        let s = rozone_raft::status::raft_status("pipeline", e);
        let delivery = match code {
            Some(DnCode::NotLeader) => Delivery::NotLeader(rozone_rpc::leader_hint(&s)),
            Some(_) => Delivery::LeaderNotReady,
            None => Delivery::Plain(s.code()),
        };
        Self {
            code: code.unwrap_or(DnCode::IoError),
            message: s.message().to_string(),
            delivery,
        }
    }
}

/// The one mapping of datanode errors to gRPC statuses.
impl From<DnError> for Status {
    fn from(e: DnError) -> Self {
        match e.delivery {
            Delivery::Result => with_dn_result(Status::new(e.code.grpc(), e.to_string()), e.code),
            Delivery::NotLeader(hint) => {
                with_dn_result(rozone_rpc::not_leader(e.message, hint.as_deref()), e.code)
            }
            Delivery::LeaderNotReady => {
                with_dn_result(rozone_rpc::leader_not_ready(e.message), e.code)
            }
            Delivery::Plain(code) => Status::new(code, e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use rozone_raft::NodeInfo;
    use rozone_types::codes::dn_result;

    use super::*;

    #[test]
    fn every_code_round_trips_through_a_status() {
        for c in DnCode::ALL {
            let s = Status::from(DnError::new(c, "x"));
            assert_eq!(dn_result(&s), Some(c));
            assert_eq!(s.code(), c.grpc());
            assert_eq!(DnCode::from_name(c.name()), Some(c));
            assert!(
                rozone_proto::datanode::Result::from_str_name(c.name()).is_some(),
                "{} missing from datanode.proto",
                c.name()
            );
        }
        let s = Status::from(DnError::container_not_found(7));
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert!(s.message().contains("container 7"));
    }

    /// One Raft refusal of each kind (`RaftGroupError` is not `Clone`: made twice).
    fn raft_error(kind: usize) -> RaftGroupError {
        match kind {
            0 => RaftGroupError::NotLeader {
                leader: Some((2, NodeInfo::new("127.0.0.1:1", "127.0.0.1:2"))),
            },
            1 => RaftGroupError::NotLeader { leader: None },
            2 => RaftGroupError::LeaderNotReady,
            3 => RaftGroupError::Timeout("append".into()),
            _ => RaftGroupError::Fatal("stopped".into()),
        }
    }

    /// Raft refusals go out exactly as the Raft layer's status plus, for the leadership
    /// refusals, the result code.
    #[test]
    fn raft_refusals_keep_the_leader_hint_retry_reason_and_result_code() {
        let codes = [
            Some(DnCode::NotLeader),
            Some(DnCode::NotLeader),
            Some(DnCode::LeaderNotReady),
            None,
            None,
        ];
        for (kind, code) in codes.into_iter().enumerate() {
            let want = rozone_raft::status::raft_status("pipeline", raft_error(kind));
            let got = Status::from(DnError::from(raft_error(kind)));
            assert_eq!(got.code(), want.code());
            assert_eq!(got.message(), want.message());
            assert_eq!(
                rozone_rpc::leader_hint(&got),
                rozone_rpc::leader_hint(&want)
            );
            assert_eq!(
                rozone_rpc::retry_reason(&got),
                rozone_rpc::retry_reason(&want)
            );
            assert_eq!(dn_result(&got), code);
        }
        let s = Status::from(DnError::from(raft_error(0)));
        assert_eq!(rozone_rpc::leader_hint(&s).as_deref(), Some("127.0.0.1:2"));
        assert_eq!(s.code(), tonic::Code::Unavailable);
    }

    /// Pipeline responses carry errors: the encoding is the code and the message, as before
    /// the delivery was added, and it decodes to the plain result.
    #[test]
    fn serialized_form_is_code_and_message() {
        let e = DnError::new(DnCode::ContainerNotFound, "container 7");
        let bytes = rozone_raft::codec::encode(&e).unwrap();
        let pair = (DnCode::ContainerNotFound, "container 7".to_string());
        assert_eq!(bytes, rozone_raft::codec::encode(&pair).unwrap());
        assert_eq!(rozone_raft::codec::decode::<DnError>(&bytes).unwrap(), e);
        let raft = DnError::from(RaftGroupError::LeaderNotReady);
        let back: DnError =
            rozone_raft::codec::decode(&rozone_raft::codec::encode(&raft).unwrap()).unwrap();
        assert_eq!(back, DnError::new(raft.code, raft.message.clone()));
    }

    #[test]
    fn a_dead_worker_is_internal_without_a_result_code() {
        let s = Status::from(DnError::worker("task panicked"));
        assert_eq!(s.code(), tonic::Code::Internal);
        assert_eq!(s.message(), "worker failed: task panicked");
        assert_eq!(dn_result(&s), None);
    }
}
