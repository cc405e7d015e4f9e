//! Keys being written: opened with the blocks the leader got from the SCM, given more
//! blocks while the writer needs them, and expired (their blocks to deletion) when the
//! writer never commits.

use rozone_raft::{Rows, Txn};

use super::shared::{bucket_not_found, find_open_key, get_bucket, path, put, refuse, Applied};
use super::{deleted, reserved};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{AllocatedBlock, OpenKey, OpenKeyId, Replication};
use crate::state::{open_key_key, CF_OPEN_KEYS};

/// `OpenKey`: refused without the bucket, or when this client id already holds the name.
pub(super) fn open(
    txn: &mut Txn<'_>,
    id: OpenKeyId,
    replication: Option<Replication>,
    blocks: Vec<AllocatedBlock>,
    now_ms: u64,
    expires_ms: u64,
) -> Applied {
    let Some(b) = get_bucket(txn, &id.volume, &id.bucket)? else {
        return refuse(bucket_not_found(txn, &id.volume, &id.bucket)?);
    };
    let ok = open_key_key(&id);
    if txn.get_row::<OpenKey>(CF_OPEN_KEYS, &ok)?.is_some() {
        return refuse(Refusal::OpenKeyExists {
            path: path(&id),
            client_id: id.client_id,
        });
    }
    // A block from the leader's pool was reserved until an open took it: this open does.
    reserved::take(txn, &blocks);
    let open = OpenKey {
        volume: id.volume,
        bucket: id.bucket,
        name: id.key,
        client_id: id.client_id,
        replication: replication.unwrap_or(b.replication),
        blocks,
        created_ms: now_ms,
        expires_ms,
    };
    put(txn, CF_OPEN_KEYS, ok, &open)?;
    Ok(OmResponse::KeyOpened(open))
}

/// `AddBlocks`: refused without the open key or past `max_blocks`; the expiry only grows.
pub(super) fn add_blocks(
    txn: &mut Txn<'_>,
    id: OpenKeyId,
    blocks: Vec<AllocatedBlock>,
    expires_ms: u64,
    max_blocks: u32,
) -> Applied {
    let mut open = match find_open_key(txn, &id)? {
        Ok(o) => o,
        Err(r) => return refuse(r),
    };
    let count = (open.blocks.len() + blocks.len()) as u64;
    if count > u64::from(max_blocks) {
        return refuse(Refusal::TooManyBlocks {
            path: path(&id),
            count,
            max: u64::from(max_blocks),
        });
    }
    open.blocks.extend(blocks);
    open.expires_ms = open.expires_ms.max(expires_ms);
    let expires_ms = open.expires_ms;
    put(txn, CF_OPEN_KEYS, open_key_key(&id), &open)?;
    Ok(OmResponse::BlocksAdded { expires_ms })
}

