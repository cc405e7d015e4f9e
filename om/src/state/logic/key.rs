//! Committed keys: delete one (its blocks, older versions' included, to deletion) and
//! rename one within its bucket.

use rozone_raft::{Rows, Txn};

use super::deleted;
use super::shared::{account, bucket_not_found, get_bucket, put, refuse, Applied};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{BlockId, Key};
use crate::state::{key_key, key_path, CF_KEYS};

/// The key, or the refusal naming what is missing: the volume, the bucket or the key.
pub(super) fn find_key(
    txn: &Txn<'_>,
    volume: &str,
    bucket: &str,
    key: &str,
) -> std::io::Result<Result<Key, Refusal>> {
    if let Some(k) = txn.get_row::<Key>(CF_KEYS, &key_key(volume, bucket, key))? {
        return Ok(Ok(k));
    }
    if get_bucket(txn, volume, bucket)?.is_none() {
        return Ok(Err(bucket_not_found(txn, volume, bucket)?));
    }
    Ok(Err(Refusal::KeyNotFound {
        path: key_path(volume, bucket, key),
    }))
}

/// `DeleteKey`: refused without the key.
pub(super) fn delete(
    txn: &mut Txn<'_>,
    index: u64,
    volume: String,
    bucket: String,
    key: String,
) -> Applied {
    let k = match find_key(txn, &volume, &bucket, &key)? {
        Ok(k) => k,
        Err(r) => return refuse(r),
    };
    txn.delete(CF_KEYS, key_key(&volume, &bucket, &key));
    let mut gone: Vec<BlockId> = k.blocks.iter().map(|b| b.id).collect();
    for v in &k.old_versions {
        gone.extend(v.blocks.iter().map(|b| b.id));
    }
    deleted::queue(
        txn,
        index,
        gone,
        format!("delete {}", key_path(&volume, &bucket, &key)),
    )?;
    account(txn, &volume, &bucket, -(k.stored_bytes() as i128), -1)?;
    Ok(OmResponse::KeyDeleted)
}

/// `RenameKey`: refused without the key, or when the new name is taken (or is the same).
pub(super) fn rename(
    txn: &mut Txn<'_>,
    volume: String,
    bucket: String,
    from: String,
    to: String,
    now_ms: u64,
) -> Applied {
    let mut k = match find_key(txn, &volume, &bucket, &from)? {
        Ok(k) => k,
        Err(r) => return refuse(r),
    };
    let to_k = key_key(&volume, &bucket, &to);
    if from == to || txn.get_row::<Key>(CF_KEYS, &to_k)?.is_some() {
        return refuse(Refusal::KeyExists {
            path: key_path(&volume, &bucket, &to),
        });
    }
    k.name = to;
    k.modified_ms = now_ms;
    txn.delete(CF_KEYS, key_key(&volume, &bucket, &from));
    put(txn, CF_KEYS, to_k, &k)?;
    Ok(OmResponse::KeyRenamed)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};

    /// A versioned bucket v/b with key k committed twice: 1/1 (3 bytes) then 1/2 (4 bytes).
    fn with_key() -> Fixture {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket_with("v", "b", true, None);
        for local in [1, 2] {
            let id = open_id("k", local);
            f.open(&id, vec![block(1, local, 10)]);
            f.commit(&id, vec![(bid(1, local), local + 2)], local + 2);
        }
        f
    }

    fn delete(volume: &str, bucket: &str, key: &str) -> OmRequest {
        OmRequest::DeleteKey {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    fn rename(bucket: &str, from: &str, to: &str) -> OmRequest {
        OmRequest::RenameKey {
            volume: "v".into(),
            bucket: bucket.into(),
            from: from.into(),
            to: to.into(),
            now_ms: NOW + 5,
        }
    }

    #[test]
    fn delete_key_queues_every_version_blocks_and_gives_back_the_bytes() {
        let mut f = with_key();
        let b = read::bucket(&f.db, "v", "b").unwrap().unwrap();
        assert_eq!((b.used_bytes, b.key_count), (7, 1));
        assert_eq!(
            f.apply_at(50, delete("v", "b", "k")),
            OmResponse::KeyDeleted
        );
        assert_eq!(read::key(&f.db, "v", "b", "k").unwrap(), None);
        let queued = read::deleted_blocks(&f.db, 10).unwrap();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].0, 50);
        assert_eq!(queued[0].1.blocks, [bid(1, 2), bid(1, 1)]);
        assert_eq!(queued[0].1.reason, "delete v/b/k");
        let b = read::bucket(&f.db, "v", "b").unwrap().unwrap();
        assert_eq!((b.used_bytes, b.key_count), (0, 0));
        assert_eq!(read::volume(&f.db, "v").unwrap().unwrap().used_bytes, 0);
    }

    #[test]
    fn delete_key_refuses_naming_the_missing_volume_bucket_or_key() {
        let mut f = with_key();
        assert_eq!(
            f.refused(delete("v", "b", "nok")),
            Refusal::KeyNotFound {
                path: "v/b/nok".into()
            }
        );
        assert_eq!(
            f.refused(delete("v", "nob", "k")),
            Refusal::BucketNotFound {
                volume: "v".into(),
                bucket: "nob".into()
            }
        );
        assert_eq!(
            f.refused(delete("nov", "b", "k")),
            Refusal::VolumeNotFound {
                volume: "nov".into()
            }
        );
        assert!(read::deleted_blocks(&f.db, 10).unwrap().is_empty());
    }

    #[test]
    fn rename_key_moves_the_row_and_keeps_its_blocks() {
        let mut f = with_key();
        let before = read::key(&f.db, "v", "b", "k").unwrap().unwrap();
        assert_eq!(f.apply(rename("b", "k", "k2")), OmResponse::KeyRenamed);
        assert_eq!(read::key(&f.db, "v", "b", "k").unwrap(), None);
        let after = read::key(&f.db, "v", "b", "k2").unwrap().unwrap();
        assert_eq!(after.name, "k2");
        assert_eq!(after.modified_ms, NOW + 5);
        assert_eq!(
            (after.blocks, after.version),
            (before.blocks, before.version)
        );
        let b = read::bucket(&f.db, "v", "b").unwrap().unwrap();
        assert_eq!((b.used_bytes, b.key_count), (7, 1));
    }

    #[test]
    fn rename_key_refuses_a_missing_source_and_a_taken_or_same_name() {
        let mut f = with_key();
        let id = open_id("other", 9);
        f.open(&id, vec![block(2, 1, 10)]);
        f.commit(&id, vec![(bid(2, 1), 1)], 1);
        for to in ["other", "k"] {
            assert_eq!(
                f.refused(rename("b", "k", to)),
                Refusal::KeyExists {
                    path: format!("v/b/{to}")
                }
            );
        }
        assert_eq!(
            f.refused(rename("b", "nok", "x")),
            Refusal::KeyNotFound {
                path: "v/b/nok".into()
            }
        );
        assert_eq!(
            f.refused(rename("nob", "k", "x")),
            Refusal::BucketNotFound {
                volume: "v".into(),
                bucket: "nob".into()
            }
        );
        assert!(read::key(&f.db, "v", "b", "k").unwrap().is_some());
    }
}
