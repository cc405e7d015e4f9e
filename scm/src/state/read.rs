//! Reads of the SCM state from a member's state database, and the row codec shared with
//! the state machine.
//!
//! These read the local database: on the leader they are current after
//! `RaftGroup::read_barrier`; on a follower they may lag. Stored bytes that do not decode
//! are an `InvalidData` error naming the row, never a panic.

use std::io;

use rozone_kv::rocksdb::{IteratorMode, DB};
use rozone_kv::{cf, key_u64, u64_key};
use rozone_raft::codec::decode;
use serde::de::DeserializeOwned;

use super::types::{ContainerInfo, ContainerState, DeletedBlocksTxn, PipelineInfo};
use super::KEY_CLUSTER_ID;
use super::{CF_CLUSTER, CF_CONTAINERS, CF_DELETED_BLOCKS, CF_PIPELINES, CF_SEQUENCE_IDS};

/// Decodes a stored value, naming the row in the error so an operator can find it.
pub(crate) fn decode_row<T: DeserializeOwned>(
    cf_name: &str,
    key: &dyn std::fmt::Display,
    bytes: &[u8],
) -> io::Result<T> {
    decode(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("corrupt row {key} in {cf_name}: {e}"),
        )
    })
}

fn get_row<T: DeserializeOwned>(
    db: &DB,
    cf_name: &str,
    key: &[u8],
    shown: &dyn std::fmt::Display,
) -> io::Result<Option<T>> {
    match db.get_cf(cf(db, cf_name)?, key).map_err(io::Error::other)? {
        Some(b) => Ok(Some(decode_row(cf_name, shown, &b)?)),
        None => Ok(None),
    }
}

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
        out.push((id, decode_row(cf_name, &id, &v)?));
    }
    Ok(out)
}

/// The container `id`, if it exists.
pub fn container(db: &DB, id: u64) -> io::Result<Option<ContainerInfo>> {
    get_row(db, CF_CONTAINERS, &u64_key(id), &id)
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
    get_row(db, CF_PIPELINES, &u64_key(id), &id)
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
    get_row(db, CF_SEQUENCE_IDS, name.as_bytes(), &name)
}

/// The cluster id, once set.
pub fn cluster_id(db: &DB) -> io::Result<Option<String>> {
    get_row(db, CF_CLUSTER, KEY_CLUSTER_ID, &"cluster_id")
}

/// Up to `limit` pending deleted-block transactions, oldest (lowest id) first.
pub fn pending_deleted_blocks(db: &DB, limit: usize) -> io::Result<Vec<DeletedBlocksTxn>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, CF_DELETED_BLOCKS)?, IteratorMode::Start) {
        if out.len() >= limit {
            break;
        }
        let (k, v) = item.map_err(io::Error::other)?;
        let shown = key_u64(&k).map_or_else(|| format!("{k:?}"), |id| id.to_string());
        out.push(decode_row(CF_DELETED_BLOCKS, &shown, &v)?);
    }
    Ok(out)
}