/// `ExpireOpenKeys`: removes the listed open keys still expired at `now_ms` (one may have
/// been extended or committed since the leader listed it).
pub(super) fn expire(txn: &mut Txn<'_>, index: u64, ids: Vec<OpenKeyId>, now_ms: u64) -> Applied {
    let mut gone = Vec::new();
    let mut count = 0;
    for id in &ids {
        let ok = open_key_key(id);
        if let Some(o) = txn.get_row::<OpenKey>(CF_OPEN_KEYS, &ok)? {
            if o.expires_ms <= now_ms {
                txn.delete(CF_OPEN_KEYS, ok);
                gone.extend(o.blocks.iter().map(|b| b.id));
                count += 1;
            }
        }
    }
    deleted::queue(txn, index, gone, format!("{count} expired open key(s)"))?;
    Ok(OmResponse::OpenKeysExpired { count })
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::{OpenKey, Replication};

    fn open_req(
        id: &crate::state::types::OpenKeyId,
        replication: Option<Replication>,
    ) -> OmRequest {
        OmRequest::OpenKey {
            id: id.clone(),
            replication,
            blocks: vec![block(1, 1, 10)],
            now_ms: NOW,
            expires_ms: NOW + 100,
        }
    }

    fn add(id: &crate::state::types::OpenKeyId, local: u64, expires_ms: u64) -> OmRequest {
        OmRequest::AddBlocks {
            id: id.clone(),
            blocks: vec![block(1, local, 10)],
            expires_ms,
            max_blocks: 3,
        }
    }

    #[test]
    fn open_key_takes_the_bucket_replication_unless_told() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let id = open_id("k", 1);
        let want = OpenKey {
            volume: "v".into(),
            bucket: "b".into(),
            name: "k".into(),
            client_id: 1,
            replication: Replication::RatisThree,
            blocks: vec![block(1, 1, 10)],
            created_ms: NOW,
            expires_ms: NOW + 100,
        };
        assert_eq!(
            f.apply(open_req(&id, None)),
            OmResponse::KeyOpened(want.clone())
        );
        assert_eq!(read::open_key(&f.db, &id).unwrap(), Some(want));
        // Another client writing the same name gets its own open key.
        let other = open_id("k", 2);
        let r = f.apply(open_req(&other, Some(Replication::RatisOne)));
        assert!(
            matches!(&r, OmResponse::KeyOpened(o) if o.replication == Replication::RatisOne),
            "{r:?}"
        );
    }

    #[test]
    fn open_key_refuses_a_missing_volume_or_bucket_and_a_client_id_in_use() {
        let mut f = Fixture::new();
        let id = open_id("k", 1);
        assert_eq!(
            f.refused(open_req(&id, None)),
            Refusal::VolumeNotFound { volume: "v".into() }
        );
        f.volume("v");
        assert_eq!(
            f.refused(open_req(&id, None)),
            Refusal::BucketNotFound {
                volume: "v".into(),
                bucket: "b".into()
            }
        );
        f.bucket("v", "b");
        f.apply(open_req(&id, None));
        assert_eq!(
            f.refused(open_req(&id, Some(Replication::RatisOne))),
            Refusal::OpenKeyExists {
                path: "v/b/k".into(),
                client_id: 1
            }
        );
        let o = read::open_key(&f.db, &id).unwrap().unwrap();
        assert_eq!(o.replication, Replication::RatisThree);
    }

    #[test]
    fn add_blocks_appends_and_never_shortens_the_expiry() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let id = open_id("k", 1);
        f.apply(open_req(&id, None));
        assert_eq!(
            f.apply(add(&id, 2, NOW + 500)),
            OmResponse::BlocksAdded {
                expires_ms: NOW + 500
            }
        );
        assert_eq!(
            f.apply(add(&id, 3, NOW + 10)),
            OmResponse::BlocksAdded {
                expires_ms: NOW + 500
            }
        );
        let o = read::open_key(&f.db, &id).unwrap().unwrap();
        let ids: Vec<_> = o.blocks.iter().map(|b| b.id).collect();
        assert_eq!(ids, [bid(1, 1), bid(1, 2), bid(1, 3)]);
        assert_eq!(o.expires_ms, NOW + 500);
    }

    #[test]
    fn add_blocks_refuses_past_the_maximum() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let id = open_id("k", 1);
        f.apply(open_req(&id, None));
        f.apply(add(&id, 2, NOW));
        f.apply(add(&id, 3, NOW));
        assert_eq!(
            f.refused(add(&id, 4, NOW + 900)),
            Refusal::TooManyBlocks {
                path: "v/b/k".into(),
                count: 4,
                max: 3
            }
        );
        let o = read::open_key(&f.db, &id).unwrap().unwrap();
        assert_eq!((o.blocks.len(), o.expires_ms), (3, NOW + 100));
    }

    #[test]
    fn add_blocks_refuses_without_the_open_key_naming_what_is_missing() {
        let mut f = Fixture::new();
        let id = open_id("k", 1);
        assert_eq!(
            f.refused(add(&id, 2, NOW)),
            Refusal::VolumeNotFound { volume: "v".into() }
        );
        f.volume("v");
        assert_eq!(
            f.refused(add(&id, 2, NOW)),
            Refusal::BucketNotFound {
                volume: "v".into(),
                bucket: "b".into()
            }
        );
        f.bucket("v", "b");
        assert_eq!(
            f.refused(add(&id, 2, NOW)),
            Refusal::OpenKeyNotFound {
                path: "v/b/k".into(),
                client_id: 1
            }
        );
        f.apply(open_req(&open_id("k", 2), None));
        assert_eq!(
            f.refused(add(&id, 2, NOW)),
            Refusal::WrongClientId {
                path: "v/b/k".into(),
                client_id: 1
            }
        );
    }

    #[test]
    fn expire_removes_only_keys_still_expired_and_queues_their_blocks() {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        let (a, b) = (open_id("a", 1), open_id("b", 1));
        f.apply(open_req(&a, None));
        f.apply(OmRequest::OpenKey {
            id: b.clone(),
            replication: None,
            blocks: vec![block(1, 2, 10)],
            now_ms: NOW,
            expires_ms: NOW + 100,
        });
        // b was extended after the leader listed it; c never existed.
        f.apply(add(&b, 3, NOW + 1000));
        let r = f.apply_at(
            40,
            OmRequest::ExpireOpenKeys {
                ids: vec![a.clone(), b.clone(), open_id("c", 1)],
                now_ms: NOW + 100,
            },
        );
        assert_eq!(r, OmResponse::OpenKeysExpired { count: 1 });
        assert_eq!(read::open_key(&f.db, &a).unwrap(), None);
        assert!(read::open_key(&f.db, &b).unwrap().is_some());
        let queued = read::deleted_blocks(&f.db, 10).unwrap();
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].0, 40);
        assert_eq!(queued[0].1.blocks, [bid(1, 1)]);
        assert_eq!(queued[0].1.reason, "1 expired open key(s)");
    }
}
