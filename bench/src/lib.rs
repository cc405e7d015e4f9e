//! rozone-bench: the side-by-side benchmarks' own tools: `rozone-etcd-load`, an etcd v3
//! load generator, and `rozone-s3-load`, S3 PUT/GET through the AWS SDK. Their reports have
//! the same fields as `rozone bench --json`, so `scripts/bench-vs-etcd.sh` and
//! `scripts/bench-s3.sh` read both sides the same way.
//!
//! Depends on no rozone crate: it measures etcd, or an S3 endpoint from outside.

/// The generated client of etcd's KV service (Range, Put): see `proto/etcd_kv.proto`.
pub mod etcd {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("etcdserverpb");
}

pub mod load;
