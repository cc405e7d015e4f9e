//! The leader's side of join tokens (docs/security.md, "Join tokens"): making one for an
//! admin, and redeeming one for a process that enrolls. The token is 32 random bytes shown
//! as `rozone-join-<64 hex>`; the ring keeps only their SHA-256
//! ([`crate::state::join_tokens`]), so neither the database nor a snapshot can be mined
//! for a redeemable token.

use std::time::Duration;

use ring::digest::{digest, SHA256};
use ring::rand::{SecureRandom, SystemRandom};
use rozone_rpc::{Caller, Role};

use crate::error::{Invalid, ScmError};
use crate::node::{now_ms, ScmNode};
use crate::state::join_tokens::{JoinTokenRecord, MAX_TTL_MS};
use crate::state::{ScmRequest, ScmResponse};

/// What every token starts with (so a token pasted into the wrong place is recognised).
pub const TOKEN_PREFIX: &str = "rozone-join-";
const SECRET_LEN: usize = 32;

/// The SHA-256 of a well-formed token's secret; `None` for anything else.
pub fn token_digest(token: &str) -> Option<Vec<u8>> {
    let hex = token.trim().strip_prefix(TOKEN_PREFIX)?;
    if hex.len() != SECRET_LEN * 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let secret: Vec<u8> = (0..SECRET_LEN)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    Some(digest(&SHA256, &secret).as_ref().to_vec())
}

fn token_text(secret: &[u8]) -> String {
    let mut s = String::from(TOKEN_PREFIX);
    for b in secret {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

impl ScmNode {
    /// Makes a one-time token for a certificate of `role` and `id`, redeemable for `ttl`;
    /// returns the token and when it expires (ms since the epoch).
    pub async fn create_join_token(
        &self,
        role: Role,
        id: u64,
        ttl: Duration,
    ) -> Result<(String, u64), ScmError> {
        drop(self.lead()?);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if id == 0 {
            return Err(Invalid("the id must be above 0".into()).into());
        }
        if ttl_ms == 0 || ttl_ms > MAX_TTL_MS {
            return Err(Invalid(format!(
                "the token's lifetime must be 1 s to {} days",
                MAX_TTL_MS / 86_400_000
            ))
            .into());
        }
        let mut secret = [0u8; SECRET_LEN];
        SystemRandom::new()
            .fill(&mut secret)
            .map_err(|_| ScmError::Unavailable("no randomness for a join token".into()))?;
        let token = token_text(&secret);
        let now = now_ms();
        let record = JoinTokenRecord {
            digest: digest(&SHA256, &secret).as_ref().to_vec(),
            role: role.as_str().to_string(),
            id,
            created_ms: now,
            expires_ms: now.saturating_add(ttl_ms),
        };
        match self.write(ScmRequest::AddJoinToken(record)).await? {
            ScmResponse::JoinTokenAdded { expires_ms } => {
                tracing::info!(%role, id, expires_ms, "join token made");
                Ok((token, expires_ms))
            }
            ScmResponse::JoinTokenRefused { reason } => Err(ScmError::FailedPrecondition(format!(
                "join token refused: {reason}"
            ))),
            other => Err(ScmError::refused("add join token", other)),
        }
    }

    /// Redeems `token` (once, replicated) and returns the identity its certificate gets.
    pub async fn redeem_join_token(&self, token: &str) -> Result<Caller, ScmError> {
        drop(self.lead()?);
        let Some(digest) = token_digest(token) else {
            return Err(ScmError::Denied(format!(
                "not a join token: want {TOKEN_PREFIX}<64 hex digits> (rozone admin join-token create)"
            )));
        };
        let request = ScmRequest::RedeemJoinToken {
            digest,
            now_ms: now_ms(),
        };
        match self.write(request).await? {
            ScmResponse::JoinTokenRedeemed { role, id } => {
                let role = role.parse::<Role>().map_err(ScmError::Internal)?;
                tracing::info!(%role, id, "join token redeemed");
                Ok(Caller { role, id })
            }
            ScmResponse::JoinTokenRefused { reason } => {
                tracing::warn!(%reason, "join token refused");
                Err(ScmError::Denied(format!("join token refused: {reason}")))
            }
            other => Err(ScmError::refused("redeem join token", other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_to_their_digest_and_junk_has_none() {
        let secret = [0xab; SECRET_LEN];
        let t = token_text(&secret);
        assert_eq!(t.len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(
            token_digest(&format!(" {t}\n")),
            Some(digest(&SHA256, &secret).as_ref().to_vec())
        );
        for junk in [
            "",
            "rozone-join-",
            &t[..t.len() - 1],
            &format!("{t}0"),
            &t.replace("ab", "zz"),
            &t.replace(TOKEN_PREFIX, "rozone-jion-"),
            "rozone-join-é",
        ] {
            assert_eq!(token_digest(junk), None, "{junk:?}");
        }
    }
}
