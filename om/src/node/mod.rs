//! One running OM as its services see it: the Raft group, the SCM client, the other OMs,
//! the config values services need, and counters for `/metrics`. Also the two gates every
//! request passes: [`OmNode::propose`] for writes (ready leader only) and
//! [`OmNode::read_gate`] for reads (the read-consistency modes of DESIGN.md).
//!
//! The node's calls take and return domain values ([`types`]); the services in
//! `crate::service` only decode a request ([`crate::convert`]), call the node and encode
//! the answer. [`namespace`] holds the volume and bucket calls, [`keys`] and
//! [`multipart`] the key and multipart upload calls, [`s3`] the S3 credentials, and
//! [`checks`] the argument checks they share. [`actor`] says whom a client call acts for.

pub mod actor;
pub mod checks;
pub mod keys;
pub mod multipart;
pub mod namespace;
pub mod s3;
pub mod types;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rozone_raft::gate::{self, LogLimit};
use rozone_raft::ring::MemberRole;
use rozone_raft::{RaftGroup, RaftGroupError};

use crate::block_pool::BlockPool;
use crate::config::Config;
use crate::error::OmError;
use crate::peers::OmPeers;
use crate::scm_client::ScmClient;
use crate::state::{OmLogic, OmRequest, OmResponse};
use crate::tokens::TokenIssuer;
use types::{Consistency, ReadInfo, ReadOptions};

/// How long a follower waits to apply up to a leader's read index.
const READ_INDEX_WAIT: Duration = Duration::from_secs(10);

/// Milliseconds since the Unix epoch (what the leader stamps into requests).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The error for a state machine answer that does not fit the request (a bug).
pub(crate) fn unexpected(r: OmResponse) -> OmError {
    OmError::Internal(format!("unexpected state machine response {r:?}"))
}

/// Counters shown on `/metrics`.
#[derive(Default)]
pub struct Metrics {
    pub lease_served: AtomicU64,
    pub lease_refused: [AtomicU64; gate::Refused::ALL.len()],
    pub lease_disabled: AtomicU64,
    pub reads: [AtomicU64; 4],
    pub writes: AtomicU64,
    pub writes_refused: AtomicU64,
    pub scm_errors: AtomicU64,
    pub open_keys_expired: AtomicU64,
    pub s3_uploads_expired: AtomicU64,
    pub blocks_deleted: AtomicU64,
    pub deferred_opens: AtomicU64,
    pub reservations_expired: AtomicU64,
}

impl Metrics {
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

pub struct OmNode {
    pub group: Arc<RaftGroup<OmLogic>>,
    pub config: Arc<Config>,
    pub scm: ScmClient,
    /// Blocks fetched ahead for opens of unknown length ([`BlockPool`]).
    pub blocks: BlockPool,
    /// Signs the block tokens of key replies (off on an insecure cluster).
    pub tokens: TokenIssuer,
    pub metrics: Metrics,
    /// The other OMs of the ring (read index from the leader).
    pub peers: OmPeers,
}

impl OmNode {
    /// `factory` builds every channel this OM opens (to the SCMs and to other OMs).
    pub fn new(
        group: Arc<RaftGroup<OmLogic>>,
        config: Arc<Config>,
        factory: rozone_rpc::ChannelFactory,
    ) -> Self {
        let scm = ScmClient::new(&config.om.scm_addrs, config.om.scm_timeout, factory.clone());
        let tokens = TokenIssuer::new(!config.security.insecure, config.om.block_token_lifetime);
        Self {
            tokens,
            group,
            config,
            scm,
            blocks: BlockPool::default(),
            metrics: Metrics::default(),
            peers: OmPeers::new(factory),
        }
    }

    pub fn id(&self) -> u64 {
        self.group.node_id()
    }

    /// Refuses unless this node is a ready leader (NotLeader + hint, or LeaderNotReady).
    pub fn require_ready_leader(&self) -> Result<(), OmError> {
        if self.group.is_ready_leader() {
            Ok(())
        } else {
            Metrics::inc(&self.metrics.writes_refused);
            Err(self.group.not_leader_error().into())
        }
    }

