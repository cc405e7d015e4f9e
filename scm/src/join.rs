//! `--bootstrap`: how a new SCM joins a running ring (Ozone's HDDS-16899 done right).
//!
//! 1. Find the leader through the SCMs listed in `[[peers]]`.
//! 2. Ask it for a fresh checkpoint, download it, verify it and install it as this node's
//!    state, retrying a failed download after `scm.bootstrap_retry_pause` up to
//!    `scm.bootstrap_attempts` times. Never join without it: no log replay over an empty DB.
//! 3. Only then start Raft and ask the leader to add this SCM (learner until caught up, then
//!    voter). A node that fails before this step is not in the ring's membership.

use std::time::Duration;

use anyhow::{bail, Context};
use rozone_proto::scm::scm_ring_client::ScmRingClient;
use rozone_proto::scm::{AddMemberRequest, PrepareCheckpointRequest, RingInfoRequest};
use rozone_raft::{DownloadPolicy, NodeInfo, PeerChannels, StateMachineLogic};
use rozone_rpc::Security;
use tonic::transport::Channel;
use tracing::{info, warn};

use crate::config::Config;
use crate::state::{ScmLogic, GROUP};

const RPC_TIMEOUT: Duration = Duration::from_secs(30);

async fn client(security: &Security, addr: &str) -> anyhow::Result<ScmRingClient<Channel>> {
    let ch = security
        .channels()
        .endpoint(addr)?
        .timeout(RPC_TIMEOUT)
        .connect()
        .await
        .with_context(|| format!("connect to SCM at {addr}"))?;
    Ok(ScmRingClient::new(ch))
}

/// The client address of the ring's leader, as seen by any listed peer.
async fn find_leader(config: &Config, security: &Security) -> anyhow::Result<String> {
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
            Ok(r) if !r.leader_client_addr.is_empty() => return Ok(r.leader_client_addr),
            Ok(_) => errors.push(format!("{}: knows no leader", p.client_addr)),
            Err(e) => errors.push(format!("{}: {e:#}", p.client_addr)),
        }
    }
    if errors.is_empty() {
        bail!("--bootstrap needs the other SCMs of the ring in [[peers]] (with client_addr)");
    }
    bail!("no SCM leader found: {}", errors.join("; "))
}

/// Step 1 and 2: take the leader's checkpoint as this node's state. Returns the leader's
/// client address.
pub async fn take_leader_checkpoint(
    config: &Config,
    security: &Security,
) -> anyhow::Result<String> {
    let scm = &config.scm;
    let mut leader = find_leader(config, security).await?;
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
                return Ok(leader);
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

/// Step 3: ask the leader to add this (running) SCM to the ring.
pub async fn ask_to_be_added(
    config: &Config,
    security: &Security,
    mut leader: String,
    me: &NodeInfo,
) -> anyhow::Result<()> {
    let scm = &config.scm;
    let mut last = String::new();
    for attempt in 1..=scm.bootstrap_attempts {
        let r = match client(security, &leader).await {
            Ok(mut c) => {
                c.add_member(AddMemberRequest {
                    id: config.node.id,
                    peer_addr: me.peer_addr.clone(),
                    client_addr: me.client_addr.clone(),
                })
                .await
            }
            Err(e) => Err(tonic::Status::unavailable(format!("{e:#}"))),
        };
        match r {
            Ok(_) => {
                info!(leader = %leader, "joined the SCM ring");
                return Ok(());
            }
            Err(s) if s.code() == tonic::Code::Unavailable => {
                last = s.message().to_string();
                if let Some(h) = rozone_rpc::leader_hint(&s) {
                    leader = h;
                }
                warn!(attempt, leader = %leader, error = %last, "leader could not add this SCM yet");
                tokio::time::sleep(scm.bootstrap_retry_pause).await;
            }
            Err(s) => bail!(
                "the SCM leader at {leader} refused to add this SCM: {}",
                s.message()
            ),
        }
    }
    bail!("the SCM leader at {leader} did not add this SCM: {last}")
}
