//! [`TokenIssuer`]: the block tokens the OM puts in its replies (docs/security.md, "Block
//! tokens"): read+write tokens for the blocks of OpenKey and AllocateBlock, read tokens for
//! the blocks of every key a reply describes (LookupKey, ListKeys, CommitKey, multipart
//! completion). A token is signed with the SCM's newest signing key, which the issuer
//! fetches from the SCM leader (`ScmBlock.GetSecretKeys`) and caches, refreshing every
//! [`REFRESH`] and whenever its key is within [`REFRESH`] of its end, so a rotation is
//! picked up long before the old key stops signing.
//!
//! On an insecure cluster (`security.insecure = true`) no token is issued: datanodes do not
//! check them there, and reads must not depend on the SCM.

use std::time::{Duration, Instant};

use rozone_proto::om as pb;
use rozone_proto::scm as spb;
use rozone_rpc::block_token::{AccessMode, BlockToken, KeySet, SecretKey, TokenError, MAX_KEYS};

use crate::error::OmError;
use crate::node::now_ms;
use crate::scm_client::ScmClient;

/// How often the cached keys are fetched again (and how close to its end a key may get
/// before they are).
pub const REFRESH: Duration = Duration::from_secs(60);

/// A key as the SCM described it.
#[derive(Debug, Clone)]
struct Key {
    key: SecretKey,
    created_ms: u64,
    expires_ms: u64,
    keep_until_ms: u64,
}

#[derive(Default)]
struct Cache {
    keys: Vec<Key>,
    fetched: Option<Instant>,
}

/// Signs block tokens with the SCM's keys.
pub struct TokenIssuer {
    enabled: bool,
    lifetime: Duration,
    cache: tokio::sync::Mutex<Cache>,
}

/// The key to sign with at `now_ms`: the newest (highest id) whose signing period holds.
fn pick(keys: &[Key], now_ms: u64) -> Option<&Key> {
    keys.iter()
        .filter(|k| k.created_ms <= now_ms && now_ms < k.expires_ms)
        .max_by_key(|k| k.key.id)
}

/// The keys of a `GetSecretKeys` reply that are well-formed (others are logged and
/// skipped), at most [`MAX_KEYS`] of the newest.
fn accept(keys: Vec<spb::SecretKey>) -> Vec<Key> {
    let mut out: Vec<Key> = keys
        .into_iter()
        .filter_map(|k| match SecretKey::new(k.id, k.secret) {
            Ok(key) => Some(Key {
                key,
                created_ms: k.created_ms,
                expires_ms: k.expires_ms,
                keep_until_ms: k.keep_until_ms,
            }),
            Err(e) => {
                tracing::warn!(key_id = k.id, error = %e, "unusable secret key from the SCM");
                None
            }
        })
        .collect();
    out.sort_by_key(|k| k.key.id);
    let extra = out.len().saturating_sub(MAX_KEYS);
    out.drain(..extra);
    out
}

impl TokenIssuer {
    /// An issuer of tokens living `lifetime`; `enabled` is false on an insecure cluster.
    pub fn new(enabled: bool, lifetime: Duration) -> Self {
        Self {
            enabled,
            lifetime,
            cache: tokio::sync::Mutex::new(Cache::default()),
        }
    }

