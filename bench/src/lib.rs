//! rozone-bench: the side-by-side benchmark's own tools. Today one: `rozone-etcd-load`, an
//! etcd v3 load generator whose report has the same fields as `rozone bench --json`, so
//! `scripts/bench-vs-etcd.sh` reads both the same way.
//!
//! Depends on no rozone crate: it measures etcd, not rozone.

/// The generated client of etcd's KV service (Range, Put): see `proto/etcd_kv.proto`.
pub mod etcd {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("etcdserverpb");
}

pub mod load;
