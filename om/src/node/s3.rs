//! The node's S3 credential calls: a user's secret drawn by the leader and replicated, read
//! from the leader's state, revoked.

use super::types::ReadOptions;
use super::{now_ms, unexpected, OmNode};
use crate::error::OmError;
use crate::state::types::S3Secret;
use crate::state::{read, OmRequest, OmResponse, Refusal};

const MAX_USER: usize = 64;

/// A user name (the access key id): what SigV4's credential scope can carry.
fn check_user(u: &str) -> Result<(), OmError> {
    let ok = !u.is_empty()
        && u.len() <= MAX_USER
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if ok {
        Ok(())
    } else {
        Err(OmError::InvalidName(format!(
            "invalid user {u:?}: 1 to {MAX_USER} characters of letters, digits, '.', '_', '-', '@'"
        )))
    }
}

/// 40 characters of base64url from 30 random bytes, as long as AWS's secrets.
fn new_secret() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..40)
        .map(|_| ALPHABET[rand::random_range(0..64usize)] as char)
        .collect()
}

impl OmNode {
    /// The secret of `user` (its access key id): a new one, or the one it already has.
    pub async fn get_s3_secret(&self, user: String) -> Result<S3Secret, OmError> {
        check_user(&user)?;
        let req = OmRequest::S3SetSecret {
            access_id: user.clone(),
            user,
            secret: new_secret(),
            now_ms: now_ms(),
        };
        match self.propose(req).await? {
            OmResponse::S3Secret(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// The secret of `access_id`, for a gateway verifying a signature.
    pub async fn lookup_s3_secret(&self, access_id: String) -> Result<S3Secret, OmError> {
        check_user(&access_id)?;
        // The leader's state: a revoked key must stop working at once.
        self.read_gate(ReadOptions::default()).await?;
        read::s3_secret(&self.group.db(), &access_id)?
            .ok_or(OmError::Refused(Refusal::S3SecretNotFound { access_id }))
    }

    pub async fn revoke_s3_secret(&self, access_id: String) -> Result<(), OmError> {
        check_user(&access_id)?;
        match self
            .propose(OmRequest::S3RevokeSecret { access_id })
            .await?
        {
            OmResponse::S3SecretRevoked => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