    /// Whether tokens are issued at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The key to sign with and the expiry of a token signed now; `None` when disabled.
    async fn signer(&self, scm: &ScmClient) -> Result<Option<(SecretKey, u64)>, OmError> {
        if !self.enabled {
            return Ok(None);
        }
        let mut c = self.cache.lock().await;
        let now = now_ms();
        let margin = REFRESH.as_millis() as u64;
        let stale = c.fetched.is_none_or(|t| t.elapsed() >= REFRESH)
            || pick(&c.keys, now).is_none_or(|k| k.expires_ms.saturating_sub(now) < margin);
        if stale {
            match scm.secret_keys().await {
                Ok(keys) => {
                    c.keys = accept(keys);
                    c.fetched = Some(Instant::now());
                }
                // A key still signing will do until the SCM answers again.
                Err(e) if pick(&c.keys, now).is_some() => {
                    tracing::warn!(error = %e, "could not refresh block-token keys from the SCM")
                }
                Err(e) => return Err(e),
            }
        }
        let now = now_ms();
        let Some(k) = pick(&c.keys, now) else {
            return Err(OmError::ScmUnavailable(
                "the SCM has no block-token key yet (its leader makes one when it starts)".into(),
            ));
        };
        let lifetime = u64::try_from(self.lifetime.as_millis()).unwrap_or(u64::MAX);
        let expires = now.saturating_add(lifetime).min(k.keep_until_ms);
        Ok(Some((k.key.clone(), expires)))
    }

    /// Checks that each of `blocks` comes with a token granting write, signed by a key of
    /// the SCM's that is still kept; nothing to check on an insecure cluster. A token
    /// signed by a key this OM has not fetched yet (another OM signed it with a newer key)
    /// makes it fetch the keys again.
    pub async fn check_write(
        &self,
        scm: &ScmClient,
        blocks: &[(rozone_types::BlockId, Vec<u8>)],
    ) -> Result<(), OmError> {
        if !self.enabled || blocks.is_empty() {
            return Ok(());
        }
        let mut c = self.cache.lock().await;
        let checked = match check_writes(&c.keys, blocks, now_ms()) {
            Err((_, TokenError::UnknownKey(_))) => {
                c.keys = accept(scm.secret_keys().await?);
                c.fetched = Some(Instant::now());
                check_writes(&c.keys, blocks, now_ms())
            }
            other => other,
        };
        checked.map_err(|(block, error)| OmError::BlockToken { block, error })
    }

    /// Puts a read+write token into each of `blocks` (an OpenKey or AllocateBlock reply).
    pub async fn sign_allocated(
        &self,
        scm: &ScmClient,
        blocks: &mut [spb::AllocatedBlock],
    ) -> Result<(), OmError> {
        let Some((key, expires_ms)) = self.signer(scm).await? else {
            return Ok(());
        };
        for b in blocks {
            if let Some(id) = b.block_id {
                b.block_token = token(&key, id, AccessMode::READ_WRITE, expires_ms);
            }
        }
        Ok(())
    }

    /// Puts a read token into each block of each of `keys` (a reply describing keys).
    pub async fn sign_keys(
        &self,
        scm: &ScmClient,
        keys: &mut [pb::KeyInfo],
    ) -> Result<(), OmError> {
        if keys.iter().all(|k| k.blocks.is_empty()) {
            return Ok(());
        }
        let Some((key, expires_ms)) = self.signer(scm).await? else {
            return Ok(());
        };
        for b in keys.iter_mut().flat_map(|k| k.blocks.iter_mut()) {
            if let Some(id) = b.block_id {
                b.block_token = token(&key, id, AccessMode::READ, expires_ms);
            }
        }
        Ok(())
    }
}

/// Checks each block's write token against `keys` (those still kept at `now_ms`): the
/// first block refused and why (`UnknownKey`: fetch the keys and check again).
fn check_writes(
    keys: &[Key],
    blocks: &[(rozone_types::BlockId, Vec<u8>)],
    now_ms: u64,
) -> Result<(), (rozone_types::BlockId, TokenError)> {
    let set = KeySet::new(
        keys.iter()
            .filter(|k| now_ms < k.keep_until_ms)
            .map(|k| k.key.clone()),
    );
    for (b, token) in blocks {
        set.verify(token, b.container_id, b.local_id, AccessMode::WRITE, now_ms)
            .map_err(|e| (*b, e))?;
    }
    Ok(())
}

