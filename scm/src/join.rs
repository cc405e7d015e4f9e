//! `--bootstrap`: how a new SCM joins a running ring (Ozone's HDDS-16899 done right), as
//! hooks of the shared join procedure ([`rozone_raft::join`]).
//!
//! 1. Find the leader (and its ring id) through the SCMs listed in `[[peers]]`; the shared
//!    procedure records "joining ring R".
//! 2. Ask it for a fresh checkpoint, download it, verify it and install it as this node's
//!    state, retrying a failed download after `scm.bootstrap_retry_pause` up to
//!    `scm.bootstrap_attempts` times. Never join without it: no log replay over an empty DB.
//! 3. Only then start Raft (peer port closed) and ask the leader to add this SCM (learner
//!    until caught up, then voter). A join that fails after the checkpoint was installed is
//!    resumed by the next `--bootstrap`, which asks to be added again.

use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use futures::FutureExt;
use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::ring::{AddMemberRequest, PrepareCheckpointRequest, RingInfoRequest};
use rozone_raft::join::{JoinAsk, JoinHooks, JoinPolicy, RingId};
use rozone_raft::{DownloadPolicy, NodeInfo, PeerChannels, StateMachineLogic};
use rozone_rpc::Security;
use tonic::transport::Channel;
use tracing::{info, warn};

use crate::config::Config;
use crate::state::{ScmLogic, GROUP};

const RPC_TIMEOUT: Duration = Duration::from_secs(30);

async fn client(security: &Security, addr: &str) -> anyhow::Result<RingClient<Channel>> {
    let ch = security
        .channels()
        .endpoint(addr)?
        .timeout(RPC_TIMEOUT)
        .connect()
        .await
        .with_context(|| format!("connect to SCM at {addr}"))?;
    Ok(RingClient::new(ch))
}

/// The client address of the ring's leader and the ring id, as seen by any listed peer.
async fn find_leader(config: &Config) -> anyhow::Result<(String, RingId)> {
    let security = &config.security()?;
    let mut errors = Vec::new();
    for p in config.peers.iter().filter(|p| p.id != config.node.id) {
        match async {
            let r = client(security, &p.client_addr)
                .await?
                .ring_info(RingInfoRequest {})
                .await?;
            anyhow::Ok(r.into_inner())
        }
        .await
        {
            Ok(r) if !r.leader_client_addr.is_empty() => {
                let leader = r.leader_client_addr;
                // The ring id as the leader itself records it.
                let ring = client(security, &leader)
                    .await?
                    .ring_info(RingInfoRequest {})
                    .await?
                    .into_inner()
                    .ring_id;
                match RingId::parse_opt(&ring).map_err(anyhow::Error::msg)? {
                    Some(ring) => return Ok((leader, ring)),
                    None => errors.push(format!("{leader}: leader reports no ring id")),
                }
            }
            Ok(_) => errors.push(format!("{}: knows no leader", p.client_addr)),
            Err(e) => errors.push(format!("{}: {e:#}", p.client_addr)),
        }
    }
    if errors.is_empty() {
        bail!("--bootstrap needs the other SCMs of the ring in [[peers]] (with client_addr)");
    }
    bail!("no SCM leader found: {}", errors.join("; "))
}

/// Step 2: take the leader's checkpoint as this node's state (Raft not started yet).
pub async fn take_leader_checkpoint(config: &Config, mut leader: String) -> anyhow::Result<()> {
    let scm = &config.scm;
    let security = &config.security()?;
    let mut last = String::new();
    for attempt in 1..=scm.bootstrap_attempts {
        let prep = match client(security, &leader).await {
            Ok(mut c) => c.prepare_checkpoint(PrepareCheckpointRequest {}).await,
            Err(e) => Err(tonic::Status::unavailable(format!("{e:#}"))),
        };
        match prep {
            Ok(r) => {
                let r = r.into_inner();
                let policy = DownloadPolicy {
                    attempts: scm.bootstrap_attempts - attempt + 1,
                    pause: scm.bootstrap_retry_pause,
                    stall: config.raft.snapshot_stall_timeout,
                };
                let cfs = ScmLogic.column_families();
                rozone_raft::download::bootstrap_from_checkpoint(
                    &config.node.data_dir.join("raft"),
                    &cfs,
                    &PeerChannels::new(security.channels()),
                    &r.checkpoint_addr,
                    GROUP,
                    &policy,
                )
                .await
                .with_context(|| format!("bootstrap from the SCM leader at {leader}"))?;
                info!(leader = %leader, snapshot = %r.snapshot_id, "took the leader's checkpoint");
                return Ok(());
            }
            Err(s) => {
                last = s.message().to_string();
                if let Some(h) = rozone_rpc::leader_hint(&s) {
                    leader = h;
                }
                warn!(attempt, leader = %leader, error = %last, "could not prepare a checkpoint on the leader");
                tokio::time::sleep(scm.bootstrap_retry_pause).await;
            }
        }
    }
    bail!(
        "checkpoint of the SCM leader at {leader} not obtained after {} attempt(s): {last}",
        scm.bootstrap_attempts
    )
}

/// The SCM's part of the shared join procedure.
pub struct ScmJoin {
    pub config: Config,
    pub me: NodeInfo,
}

impl ScmJoin {
    pub fn policy(&self) -> JoinPolicy {
        JoinPolicy {
            attempts: self.config.scm.bootstrap_attempts,
            pause: self.config.scm.bootstrap_retry_pause,
        }
    }
}

impl JoinHooks for ScmJoin {
    fn find_leader(&self) -> BoxFuture<'_, anyhow::Result<(String, RingId)>> {
        find_leader(&self.config).boxed()
    }

    fn add_member<'a>(
        &'a self,
        leader: &'a str,
        ask: &'a JoinAsk,
    ) -> BoxFuture<'a, Result<(), tonic::Status>> {
        async move {
            let security = self
                .config
                .security()
                .map_err(|e| tonic::Status::failed_precondition(format!("{e:#}")))?;
            let mut c = client(&security, leader)
                .await
                .map_err(|e| tonic::Status::unavailable(format!("{e:#}")))?;
            c.add_member(AddMemberRequest {
                id: self.config.node.id,
                peer_addr: self.me.peer_addr.clone(),
                client_addr: self.me.client_addr.clone(),
                ring_id: ask.ring_id.map(|r| r.to_string()).unwrap_or_default(),
                last_log_index: ask.last_log_index,
                check_only: ask.check_only,
                force: false,
            })
            .await
            .map(|_| ())
        }
        .boxed()
    }
}
