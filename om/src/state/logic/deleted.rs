//! Blocks no key refers to any more: queued under the log index of the entry that freed
//! them (one row per entry at most), purged once the SCM has taken them over.
//!
//! A block may be shared by several keys (a server-side copy, [`super::copy`]): the
//! `block_refs` column family counts the references beyond the first. Every path that
//! frees a key's blocks goes through [`queue`], which spends one extra reference instead of
//! deleting a shared block, so a block is deleted only when its last key goes.

use std::io;

use rozone_raft::{Rows, Txn};

use super::shared::{put, Applied};
use crate::state::request::OmResponse;
use crate::state::types::{BlockId, DeletedBlocks};
use crate::state::{CF_BLOCK_REFS, CF_DELETED_BLOCKS};

use crate::state::block_key as refs_key;

/// References to `b` beyond the first (0: only one key uses it).
pub(super) fn extra_refs(txn: &Txn<'_>, b: &BlockId) -> std::io::Result<u64> {
    Ok(txn
        .get_row::<u64>(CF_BLOCK_REFS, &refs_key(b))?
        .unwrap_or(0))
}

/// Records one more key using each of `blocks` (a copy); saturates rather than wraps.
pub(super) fn share(txn: &mut Txn<'_>, blocks: &[BlockId]) -> io::Result<()> {
    for b in blocks {
        let n = extra_refs(txn, b)?.saturating_add(1);
        put(txn, CF_BLOCK_REFS, refs_key(b), &n)?;
    }
    Ok(())
}

/// Spends one extra reference of `b`; false when it had none (its last key lets it go).
pub(super) fn unshare(txn: &mut Txn<'_>, b: &BlockId) -> io::Result<bool> {
    match extra_refs(txn, b)? {
        0 => Ok(false),
        1 => {
            txn.delete(CF_BLOCK_REFS, refs_key(b));
            Ok(true)
        }
        n => put(txn, CF_BLOCK_REFS, refs_key(b), &(n - 1)).map(|()| true),
    }
}

/// Queues blocks for deletion under this entry's log index (shared blocks lose a
/// reference instead).
pub(super) fn queue(
    txn: &mut Txn<'_>,
    index: u64,
    blocks: Vec<BlockId>,
    reason: String,
) -> io::Result<()> {
    // A shared block loses one reference instead of being deleted.
    let mut unshared = Vec::with_capacity(blocks.len());
    for b in blocks {
        if !unshare(txn, &b)? {
            unshared.push(b);
        }
    }
    let blocks = unshared;
    if blocks.is_empty() {
        return Ok(());
    }
    let k = index.to_be_bytes();
    let mut row = txn
        .get_row::<DeletedBlocks>(CF_DELETED_BLOCKS, &k)?
        .unwrap_or(DeletedBlocks {
            blocks: Vec::new(),
            reason: String::new(),
        });
    row.blocks.extend(blocks);
    if row.reason.is_empty() {
        row.reason = reason;
    }
    put(txn, CF_DELETED_BLOCKS, k.to_vec(), &row)
}

/// `PurgeDeletedBlocks`: drops the rows that are there; ids already gone are skipped.
pub(super) fn purge(txn: &mut Txn<'_>, ids: Vec<u64>) -> Applied {
    let mut count = 0;
    for id in ids {
        let k = id.to_be_bytes();
        if txn.get(CF_DELETED_BLOCKS, &k)?.is_some() {
            txn.delete(CF_DELETED_BLOCKS, k.to_vec());
            count += 1;
        }
    }
    Ok(OmResponse::DeletedBlocksPurged { count })
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::state::read;

    #[test]
    fn blocks_freed_by_one_entry_share_one_row_under_its_index() {
        let f = Fixture::new();
        let mut txn = Txn::new(&f.db);
        queue(&mut txn, 7, vec![], "nothing".into()).unwrap();
        queue(&mut txn, 7, vec![bid(1, 1)], "first".into()).unwrap();
        queue(&mut txn, 7, vec![bid(1, 2)], "second".into()).unwrap();
        queue(&mut txn, 9, vec![bid(2, 1)], "other".into()).unwrap();
        f.db.write(txn.into_batch().unwrap()).unwrap();
        let rows = read::deleted_blocks(&f.db, 10).unwrap();
        assert_eq!(
            rows,
            vec![
                (
                    7,
                    DeletedBlocks {
                        blocks: vec![bid(1, 1), bid(1, 2)],
                        reason: "first".into()
                    }
                ),
                (
                    9,
                    DeletedBlocks {
                        blocks: vec![bid(2, 1)],
                        reason: "other".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn purge_drops_the_rows_that_are_there_and_counts_them() {
        let mut f = Fixture::new();
        let mut txn = Txn::new(&f.db);
        queue(&mut txn, 3, vec![bid(1, 1)], "x".into()).unwrap();
        queue(&mut txn, 5, vec![bid(1, 2)], "y".into()).unwrap();
        f.db.write(txn.into_batch().unwrap()).unwrap();
        // 4 was never there and the second 3 is gone by then: neither counts.
        assert_eq!(
            f.apply(crate::state::OmRequest::PurgeDeletedBlocks { ids: vec![3, 4, 3] }),
            OmResponse::DeletedBlocksPurged { count: 1 }
        );
        let left: Vec<u64> = read::deleted_blocks(&f.db, 10)
            .unwrap()
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(left, [5]);
    }
}