fn token(key: &SecretKey, id: spb::BlockId, mode: AccessMode, expires_ms: u64) -> Vec<u8> {
    BlockToken {
        key_id: key.id,
        container_id: id.container_id,
        local_id: id.local_id,
        mode,
        expires_ms,
    }
    .sign(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rozone_rpc::block_token::KeySet;

    fn wire(id: u64, created_ms: u64, expires_ms: u64) -> spb::SecretKey {
        spb::SecretKey {
            id,
            secret: vec![id as u8; 32],
            created_ms,
            expires_ms,
            keep_until_ms: expires_ms + 100,
        }
    }

    #[test]
    fn a_deferred_commit_needs_a_write_token_for_each_block_it_names() {
        let keys = accept(vec![wire(1, 0, 1_000)]);
        let b = rozone_types::BlockId::new(4, 9);
        let id = spb::BlockId {
            container_id: 4,
            local_id: 9,
        };
        let rw = token(&keys[0].key, id, AccessMode::READ_WRITE, 500);
        let ok = |blocks: &[(rozone_types::BlockId, Vec<u8>)]| check_writes(&keys, blocks, 100);
        assert!(ok(&[(b, rw.clone())]).is_ok());
        // Read-only, for another block, altered, missing: refused.
        let read = token(&keys[0].key, id, AccessMode::READ, 500);
        let other = rozone_types::BlockId::new(4, 10);
        let mut altered = rw.clone();
        altered[20] ^= 1;
        for bad in [
            vec![(b, read)],
            vec![(other, rw.clone())],
            vec![(b, altered)],
            vec![(b, Vec::new())],
        ] {
            let refused = ok(&bad).unwrap_err();
            assert_eq!(refused.0, bad[0].0);
            assert!(
                !matches!(refused.1, TokenError::UnknownKey(_)),
                "{refused:?}"
            );
        }
        // Signed by a key this OM has not fetched: fetch and look again; the refusal names
        // that block, not the first.
        let newer = accept(vec![wire(2, 0, 1_000)]);
        let other_id = spb::BlockId {
            container_id: 4,
            local_id: 10,
        };
        let by_newer = token(&newer[0].key, other_id, AccessMode::READ_WRITE, 500);
        assert!(matches!(
            ok(&[(b, rw.clone()), (other, by_newer)]),
            Err((blk, TokenError::UnknownKey(2))) if blk == other
        ));
    }

    #[test]
    fn signs_with_the_newest_key_in_its_period() {
        let keys = accept(vec![wire(2, 100, 300), wire(1, 0, 200), wire(3, 500, 900)]);
        assert_eq!(pick(&keys, 150).map(|k| k.key.id), Some(2));
        assert_eq!(pick(&keys, 250).map(|k| k.key.id), Some(2));
        assert_eq!(pick(&keys, 50).map(|k| k.key.id), Some(1));
        // Between periods, and before the first: none.
        assert!(pick(&keys, 400).is_none());
        assert!(pick(&[], 400).is_none());
    }

    #[test]
    fn malformed_keys_from_the_scm_are_skipped() {
        let mut short = wire(5, 0, 10);
        short.secret.truncate(4);
        let keys = accept(vec![short, wire(4, 0, 10)]);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].key.id, 4);
    }

    #[test]
    fn tokens_verify_with_the_key_for_their_block_and_mode() {
        let keys = accept(vec![wire(1, 0, 1_000)]);
        let k = &keys[0].key;
        let id = spb::BlockId {
            container_id: 3,
            local_id: 4,
        };
        let set = KeySet::new([k.clone()]);
        let rw = token(k, id, AccessMode::READ_WRITE, 500);
        set.verify(&rw, 3, 4, AccessMode::WRITE, 400).unwrap();
        let r = token(k, id, AccessMode::READ, 500);
        set.verify(&r, 3, 4, AccessMode::READ, 400).unwrap();
        assert!(set.verify(&r, 3, 4, AccessMode::WRITE, 400).is_err());
    }
}
