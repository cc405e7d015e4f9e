//! What the S3 gateway needs decided in the state machine: commits that keep S3 metadata
//! and may carry a condition (the compare-and-set of S3 conditional writes), the metadata
//! rows following their key (dropped by a plain commit or a delete, moved by a rename),
//! and the credentials table.

use std::io;

use rozone_raft::{Rows, Txn};

use super::commit;
use super::deleted;
use super::shared::{path, put, refuse, Applied};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{BlockId, Key, OpenKey, OpenKeyId, S3Condition, S3Meta, S3Secret};
use crate::state::{key_key, open_key_key, CF_KEYS, CF_OPEN_KEYS, CF_S3_META, CF_S3_SECRETS};

/// Why `condition` does not hold on the key as it is now, or `None` when it holds.
pub(super) fn unmet(
    txn: &Txn<'_>,
    id: &OpenKeyId,
    condition: &S3Condition,
) -> io::Result<Option<Refusal>> {
    let kk = key_key(&id.volume, &id.bucket, &id.key);
    let exists = txn.get_row::<Key>(CF_KEYS, &kk)?.is_some();
    let failed = |reason: &str| {
        Some(Refusal::PreconditionFailed {
            path: path(id),
            reason: reason.to_string(),
        })
    };
    Ok(match condition {
        S3Condition::IfNoneMatchAny if exists => failed("the key exists (If-None-Match: *)"),
        S3Condition::IfNoneMatchAny => None,
        S3Condition::IfMatch(_) if !exists => Some(Refusal::KeyNotFound { path: path(id) }),
        S3Condition::IfMatch(want) => {
            let etag = txn.get_row::<S3Meta>(CF_S3_META, &kk)?.map(|m| m.etag);
            if etag.as_deref() == Some(want.as_str()) {
                None
            } else {
                failed(&format!("the key's ETag is not {want:?} (If-Match)"))
            }
        }
    })
}

/// Drops an open key whose conditional commit was refused: its blocks go to deletion now
/// rather than at expiry (the writer will not retry a failed precondition).
fn drop_open_key(txn: &mut Txn<'_>, index: u64, id: &OpenKeyId) -> io::Result<()> {
    let ok = open_key_key(id);
    if let Some(o) = txn.get_row::<OpenKey>(CF_OPEN_KEYS, &ok)? {
        txn.delete(CF_OPEN_KEYS, ok);
        let blocks = o.blocks.iter().map(|b| b.id).collect();
        deleted::queue(
            txn,
            index,
            blocks,
            format!("precondition failed {}", path(id)),
        )?;
    }
    Ok(())
}

/// `S3CommitKey`: the condition first (refusals of a missing open key still come from
/// the commit itself, so a retried commit that already landed is told so), then the
/// commit, then the metadata row.
#[allow(clippy::too_many_arguments)]
pub(super) fn commit_key(
    txn: &mut Txn<'_>,
    index: u64,
    id: OpenKeyId,
    blocks: Vec<(BlockId, u64)>,
    size: u64,
    checksum: String,
    now_ms: u64,
    meta: S3Meta,
    condition: Option<S3Condition>,
) -> Applied {
    let open = txn.get_row::<OpenKey>(CF_OPEN_KEYS, &open_key_key(&id))?;
    if let (Some(_), Some(c)) = (&open, &condition) {
        if let Some(r) = unmet(txn, &id, c)? {
            drop_open_key(txn, index, &id)?;
            return refuse(r);
        }
    }
    let kk = key_key(&id.volume, &id.bucket, &id.key);
    let out = commit::commit(txn, index, id, blocks, size, checksum, now_ms)?;
    if matches!(out, OmResponse::KeyCommitted(_)) {
        put(txn, CF_S3_META, kk, &meta)?;
    }
    Ok(out)
}

