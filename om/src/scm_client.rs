//! The OM's client of the SCM's `ScmBlock` service: the one failover [`Ring`] of
//! rozone-rpc over `om.scm_addrs` (leader hints followed, retryable refusals retried with
//! bounded backoff until `om.scm_timeout`), over this OM's channel factory.

use std::time::Duration;

use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_proto::scm::{
    AllocateBlockReply, AllocateBlockRequest, BlockId, DeleteBlocksRequest, GetSecretKeysRequest,
    SecretKey,
};
use rozone_rpc::{ChannelFactory, RetryPolicy, Ring, RpcError};

use crate::error::OmError;

/// One attempt may take at most this long (the overall deadline may be shorter).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ScmClient {
    /// `Err`: the configured addresses are unusable (said on every call).
    ring: Result<Ring, String>,
}

impl ScmClient {
    pub fn new(addrs: &[String], deadline: Duration, channels: ChannelFactory) -> Self {
        let policy = RetryPolicy {
            deadline,
            attempt_timeout: ATTEMPT_TIMEOUT.min(deadline),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
        };
        Self {
            ring: Ring::new("SCM", addrs, policy, channels).map_err(|e| e.to_string()),
        }
    }

    fn ring(&self) -> Result<&Ring, OmError> {
        self.ring
            .as_ref()
            .map_err(|e| OmError::ScmUnavailable(e.clone()))
    }

    /// Asks the SCM leader for `count` blocks.
    pub async fn allocate(&self, req: AllocateBlockRequest) -> Result<AllocateBlockReply, OmError> {
        let want = req.count;
        let reply = self
            .ring()?
            .call("allocate blocks", |ch| {
                let r = req.clone();
                async move { ScmBlockClient::new(ch).allocate_block(r).await }
            })
            .await
            .map_err(|e| scm_error("allocate blocks", e))?;
        if reply.blocks.len() != want as usize {
            return Err(OmError::Scm(format!(
                "asked for {want} block(s), got {}",
                reply.blocks.len()
            )));
        }
        Ok(reply)
    }

    /// Hands blocks no key refers to any more to the SCM for deletion.
    pub async fn delete_blocks(&self, blocks: Vec<BlockId>) -> Result<(), OmError> {
        self.ring()?
            .call("delete blocks", |ch| {
                let r = DeleteBlocksRequest {
                    blocks: blocks.clone(),
                };
                async move { ScmBlockClient::new(ch).delete_blocks(r).await }
            })
            .await
            .map(|_| ())
            .map_err(|e| scm_error("delete blocks", e))
    }

    /// The SCM's block-token secret keys (for [`crate::tokens::TokenIssuer`]).
    pub async fn secret_keys(&self) -> Result<Vec<SecretKey>, OmError> {
        self.ring()?
            .call("get secret keys", |ch| async move {
                ScmBlockClient::new(ch)
                    .get_secret_keys(GetSecretKeysRequest {})
                    .await
            })
            .await
            .map(|r| r.keys)
            .map_err(|e| scm_error("get secret keys", e))
    }
}

fn scm_error(what: &str, e: RpcError) -> OmError {
    match e {
        RpcError::Unavailable { detail, .. } => OmError::ScmUnavailable(detail),
        RpcError::Status { status, .. } => OmError::Scm(format!("{what}: {}", status.message())),
        other => OmError::Scm(format!("{what}: {other}")),
    }
}
