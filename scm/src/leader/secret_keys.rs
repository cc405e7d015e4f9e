//! The leader's side of block-token secret keys: making the next key before the current one
//! stops signing, forgetting keys no token can still need, and handing the kept keys to
//! OMs (`ScmBlock.GetSecretKeys`) and datanodes (register and heartbeat replies).
//!
//! Timing (`scm.block_token_key_rotation` = R, `scm.block_token_max_lifetime` = L): a key
//! made at `t` signs until `t + R` and is kept until `t + R + L`. The next key is made at
//! `t + 0.9 R`, so an OM that refreshes its keys every minute has the next one long before
//! the current one stops signing. A token lives at most L (the OM caps it), so every token
//! expires before the key that signed it is forgotten.

use std::time::Duration;

use ring::rand::{SecureRandom, SystemRandom};

use crate::error::ScmError;
use crate::node::{now_ms, ScmNode};
use crate::state::secret_keys::{self, SecretKeyRecord, SECRET_LEN};
use crate::state::{ScmRequest, ScmResponse};

/// What the leader should propose about keys at `now_ms`, given the kept keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPlan {
    /// Make a key with this id, created now.
    pub add: Option<u64>,
    /// Some key is past its keep-until time.
    pub remove_expired: bool,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The pure rotation rule (see the module doc).
pub fn plan(keys: &[SecretKeyRecord], now_ms: u64, rotation: Duration) -> KeyPlan {
    let remove_expired = keys.iter().any(|k| k.keep_until_ms <= now_ms);
    let newest = keys.iter().max_by_key(|k| k.id);
    let due = match newest {
        None => true,
        Some(k) => {
            let lead = ms(rotation) / 10;
            now_ms >= k.expires_ms.saturating_sub(lead)
        }
    };
    KeyPlan {
        add: due.then(|| newest.map_or(1, |k| k.id.saturating_add(1))),
        remove_expired,
    }
}

impl ScmNode {
    /// One pass of key upkeep on the ready leader (from the background loop).
    pub async fn rotate_secret_keys(&self) -> Result<(), ScmError> {
        drop(self.lead()?);
        let now = now_ms();
        let keys = secret_keys::keys(&self.group.db())?;
        let p = plan(&keys, now, self.cfg.block_token_key_rotation);
        if p.remove_expired {
            let r = self
                .write(ScmRequest::RemoveExpiredSecretKeys { now_ms: now })
                .await?;
            tracing::info!(response = ?r, "expired block-token keys removed");
        }
        if let Some(id) = p.add {
            let mut secret = vec![0u8; SECRET_LEN];
            SystemRandom::new()
                .fill(&mut secret)
                .map_err(|_| ScmError::Unavailable("no randomness for a secret key".into()))?;
            let expires_ms = now.saturating_add(ms(self.cfg.block_token_key_rotation));
            let key = SecretKeyRecord {
                id,
                secret,
                created_ms: now,
                expires_ms,
                keep_until_ms: expires_ms.saturating_add(ms(self.cfg.block_token_max_lifetime)),
            };
            match self.write(ScmRequest::AddSecretKey(key)).await? {
                ScmResponse::SecretKeyAdded { id } => {
                    tracing::info!(key_id = id, expires_ms, "new block-token secret key")
                }
                other => return Err(ScmError::refused("add secret key", other)),
            }
        }
        Ok(())
    }

    /// The kept keys, for OMs and datanodes; only the ready leader answers, so a caller
    /// never gets a follower's older set.
    pub fn secret_keys(&self) -> Result<Vec<SecretKeyRecord>, ScmError> {
        drop(self.lead()?);
        Ok(secret_keys::keys(&self.group.db())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);
    const DAY_MS: u64 = 86_400_000;

    fn key(id: u64, created_ms: u64) -> SecretKeyRecord {
        SecretKeyRecord {
            id,
            secret: vec![0; SECRET_LEN],
            created_ms,
            expires_ms: created_ms + DAY_MS,
            keep_until_ms: created_ms + DAY_MS + 3_600_000,
        }
    }

    #[test]
    fn the_first_key_is_made_at_once() {
        let p = plan(&[], 5, DAY);
        assert_eq!(p.add, Some(1));
        assert!(!p.remove_expired);
    }

    #[test]
    fn the_next_key_is_made_a_tenth_of_the_rotation_before_the_current_one_expires() {
        let keys = [key(4, 1000)];
        assert_eq!(plan(&keys, 1000 + DAY_MS * 9 / 10 - 1, DAY).add, None);
        assert_eq!(plan(&keys, 1000 + DAY_MS * 9 / 10, DAY).add, Some(5));
    }

    #[test]
    fn keys_past_keep_until_are_removed() {
        let keys = [key(1, 0), key(2, DAY_MS)];
        assert!(!plan(&keys, DAY_MS + 3_599_999, DAY).remove_expired);
        assert!(plan(&keys, DAY_MS + 3_600_000, DAY).remove_expired);
    }
}
