//! Commands replicated through the SCM's Raft log and their results.
//!
//! Refusals (a failed compare-and-set, an invalid transition, an unknown id) are responses,
//! not errors: they are the same on every member and must not stop a Raft node.

use serde::{Deserialize, Serialize};

use super::join_tokens::JoinTokenRecord;
use super::secret_keys::SecretKeyRecord;
use super::types::{ContainerEvent, ContainerInfo, ContainerState, DatanodeRecord, PipelineInfo};

/// A command of the SCM state machine, replicated in the sealed envelope
/// (`rozone_raft::envelope`). **Append-only**: a new command is a new variant at the end;
/// an existing variant's fields never change (a changed command is a new variant). Every
/// variant has a golden fixture in `scm/golden/requests-v1.txt` (test `golden`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScmRequest {
    /// Records the cluster id; refused if a different one is set.
    SetClusterId { cluster_id: String },
    /// Compare-and-set on sequence row `name` (absent = 0): when it holds `expected_last`,
    /// it becomes `new_last` and ids `expected_last + 1 ..= new_last` are reserved.
    AllocateBatch {
        name: String,
        expected_last: u64,
        new_last: u64,
    },
    /// Adds a container; its id must be new and its state OPEN.
    CreateContainer(ContainerInfo),
    /// Moves a container through its lifecycle.
    UpdateContainer { id: u64, event: ContainerEvent },
    /// Records usage from reports; the BCSID never goes backwards.
    UpdateContainerUsage {
        id: u64,
        used_bytes: u64,
        key_count: u64,
        bcsid: u64,
    },
    /// Adds a pipeline (new id, 3 distinct members, OPEN).
    CreatePipeline(PipelineInfo),
    /// Marks a pipeline CLOSED (idempotent).
    ClosePipeline { id: u64 },
    /// Queues blocks of a container for deletion under a new transaction id.
    AddDeletedBlocks {
        txn_id: u64,
        container_id: u64,
        local_ids: Vec<u64>,
    },
    /// Drops finished deleted-block transactions (absent ids are ignored).
    RemoveDeletedBlocks { txn_ids: Vec<u64> },
    /// Records a datanode as the leader last knew it (registration or health change),
    /// replacing the previous record of that id.
    RecordDatanode(DatanodeRecord),
    /// Records that the leader of `term` serves outside safe mode (kept: the highest term).
    RecordSafeModeLeft { term: u64 },
    /// Adds a block-token secret key (bytes drawn by the leader before proposing); refused
    /// unless well-formed and its id is above every kept key's.
    AddSecretKey(SecretKeyRecord),
    /// Forgets the secret keys whose `keep_until_ms` is at or before `now_ms` (stamped by
    /// the leader).
    RemoveExpiredSecretKeys { now_ms: u64 },
    /// Adds a one-time join token (its digest; expired tokens are dropped first).
    AddJoinToken(JoinTokenRecord),
    /// Redeems the join token with this digest at `now_ms` (stamped by the leader): its row
    /// is removed whatever the outcome.
    RedeemJoinToken { digest: Vec<u8>, now_ms: u64 },
}

/// The outcome of an [`ScmRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScmResponse {
    /// The cluster id is (now) this one.
    ClusterIdSet {
        cluster_id: String,
    },
    /// A different cluster id is already set.
    ClusterIdMismatch {
        existing: String,
    },
    /// Ids `first ..= last` of `name` are reserved for the proposer.
    BatchAllocated {
        name: String,
        first: u64,
        last: u64,
    },
    /// The row was not `expected_last`; `current` is what it holds.
    CasFailed {
        name: String,
        current: u64,
    },
    /// `name` is not a known sequence.
    UnknownSequence {
        name: String,
    },
    /// `new_last` was not greater than `expected_last`.
    InvalidBatch {
        name: String,
        expected_last: u64,
        new_last: u64,
    },
    ContainerCreated {
        id: u64,
    },
    ContainerExists {
        id: u64,
    },
    /// A new container was not OPEN.
    InvalidContainer {
        id: u64,
        reason: String,
    },
    ContainerNotFound {
        id: u64,
    },
    ContainerUpdated {
        id: u64,
        state: ContainerState,
    },
    InvalidTransition {
        id: u64,
        from: ContainerState,
        event: ContainerEvent,
    },
    UsageUpdated {
        id: u64,
        bcsid: u64,
    },
    /// A usage update carried a lower BCSID than recorded; nothing changed.
    BcsidRegression {
        id: u64,
        current: u64,
        requested: u64,
    },
    PipelineCreated {
        id: u64,
    },
    PipelineExists {
        id: u64,
    },
    InvalidPipeline {
        id: u64,
        reason: String,
    },
    PipelineNotFound {
        id: u64,
    },
    PipelineClosed {
        id: u64,
    },
    DeletedBlocksAdded {
        txn_id: u64,
    },
    DeletedBlocksTxnExists {
        txn_id: u64,
    },
    /// How many of the given transactions existed and were removed.
    DeletedBlocksRemoved {
        removed: u64,
    },
    DatanodeRecorded {
        id: u64,
    },
    /// A datanode record with id 0 or an empty address.
    InvalidDatanode {
        id: u64,
        reason: String,
    },
    /// The highest term recorded as out of safe mode, after the request.
    SafeModeLeftRecorded {
        term: u64,
    },
    SecretKeyAdded {
        id: u64,
    },
    /// A key with a bad shape, or an id not above every kept key's.
    SecretKeyRefused {
        id: u64,
        reason: String,
    },
    /// How many keys were forgotten.
    SecretKeysRemoved {
        removed: u64,
    },
    JoinTokenAdded {
        expires_ms: u64,
    },
    /// The token's redeemer gets a certificate of this role and id.
    JoinTokenRedeemed {
        role: String,
        id: u64,
    },
    /// A malformed token, or one unknown, used or expired.
    JoinTokenRefused {
        reason: String,
    },
}

#[cfg(test)]
#[path = "request_golden.rs"]
mod golden;
