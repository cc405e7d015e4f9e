//! The SCM leader's work on [`crate::node::ScmNode`], on top of the replicated state:
//! datanode registration and heartbeats ([`reports`]), pipelines ([`pipelines`]), block
//! allocation and deletion ([`blocks`]), the ReplicationManager ([`rm`]), deletion of empty
//! containers ([`deleting`]) and the periodic
//! loop that drives them ([`background`]). Refusals are [`crate::error::ScmError`]s; only
//! the services turn them into gRPC statuses.

pub mod background;
pub mod blocks;
pub mod deleting;
pub mod pipelines;
pub mod reports;
pub mod rm;