    /// Replicates a write; a refusal of the state machine becomes `OmError::Refused`.
    pub async fn propose(&self, req: OmRequest) -> Result<OmResponse, OmError> {
        self.require_ready_leader()?;
        Metrics::inc(&self.metrics.writes);
        match self.group.write(req).await {
            Ok(OmResponse::Refused(r)) => Err(r.into()),
            Ok(r) => Ok(r),
            Err(e) => {
                if e.is_retryable() {
                    Metrics::inc(&self.metrics.writes_refused);
                }
                Err(e.into())
            }
        }
    }

    /// Replicates a write on behalf of `actor` (a user's is wrapped in `AsUser`).
    pub async fn propose_as(
        &self,
        actor: &actor::Actor,
        req: OmRequest,
    ) -> Result<OmResponse, OmError> {
        self.propose(actor.wrap(req)).await
    }

    /// Decides whether (and after what wait) a read may be served from this node's state.
    pub async fn read_gate(&self, opts: ReadOptions) -> Result<ReadInfo, OmError> {
        let consistency = opts.consistency;
        Metrics::inc(&self.metrics.reads[consistency.index()]);
        match consistency {
            Consistency::Default => self.require_ready_leader()?,
            Consistency::LinearizableLeaderOnly => self.group.read_barrier().await?,
            Consistency::LinearizableAllowFollower => self.follower_read_index().await?,
            Consistency::LocalLease => self.local_lease(&opts)?,
        }
        Ok(ReadInfo {
            served_by: self.id(),
            applied_index: self.group.applied_index(),
            consistency,
        })
    }

    fn local_lease(&self, opts: &ReadOptions) -> Result<(), OmError> {
        let om = &self.config.om;
        if !om.local_lease_enabled {
            Metrics::inc(&self.metrics.lease_disabled);
            return Err(OmError::LocalLeaseDisabled);
        }
        let mut lease_time = om.local_lease_time;
        if let Some(ms) = opts.lease_time_ms {
            lease_time = lease_time.min(Duration::from_millis(ms));
        }
        let configured =
            LogLimit::from_i64(om.local_lease_log_limit).unwrap_or(LogLimit::Entries(0));
        let log_limit = match opts.log_limit {
            None | Some(-1) => configured,
            Some(v) => configured.narrower(LogLimit::from_i64(v).ok_or_else(|| {
                OmError::InvalidArgument(format!(
                    "read.log_limit ({v}) must be -1 (the configured limit) or at least 0"
                ))
            })?),
        };
        let input = self.group.lease_input(lease_time, log_limit);
        match gate::local_lease(&input) {
            Ok(()) => {
                Metrics::inc(&self.metrics.lease_served);
                Ok(())
            }
            Err(reason) => {
                Metrics::inc(&self.metrics.lease_refused[reason.index()]);
                Err(OmError::LeaseRefused {
                    reason,
                    leader_client_addr: input
                        .known_leader
                        .filter(|l| *l != self.id())
                        .and_then(|l| self.member_client_addr(l)),
                })
            }
        }
    }

    /// A member's client address from the Raft membership.
    pub fn member_client_addr(&self, id: u64) -> Option<String> {
        self.group
            .ring_view()
            .member(id)
            .map(|m| m.client_addr.clone())
    }

    /// LINEARIZABLE_ALLOW_FOLLOWER: the leader confirms its read index, then this node
    /// waits until it applied that far.
    async fn follower_read_index(&self) -> Result<(), OmError> {
        let v = self.group.ring_view();
        if v.role == MemberRole::Leader {
            return Ok(self.group.read_barrier().await?);
        }
        let Some((leader, addr)) = v
            .leader_id
            .and_then(|l| self.member_client_addr(l).map(|a| (l, a)))
        else {
            return Err(RaftGroupError::NotLeader { leader: None }.into());
        };
        let index = self
            .peers
            .read_index(leader, &addr, READ_INDEX_WAIT)
            .await?;
        self.group.wait_applied(index, READ_INDEX_WAIT).await?;
        Ok(())
    }
}
