//! rozone-raft: the Raft layer shared by SCM, OM and datanode pipelines.
//!
//! openraft drives consensus; this crate supplies its storage (a RocksDB log store and a
//! RocksDB state-machine base with checkpoint snapshots), its network (gRPC between peer
//! ports, one process hosting many groups) and what services need on top: readiness and
//! the leader lease (the read gate), leader-contact tracking, membership changes and leader transfer. openraft's types stay
//! behind this crate so an upgrade touches only it.
//!
//! Must not depend on any daemon crate.

pub mod blocking;
pub mod codec;
pub mod contact;
pub mod download;
pub mod envelope;
pub mod error;
pub mod gate;
pub mod golden;
pub mod group;
pub mod hook;
mod install;
pub mod join;
pub mod log_store;
pub mod network;
pub mod record;
pub mod registry;
pub mod report;
pub mod retry_cache;
pub mod ring;
pub mod rows;
pub mod server;
pub mod service;
pub mod snapshot;
pub mod state_machine;
pub mod status;
pub mod txn;
pub mod types;
pub mod wire;

pub use contact::{leader_ready, ContactRecord, LeaderContact};
pub use download::DownloadPolicy;
pub use error::RaftGroupError;
pub use group::{GroupConfig, RaftGroup, SnapshotStats};
pub use hook::AppendHook;
pub use network::PeerChannels;
pub use registry::GroupRegistry;
pub use rows::Rows;
pub use snapshot::sync_dir;
pub use state_machine::{StateDb, StateMachineLogic};
pub use txn::Txn;
pub use types::{LogId, NodeId, NodeInfo, RaftMetrics, TypeConfig};

/// Re-exported for services that compare roles; the rest of openraft stays inside.
pub use openraft::ServerState;
