//! `AsUser`: a command on behalf of a client certificate's user, applied only if the user
//! may touch what it names ([`crate::state::owner`]). The check runs here, at apply, and
//! not only at the leader before proposing: the volume or bucket may change hands (deleted
//! and created again by someone else) between the two, and every member must decide alike.

use rozone_raft::Txn;

use super::shared::{put, refuse, Applied};
use crate::state::owner::{bucket_access, volume_access, Access};
use crate::state::request::{OmRequest, OmResponse, Refusal};
use crate::state::{bucket_key, key_path, CF_BUCKET_OWNERS};

/// `None` when `user` may apply `req`; else what it may not do, as the refusal names it
/// (built only then: this runs for every write of a user).
fn denied(txn: &Txn<'_>, user: &str, req: &OmRequest) -> std::io::Result<Option<String>> {
    let unless = |a: Access, what: &dyn Fn() -> String| (a == Access::Denied).then(what);
    let bucket = |v: &str, b: &str, what: &dyn Fn() -> String| {
        Ok::<_, std::io::Error>(unless(bucket_access(txn, user, v, b)?, what))
    };
    match req {
        OmRequest::CreateVolume { name, owner, .. } => {
            Ok((owner != user).then(|| format!("create volume {name} owned by {owner}")))
        }
        OmRequest::DeleteVolume { name } => Ok(unless(volume_access(txn, user, name)?, &|| {
            format!("delete volume {name}")
        })),
        OmRequest::CreateBucket { volume, name, .. } => {
            Ok(unless(volume_access(txn, user, volume)?, &|| {
                format!("create bucket {name} in volume {volume}")
            }))
        }
        OmRequest::DeleteBucket { volume, name } => {
            bucket(volume, name, &|| format!("delete bucket {volume}/{name}"))
        }
        OmRequest::OpenKey { id, .. }
        | OmRequest::AddBlocks { id, .. }
        | OmRequest::CommitKey { id, .. }
        | OmRequest::S3CommitKey { id, .. } => bucket(&id.volume, &id.bucket, &|| {
            format!("write key {}", key_path(&id.volume, &id.bucket, &id.key))
        }),
        OmRequest::DeleteKey {
            volume,
            bucket: b,
            key,
        } => bucket(volume, b, &|| {
            format!("delete key {}", key_path(volume, b, key))
        }),
        OmRequest::RenameKey {
            volume,
            bucket: b,
            from,
            ..
        } => bucket(volume, b, &|| {
            format!("rename key {}", key_path(volume, b, from))
        }),
        // Whoever may commit the key may commit it from a deferred open.
        OmRequest::DeferredCommit { commit, .. } => denied(txn, user, commit),
        // The OM's own housekeeping, S3 credentials and multipart uploads are never a
        // user's (the gateway and admins send them unwrapped), nor is a wrapped wrapper.
        other => Ok(Some(format!("send {}", command_name(other)))),
    }
}

