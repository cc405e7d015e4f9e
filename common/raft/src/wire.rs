//! Payloads carried in `RaftRequest.payload` / `RaftReply.payload` (postcard-encoded).

use openraft::errors::{NetworkError, RPCError, Unreachable};
use rozone_proto::raft::RaftReply;
use serde::{Deserialize, Serialize};
use tonic::Status;

use crate::codec::encode;
use crate::types::{SnapshotMeta, TypeConfig, Vote};

/// The leader offers a snapshot; the follower pulls it from `source_addr`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotOffer {
    pub vote: Vote,
    pub meta: SnapshotMeta,
    pub snapshot_id: String,
    /// `host:port` of the leader's snapshot download service.
    pub source_addr: String,
}

/// A reply: the handler's result, or the remote failure as text.
pub type Reply<T> = Result<T, String>;

/// A reply as it travels: encoded into the payload of a [`RaftReply`], stamped with this
/// process's clock (the leader echoes the stamp back: [`crate::contact`]).
pub(crate) fn reply<T: Serialize>(r: &Reply<T>) -> Result<RaftReply, Status> {
    Ok(RaftReply {
        payload: encode(r).map_err(|e| Status::internal(e.to_string()))?,
        stamp: Some(crate::contact::stamp()),
    })
}

/// A failed peer call as openraft sees it: a peer that is down or gone is unreachable
/// (openraft backs off), anything else a network error.
pub(crate) fn status_to_rpc(s: Status) -> RPCError<TypeConfig> {
    match s.code() {
        tonic::Code::Unavailable | tonic::Code::NotFound | tonic::Code::Cancelled => {
            RPCError::Unreachable(Unreachable::from_string(s.to_string()))
        }
        _ => RPCError::Network(NetworkError::from_string(s.to_string())),
    }
}
