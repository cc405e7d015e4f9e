//! Buckets: create one in a volume, delete an empty one; the volume counts its buckets.

use rozone_raft::Txn;

use super::shared::{get_bucket, get_volume, put, refuse, Applied};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{Bucket, Replication};
use crate::state::{
    bucket_key, keys_prefix, CF_BUCKETS, CF_BUCKET_OWNERS, CF_KEYS, CF_OPEN_KEYS, CF_VOLUMES,
};

/// `CreateBucket`: refused without the volume or when the name is taken.
pub(super) fn create(
    txn: &mut Txn<'_>,
    volume: String,
    name: String,
    replication: Replication,
    versioning: bool,
    quota_bytes: Option<u64>,
    now_ms: u64,
) -> Applied {
    let Some(mut v) = get_volume(txn, &volume)? else {
        return refuse(Refusal::VolumeNotFound { volume });
    };
    if get_bucket(txn, &volume, &name)?.is_some() {
        return refuse(Refusal::BucketExists {
            volume,
            bucket: name,
        });
    }
    let b = Bucket {
        volume: volume.clone(),
        name,
        replication,
        versioning,
        quota_bytes,
        used_bytes: 0,
        key_count: 0,
        created_ms: now_ms,
        modified_ms: now_ms,
    };
    put(txn, CF_BUCKETS, bucket_key(&volume, &b.name), &b)?;
    v.bucket_count += 1;
    put(txn, CF_VOLUMES, volume.into_bytes(), &v)?;
    Ok(OmResponse::BucketCreated(b))
}

/// `DeleteBucket`: refused while the bucket has keys or keys being written.
pub(super) fn delete(txn: &mut Txn<'_>, volume: String, name: String) -> Applied {
    if get_bucket(txn, &volume, &name)?.is_none() {
        return refuse(Refusal::BucketNotFound {
            volume,
            bucket: name,
        });
    }
    let prefix = keys_prefix(&volume, &name);
    for (cf, what) in [(CF_KEYS, "keys"), (CF_OPEN_KEYS, "keys being written")] {
        if !txn.scan_prefix(cf, &prefix, None, 1)?.is_empty() {
            return refuse(Refusal::BucketNotEmpty {
                volume,
                bucket: name,
                what: what.to_string(),
            });
        }
    }
    txn.delete(CF_BUCKETS, bucket_key(&volume, &name));
    // A bucket created later under this name starts with no owner of its own.
    txn.delete(CF_BUCKET_OWNERS, bucket_key(&volume, &name));
    if let Some(mut v) = get_volume(txn, &volume)? {
        v.bucket_count = v.bucket_count.saturating_sub(1);
        put(txn, CF_VOLUMES, volume.into_bytes(), &v)?;
    }
    Ok(OmResponse::BucketDeleted)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::{Bucket, Replication};

    fn create(volume: &str) -> OmRequest {
        OmRequest::CreateBucket {
            volume: volume.into(),
            name: "b".into(),
            replication: Replication::RatisOne,
            versioning: true,
            quota_bytes: Some(9),
            now_ms: NOW,
        }
    }

    fn delete() -> OmRequest {
        OmRequest::DeleteBucket {
            volume: "v".into(),
            name: "b".into(),
        }
    }

    #[test]
    fn create_bucket_stores_it_and_counts_it_in_its_volume() {
        let mut f = Fixture::new();
        f.volume("v");
        let want = Bucket {
            volume: "v".into(),
            name: "b".into(),
            replication: Replication::RatisOne,
            versioning: true,
            quota_bytes: Some(9),
            used_bytes: 0,
            key_count: 0,
            created_ms: NOW,
            modified_ms: NOW,
        };
        assert_eq!(
            f.apply(create("v")),
            OmResponse::BucketCreated(want.clone())
        );
        assert_eq!(read::bucket(&f.db, "v", "b").unwrap(), Some(want));
        assert_eq!(read::volume(&f.db, "v").unwrap().unwrap().bucket_count, 1);
    }

    #[test]
    fn create_bucket_refuses_a_missing_volume_and_a_taken_name() {
        let mut f = Fixture::new();
        assert_eq!(
            f.refused(create("v")),
            Refusal::VolumeNotFound { volume: "v".into() }
        );
        f.volume("v");
        f.apply(create("v"));
        assert_eq!(
            f.refused(create("v")),
            Refusal::BucketExists {
                volume: "v".into(),
                bucket: "b".into()
            }
        );
        assert_eq!(read::volume(&f.db, "v").unwrap().unwrap().bucket_count, 1);
    }

    #[test]
    fn delete_bucket_removes_it_and_uncounts_it() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        assert_eq!(f.apply(delete()), OmResponse::BucketDeleted);
        assert_eq!(read::bucket(&f.db, "v", "b").unwrap(), None);
        assert_eq!(read::volume(&f.db, "v").unwrap().unwrap().bucket_count, 0);
        assert_eq!(
            f.refused(delete()),
            Refusal::BucketNotFound {
                volume: "v".into(),
                bucket: "b".into()
            }
        );
    }

    #[test]
    fn delete_bucket_refuses_while_keys_are_written_or_committed() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let id = open_id("k", 1);
        f.open(&id, vec![block(1, 1, 10)]);
        let not_empty = |what: &str| Refusal::BucketNotEmpty {
            volume: "v".into(),
            bucket: "b".into(),
            what: what.into(),
        };
        assert_eq!(f.refused(delete()), not_empty("keys being written"));
        f.commit(&id, vec![(bid(1, 1), 4)], 4);
        assert_eq!(f.refused(delete()), not_empty("keys"));
        assert!(read::bucket(&f.db, "v", "b").unwrap().is_some());
        assert_eq!(read::volume(&f.db, "v").unwrap().unwrap().bucket_count, 1);
    }
}
