//! The block-token secret keys the ring keeps (docs/security.md, "Block tokens"): the
//! leader makes a key ([`ScmRequest::AddSecretKey`], its bytes drawn before proposing so
//! every member stores the same key) and drops keys no token may still need
//! ([`ScmRequest::RemoveExpiredSecretKeys`], time stamped by the leader). Keys are
//! replicated, so a new leader serves the same keys and tokens signed before a failover
//! still verify.
//!
//! Rows live in [`CF_CLUSTER`] under [`SECRET_KEY_PREFIX`] (no new column family: a
//! checkpoint of an older build opens unchanged). A row is a versioned enum, so a later
//! build appends a `V2` and still reads `V1`. The data dir and snapshots of an SCM are
//! therefore secret material, as the OM's are for S3 secrets.
//!
//! [`ScmRequest::AddSecretKey`]: super::ScmRequest::AddSecretKey
//! [`ScmRequest::RemoveExpiredSecretKeys`]: super::ScmRequest::RemoveExpiredSecretKeys

use std::io;

use rozone_kv::rocksdb::{Direction, IteratorMode, DB};
use rozone_kv::{cf, key_u64, u64_key};
use rozone_raft::codec::encode;
use rozone_raft::rows::decode_row;
use rozone_raft::Txn;
use serde::{Deserialize, Serialize};

use super::request::ScmResponse;
use super::CF_CLUSTER;

/// Key prefix of secret-key rows in [`CF_CLUSTER`]; the id follows, big-endian.
pub const SECRET_KEY_PREFIX: &[u8] = b"secret_key/";
/// Most keys kept (rotation makes two or three; a bound on a corrupt or hostile state).
pub const MAX_SECRET_KEYS: usize = 64;
/// Bytes of a key's secret.
pub const SECRET_LEN: usize = 32;

/// One block-token signing key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretKeyRecord {
    /// Above every earlier key's id.
    pub id: u64,
    /// HMAC-SHA256 key ([`SECRET_LEN`] bytes).
    pub secret: Vec<u8>,
    /// When the leader made it (ms since the epoch).
    pub created_ms: u64,
    /// End of its signing period: OMs sign with the newest key not past it.
    pub expires_ms: u64,
    /// When the ring forgets it: `expires_ms` + `scm.block_token_max_lifetime`.
    pub keep_until_ms: u64,
}

impl std::fmt::Debug for SecretKeyRecord {
    // Never log the secret: requests are logged with Debug.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKeyRecord")
            .field("id", &self.id)
            .field("created_ms", &self.created_ms)
            .field("expires_ms", &self.expires_ms)
            .field("keep_until_ms", &self.keep_until_ms)
            .finish_non_exhaustive()
    }
}

/// How a key row is stored. Append versions; never change one a build wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum SecretKeyRow {
    V1(SecretKeyRecord),
}

fn key_of(id: u64) -> Vec<u8> {
    let mut k = SECRET_KEY_PREFIX.to_vec();
    k.extend_from_slice(&u64_key(id));
    k
}

/// Every key row through `txn` (this batch's earlier writes included), by id.
fn rows(txn: &Txn<'_>) -> io::Result<Vec<SecretKeyRecord>> {
    // One more than the cap, so a state over it is seen (and refused) rather than cut.
    let found = txn.scan_prefix(CF_CLUSTER, SECRET_KEY_PREFIX, None, MAX_SECRET_KEYS + 1)?;
    found
        .into_iter()
        .map(|(k, v)| {
            let SecretKeyRow::V1(r) = decode_row::<SecretKeyRow>(CF_CLUSTER, &k, &v)?;
            Ok(r)
        })
        .collect()
}

/// Applies `AddSecretKey`: a well-formed key whose id is above every kept key's.
pub(super) fn add(txn: &mut Txn<'_>, k: SecretKeyRecord) -> io::Result<ScmResponse> {
    let id = k.id;
    let refuse = |reason: String| Ok(ScmResponse::SecretKeyRefused { id, reason });
    if id == 0 {
        return refuse("key id must be above 0".into());
    }
    if k.secret.len() != SECRET_LEN {
        return refuse(format!(
            "secret has {} bytes, want {SECRET_LEN}",
            k.secret.len()
        ));
    }
    if !(k.created_ms < k.expires_ms && k.expires_ms <= k.keep_until_ms) {
        return refuse("want created_ms < expires_ms <= keep_until_ms".into());
    }
    if txn.get(CF_CLUSTER, &key_of(id))?.is_some() {
        return refuse("a key with this id exists".into());
    }
    let existing = rows(txn)?;
    if let Some(newest) = existing.iter().map(|r| r.id).max() {
        if id <= newest {
            return refuse(format!("key ids only grow; the newest is {newest}"));
        }
    }
    if existing.len() >= MAX_SECRET_KEYS {
        return refuse(format!("{MAX_SECRET_KEYS} keys kept already"));
    }
    txn.put(CF_CLUSTER, key_of(id), encode(&SecretKeyRow::V1(k))?);
    Ok(ScmResponse::SecretKeyAdded { id })
}

