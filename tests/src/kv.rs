//! A small key-value state machine for exercising the Raft layer.

use std::io;
use std::sync::Arc;

use rozone_kv::rocksdb::{IteratorMode, DB};
use rozone_raft::{LogId, StateMachineLogic, Txn};
use serde::{Deserialize, Serialize};

pub const CF_KV: &str = "kv";
pub const CF_STATS: &str = "stats";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum KvRequest {
    Put { key: String, value: String },
    Delete { key: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KvResponse {
    pub previous: Option<String>,
    /// Writes applied so far, counted in the state itself (so replicas must agree).
    pub writes: u64,
}

/// Key-value store: `kv` holds the keys, `stats` a write counter.
#[derive(Debug, Default, Clone, Copy)]
pub struct KvLogic;

impl StateMachineLogic for KvLogic {
    type Request = KvRequest;
    type Response = KvResponse;

    fn column_families(&self) -> Vec<&'static str> {
        vec![CF_KV, CF_STATS]
    }

    fn apply(
        &mut self,
        txn: &mut Txn<'_>,
        _log_id: &LogId,
        req: KvRequest,
    ) -> io::Result<KvResponse> {
        let writes = match txn.get(CF_STATS, b"writes")? {
            Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "writes counter is not 8 bytes")
            })?),
            None => 0,
        } + 1;
        txn.put(CF_STATS, b"writes".to_vec(), writes.to_be_bytes().to_vec());
        let key = match &req {
            KvRequest::Put { key, .. } | KvRequest::Delete { key } => key.clone(),
        };
        let previous = txn
            .get(CF_KV, key.as_bytes())?
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        match req {
            KvRequest::Put { key, value } => txn.put(CF_KV, key.into_bytes(), value.into_bytes()),
            KvRequest::Delete { key } => txn.delete(CF_KV, key.into_bytes()),
        }
        Ok(KvResponse { previous, writes })
    }
}

/// CRC32 over every key and value of every application column family, in order.
pub fn digest(db: &Arc<DB>) -> io::Result<u32> {
    let mut h = crc32fast::Hasher::new();
    for cf_name in [CF_KV, CF_STATS] {
        h.update(cf_name.as_bytes());
        let cf = rozone_kv::cf(db, cf_name)?;
        for item in db.iterator_cf(cf, IteratorMode::Start) {
            let (k, v) = item.map_err(io::Error::other)?;
            h.update(&(k.len() as u32).to_be_bytes());
            h.update(&k);
            h.update(&(v.len() as u32).to_be_bytes());
            h.update(&v);
        }
    }
    Ok(h.finalize())
}

/// Reads one key from a member's state.
pub fn get(db: &Arc<DB>, key: &str) -> io::Result<Option<String>> {
    let cf = rozone_kv::cf(db, CF_KV)?;
    Ok(db
        .get_cf(cf, key.as_bytes())
        .map_err(io::Error::other)?
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
}
