//! Reads of the SCM state from a member's state database.
//!
//! These read the local database: on the leader they are current after
//! `RaftGroup::read_barrier`; on a follower they may lag. Rows are read with the typed row
//! read of `rozone_raft` ([`Rows`], [`decode_row`]): stored bytes that do not decode are
//! an `InvalidData` error naming the table and key, never a panic.

use std::io;

use rozone_kv::rocksdb::{IteratorMode, DB};
use rozone_kv::{cf, key_u64, u64_key};
use rozone_raft::rows::decode_row;
use rozone_raft::Rows;
use serde::de::DeserializeOwned;

use super::types::{ContainerInfo, ContainerState, DeletedBlocksTxn, PipelineInfo};
use super::KEY_CLUSTER_ID;
use super::{CF_CLUSTER, CF_CONTAINERS, CF_DELETED_BLOCKS, CF_PIPELINES, CF_SEQUENCE_IDS};

/// Every row of an integer-keyed column family, in key order.
fn scan_u64_rows<T: DeserializeOwned>(db: &DB, cf_name: &str) -> io::Result<Vec<(u64, T)>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, cf_name)?, IteratorMode::Start) {
        let (k, v) = item.map_err(io::Error::other)?;
        let id = key_u64(&k).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("corrupt key {k:?} in {cf_name}: not 8 bytes"),
            )
        })?;
        out.push((id, decode_row(cf_name, &k, &v)?));
    }
    Ok(out)
}

/// The container `id`, if it exists.
pub fn container(db: &DB, id: u64) -> io::Result<Option<ContainerInfo>> {
    db.get_row(CF_CONTAINERS, &u64_key(id))
}

/// All containers in id order, or only those in `state`.
pub fn containers(db: &DB, state: Option<ContainerState>) -> io::Result<Vec<ContainerInfo>> {
    Ok(scan_u64_rows::<ContainerInfo>(db, CF_CONTAINERS)?
        .into_iter()
        .map(|(_, c)| c)
        .filter(|c| state.is_none_or(|s| c.state == s))
        .collect())
}

/// The pipeline `id`, if it exists.
pub fn pipeline(db: &DB, id: u64) -> io::Result<Option<PipelineInfo>> {
    db.get_row(CF_PIPELINES, &u64_key(id))
}

/// All pipelines in id order.
pub fn pipelines(db: &DB) -> io::Result<Vec<PipelineInfo>> {
    Ok(scan_u64_rows::<PipelineInfo>(db, CF_PIPELINES)?
        .into_iter()
        .map(|(_, p)| p)
        .collect())
}

/// The last id reserved for sequence `name`; `None` when no batch was ever allocated.
pub fn sequence_id(db: &DB, name: &str) -> io::Result<Option<u64>> {
    db.get_row(CF_SEQUENCE_IDS, name.as_bytes())
}

/// The cluster id, once set.
pub fn cluster_id(db: &DB) -> io::Result<Option<String>> {
    db.get_row(CF_CLUSTER, KEY_CLUSTER_ID)
}

/// Containers with a pending deleted-block transaction (their block deletes are not done).
pub fn containers_with_pending_deletes(db: &DB) -> io::Result<std::collections::BTreeSet<u64>> {
    Ok(pending_deleted_blocks(db, usize::MAX)?
        .into_iter()
        .map(|t| t.container_id)
        .collect())
}

/// Up to `limit` pending deleted-block transactions, oldest (lowest id) first.
pub fn pending_deleted_blocks(db: &DB, limit: usize) -> io::Result<Vec<DeletedBlocksTxn>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, CF_DELETED_BLOCKS)?, IteratorMode::Start) {
        if out.len() >= limit {
            break;
        }
        let (k, v) = item.map_err(io::Error::other)?;
        out.push(decode_row(CF_DELETED_BLOCKS, &k, &v)?);
    }
    Ok(out)
}
