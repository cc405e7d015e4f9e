//! The SCM's replicated state: what every SCM applies from the Raft log, and how it is
//! stored and read back.
//!
//! [`ScmLogic`] is the `StateMachineLogic` plugged into the SCM's Raft group. Its state lives
//! in the column families named below; values are postcard (`rozone_raft::codec`), integer
//! keys big-endian so they sort. Every request is deterministic (time is stamped by the
//! leader *before* proposing), and application-level refusals are [`ScmResponse`] variants,
//! so every member judges a request against the same rows and reaches the same answer.
//!
//! [`SequenceIdGenerator`] is the leader-only, in-memory side of sequence ids: it hands out
//! ids from a batch reserved through a replicated compare-and-set ([`ScmRequest::AllocateBatch`]).
//! No sequence-id row is ever written from local data outside the log (the root cause of
//! Ozone's HDDS-16899 divergence).
//!
//! Must not depend on the OM or datanode crates, nor on the SCM's services: it is the layer
//! they build on.

pub mod join_tokens;
pub mod logic;
pub mod read;
pub mod registry;
pub mod request;
pub mod secret_keys;
pub mod sequence;
pub mod types;

pub use logic::ScmLogic;
pub use request::{ScmRequest, ScmResponse};
pub use sequence::{BatchProposer, SequenceIdError, SequenceIdGenerator, DEFAULT_BATCH_SIZE};
pub use types::{
    ContainerEvent, ContainerInfo, ContainerState, Datanode, DatanodeRecord, DeletedBlocksTxn,
    NodeHealth, PipelineInfo, PipelineState, ReplicationFactor,
};

/// Raft group id of the SCM ring.
pub const GROUP: &str = "scm";

/// Sequence-id rows: name (UTF-8) → last id handed out to any batch (`u64`).
pub const CF_SEQUENCE_IDS: &str = "sequence_ids";
/// Containers: id (big-endian) → [`ContainerInfo`].
pub const CF_CONTAINERS: &str = "containers";
/// Pipelines: id (big-endian) → [`PipelineInfo`].
pub const CF_PIPELINES: &str = "pipelines";
/// Deleted-block transactions: txn id (big-endian) → [`DeletedBlocksTxn`].
pub const CF_DELETED_BLOCKS: &str = "deleted_blocks";
/// Cluster-wide rows: the cluster id under [`KEY_CLUSTER_ID`], what a new leader starts
/// from ([`registry`]: datanodes as last known, the safe-mode record), and the block-token
/// secret keys ([`secret_keys`]).
pub const CF_CLUSTER: &str = "cluster";
/// Key of the cluster id in [`CF_CLUSTER`].
pub const KEY_CLUSTER_ID: &[u8] = b"cluster_id";

/// Every column family of the SCM state, in a fixed order (digests iterate in this order).
pub const COLUMN_FAMILIES: [&str; 5] = [
    CF_SEQUENCE_IDS,
    CF_CONTAINERS,
    CF_PIPELINES,
    CF_DELETED_BLOCKS,
    CF_CLUSTER,
];

/// Sequence of container ids.
pub const SEQ_CONTAINER_ID: &str = "containerId";
/// Sequence of block local ids.
pub const SEQ_LOCAL_ID: &str = "localId";
/// Sequence of deleted-block transaction ids.
pub const SEQ_DEL_TXN_ID: &str = "delTxnId";
/// Sequence of pipeline ids.
pub const SEQ_PIPELINE_ID: &str = "pipelineId";
/// The sequence names the state machine accepts; an unknown name is refused so a typo
/// cannot silently start a new sequence at 1.
pub const SEQUENCE_NAMES: [&str; 4] = [
    SEQ_CONTAINER_ID,
    SEQ_LOCAL_ID,
    SEQ_DEL_TXN_ID,
    SEQ_PIPELINE_ID,
];

/// Whether `name` is a known sequence.
pub fn is_sequence_name(name: &str) -> bool {
    SEQUENCE_NAMES.contains(&name)
}
