//! Blocks the leader fetched ahead (its block pool), reserved in the state before an open
//! may take one, and the deferred open that takes them at commit.
//!
//! A deferred open hands a reserved block to a writer without a log entry; the writer's
//! commit makes the open key from the reservation and commits it in one entry. So every
//! block handed out is accounted for whatever happens to the writer or the leader: the
//! reservation row, then an open key, then a key, each taking the block from the one
//! before in the same entry; a reservation nobody took goes to deletion when it expires.

use rozone_raft::{Rows, Txn};

use super::deleted;
use super::shared::{bucket_not_found, get_bucket, path, put, Applied};
use crate::state::request::{OmRequest, OmResponse, Refusal};
use crate::state::types::{AllocatedBlock, BlockId, OpenKey, OpenKeyId, ReservedBlock};
use crate::state::{block_key, open_key_key, CF_OPEN_KEYS, CF_RESERVED_BLOCKS};

/// `ReserveBlocks`: records each block until `expires_ms` (a block already recorded keeps
/// its row: a retried proposal must not extend nor duplicate it).
pub(super) fn reserve(txn: &mut Txn<'_>, blocks: Vec<AllocatedBlock>, expires_ms: u64) -> Applied {
    let mut count = 0;
    for block in blocks {
        let k = block_key(&block.id);
        if txn.get(CF_RESERVED_BLOCKS, &k)?.is_none() {
            put(
                txn,
                CF_RESERVED_BLOCKS,
                k,
                &ReservedBlock { block, expires_ms },
            )?;
            count += 1;
        }
    }
    Ok(OmResponse::BlocksReserved { count })
}

/// Drops the reservations of `blocks` (an open key took them).
pub(super) fn take(txn: &mut Txn<'_>, blocks: &[AllocatedBlock]) {
    for b in blocks {
        txn.delete(CF_RESERVED_BLOCKS, block_key(&b.id));
    }
}

/// `ExpireReserved`: the listed reservations still expired at `now_ms` go, their blocks to
/// deletion (a block taken since is not there any more and is skipped).
pub(super) fn expire(txn: &mut Txn<'_>, index: u64, ids: Vec<BlockId>, now_ms: u64) -> Applied {
    let mut gone = Vec::new();
    for id in ids {
        let k = block_key(&id);
        if let Some(r) = txn.get_row::<ReservedBlock>(CF_RESERVED_BLOCKS, &k)? {
            if r.expires_ms <= now_ms {
                txn.delete(CF_RESERVED_BLOCKS, k);
                gone.push(id);
            }
        }
    }
    let count = gone.len() as u64;
    deleted::queue(
        txn,
        index,
        gone,
        format!("{count} expired reserved block(s)"),
    )?;
    Ok(OmResponse::ReservationsExpired { count })
}

/// The id a deferred commit's inner request commits, if it is a commit.
fn commit_id(req: &OmRequest) -> Option<&OpenKeyId> {
    match req {
        OmRequest::CommitKey { id, .. } | OmRequest::S3CommitKey { id, .. } => Some(id),
        _ => None,
    }
}

