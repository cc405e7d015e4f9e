//! `CopyKey`: a server-side copy that shares the source's blocks instead of copying bytes
//! (S3 CopyObject). The destination is installed as a commit installs a key (the version
//! it replaces kept or freed, quotas checked), with the source's block list and the given
//! S3 metadata; each block gains one reference in `block_refs` before anything is freed,
//! so copying onto a key that already shares those blocks nets to nothing. Freeing goes
//! through `deleted::queue`, which spends references before it deletes.

use rozone_raft::Txn;

use super::commit::{install, NewKey};
use super::deleted;
use super::key::find_key;
use super::shared::{put, refuse, Applied};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{BlockId, KeyCopy, OpenKeyId};
use crate::state::{key_key, key_path, CF_S3_META};

/// `CopyKey`: refused without the source, when its blocks are no longer the ones the
/// caller saw, or (by `install`, references taken back) without the destination bucket or
/// past a quota.
pub(super) fn copy(txn: &mut Txn<'_>, index: u64, c: KeyCopy) -> Applied {
    let src_path = key_path(&c.volume, &c.src_bucket, &c.src_key);
    let src = match find_key(txn, &c.volume, &c.src_bucket, &c.src_key)? {
        Ok(k) => k,
        Err(r) => return refuse(r),
    };
    let blocks: Vec<BlockId> = src.blocks.iter().map(|b| b.id).collect();
    if blocks != c.src_blocks {
        return refuse(Refusal::PreconditionFailed {
            path: src_path,
            reason: "the source key changed since it was looked up".into(),
        });
    }
    let dst = OpenKeyId {
        volume: c.volume.clone(),
        bucket: c.dst_bucket.clone(),
        key: c.dst_key.clone(),
        client_id: 0,
    };
    // References first: the key this copy replaces may hold the same blocks.
    deleted::share(txn, &blocks)?;
    let new = NewKey {
        size: src.size,
        blocks: src.blocks,
        checksum: src.checksum,
        replication: src.replication,
        now_ms: c.now_ms,
    };
    let why = format!(
        "copy {src_path} to {}",
        key_path(&dst.volume, &dst.bucket, &dst.key)
    );
    let out = install(txn, index, &dst, new, Vec::new(), why)?;
    if matches!(out, OmResponse::KeyCommitted(_)) {
        put(
            txn,
            CF_S3_META,
            key_key(&dst.volume, &dst.bucket, &dst.key),
            &c.meta,
        )?;
    } else {
        // A refusal is an applied answer whose writes stand: take back the references.
        for b in &blocks {
            deleted::unshare(txn, b)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::{BlockId, KeyCopy, S3Meta};

    fn meta(etag: &str) -> S3Meta {
        S3Meta {
            etag: etag.into(),
            content_type: "text/plain".into(),
            metadata: vec![],
        }
    }

    fn copy(from: &str, to: &str, blocks: Vec<BlockId>) -> OmRequest {
        OmRequest::CopyKey(KeyCopy {
            volume: "v".into(),
            src_bucket: "b".into(),
            src_key: from.into(),
            dst_bucket: "b".into(),
            dst_key: to.into(),
            src_blocks: blocks,
            meta: meta("e"),
            now_ms: NOW + 5,
        })
    }

    fn delete(key: &str) -> OmRequest {
        OmRequest::DeleteKey {
            volume: "v".into(),
            bucket: "b".into(),
            key: key.into(),
        }
    }

    /// Every block queued for deletion so far.
    fn queued(f: &Fixture) -> Vec<BlockId> {
        read::deleted_blocks(&f.db, 100)
            .unwrap()
            .into_iter()
            .flat_map(|(_, d)| d.blocks)
            .collect()
    }

    /// Key `a` of blocks 1/1 and 1/2.
    fn with_key_a() -> Fixture {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let id = open_id("a", 1);
        f.open(&id, vec![block(1, 1, 10), block(1, 2, 10)]);
        f.commit(&id, vec![(bid(1, 1), 10), (bid(1, 2), 5)], 15);
        f
    }

    #[test]
    fn a_shared_block_is_deleted_only_with_its_last_key() {
        let mut f = with_key_a();
        let blocks = vec![bid(1, 1), bid(1, 2)];
        let r = f.apply(copy("a", "c", blocks.clone()));
        let OmResponse::KeyCommitted(k) = r else {
            panic!("{r:?}")
        };
        assert_eq!(k.blocks.iter().map(|b| b.id).collect::<Vec<_>>(), blocks);
        assert_eq!(k.size, 15);
        assert_eq!(
            read::s3_meta(&f.db, "v", "b", "c").unwrap(),
            Some(meta("e"))
        );
        // A second copy of the copy: three keys share the blocks.
        f.apply(copy("c", "d", blocks.clone()));
        f.apply_at(50, delete("a"));
        f.apply_at(51, delete("d"));
        assert_eq!(queued(&f), vec![], "blocks still used by c were queued");
        f.apply_at(52, delete("c"));
        assert_eq!(queued(&f), blocks);
    }

    #[test]
    fn copying_onto_a_key_that_shares_the_blocks_frees_nothing() {
        let mut f = with_key_a();
        let blocks = vec![bid(1, 1), bid(1, 2)];
        f.apply(copy("a", "c", blocks.clone()));
        // Again onto c (it holds the same blocks), and a onto itself.
        f.apply(copy("a", "c", blocks.clone()));
        f.apply(copy("a", "a", blocks.clone()));
        assert_eq!(queued(&f), vec![]);
        f.apply_at(60, delete("a"));
        assert_eq!(queued(&f), vec![]);
        f.apply_at(61, delete("c"));
        assert_eq!(queued(&f), blocks);
    }

    #[test]
    fn overwriting_a_copy_frees_only_its_own_unshared_blocks() {
        let mut f = with_key_a();
        let blocks = vec![bid(1, 1), bid(1, 2)];
        f.apply(copy("a", "c", blocks.clone()));
        // A new write of a frees its old blocks from a, not from c.
        let id = open_id("a", 2);
        f.open(&id, vec![block(2, 1, 10)]);
        f.commit(&id, vec![(bid(2, 1), 3)], 3);
        assert_eq!(queued(&f), vec![]);
        f.apply_at(70, delete("c"));
        assert_eq!(queued(&f), blocks);
    }

    #[test]
    fn a_changed_or_missing_source_or_bucket_is_refused_and_takes_no_reference() {
        let mut f = with_key_a();
        let r = f.refused(copy("a", "c", vec![bid(1, 1)]));
        assert!(matches!(r, Refusal::PreconditionFailed { .. }), "{r:?}");
        let r = f.refused(copy("zz", "c", vec![]));
        assert!(matches!(r, Refusal::KeyNotFound { .. }), "{r:?}");
        let mut to_nowhere = copy("a", "c", vec![bid(1, 1), bid(1, 2)]);
        if let OmRequest::CopyKey(c) = &mut to_nowhere {
            c.dst_bucket = "nope".into();
        }
        let r = f.refused(to_nowhere);
        assert!(matches!(r, Refusal::BucketNotFound { .. }), "{r:?}");
        // No reference was left behind: deleting a frees its blocks at once.
        f.apply_at(80, delete("a"));
        assert_eq!(queued(&f), vec![bid(1, 1), bid(1, 2)]);
    }

    #[test]
    fn a_copy_past_the_bucket_quota_is_refused_and_takes_no_reference() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket_with("v", "b", false, Some(20));
        let id = open_id("a", 1);
        f.open(&id, vec![block(1, 1, 20)]);
        f.commit(&id, vec![(bid(1, 1), 15)], 15);
        let r = f.refused(copy("a", "c", vec![bid(1, 1)]));
        assert!(matches!(r, Refusal::QuotaExceeded { .. }), "{r:?}");
        f.apply_at(90, delete("a"));
        assert_eq!(queued(&f), vec![bid(1, 1)]);
    }
}
