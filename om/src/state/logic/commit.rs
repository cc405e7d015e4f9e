//! `CommitKey`: an open key becomes the key, with the blocks the writer filled. Checks
//! the block list against the allocation and the quotas; the version it replaces is kept
//! (versioned bucket) or its blocks go to deletion, as do blocks allocated but not used.

use std::collections::{BTreeMap, BTreeSet};

use rozone_raft::{Rows, Txn};

use super::deleted;
use super::shared::{
    account, bucket_not_found, find_open_key, get_bucket, get_volume, path, put, refuse, Applied,
};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{AllocatedBlock, BlockId, Key, KeyBlock, KeyVersion, OpenKey, OpenKeyId};
use crate::state::{key_key, open_key_key, CF_KEYS, CF_OPEN_KEYS};

/// `CommitKey`: refused without the open key, for a block list the allocation does not
/// cover, or when the key's growth passes the bucket's or the volume's quota.
pub(super) fn commit(
    txn: &mut Txn<'_>,
    index: u64,
    id: OpenKeyId,
    blocks: Vec<(BlockId, u64)>,
    size: u64,
    checksum: String,
    now_ms: u64,
) -> Applied {
    let open = match find_open_key(txn, &id)? {
        Ok(o) => o,
        Err(r) => return refuse(r),
    };
    let key_blocks = match check_blocks(&open, &blocks, size) {
        Ok(b) => b,
        Err(reason) => {
            return refuse(Refusal::InvalidBlockList {
                path: path(&id),
                reason,
            })
        }
    };
    // Blocks allocated but not committed are given back too.
    let committed: BTreeSet<BlockId> = blocks.iter().map(|b| b.0).collect();
    let unused: Vec<BlockId> = open
        .blocks
        .iter()
        .map(|b| b.id)
        .filter(|b| !committed.contains(b))
        .collect();
    let why = format!("commit {}", path(&id));
    let out = install(
        txn,
        index,
        &id,
        NewKey {
            size,
            blocks: key_blocks,
            checksum,
            replication: open.replication,
            now_ms,
        },
        unused,
        why,
    )?;
    if matches!(out, OmResponse::KeyCommitted(_)) {
        txn.delete(CF_OPEN_KEYS, open_key_key(&id));
    }
    Ok(out)
}

/// What a commit or a copy makes the key's current version.
pub(super) struct NewKey {
    pub size: u64,
    pub blocks: Vec<KeyBlock>,
    pub checksum: String,
    pub replication: crate::state::types::Replication,
    pub now_ms: u64,
}

/// Makes `new` the key `id`: the version it replaces is kept (versioned bucket) or its
/// blocks go to deletion with `also_freed`; refused without the bucket or past a quota.
/// Every key write that replaces a key goes through here.
pub(super) fn install(
    txn: &mut Txn<'_>,
    index: u64,
    id: &OpenKeyId,
    new: NewKey,
    also_freed: Vec<BlockId>,
    why: String,
) -> Applied {
    let Some(bucket) = get_bucket(txn, &id.volume, &id.bucket)? else {
        return refuse(bucket_not_found(txn, &id.volume, &id.bucket)?);
    };
    let Some(volume) = get_volume(txn, &id.volume)? else {
        return refuse(Refusal::VolumeNotFound {
            volume: id.volume.clone(),
        });
    };
    let now_ms = new.now_ms;
    let kk = key_key(&id.volume, &id.bucket, &id.key);
    let old = txn.get_row::<Key>(CF_KEYS, &kk)?;
    let (old_versions, freed, created_ms, version) = match &old {
        Some(o) if bucket.versioning => {
            let mut vs = o.old_versions.clone();
            vs.push(KeyVersion {
                version: o.version,
                size: o.size,
                blocks: o.blocks.clone(),
                checksum: o.checksum.clone(),
                modified_ms: o.modified_ms,
            });
            (vs, Vec::new(), o.created_ms, o.version + 1)
        }
        Some(o) => (
            Vec::new(),
            o.blocks.iter().map(|b| b.id).collect(),
            o.created_ms,
            o.version + 1,
        ),
        None => (Vec::new(), Vec::new(), now_ms, 0),
    };
    let key = Key {
        volume: id.volume.clone(),
        bucket: id.bucket.clone(),
        name: id.key.clone(),
        size: new.size,
        blocks: new.blocks,
        checksum: new.checksum,
        replication: new.replication,
        version,
        created_ms,
        modified_ms: now_ms,
        old_versions,
    };
    let delta = key.stored_bytes() as i128 - old.as_ref().map_or(0, |o| o.stored_bytes() as i128);
    if delta > 0 {
        let adding = delta as u64;
        for (what, used, quota) in [
            (
                format!("bucket {}/{}", id.volume, id.bucket),
                bucket.used_bytes,
                bucket.quota_bytes,
            ),
            (
                format!("volume {}", id.volume),
                volume.used_bytes,
                volume.quota_bytes,
            ),
        ] {
            if let Some(quota) = quota {
                if used.saturating_add(adding) > quota {
                    return refuse(Refusal::QuotaExceeded {
                        what,
                        used,
                        adding,
                        quota,
                    });
                }
            }
        }
    }
    let mut gone = freed;
    gone.extend(also_freed);
    put(txn, CF_KEYS, kk, &key)?;
    deleted::queue(txn, index, gone, why)?;
    account(txn, &id.volume, &id.bucket, delta, i64::from(old.is_none()))?;
    Ok(OmResponse::KeyCommitted(key))
}