/// The first half of `DeferredCommit`: makes the open key `id` from the reserved `blocks`,
/// taking their reservations. `Ok(Err(_))` is the refusal of the whole command.
pub(super) fn open(
    txn: &mut Txn<'_>,
    id: &OpenKeyId,
    blocks: &[BlockId],
    now_ms: u64,
    expires_ms: u64,
    commit: &OmRequest,
) -> std::io::Result<Result<(), Refusal>> {
    if commit_id(commit) != Some(id) {
        return Ok(Err(Refusal::InvalidBlockList {
            path: path(id),
            reason: "a deferred open is committed only by a commit of the same key".into(),
        }));
    }
    let Some(bucket) = get_bucket(txn, &id.volume, &id.bucket)? else {
        return Ok(Err(bucket_not_found(txn, &id.volume, &id.bucket)?));
    };
    let ok = open_key_key(id);
    // A retry of a commit the state machine refused after the open key was made (a quota,
    // a condition): the open key is there, as after any open.
    if txn.get_row::<OpenKey>(CF_OPEN_KEYS, &ok)?.is_some() {
        return Ok(Ok(()));
    }
    let mut taken = Vec::with_capacity(blocks.len());
    for b in blocks {
        match txn.get_row::<ReservedBlock>(CF_RESERVED_BLOCKS, &block_key(b))? {
            Some(r) if !taken.iter().any(|t: &AllocatedBlock| t.id == *b) => taken.push(r.block),
            // The deferred open is gone as an open key would be: committed (its blocks
            // taken), expired (given back), or never made (blocks it did not hand out).
            _ => {
                return Ok(Err(Refusal::OpenKeyNotFound {
                    path: path(id),
                    client_id: id.client_id,
                }))
            }
        }
    }
    take(txn, &taken);
    let open = OpenKey::new(id, bucket.replication, taken, now_ms, expires_ms);
    put(txn, CF_OPEN_KEYS, ok, &open)?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::state::read;
    use crate::state::types::Key;

    fn reserve_req(blocks: Vec<AllocatedBlock>, expires_ms: u64) -> OmRequest {
        OmRequest::ReserveBlocks { blocks, expires_ms }
    }

    fn deferred(id: &OpenKeyId, blocks: &[BlockId], written: Vec<(BlockId, u64)>) -> OmRequest {
        let size = written.iter().map(|b| b.1).sum();
        OmRequest::DeferredCommit {
            id: id.clone(),
            blocks: blocks.to_vec(),
            now_ms: NOW,
            expires_ms: NOW + 100,
            commit: Box::new(OmRequest::CommitKey {
                id: id.clone(),
                blocks: written,
                size,
                checksum: "c".into(),
                now_ms: NOW,
            }),
        }
    }

    /// Every reserved block (all expire by the end of time).
    fn reserved(f: &Fixture) -> Vec<BlockId> {
        read::expired_reservations(&f.db, u64::MAX, 100).unwrap()
    }

    #[test]
    fn a_deferred_commit_takes_its_reserved_blocks_and_frees_the_unwritten_ones() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let (b1, b2, b3) = (block(1, 1, 10), block(1, 2, 10), block(1, 3, 10));
        assert_eq!(
            f.apply(reserve_req(
                vec![b1.clone(), b2.clone(), b3.clone()],
                NOW + 50
            )),
            OmResponse::BlocksReserved { count: 3 }
        );
        let id = open_id("k", 9);
        // The open handed out b1 and b2; the writer wrote only b1.
        let out = f.apply(deferred(&id, &[b1.id, b2.id], vec![(b1.id, 4)]));
        let OmResponse::KeyCommitted(Key { size, blocks, .. }) = out else {
            panic!("{out:?}")
        };
        assert_eq!((size, blocks.len()), (4, 1));
        assert_eq!(reserved(&f), vec![b3.id], "b1 and b2 were taken");
        assert!(read::open_key(&f.db, &id).unwrap().is_none());
        let freed: Vec<BlockId> = read::deleted_blocks(&f.db, 10)
            .unwrap()
            .into_iter()
            .flat_map(|(_, r)| r.blocks)
            .collect();
        assert_eq!(freed, vec![b2.id], "the unwritten block goes to deletion");
        // The same blocks cannot be committed twice, nor blocks never reserved.
        let again = f.apply(deferred(&open_id("k2", 1), &[b1.id], vec![(b1.id, 4)]));
        assert!(
            matches!(&again, OmResponse::Refused(Refusal::OpenKeyNotFound { .. })),
            "{again:?}"
        );
        let never = f.apply(deferred(&open_id("k3", 1), &[bid(7, 7)], vec![]));
        assert!(matches!(
            never,
            OmResponse::Refused(Refusal::OpenKeyNotFound { .. })
        ));
        assert!(read::key(&f.db, "v", "b", "k2").unwrap().is_none());
    }

    #[test]
    fn an_open_key_takes_a_reservation_so_it_never_expires_under_it() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let b1 = block(1, 1, 10);
        f.apply(reserve_req(vec![b1.clone()], NOW + 50));
        let out = f.apply(OmRequest::OpenKey {
            id: open_id("k", 1),
            replication: None,
            blocks: vec![b1.clone()],
            now_ms: NOW,
            expires_ms: NOW + 100,
        });
        assert!(matches!(out, OmResponse::KeyOpened(_)), "{out:?}");
        assert!(reserved(&f).is_empty());
        assert_eq!(
            f.apply(OmRequest::ExpireReserved {
                ids: vec![b1.id],
                now_ms: NOW + 60
            }),
            OmResponse::ReservationsExpired { count: 0 }
        );
        assert!(read::deleted_blocks(&f.db, 10).unwrap().is_empty());
    }

    #[test]
    fn expired_reservations_go_to_deletion_and_live_ones_stay() {
        let mut f = Fixture::new();
        let (b1, b2) = (block(1, 1, 10), block(1, 2, 10));
        f.apply(reserve_req(vec![b1.clone()], NOW + 10));
        f.apply(reserve_req(vec![b2.clone()], NOW + 90));
        // A repeated reservation neither duplicates nor extends a row.
        assert_eq!(
            f.apply(reserve_req(vec![b1.clone()], NOW + 500)),
            OmResponse::BlocksReserved { count: 0 }
        );
        assert_eq!(
            f.apply(OmRequest::ExpireReserved {
                ids: vec![b1.id, b2.id],
                now_ms: NOW + 50
            }),
            OmResponse::ReservationsExpired { count: 1 }
        );
        assert_eq!(reserved(&f), vec![b2.id]);
        let freed: Vec<BlockId> = read::deleted_blocks(&f.db, 10)
            .unwrap()
            .into_iter()
            .flat_map(|(_, r)| r.blocks)
            .collect();
        assert_eq!(freed, vec![b1.id]);
    }

    #[test]
    fn a_refused_deferred_commit_leaves_an_open_key_that_a_retry_uses() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let b1 = block(1, 1, 10);
        f.apply(reserve_req(vec![b1.clone()], NOW + 50));
        let id = open_id("k", 3);
        // A block list the allocation does not cover: the commit refuses, the open stays.
        let bad = f.apply(deferred(&id, &[b1.id], vec![(bid(5, 5), 4)]));
        assert!(
            matches!(bad, OmResponse::Refused(Refusal::InvalidBlockList { .. })),
            "{bad:?}"
        );
        assert!(read::open_key(&f.db, &id).unwrap().is_some());
        assert!(reserved(&f).is_empty());
        let ok = f.apply(deferred(&id, &[b1.id], vec![(b1.id, 4)]));
        assert!(matches!(ok, OmResponse::KeyCommitted(_)), "{ok:?}");
        // Another command wrapped as a deferred commit is refused whole.
        let mut odd = deferred(&open_id("k4", 1), &[], vec![]);
        if let OmRequest::DeferredCommit { commit, .. } = &mut odd {
            **commit = OmRequest::DeleteKey {
                volume: "v".into(),
                bucket: "b".into(),
                key: "k".into(),
            };
        }
        assert!(matches!(
            f.apply(odd),
            OmResponse::Refused(Refusal::InvalidBlockList { .. })
        ));
        assert!(read::key(&f.db, "v", "b", "k").unwrap().is_some());
    }
}