/// Applies `RemoveExpiredSecretKeys`: drops keys with `keep_until_ms <= now_ms`.
pub(super) fn remove_expired(txn: &mut Txn<'_>, now_ms: u64) -> io::Result<ScmResponse> {
    let mut removed = 0;
    for r in rows(txn)? {
        if r.keep_until_ms <= now_ms {
            txn.delete(CF_CLUSTER, key_of(r.id));
            removed += 1;
        }
    }
    Ok(ScmResponse::SecretKeysRemoved { removed })
}

/// Every kept key, by id (at most [`MAX_SECRET_KEYS`]).
pub fn keys(db: &DB) -> io::Result<Vec<SecretKeyRecord>> {
    let mut out = Vec::new();
    let mode = IteratorMode::From(SECRET_KEY_PREFIX, Direction::Forward);
    for item in db.iterator_cf(cf(db, CF_CLUSTER)?, mode) {
        let (k, v) = item.map_err(io::Error::other)?;
        let Some(id) = k.strip_prefix(SECRET_KEY_PREFIX) else {
            break;
        };
        if key_u64(id).is_none() || out.len() >= MAX_SECRET_KEYS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("corrupt secret key row {k:?} in {CF_CLUSTER}, or too many keys"),
            ));
        }
        let SecretKeyRow::V1(r) = decode_row::<SecretKeyRow>(CF_CLUSTER, &k, &v)?;
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::COLUMN_FAMILIES;

    fn key(id: u64, created_ms: u64) -> SecretKeyRecord {
        SecretKeyRecord {
            id,
            secret: vec![id as u8; SECRET_LEN],
            created_ms,
            expires_ms: created_ms + 100,
            keep_until_ms: created_ms + 150,
        }
    }

    fn apply(db: &DB, f: impl FnOnce(&mut Txn<'_>) -> io::Result<ScmResponse>) -> ScmResponse {
        let mut txn = Txn::new(db);
        let r = f(&mut txn).unwrap();
        db.write(txn.into_batch().unwrap()).unwrap();
        r
    }

    #[test]
    fn keys_are_added_with_growing_ids_and_removed_after_keep_until() {
        let dir = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
        // Other rows of the column family are not keys.
        db.put_cf(db.cf_handle(CF_CLUSTER).unwrap(), b"cluster_id", b"x")
            .unwrap();
        db.put_cf(db.cf_handle(CF_CLUSTER).unwrap(), b"zzz", b"x")
            .unwrap();
        assert_eq!(
            apply(&db, |t| add(t, key(1, 1000))),
            ScmResponse::SecretKeyAdded { id: 1 }
        );
        assert_eq!(
            apply(&db, |t| add(t, key(2, 1090))),
            ScmResponse::SecretKeyAdded { id: 2 }
        );
        for bad in [
            key(2, 2000),
            key(1, 2000),
            key(0, 2000),
            SecretKeyRecord {
                secret: vec![1; 8],
                ..key(3, 2000)
            },
            SecretKeyRecord {
                expires_ms: 2000,
                ..key(3, 2000)
            },
        ] {
            let r = apply(&db, |t| add(t, bad.clone()));
            assert!(matches!(r, ScmResponse::SecretKeyRefused { .. }), "{r:?}");
        }
        assert_eq!(keys(&db).unwrap(), vec![key(1, 1000), key(2, 1090)]);
        // Key 1 is kept until 1150, key 2 until 1240.
        assert_eq!(
            apply(&db, |t| remove_expired(t, 1149)),
            ScmResponse::SecretKeysRemoved { removed: 0 }
        );
        assert_eq!(
            apply(&db, |t| remove_expired(t, 1150)),
            ScmResponse::SecretKeysRemoved { removed: 1 }
        );
        assert_eq!(keys(&db).unwrap(), vec![key(2, 1090)]);
        // Ids keep growing after a removal.
        let r = apply(&db, |t| add(t, key(1, 3000)));
        assert!(matches!(r, ScmResponse::SecretKeyRefused { .. }), "{r:?}");
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let s = format!("{:?}", key(7, 1));
        assert!(!s.contains("secret: ["), "{s}");
        assert!(s.contains("id: 7"), "{s}");
    }

    /// The stored form is part of the replicated format: a `V1` row is the variant tag 0
    /// followed by the record's fields in order.
    #[test]
    fn a_v1_row_keeps_its_bytes() {
        let bytes = encode(&SecretKeyRow::V1(key(1, 1))).unwrap();
        let mut want = vec![0u8, 1, SECRET_LEN as u8];
        want.extend_from_slice(&[1; SECRET_LEN]);
        // created 1, expires 101, keep_until 151 (a two-byte varint: 0x97 0x01).
        want.extend_from_slice(&[1, 101, 0x97, 0x01]);
        assert_eq!(bytes, want);
    }
}
