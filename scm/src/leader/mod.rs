//! The SCM leader's work on [`crate::node::ScmNode`], on top of the replicated state:
//! datanode registration and heartbeats ([`reports`]), pipelines ([`pipelines`]), block
//! allocation and deletion ([`blocks`]), the ReplicationManager ([`rm`]), deletion of empty
//! containers ([`deleting`]), block-token secret keys ([`secret_keys`]), join tokens ([`join_tokens`]), what admins ask
//! ([`admin`]) and the periodic loop that drives them ([`background`]). It takes and
//! returns domain types ([`types`], [`crate::cluster::commands::DatanodeCommand`]);
//! refusals are [`crate::error::ScmError`]s. Only `service/` and `convert/` speak protobuf and
//! `tonic::Status`.

pub mod admin;
pub mod background;
pub mod blocks;
pub mod deleting;
pub mod join_tokens;
pub mod pipelines;
pub mod reports;
pub mod rm;
pub mod secret_keys;
pub mod types;
