//! One-time join tokens (docs/security.md, "Join tokens"): an admin asks the leader for a
//! token ([`ScmRequest::AddJoinToken`]); a process without a certificate redeems it once on
//! the enrollment port ([`ScmRequest::RedeemJoinToken`]) for a certificate of the token's
//! role and id. Both are replicated, so a token is redeemable on whichever SCM leads, and
//! never twice, across failovers too: the redemption is decided at apply, identically on
//! every member.
//!
//! Only the SHA-256 of a token is kept (the token is shown once, to the admin who asked),
//! so the data dir and snapshots do not hold redeemable tokens. Rows live in [`CF_CLUSTER`]
//! under [`JOIN_TOKEN_PREFIX`] + the digest, as a versioned enum (append a `V2`, keep
//! reading `V1`). Expired rows are dropped when a new token is added, so the table stays
//! below [`MAX_JOIN_TOKENS`] without a sweeper.
//!
//! [`ScmRequest::AddJoinToken`]: super::ScmRequest::AddJoinToken
//! [`ScmRequest::RedeemJoinToken`]: super::ScmRequest::RedeemJoinToken

use std::io;

use rozone_raft::codec::encode;
use rozone_raft::rows::decode_row;
use rozone_raft::Txn;
use serde::{Deserialize, Serialize};

use super::request::ScmResponse;
use super::CF_CLUSTER;

/// Key prefix of join-token rows in [`CF_CLUSTER`]; the token's SHA-256 follows.
pub const JOIN_TOKEN_PREFIX: &[u8] = b"join_token/";
/// Most unexpired tokens kept at once (a bound on a careless script or a hostile admin).
pub const MAX_JOIN_TOKENS: usize = 1024;
/// Bytes of a token's digest (SHA-256).
pub const DIGEST_LEN: usize = 32;
/// Longest a token may stay redeemable.
pub const MAX_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// Roles a token may name (the names of `rozone_rpc::Role`).
pub const ROLES: [&str; 6] = ["scm", "om", "datanode", "s3g", "client", "admin"];

/// One unredeemed token: who its redeemer becomes, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinTokenRecord {
    /// SHA-256 of the token ([`DIGEST_LEN`] bytes): the token itself is never stored.
    pub digest: Vec<u8>,
    /// The role the certificate will carry (one of [`ROLES`]).
    pub role: String,
    /// The node id the certificate will carry (> 0).
    pub id: u64,
    /// When the leader made it (ms since the epoch).
    pub created_ms: u64,
    /// When it stops being redeemable.
    pub expires_ms: u64,
}

/// How a token row is stored. Append versions; never change one a build wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum JoinTokenRow {
    V1(JoinTokenRecord),
}

fn key_of(digest: &[u8]) -> Vec<u8> {
    let mut k = JOIN_TOKEN_PREFIX.to_vec();
    k.extend_from_slice(digest);
    k
}

/// Every token row through `txn`; one more than the cap, so a state over it is seen.
fn rows(txn: &Txn<'_>) -> io::Result<Vec<JoinTokenRecord>> {
    let found = txn.scan_prefix(CF_CLUSTER, JOIN_TOKEN_PREFIX, None, MAX_JOIN_TOKENS + 1)?;
    found
        .into_iter()
        .map(|(k, v)| {
            let JoinTokenRow::V1(r) = decode_row::<JoinTokenRow>(CF_CLUSTER, &k, &v)?;
            Ok(r)
        })
        .collect()
}

/// Applies `AddJoinToken`: a well-formed token with a new digest; expired tokens are
/// dropped first (`created_ms` is the leader's now).
pub(super) fn add(txn: &mut Txn<'_>, t: JoinTokenRecord) -> io::Result<ScmResponse> {
    let refuse = |reason: String| Ok(ScmResponse::JoinTokenRefused { reason });
    if t.digest.len() != DIGEST_LEN {
        return refuse(format!(
            "digest has {} bytes, want {DIGEST_LEN}",
            t.digest.len()
        ));
    }
    if !ROLES.contains(&t.role.as_str()) {
        return refuse(format!("unknown role {:?}", t.role));
    }
    if t.id == 0 {
        return refuse("the id must be above 0".into());
    }
    if !(t.created_ms < t.expires_ms && t.expires_ms - t.created_ms <= MAX_TTL_MS) {
        return refuse(format!(
            "want created_ms < expires_ms <= created_ms + {MAX_TTL_MS}"
        ));
    }
    let mut live = 0;
    for r in rows(txn)? {
        if r.expires_ms <= t.created_ms {
            txn.delete(CF_CLUSTER, key_of(&r.digest));
        } else {
            live += 1;
        }
    }
    if txn.get(CF_CLUSTER, &key_of(&t.digest))?.is_some() {
        return refuse("a token with this digest exists".into());
    }
    if live >= MAX_JOIN_TOKENS {
        return refuse(format!(
            "{MAX_JOIN_TOKENS} unexpired tokens exist already: let some expire or redeem them"
        ));
    }
    let expires_ms = t.expires_ms;
    txn.put(CF_CLUSTER, key_of(&t.digest), encode(&JoinTokenRow::V1(t))?);
    Ok(ScmResponse::JoinTokenAdded { expires_ms })
}

