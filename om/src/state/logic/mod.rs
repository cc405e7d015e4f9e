//! [`OmLogic`]: how each OM applies a committed [`OmRequest`] to its state, one function
//! per command, grouped by what they change: [`volume`], [`bucket`], [`open_key`] (open,
//! add blocks, expire), [`reserved`] (the leader's fetched-ahead blocks, deferred opens), [`commit`], [`key`] (delete, rename) and [`deleted`] (the queue
//! of blocks to delete); [`as_user`] applies a command on behalf of a user after checking
//! it may; [`shared`] has the reads and refusals several of them use.
//!
//! Every decision reads only rows of this state (through the batch's `Txn`, so an entry
//! sees earlier entries of its batch) and fields of the request, so every member reaches
//! the same answer. An `Err` is reserved for local storage failures (including stored
//! bytes that do not decode): it stops this Raft node rather than letting it diverge.

mod as_user;
mod bucket;
mod commit;
mod copy;
mod deleted;
mod key;
mod multipart;
mod open_key;
mod reserved;
mod s3;
mod shared;
#[cfg(test)]
pub(crate) mod testkit;
mod volume;

use rozone_raft::{LogId, StateMachineLogic, Txn};

use shared::Applied;

use super::request::{OmRequest, OmResponse};
use super::COLUMN_FAMILIES;

/// The OM state machine. Stateless in memory: everything lives in the database. The
/// node id only picks this node for the test failpoint `om-apply-hold`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OmLogic {
    pub node_id: u64,
}

impl OmLogic {
    pub fn new(node_id: u64) -> Self {
        Self { node_id }
    }
}

