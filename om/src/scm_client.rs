//! The OM's client of the SCM's `ScmBlock` service: the one failover [`Ring`] of
//! rozone-rpc over `om.scm_addrs` (leader hints followed, retryable refusals retried with
//! bounded backoff until `om.scm_timeout`), over this OM's channel factory. It takes and
//! returns the OM's domain values ([`AllocatedBlock`], [`BlockId`]): the wire types stay
//! at this edge, and what the SCM sends back is checked here ([`crate::convert`]).

use std::time::Duration;

use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_proto::scm::{
    AllocateBlockRequest, DeleteBlocksRequest, GetSecretKeysRequest, SecretKey,
};
use rozone_rpc::{ChannelFactory, RetryPolicy, Ring, RpcError};

use crate::error::OmError;
use crate::state::types::{AllocatedBlock, BlockId};

/// What new blocks must not be placed on: a writer that failed on a datanode, pipeline or
/// container asks for blocks elsewhere.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exclude {
    pub datanodes: Vec<u64>,
    pub pipelines: Vec<u64>,
    pub containers: Vec<u64>,
}

impl Exclude {
    pub fn is_empty(&self) -> bool {
        self.datanodes.is_empty() && self.pipelines.is_empty() && self.containers.is_empty()
    }
}

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

    /// Asks the SCM leader for `count` blocks of `size` bytes (0: of unknown length, up
    /// to a whole block), placed outside `exclude`.
    pub async fn allocate(
        &self,
        size: u64,
        count: u32,
        exclude: &Exclude,
    ) -> Result<Vec<AllocatedBlock>, OmError> {
        let req = AllocateBlockRequest {
            size,
            count,
            owner: "om".to_string(),
            exclude_datanodes: exclude.datanodes.clone(),
            exclude_pipelines: exclude.pipelines.clone(),
            exclude_containers: exclude.containers.clone(),
        };
        let reply = self
            .ring()?
            .call("allocate blocks", |ch| {
                let r = req.clone();
                async move { ScmBlockClient::new(ch).allocate_block(r).await }
            })
            .await
            .map_err(|e| scm_error("allocate blocks", e))?;
        if reply.blocks.len() != count as usize {
            return Err(OmError::Scm(format!(
                "asked for {count} block(s), got {}",
                reply.blocks.len()
            )));
        }
        reply
            .blocks
            .into_iter()
            .map(AllocatedBlock::try_from)
            .collect()
    }

    /// Hands blocks no key refers to any more to the SCM for deletion.
    pub async fn delete_blocks(&self, blocks: Vec<BlockId>) -> Result<(), OmError> {
        self.ring()?
            .call("delete blocks", |ch| {
                let r = DeleteBlocksRequest {
                    blocks: blocks.iter().map(|b| (*b).into()).collect(),
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