/// The command's name for a refusal (its variant, without its fields).
fn command_name(req: &OmRequest) -> String {
    let debug = format!("{req:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("a command")
        .to_string()
}

/// Applies `req` for `user` through `apply` (the state machine's own dispatch), refusing it
/// with `PermissionDenied` when the user may not; a bucket the user creates is recorded as
/// the user's.
pub(super) fn apply(
    txn: &mut Txn<'_>,
    user: String,
    req: OmRequest,
    apply: impl FnOnce(&mut Txn<'_>, OmRequest) -> Applied,
) -> Applied {
    if let Some(action) = denied(txn, &user, &req)? {
        return refuse(Refusal::PermissionDenied { user, action });
    }
    let out = apply(txn, req)?;
    if let OmResponse::BucketCreated(b) = &out {
        put(txn, CF_BUCKET_OWNERS, bucket_key(&b.volume, &b.name), &user)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::owner::bucket_owner;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::Replication;

    fn as_user(user: &str, request: OmRequest) -> OmRequest {
        OmRequest::AsUser {
            user: user.into(),
            request: Box::new(request),
        }
    }

    fn volume(name: &str, owner: &str) -> OmRequest {
        OmRequest::CreateVolume {
            name: name.into(),
            owner: owner.into(),
            quota_bytes: None,
            now_ms: NOW,
        }
    }

    fn bucket(volume: &str, name: &str) -> OmRequest {
        OmRequest::CreateBucket {
            volume: volume.into(),
            name: name.into(),
            replication: Replication::RatisThree,
            versioning: false,
            quota_bytes: None,
            now_ms: NOW,
        }
    }

    fn denied(r: Refusal, user: &str, action: &str) {
        assert_eq!(
            r,
            Refusal::PermissionDenied {
                user: user.into(),
                action: action.into()
            }
        );
    }

    #[test]
    fn a_user_creates_only_its_own_volumes_and_owns_the_buckets_it_creates() {
        let mut f = Fixture::new();
        denied(
            f.refused(as_user("client-7", volume("v", "client-8"))),
            "client-7",
            "create volume v owned by client-8",
        );
        assert_eq!(read::volume(&f.db, "v").unwrap(), None);
        assert!(matches!(
            f.apply(as_user("client-7", volume("v", "client-7"))),
            OmResponse::VolumeCreated(_)
        ));
        denied(
            f.refused(as_user("client-8", bucket("v", "b"))),
            "client-8",
            "create bucket b in volume v",
        );
        assert!(matches!(
            f.apply(as_user("client-7", bucket("v", "b"))),
            OmResponse::BucketCreated(_)
        ));
        assert_eq!(
            bucket_owner(&*f.db, "v", "b").unwrap().as_deref(),
            Some("client-7")
        );
        // Unwrapped (an admin's): no owner row.
        f.apply(bucket("v", "admins"));
        assert_eq!(bucket_owner(&*f.db, "v", "admins").unwrap(), None);
    }

    #[test]
    fn only_the_bucket_or_volume_owner_touches_a_bucket_and_its_keys() {
        let mut f = Fixture::new();
        f.apply(volume("shared", "admin"));
        f.apply(bucket("shared", "b"));
        // A bucket of client-7's in a volume client-7 does not own: its owner row counts.
        f.put_row(
            crate::state::CF_BUCKET_OWNERS,
            &crate::state::bucket_key("shared", "b"),
            &"client-7".to_string(),
        );
        let id = |key: &str| crate::state::types::OpenKeyId {
            volume: "shared".into(),
            bucket: "b".into(),
            key: key.into(),
            client_id: 5,
        };
        let open = |key: &str| OmRequest::OpenKey {
            id: id(key),
            replication: None,
            blocks: vec![block(1, 1, 100)],
            now_ms: NOW,
            expires_ms: NOW + 100,
        };
        denied(
            f.refused(as_user("client-8", open("k"))),
            "client-8",
            "write key shared/b/k",
        );
        assert!(read::open_key(&f.db, &id("k")).unwrap().is_none());
        assert!(matches!(
            f.apply(as_user("client-7", open("k"))),
            OmResponse::KeyOpened(_)
        ));
        // The volume's owner may too.
        assert!(matches!(
            f.apply(as_user("admin", open("k2"))),
            OmResponse::KeyOpened(_)
        ));
        let delete = OmRequest::DeleteBucket {
            volume: "shared".into(),
            name: "b".into(),
        };
        denied(
            f.refused(as_user("client-8", delete.clone())),
            "client-8",
            "delete bucket shared/b",
        );
        // Missing things are not denied: they are not found, as for anyone.
        assert_eq!(
            f.refused(as_user(
                "client-8",
                OmRequest::DeleteKey {
                    volume: "shared".into(),
                    bucket: "nope".into(),
                    key: "k".into()
                }
            )),
            Refusal::BucketNotFound {
                volume: "shared".into(),
                bucket: "nope".into()
            }
        );
        // Housekeeping and nested wrappers are never a user's.
        denied(
            f.refused(as_user(
                "client-7",
                OmRequest::PurgeDeletedBlocks { ids: vec![1] },
            )),
            "client-7",
            "send PurgeDeletedBlocks",
        );
        denied(
            f.refused(as_user("client-7", as_user("admin", delete))),
            "client-7",
            "send AsUser",
        );
    }

    #[test]
    fn a_deleted_bucket_forgets_its_owner() {
        let mut f = Fixture::new();
        f.apply(volume("v", "root"));
        f.put_row(
            crate::state::CF_BUCKET_OWNERS,
            &crate::state::bucket_key("v", "b"),
            &"client-7".to_string(),
        );
        f.apply(bucket("v", "b"));
        assert_eq!(
            f.apply(OmRequest::DeleteBucket {
                volume: "v".into(),
                name: "b".into()
            }),
            OmResponse::BucketDeleted
        );
        assert_eq!(bucket_owner(&*f.db, "v", "b").unwrap(), None);
        // Created again by an admin: client-7 has no hold on it.
        f.apply(bucket("v", "b"));
        denied(
            f.refused(as_user(
                "client-7",
                OmRequest::DeleteBucket {
                    volume: "v".into(),
                    name: "b".into(),
                },
            )),
            "client-7",
            "delete bucket v/b",
        );
    }
}
