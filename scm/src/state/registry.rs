//! What the ring remembers for its next leader: each datanode as last known (registration
//! and last judged health) and the highest term whose leader served outside safe mode. A
//! new leader starts from these rows instead of from nothing, so a failover does not stop
//! block allocation (issue 12, item 7; see `crate::cluster::safemode::start`).
//!
//! Rows live in [`CF_CLUSTER`] (no new column family: a checkpoint of an older build opens
//! unchanged). A datanode row is a versioned enum, so a later build appends a `V2` and
//! still reads `V1`.

use std::io;

use rozone_kv::rocksdb::{Direction, IteratorMode, DB};
use rozone_kv::{cf, key_u64, u64_key};
use rozone_raft::codec::encode;
use rozone_raft::rows::decode_row;
use rozone_raft::{Rows, Txn};
use serde::{Deserialize, Serialize};

use super::request::ScmResponse;
use super::types::DatanodeRecord;
use super::CF_CLUSTER;

/// Key prefix of datanode rows in [`CF_CLUSTER`]; the id follows, big-endian.
pub const DATANODE_PREFIX: &[u8] = b"datanode/";
/// Key of the highest term recorded as out of safe mode.
pub const KEY_SAFE_MODE_LEFT: &[u8] = b"safe_mode_left_term";
/// Most datanode rows a leader loads (a bound on what a corrupt or hostile state costs).
pub const MAX_DATANODES: usize = 100_000;

/// How a datanode row is stored. Append versions; never change one a build wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum DatanodeRow {
    V1(DatanodeRecord),
}

fn datanode_key(id: u64) -> Vec<u8> {
    let mut k = DATANODE_PREFIX.to_vec();
    k.extend_from_slice(&u64_key(id));
    k
}

/// Applies `RecordDatanode`: checked, then replaces the row of that id.
pub(super) fn record_datanode(txn: &mut Txn<'_>, rec: DatanodeRecord) -> io::Result<ScmResponse> {
    let d = &rec.datanode;
    let id = d.id;
    let missing = [
        ("container_addr", &d.container_addr),
        ("raft_addr", &d.raft_addr),
    ]
    .into_iter()
    .find(|(_, v)| v.is_empty());
    if id == 0 {
        return Ok(ScmResponse::InvalidDatanode {
            id,
            reason: "datanode id must be above 0".into(),
        });
    }
    if let Some((name, _)) = missing {
        return Ok(ScmResponse::InvalidDatanode {
            id,
            reason: format!("{name} is empty"),
        });
    }
    txn.put(CF_CLUSTER, datanode_key(id), encode(&DatanodeRow::V1(rec))?);
    Ok(ScmResponse::DatanodeRecorded { id })
}

/// Applies `RecordSafeModeLeft`: the highest term wins, so a late entry of an older leader
/// never lowers it.
pub(super) fn record_safe_mode_left(txn: &mut Txn<'_>, term: u64) -> io::Result<ScmResponse> {
    let current: Option<u64> = txn.get_row(CF_CLUSTER, KEY_SAFE_MODE_LEFT)?;
    let term = current.map_or(term, |c| c.max(term));
    txn.put(CF_CLUSTER, KEY_SAFE_MODE_LEFT, encode(&term)?);
    Ok(ScmResponse::SafeModeLeftRecorded { term })
}

/// The record of datanode `id`, if any.
pub fn datanode(db: &DB, id: u64) -> io::Result<Option<DatanodeRecord>> {
    Ok(db
        .get_row::<DatanodeRow>(CF_CLUSTER, &datanode_key(id))?
        .map(|DatanodeRow::V1(r)| r))
}