/// Checks a commit's block list against the open key's allocation; returns the key's
/// blocks with offsets and pipelines.
pub(super) fn check_blocks(
    open: &OpenKey,
    blocks: &[(BlockId, u64)],
    size: u64,
) -> Result<Vec<KeyBlock>, String> {
    let allocated: BTreeMap<BlockId, &AllocatedBlock> =
        open.blocks.iter().map(|b| (b.id, b)).collect();
    let mut out = Vec::with_capacity(blocks.len());
    let mut offset: u64 = 0;
    let mut seen = BTreeSet::new();
    for (id, length) in blocks {
        let Some(a) = allocated.get(id) else {
            return Err(format!("block {id} was not allocated to this open key"));
        };
        if !seen.insert(*id) {
            return Err(format!("block {id} is listed twice"));
        }
        if *length > a.max_size {
            return Err(format!(
                "block {id} has length {length} above its maximum {}",
                a.max_size
            ));
        }
        out.push(KeyBlock {
            id: *id,
            length: *length,
            offset,
            pipeline: a.pipeline.clone(),
        });
        offset = offset
            .checked_add(*length)
            .ok_or_else(|| "block lengths overflow".to_string())?;
    }
    if offset != size {
        return Err(format!(
            "block lengths add up to {offset} bytes, but the size is {size}"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::{BlockId, Key, OpenKeyId};
    use crate::state::CF_VOLUMES;

    fn commit_req(id: &OpenKeyId, blocks: Vec<(BlockId, u64)>, size: u64) -> OmRequest {
        OmRequest::CommitKey {
            id: id.clone(),
            blocks,
            size,
            checksum: "crc".into(),
            now_ms: NOW + 1,
        }
    }

    /// A bucket v/b and an open key k (client 1) with blocks 1/1 and 1/2 of 10 bytes each.
    fn with_open_key(versioning: bool, quota: Option<u64>) -> (Fixture, OpenKeyId) {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket_with("v", "b", versioning, quota);
        let id = open_id("k", 1);
        f.open(&id, vec![block(1, 1, 10), block(1, 2, 10)]);
        (f, id)
    }

    fn committed(r: OmResponse) -> Key {
        match r {
            OmResponse::KeyCommitted(k) => k,
            other => panic!("not committed: {other:?}"),
        }
    }

    #[test]
    fn commit_makes_the_key_with_offsets_and_gives_back_unused_blocks() {
        let (mut f, id) = with_open_key(false, None);
        let k = committed(f.apply_at(20, commit_req(&id, vec![(bid(1, 2), 7)], 7)));
        assert_eq!((k.size, k.version, k.created_ms), (7, 0, NOW + 1));
        assert_eq!(k.checksum, "crc");
        assert_eq!(k.blocks.len(), 1);
        assert_eq!((k.blocks[0].id, k.blocks[0].offset), (bid(1, 2), 0));
        assert_eq!(read::key(&f.db, "v", "b", "k").unwrap(), Some(k));
        assert_eq!(read::open_key(&f.db, &id).unwrap(), None);
        let queued = read::deleted_blocks(&f.db, 10).unwrap();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].0, 20);
        assert_eq!(queued[0].1.blocks, [bid(1, 1)]);
        assert_eq!(queued[0].1.reason, "commit v/b/k");
        let b = read::bucket(&f.db, "v", "b").unwrap().unwrap();
        assert_eq!((b.used_bytes, b.key_count), (7, 1));
        assert_eq!(read::volume(&f.db, "v").unwrap().unwrap().used_bytes, 7);
    }

    #[test]
    fn commit_over_a_key_frees_its_blocks_or_keeps_them_as_a_version() {
        for versioning in [false, true] {
            let (mut f, id) = with_open_key(versioning, None);
            f.apply(commit_req(&id, vec![(bid(1, 1), 10), (bid(1, 2), 5)], 15));
            let id2 = open_id("k", 2);
            f.open(&id2, vec![block(2, 1, 10)]);
            let k = committed(f.apply_at(30, commit_req(&id2, vec![(bid(2, 1), 4)], 4)));
            assert_eq!((k.version, k.created_ms), (1, NOW + 1));
            let queued: Vec<_> = read::deleted_blocks(&f.db, 10)
                .unwrap()
                .into_iter()
                .filter(|(i, _)| *i == 30)
                .collect();
            let b = read::bucket(&f.db, "v", "b").unwrap().unwrap();
            if versioning {
                assert_eq!(k.old_versions.len(), 1);
                assert_eq!(k.old_versions[0].size, 15);
                assert!(queued.is_empty(), "{queued:?}");
                assert_eq!((b.used_bytes, b.key_count), (19, 1));
            } else {
                assert!(k.old_versions.is_empty());
                assert_eq!(queued[0].1.blocks, [bid(1, 1), bid(1, 2)]);
                assert_eq!((b.used_bytes, b.key_count), (4, 1));
            }
        }
    }

    #[test]
    fn commit_refuses_without_the_open_key() {
        let (mut f, _) = with_open_key(false, None);
        let refused =
            |f: &mut Fixture, id: OpenKeyId| f.refused(commit_req(&id, vec![(bid(1, 1), 1)], 1));
        assert_eq!(
            refused(&mut f, open_id("k", 2)),
            Refusal::WrongClientId {
                path: "v/b/k".into(),
                client_id: 2
            }
        );
        assert_eq!(
            refused(&mut f, open_id("other", 1)),
            Refusal::OpenKeyNotFound {
                path: "v/b/other".into(),
                client_id: 1
            }
        );
        let mut elsewhere = open_id("k", 1);
        elsewhere.bucket = "nob".into();
        assert_eq!(
            refused(&mut f, elsewhere.clone()),
            Refusal::BucketNotFound {
                volume: "v".into(),
                bucket: "nob".into()
            }
        );
        elsewhere.volume = "nov".into();
        assert_eq!(
            refused(&mut f, elsewhere),
            Refusal::VolumeNotFound {
                volume: "nov".into()
            }
        );
    }

    #[test]
    fn commit_refuses_a_block_list_the_allocation_does_not_cover() {
        let (mut f, id) = with_open_key(false, None);
        for (blocks, size, reason) in [
            (
                vec![(bid(9, 9), 1)],
                1,
                "block 9/9 was not allocated to this open key",
            ),
            (
                vec![(bid(1, 1), 1), (bid(1, 1), 1)],
                2,
                "block 1/1 is listed twice",
            ),
            (
                vec![(bid(1, 1), 11)],
                11,
                "block 1/1 has length 11 above its maximum 10",
            ),
            (
                vec![(bid(1, 1), 3)],
                4,
                "block lengths add up to 3 bytes, but the size is 4",
            ),
        ] {
            assert_eq!(
                f.refused(commit_req(&id, blocks, size)),
                Refusal::InvalidBlockList {
                    path: "v/b/k".into(),
                    reason: reason.into()
                }
            );
        }
        assert!(read::open_key(&f.db, &id).unwrap().is_some());
        assert_eq!(read::key(&f.db, "v", "b", "k").unwrap(), None);
    }

    #[test]
    fn commit_refuses_lengths_that_overflow() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let id = open_id("k", 1);
        f.open(&id, vec![block(1, 1, u64::MAX), block(1, 2, u64::MAX)]);
        assert_eq!(
            f.refused(commit_req(
                &id,
                vec![(bid(1, 1), u64::MAX), (bid(1, 2), 1)],
                0
            )),
            Refusal::InvalidBlockList {
                path: "v/b/k".into(),
                reason: "block lengths overflow".into()
            }
        );
    }

    #[test]
    fn commit_refuses_growth_past_the_bucket_or_volume_quota() {
        let (mut f, id) = with_open_key(false, Some(10));
        assert_eq!(
            f.refused(commit_req(&id, vec![(bid(1, 1), 10), (bid(1, 2), 1)], 11)),
            Refusal::QuotaExceeded {
                what: "bucket v/b".into(),
                used: 0,
                adding: 11,
                quota: 10
            }
        );
        // The volume's quota counts too (set here behind the commands' back).
        let mut v = read::volume(&f.db, "v").unwrap().unwrap();
        v.quota_bytes = Some(5);
        f.put_row(CF_VOLUMES, b"v", &v);
        assert_eq!(
            f.refused(commit_req(&id, vec![(bid(1, 1), 6)], 6)),
            Refusal::QuotaExceeded {
                what: "volume v".into(),
                used: 0,
                adding: 6,
                quota: 5
            }
        );
        // Within both: committed.
        committed(f.apply(commit_req(&id, vec![(bid(1, 1), 5)], 5)));
    }

    #[test]
    fn commit_refuses_when_the_volume_row_is_gone_under_its_bucket() {
        // Not reachable through the commands (a volume with buckets is not deleted), but
        // the check is there: the refusal names the volume.
        let (mut f, id) = with_open_key(false, None);
        f.delete_row(CF_VOLUMES, b"v");
        assert_eq!(
            f.refused(commit_req(&id, vec![(bid(1, 1), 1)], 1)),
            Refusal::VolumeNotFound { volume: "v".into() }
        );
    }
}
