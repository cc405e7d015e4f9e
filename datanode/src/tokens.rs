//! [`TokenVerifier`]: the datanode's check of block tokens on the container port
//! (docs/security.md, "Block tokens"). Reads (GetBlock, ReadChunk, GetCommittedBlockLength)
//! need a token granting read, writes (WriteChunk, PutBlock, StreamBlock) one granting
//! write, for exactly the block the call names, signed by a key of the SCM's and not
//! expired. Data movement between datanodes (pipeline pushes and pulls, container
//! replication) is on other ports and authorized by the caller's datanode certificate
//! instead.
//!
//! Keys come with every SCM register and heartbeat reply ([`TokenVerifier::set_keys`]).
//! A token signed by a key newer than any known (the SCM rotated since the last heartbeat)
//! makes the verifier ask the SCM leader at once (`ScmBlock.GetSecretKeys`), at most once
//! per [`REFETCH_PAUSE`] so forged key ids cannot turn into a flood of SCM calls.
//!
//! On an insecure datanode (`security.insecure = true`) nothing is checked: every caller
//! is trusted there anyway.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use rozone_proto::scm as spb;
use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_rpc::block_token::{AccessMode, KeySet, SecretKey, TokenError};
use rozone_rpc::Ring;
use rozone_types::codes::DnCode;
use rozone_types::BlockId;

use crate::error::DnError;

/// Least time between two fetches of the keys on a miss.
pub const REFETCH_PAUSE: Duration = Duration::from_secs(1);

/// Checks block tokens with the SCM's keys.
pub struct TokenVerifier {
    enabled: bool,
    keys: RwLock<KeySet>,
    /// Where keys are fetched from on a miss (none: only from heartbeats).
    scm: Option<Ring>,
    /// When keys were last fetched on a miss; held across the fetch, so misses queue
    /// behind one call.
    fetched: tokio::sync::Mutex<Option<Instant>>,
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn refused(e: TokenError) -> DnError {
    DnError::new(DnCode::BlockTokenVerificationFailed, e.to_string())
}

/// The well-formed keys of an SCM reply (others are logged and skipped).
fn key_set(keys: Vec<spb::SecretKey>) -> KeySet {
    KeySet::new(keys.into_iter().filter_map(|k| {
        SecretKey::new(k.id, k.secret)
            .inspect_err(|e| tracing::warn!(error = %e, "unusable secret key from the SCM"))
            .ok()
    }))
}

impl TokenVerifier {
    /// A verifier that checks nothing (insecure datanode).
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            keys: RwLock::new(KeySet::default()),
            scm: None,
            fetched: tokio::sync::Mutex::new(None),
        }
    }

    /// A verifier that checks every call, fetching missing keys from `scm` when given.
    pub fn new(scm: Option<Ring>) -> Self {
        Self {
            enabled: true,
            keys: RwLock::new(KeySet::default()),
            scm,
            fetched: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether calls are checked.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Replaces the keys with the SCM's current set (a register or heartbeat reply).
    pub fn set_keys(&self, keys: Vec<spb::SecretKey>) {
        let set = key_set(keys);
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = set;
    }

    fn verify_now(&self, token: &[u8], block: BlockId, mode: AccessMode) -> Result<(), TokenError> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        keys.verify(token, block.container_id, block.local_id, mode, now_ms())
            .map(|_| ())
    }

    /// Whether key `id` is newer than every key held (so the SCM may have made it since).
    fn may_be_new(&self, id: u64) -> bool {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        keys.newest_id().is_none_or(|n| id > n)
    }

    /// Checks `token` (as the call carried it) for `block` and `mode`; a refusal is
    /// `BLOCK_TOKEN_VERIFICATION_FAILED` (PERMISSION_DENIED) saying why.
    pub async fn check(
        &self,
        token: &Result<Vec<u8>, TokenError>,
        block: BlockId,
        mode: AccessMode,
    ) -> Result<(), DnError> {
        if !self.enabled {
            return Ok(());
        }
        let token = token.as_ref().map_err(|e| refused(e.clone()))?;
        match self.verify_now(token, block, mode) {
            Err(TokenError::UnknownKey(id)) if self.may_be_new(id) => {
                self.refetch().await;
                self.verify_now(token, block, mode).map_err(refused)
            }
            r => r.map_err(refused),
        }
    }

    /// Fetches the keys from the SCM leader, unless that was done within
    /// [`REFETCH_PAUSE`].
    async fn refetch(&self) {
        let Some(ring) = &self.scm else { return };
        let mut last = self.fetched.lock().await;
        if last.is_some_and(|t| t.elapsed() < REFETCH_PAUSE) {
            return;
        }
        *last = Some(Instant::now());
        let r = ring
            .call("get secret keys", |ch| async move {
                ScmBlockClient::new(ch)
                    .get_secret_keys(spb::GetSecretKeysRequest {})
                    .await
            })
            .await;
        match r {
            Ok(reply) => self.set_keys(reply.keys),
            Err(e) => tracing::warn!(error = %e, "could not fetch block-token keys from the SCM"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rozone_rpc::block_token::BlockToken;

    fn wire(id: u64) -> spb::SecretKey {
        spb::SecretKey {
            id,
            secret: vec![id as u8; 32],
            ..Default::default()
        }
    }

    fn signed(key_id: u64, block: BlockId, mode: AccessMode) -> Vec<u8> {
        let key = SecretKey::new(key_id, vec![key_id as u8; 32]).unwrap();
        BlockToken {
            key_id,
            container_id: block.container_id,
            local_id: block.local_id,
            mode,
            expires_ms: now_ms() + 60_000,
        }
        .sign(&key)
    }

    const B: BlockId = BlockId {
        container_id: 1,
        local_id: 2,
    };

    #[tokio::test]
    async fn checks_tokens_only_when_enabled() {
        let v = TokenVerifier::new(None);
        v.set_keys(vec![wire(1)]);
        let ok = Ok(signed(1, B, AccessMode::READ_WRITE));
        v.check(&ok, B, AccessMode::WRITE).await.unwrap();
        let read = Ok(signed(1, B, AccessMode::READ));
        let e = v.check(&read, B, AccessMode::WRITE).await.unwrap_err();
        assert_eq!(e.code, DnCode::BlockTokenVerificationFailed);
        let e = v
            .check(&Err(TokenError::Missing), B, AccessMode::READ)
            .await
            .unwrap_err();
        assert!(e.message.contains("no block token"), "{e}");
        // A key the SCM never sent: unknown (no SCM to ask here).
        let other = Ok(signed(2, B, AccessMode::READ));
        let e = v.check(&other, B, AccessMode::READ).await.unwrap_err();
        assert!(e.message.contains("unknown key 2"), "{e}");
        // Keys are replaced by each heartbeat's set.
        v.set_keys(vec![wire(2)]);
        v.check(&other, B, AccessMode::READ).await.unwrap();
        assert!(v.check(&ok, B, AccessMode::READ).await.is_err());

        let off = TokenVerifier::disabled();
        off.check(&Err(TokenError::Missing), B, AccessMode::WRITE)
            .await
            .unwrap();
    }
}