/// Test hook (failpoint `om-apply-hold`, configured as `return(<node id>)`): that node's
/// state machine stops applying (its log keeps growing) until the failpoint is removed.
/// The Raft layer's `raft-apply` would hold every member of the process at once.
fn apply_hold_failpoint(node_id: u64) {
    let held = || {
        fail::eval("om-apply-hold", |arg| {
            arg.and_then(|a| a.trim().parse::<u64>().ok()) == Some(node_id)
        })
        .unwrap_or(false)
    };
    while held() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

impl StateMachineLogic for OmLogic {
    type Request = OmRequest;
    type Response = OmResponse;

    fn column_families(&self) -> Vec<&'static str> {
        COLUMN_FAMILIES.to_vec()
    }

    fn apply(&mut self, txn: &mut Txn<'_>, log_id: &LogId, req: OmRequest) -> Applied {
        if cfg!(debug_assertions) || cfg!(test) {
            apply_hold_failpoint(self.node_id);
        }
        // Blocks an entry frees are queued under its index.
        let index = log_id.index();
        match req {
            OmRequest::CreateVolume {
                name,
                owner,
                quota_bytes,
                now_ms,
            } => volume::create(txn, name, owner, quota_bytes, now_ms),
            OmRequest::DeleteVolume { name } => volume::delete(txn, name),
            OmRequest::CreateBucket {
                volume,
                name,
                replication,
                versioning,
                quota_bytes,
                now_ms,
            } => bucket::create(
                txn,
                volume,
                name,
                replication,
                versioning,
                quota_bytes,
                now_ms,
            ),
            OmRequest::DeleteBucket { volume, name } => bucket::delete(txn, volume, name),
            OmRequest::OpenKey {
                id,
                replication,
                blocks,
                now_ms,
                expires_ms,
            } => open_key::open(txn, id, replication, blocks, now_ms, expires_ms),
            OmRequest::AddBlocks {
                id,
                blocks,
                expires_ms,
                max_blocks,
            } => open_key::add_blocks(txn, id, blocks, expires_ms, max_blocks),
            OmRequest::CommitKey {
                id,
                blocks,
                size,
                checksum,
                now_ms,
            } => {
                let (v, b, k) = (id.volume.clone(), id.bucket.clone(), id.key.clone());
                let out = commit::commit(txn, index, id, blocks, size, checksum, now_ms)?;
                s3::follow_key(txn, &out, &v, &b, &k, None)?;
                Ok(out)
            }
            OmRequest::DeleteKey {
                volume,
                bucket,
                key,
            } => {
                let (v, b, k) = (volume.clone(), bucket.clone(), key.clone());
                let out = key::delete(txn, index, volume, bucket, key)?;
                s3::follow_key(txn, &out, &v, &b, &k, None)?;
                Ok(out)
            }
            OmRequest::RenameKey {
                volume,
                bucket,
                from,
                to,
                now_ms,
            } => {
                let (v, b, f, t) = (volume.clone(), bucket.clone(), from.clone(), to.clone());
                let out = key::rename(txn, volume, bucket, from, to, now_ms)?;
                s3::follow_key(txn, &out, &v, &b, &f, Some(&t))?;
                Ok(out)
            }
            OmRequest::ExpireOpenKeys { ids, now_ms } => open_key::expire(txn, index, ids, now_ms),
            OmRequest::PurgeDeletedBlocks { ids } => deleted::purge(txn, ids),
            OmRequest::S3CommitKey {
                id,
                blocks,
                size,
                checksum,
                now_ms,
                meta,
                condition,
            } => s3::commit_key(
                txn, index, id, blocks, size, checksum, now_ms, meta, condition,
            ),
            OmRequest::S3SetSecret {
                access_id,
                user,
                secret,
                now_ms,
            } => s3::set_secret(txn, access_id, user, secret, now_ms),
            OmRequest::S3RevokeSecret { access_id } => s3::revoke_secret(txn, access_id),
            OmRequest::S3CreateUpload { upload } => multipart::create(txn, upload),
            OmRequest::S3CommitPart {
                upload,
                part_number,
                id,
                blocks,
                size,
                etag,
                now_ms,
            } => multipart::commit_part(
                txn,
                index,
                upload,
                part_number,
                id,
                blocks,
                size,
                etag,
                now_ms,
            ),
            OmRequest::S3CompleteUpload {
                upload,
                parts,
                etag,
                min_part_size,
                now_ms,
                condition,
            } => multipart::complete(
                txn,
                index,
                upload,
                parts,
                etag,
                min_part_size,
                now_ms,
                condition,
            ),
            OmRequest::S3AbortUpload { upload } => multipart::abort(txn, index, upload),
            OmRequest::AsUser { user, request } => {
                as_user::apply(txn, user, *request, |txn, req| self.apply(txn, log_id, req))
            }
            OmRequest::CopyKey(c) => copy::copy(txn, index, c),
            OmRequest::ReserveBlocks { blocks, expires_ms } => {
                reserved::reserve(txn, blocks, expires_ms)
            }
            OmRequest::ExpireReserved { ids, now_ms } => reserved::expire(txn, index, ids, now_ms),
            OmRequest::DeferredCommit {
                id,
                blocks,
                now_ms,
                expires_ms,
                commit,
            } => match reserved::open(txn, &id, &blocks, now_ms, expires_ms, &commit)? {
                Ok(()) => self.apply(txn, log_id, *commit),
                Err(r) => shared::refuse(r),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::testkit::*;
    use super::*;
    use crate::state::request::Refusal;
    use crate::state::{bucket_key, CF_BUCKETS, CF_VOLUMES};

    #[test]
    fn entries_of_one_batch_see_each_other() {
        let f = Fixture::new();
        let mut logic = OmLogic::new(1);
        let mut txn = Txn::new(&f.db);
        let create = || OmRequest::CreateVolume {
            name: "v".into(),
            owner: "o".into(),
            quota_bytes: None,
            now_ms: NOW,
        };
        let id = rozone_raft::types::log_id(1, 1, 1);
        let first = logic.apply(&mut txn, &id, create()).unwrap();
        assert!(matches!(first, OmResponse::VolumeCreated(_)), "{first:?}");
        assert_eq!(
            logic.apply(&mut txn, &id, create()).unwrap(),
            OmResponse::Refused(Refusal::VolumeExists { volume: "v".into() })
        );
    }

    #[test]
    fn corrupt_stored_rows_are_errors_naming_the_row_not_panics() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        f.put_bytes(CF_BUCKETS, &bucket_key("v", "b"), &[0xff]);
        f.put_bytes(CF_VOLUMES, b"w", &[]);
        fn bad<T: std::fmt::Debug>(r: io::Result<T>) -> String {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
            e.to_string()
        }
        let msg = bad(f.try_apply(OmRequest::DeleteBucket {
            volume: "v".into(),
            name: "b".into(),
        }));
        assert!(msg.contains("v/b") && msg.contains(CF_BUCKETS), "{msg}");
        let msg = bad(f.try_apply(OmRequest::DeleteVolume { name: "w".into() }));
        assert!(msg.contains("\"w\"") && msg.contains(CF_VOLUMES), "{msg}");
        // Reads of the live database name the row the same way.
        let msg = bad(crate::state::read::bucket(&f.db, "v", "b"));
        assert!(msg.starts_with("corrupt row \"v/b\" in buckets:"), "{msg}");
        assert!(crate::state::read::list_volumes(&f.db, "", "", 10).is_err());
    }
}