/// Every datanode record, by id (at most [`MAX_DATANODES`]).
pub fn datanodes(db: &DB) -> io::Result<Vec<DatanodeRecord>> {
    let mut out = Vec::new();
    let mode = IteratorMode::From(DATANODE_PREFIX, Direction::Forward);
    for item in db.iterator_cf(cf(db, CF_CLUSTER)?, mode) {
        let (k, v) = item.map_err(io::Error::other)?;
        let Some(id) = k.strip_prefix(DATANODE_PREFIX) else {
            break;
        };
        if key_u64(id).is_none() || out.len() >= MAX_DATANODES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("corrupt datanode key {k:?} in {CF_CLUSTER}, or too many datanodes"),
            ));
        }
        let DatanodeRow::V1(r) = decode_row::<DatanodeRow>(CF_CLUSTER, &k, &v)?;
        out.push(r);
    }
    Ok(out)
}

/// The highest term whose leader recorded it served outside safe mode.
pub fn safe_mode_left_term(db: &DB) -> io::Result<Option<u64>> {
    db.get_row(CF_CLUSTER, KEY_SAFE_MODE_LEFT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::types::{Datanode, NodeHealth};
    use crate::state::COLUMN_FAMILIES;

    fn rec(id: u64, health: NodeHealth) -> DatanodeRecord {
        DatanodeRecord {
            datanode: Datanode {
                id,
                hostname: format!("dn{id}"),
                container_addr: "a:1".into(),
                raft_addr: "a:2".into(),
                replication_addr: "a:3".into(),
            },
            health,
        }
    }

    fn apply(db: &DB, f: impl FnOnce(&mut Txn<'_>) -> io::Result<ScmResponse>) -> ScmResponse {
        let mut txn = Txn::new(db);
        let r = f(&mut txn).unwrap();
        db.write(txn.into_batch().unwrap()).unwrap();
        r
    }

    #[test]
    fn datanode_records_replace_by_id_and_bad_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
        // The cluster id shares the column family; it must not look like a datanode.
        db.put_cf(db.cf_handle(CF_CLUSTER).unwrap(), b"cluster_id", b"x")
            .unwrap();
        for id in [2, 1] {
            let r = apply(&db, |t| record_datanode(t, rec(id, NodeHealth::Healthy)));
            assert_eq!(r, ScmResponse::DatanodeRecorded { id });
        }
        apply(&db, |t| record_datanode(t, rec(2, NodeHealth::Stale)));
        let all = datanodes(&db).unwrap();
        assert_eq!(
            all,
            vec![rec(1, NodeHealth::Healthy), rec(2, NodeHealth::Stale)]
        );
        assert_eq!(datanode(&db, 2).unwrap(), Some(rec(2, NodeHealth::Stale)));
        let mut bad = rec(0, NodeHealth::Healthy);
        let r = apply(&db, |t| record_datanode(t, bad.clone()));
        assert!(
            matches!(r, ScmResponse::InvalidDatanode { id: 0, .. }),
            "{r:?}"
        );
        bad.datanode.id = 5;
        bad.datanode.raft_addr.clear();
        let r = apply(&db, |t| record_datanode(t, bad));
        assert!(
            matches!(r, ScmResponse::InvalidDatanode { id: 5, .. }),
            "{r:?}"
        );
        assert_eq!(datanodes(&db).unwrap().len(), 2);
    }

    #[test]
    fn safe_mode_left_keeps_the_highest_term() {
        let dir = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
        assert_eq!(safe_mode_left_term(&db).unwrap(), None);
        apply(&db, |t| record_safe_mode_left(t, 5));
        let r = apply(&db, |t| record_safe_mode_left(t, 3));
        assert_eq!(r, ScmResponse::SafeModeLeftRecorded { term: 5 });
        assert_eq!(safe_mode_left_term(&db).unwrap(), Some(5));
    }

    /// The stored form is part of the replicated format: a `V1` row is the variant tag 0
    /// followed by the record's fields in order.
    #[test]
    fn a_v1_row_keeps_its_bytes() {
        let bytes = encode(&DatanodeRow::V1(rec(1, NodeHealth::Stale))).unwrap();
        // Tag V1, id 1, then each string as its length and bytes, then health STALE (1).
        let mut want = vec![0u8, 1];
        for s in ["dn1", "a:1", "a:2", "a:3"] {
            want.push(s.len() as u8);
            want.extend_from_slice(s.as_bytes());
        }
        want.push(1);
        assert_eq!(bytes, want);
    }
}