/// After a plain `CommitKey`, `DeleteKey` or `RenameKey` (given its outcome): the metadata
/// row of the old key no longer describes anything; a rename carries it to the new name.
pub(super) fn follow_key(
    txn: &mut Txn<'_>,
    out: &OmResponse,
    volume: &str,
    bucket: &str,
    from: &str,
    to: Option<&str>,
) -> io::Result<()> {
    if !matches!(
        out,
        OmResponse::KeyCommitted(_) | OmResponse::KeyDeleted | OmResponse::KeyRenamed
    ) {
        return Ok(());
    }
    let old = key_key(volume, bucket, from);
    let meta = txn.get_row::<S3Meta>(CF_S3_META, &old)?;
    txn.delete(CF_S3_META, old);
    if let (Some(m), Some(to)) = (meta, to) {
        put(txn, CF_S3_META, key_key(volume, bucket, to), &m)?;
    }
    Ok(())
}

/// `S3SetSecret`: the stored secret when there is one, else this one.
pub(super) fn set_secret(
    txn: &mut Txn<'_>,
    access_id: String,
    user: String,
    secret: String,
    now_ms: u64,
) -> Applied {
    if let Some(s) = txn.get_row::<S3Secret>(CF_S3_SECRETS, access_id.as_bytes())? {
        return Ok(OmResponse::S3Secret(s));
    }
    let s = S3Secret {
        access_id,
        user,
        secret,
        created_ms: now_ms,
    };
    put(txn, CF_S3_SECRETS, s.access_id.as_bytes().to_vec(), &s)?;
    Ok(OmResponse::S3Secret(s))
}