/// Applies `RedeemJoinToken`: the token's row is removed whatever the outcome (a spent or
/// expired token is gone), and only an unexpired one names who its redeemer becomes.
pub(super) fn redeem(txn: &mut Txn<'_>, digest: &[u8], now_ms: u64) -> io::Result<ScmResponse> {
    let key = key_of(digest);
    let Some(v) = txn.get(CF_CLUSTER, &key)? else {
        return Ok(ScmResponse::JoinTokenRefused {
            reason: "unknown or already used".into(),
        });
    };
    let JoinTokenRow::V1(r) = decode_row::<JoinTokenRow>(CF_CLUSTER, &key, &v)?;
    txn.delete(CF_CLUSTER, key);
    if r.expires_ms <= now_ms {
        return Ok(ScmResponse::JoinTokenRefused {
            reason: format!("expired {} s ago", (now_ms - r.expires_ms) / 1000),
        });
    }
    Ok(ScmResponse::JoinTokenRedeemed {
        role: r.role,
        id: r.id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::COLUMN_FAMILIES;
    use rozone_kv::rocksdb::DB;

    fn token(n: u8, created_ms: u64, ttl_ms: u64) -> JoinTokenRecord {
        JoinTokenRecord {
            digest: vec![n; DIGEST_LEN],
            role: "datanode".into(),
            id: 4,
            created_ms,
            expires_ms: created_ms + ttl_ms,
        }
    }

    fn apply(db: &DB, f: impl FnOnce(&mut Txn<'_>) -> io::Result<ScmResponse>) -> ScmResponse {
        let mut txn = Txn::new(db);
        let r = f(&mut txn).unwrap();
        db.write(txn.into_batch().unwrap()).unwrap();
        r
    }

    fn open() -> (tempfile::TempDir, std::sync::Arc<DB>) {
        let dir = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
        (dir, db)
    }

    fn refused(r: &ScmResponse) -> bool {
        matches!(r, ScmResponse::JoinTokenRefused { .. })
    }

    #[test]
    fn a_token_is_redeemed_once_and_never_after_it_expires() {
        let (_d, db) = open();
        assert_eq!(
            apply(&db, |t| add(t, token(1, 1000, 500))),
            ScmResponse::JoinTokenAdded { expires_ms: 1500 }
        );
        apply(&db, |t| add(t, token(2, 1000, 500)));
        // The same digest twice is refused.
        assert!(refused(&apply(&db, |t| add(t, token(1, 1001, 500)))));
        assert_eq!(
            apply(&db, |t| redeem(t, &[1; DIGEST_LEN], 1499)),
            ScmResponse::JoinTokenRedeemed {
                role: "datanode".into(),
                id: 4
            }
        );
        // Once only.
        assert!(refused(&apply(&db, |t| redeem(t, &[1; DIGEST_LEN], 1499))));
        // Unknown.
        assert!(refused(&apply(&db, |t| redeem(t, &[9; DIGEST_LEN], 1000))));
        // Expired at 1500: refused, and gone.
        let r = apply(&db, |t| redeem(t, &[2; DIGEST_LEN], 1500));
        assert!(refused(&r), "{r:?}");
        assert!(rows(&Txn::new(&db)).unwrap().is_empty());
    }

    #[test]
    fn bad_tokens_are_refused_and_expired_ones_make_room() {
        let (_d, db) = open();
        // Other rows of the column family are not tokens.
        db.put_cf(db.cf_handle(CF_CLUSTER).unwrap(), b"cluster_id", b"x")
            .unwrap();
        for bad in [
            JoinTokenRecord {
                digest: vec![1; 8],
                ..token(1, 1000, 10)
            },
            JoinTokenRecord {
                role: "root".into(),
                ..token(1, 1000, 10)
            },
            JoinTokenRecord {
                id: 0,
                ..token(1, 1000, 10)
            },
            token(1, 1000, 0),
            token(1, 1000, MAX_TTL_MS + 1),
        ] {
            let r = apply(&db, |t| add(t, bad.clone()));
            assert!(refused(&r), "{bad:?}: {r:?}");
        }
        apply(&db, |t| add(t, token(1, 1000, 10)));
        // Adding at 2000 drops the token that expired at 1010.
        apply(&db, |t| add(t, token(2, 2000, 10)));
        let txn = Txn::new(&db);
        let left: Vec<u8> = rows(&txn).unwrap().iter().map(|r| r.digest[0]).collect();
        assert_eq!(left, vec![2]);
    }

    /// The stored form is part of the replicated format: a `V1` row is the variant tag 0
    /// followed by the record's fields in order.
    #[test]
    fn a_v1_row_keeps_its_bytes() {
        let bytes = encode(&JoinTokenRow::V1(token(7, 1, 99))).unwrap();
        let mut want = vec![0u8, DIGEST_LEN as u8];
        want.extend_from_slice(&[7; DIGEST_LEN]);
        want.extend_from_slice(&[8]);
        want.extend_from_slice(b"datanode");
        want.extend_from_slice(&[4, 1, 100]);
        assert_eq!(bytes, want);
    }
}