/// `S3RevokeSecret`: refused when the access id has no secret.
pub(super) fn revoke_secret(txn: &mut Txn<'_>, access_id: String) -> Applied {
    if txn
        .get_row::<S3Secret>(CF_S3_SECRETS, access_id.as_bytes())?
        .is_none()
    {
        return refuse(Refusal::S3SecretNotFound { access_id });
    }
    txn.delete(CF_S3_SECRETS, access_id.into_bytes());
    Ok(OmResponse::S3SecretRevoked)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::{OpenKeyId, S3Condition, S3Meta};

    fn meta(etag: &str) -> S3Meta {
        S3Meta {
            etag: etag.into(),
            content_type: "text/plain".into(),
            metadata: vec![("k".into(), "v".into())],
        }
    }

    fn s3_commit(id: &OpenKeyId, local: u64, etag: &str, c: Option<S3Condition>) -> OmRequest {
        OmRequest::S3CommitKey {
            id: id.clone(),
            blocks: vec![(bid(1, local), 3)],
            size: 3,
            checksum: String::new(),
            now_ms: NOW + 1,
            meta: meta(etag),
            condition: c,
        }
    }

    fn bucket() -> Fixture {
        let mut f = Fixture::new();
        f.volume("v");
        f.bucket("v", "b");
        f
    }

    #[test]
    fn if_none_match_lets_exactly_the_first_of_two_open_writers_commit() {
        let mut f = bucket();
        let (a, b) = (open_id("k", 1), open_id("k", 2));
        f.open(&a, vec![block(1, 1, 10)]);
        f.open(&b, vec![block(1, 2, 10)]);
        let first = f.apply(s3_commit(&a, 1, "ea", Some(S3Condition::IfNoneMatchAny)));
        assert!(matches!(first, OmResponse::KeyCommitted(_)), "{first:?}");
        let second = f.apply_at(9, s3_commit(&b, 2, "eb", Some(S3Condition::IfNoneMatchAny)));
        assert!(
            matches!(
                second,
                OmResponse::Refused(Refusal::PreconditionFailed { .. })
            ),
            "{second:?}"
        );
        // The loser's open key is gone and its block queued for deletion at once.
        assert!(read::open_key(&f.db, &b).unwrap().is_none());
        let queued = read::deleted_blocks(&f.db, 10).unwrap();
        assert_eq!(queued[0].1.blocks, [bid(1, 2)]);
        assert_eq!(
            read::s3_meta(&f.db, "v", "b", "k").unwrap(),
            Some(meta("ea"))
        );
    }

    #[test]
    fn if_match_replaces_only_the_named_etag() {
        let mut f = bucket();
        let a = open_id("k", 1);
        let missing = open_id("k", 9);
        f.open(&missing, vec![block(1, 9, 10)]);
        assert_eq!(
            f.refused(s3_commit(
                &missing,
                9,
                "x",
                Some(S3Condition::IfMatch("ea".into()))
            )),
            Refusal::KeyNotFound {
                path: "v/b/k".into()
            }
        );
        f.open(&a, vec![block(1, 1, 10)]);
        f.apply(s3_commit(&a, 1, "ea", None));
        let (b, c) = (open_id("k", 2), open_id("k", 3));
        f.open(&b, vec![block(1, 2, 10)]);
        f.open(&c, vec![block(1, 3, 10)]);
        let wrong = f.refused(s3_commit(
            &b,
            2,
            "eb",
            Some(S3Condition::IfMatch("zz".into())),
        ));
        assert!(
            matches!(wrong, Refusal::PreconditionFailed { .. }),
            "{wrong:?}"
        );
        let ok = f.apply(s3_commit(
            &c,
            3,
            "ec",
            Some(S3Condition::IfMatch("ea".into())),
        ));
        assert!(matches!(ok, OmResponse::KeyCommitted(_)), "{ok:?}");
        assert_eq!(
            read::s3_meta(&f.db, "v", "b", "k").unwrap().unwrap().etag,
            "ec"
        );
    }

    #[test]
    fn metadata_follows_its_key_through_plain_commit_rename_and_delete() {
        let mut f = bucket();
        let a = open_id("k", 1);
        f.open(&a, vec![block(1, 1, 10)]);
        f.apply(s3_commit(&a, 1, "ea", None));
        f.apply(OmRequest::RenameKey {
            volume: "v".into(),
            bucket: "b".into(),
            from: "k".into(),
            to: "k2".into(),
            now_ms: NOW + 2,
        });
        assert_eq!(read::s3_meta(&f.db, "v", "b", "k").unwrap(), None);
        assert_eq!(
            read::s3_meta(&f.db, "v", "b", "k2").unwrap(),
            Some(meta("ea"))
        );
        // A plain commit over an S3 key: the old ETag no longer describes the bytes.
        let b = open_id("k2", 2);
        f.open(&b, vec![block(1, 2, 10)]);
        f.commit(&b, vec![(bid(1, 2), 3)], 3);
        assert_eq!(read::s3_meta(&f.db, "v", "b", "k2").unwrap(), None);
        let c = open_id("k3", 3);
        f.open(&c, vec![block(1, 3, 10)]);
        f.apply(s3_commit(&c, 3, "ec", None));
        f.apply(OmRequest::DeleteKey {
            volume: "v".into(),
            bucket: "b".into(),
            key: "k3".into(),
        });
        assert_eq!(read::s3_meta(&f.db, "v", "b", "k3").unwrap(), None);
    }

    #[test]
    fn the_first_secret_of_an_access_id_stays_until_revoked() {
        let mut f = Fixture::new();
        let set = |secret: &str| OmRequest::S3SetSecret {
            access_id: "alice".into(),
            user: "alice".into(),
            secret: secret.into(),
            now_ms: NOW,
        };
        let first = f.apply(set("s1"));
        let again = f.apply(set("s2"));
        assert_eq!(first, again);
        assert!(matches!(&first, OmResponse::S3Secret(s) if s.secret == "s1"));
        let revoke = || OmRequest::S3RevokeSecret {
            access_id: "alice".into(),
        };
        assert_eq!(f.apply(revoke()), OmResponse::S3SecretRevoked);
        assert!(read::s3_secret(&f.db, "alice").unwrap().is_none());
        assert_eq!(
            f.refused(revoke()),
            Refusal::S3SecretNotFound {
                access_id: "alice".into()
            }
        );
        assert!(matches!(f.apply(set("s3")), OmResponse::S3Secret(s) if s.secret == "s3"));
    }
}
