//! One SCM process ([`ScmServer`]): binds the peer (Raft and snapshot downloads),
//! checkpoint (for SCMs that join) and client listeners, opens the Raft group over
//! [`ScmLogic`], serves the services of [`crate::service`] over one [`ScmNode`] and starts
//! the leader's periodic loop. [`ScmServer::stop`] closes every database before returning
//! (tests restart SCMs in-process).
//!
//! `--init` creates a one-member ring and stamps a cluster id; a plain start reopens an
//! existing ring from disk; what a start may do is decided by the shared join states
//! ([`rozone_raft::join`]), so an SCM never silently starts an empty cluster of its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use rozone_raft::{GroupConfig, GroupRegistry, NodeInfo, PeerChannels, RaftGroup};
use rozone_rpc::pki::Ca;
use rozone_rpc::{CallScoped, Role};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use rozone_proto::scm::scm_admin_server::ScmAdminServer;
use rozone_proto::scm::scm_block_server::ScmBlockServer;
use rozone_proto::scm::scm_datanode_server::ScmDatanodeServer;
use rozone_proto::scm::scm_enroll_server::ScmEnrollServer;

use crate::config::Config;
use crate::node::ScmNode;
use crate::service::admin::AdminService;
use crate::service::enroll::EnrollService;
use crate::service::ring::ScmRingHooks;
use crate::service::{BlockService, DatanodeService};
use crate::state::{read, ScmLogic, ScmRequest, ScmResponse, GROUP};

/// How long `--init` waits for its own ring to elect it.
const INIT_WAIT: Duration = Duration::from_secs(30);

/// The CA and the enrollment listener, when `scm.ca_key` is set: the CA is loaded and
/// checked at start, so a wrong key stops the start with one line rather than failing
/// every enrollment.
async fn bind_enroll(
    config: &Config,
) -> anyhow::Result<Option<(Arc<Ca>, tokio::net::TcpListener, SocketAddr)>> {
    let key = &config.scm.ca_key;
    if key.as_os_str().is_empty() {
        return Ok(None);
    }
    let ca = Ca::load(&config.security.ca_cert, key).context("scm.ca_key")?;
    let (l, addr) = rozone_raft::server::bind(&config.scm.enroll_addr.to_string())
        .await
        .with_context(|| format!("bind scm.enroll_addr {}", config.scm.enroll_addr))?;
    Ok(Some((Arc::new(ca), l, addr)))
}

/// A running SCM: a ring member and its servers.
pub struct ScmServer {
    pub group: Arc<RaftGroup<ScmLogic>>,
    /// The core the services share (the leader's work: datanodes, pipelines, blocks,
    /// replication, safe mode).
    pub node: Arc<ScmNode>,
    pub peer_addr: SocketAddr,
    pub checkpoint_addr: SocketAddr,
    pub client_addr: SocketAddr,
    /// The enrollment listener, when this SCM issues certificates (`scm.ca_key`).
    pub enroll_addr: Option<SocketAddr>,
    servers: Vec<JoinHandle<()>>,
    stop: CancellationToken,
}

impl ScmServer {
    /// Binds the listeners and opens the Raft group; with `init`, creates the ring.
    pub async fn start(config: &Config) -> anyhow::Result<Self> {
        let security = config.security()?;
        security.announce("rozone-scm");
        let (peer_l, peer_addr) = rozone_raft::server::bind(&config.scm.peer_addr.to_string())
            .await
            .with_context(|| format!("bind scm.peer_addr {}", config.scm.peer_addr))?;
        let (cp_l, checkpoint_addr) =
            rozone_raft::server::bind(&config.scm.checkpoint_addr.to_string())
                .await
                .with_context(|| {
                    format!("bind scm.checkpoint_addr {}", config.scm.checkpoint_addr)
                })?;
        let (client_l, client_addr) =
            rozone_raft::server::bind(&config.scm.client_addr.to_string())
                .await
                .with_context(|| format!("bind scm.client_addr {}", config.scm.client_addr))?;
        let enroll = bind_enroll(config).await?;
        let me = config.peers.iter().find(|p| p.id == config.node.id);
        let info = NodeInfo::new(
            me.map(|p| p.peer_addr.clone())
                .unwrap_or_else(|| rozone_raft::server::advertised(None, peer_addr)),
            me.map(|p| p.client_addr.clone())
                .unwrap_or_else(|| rozone_raft::server::advertised(None, client_addr)),
        );
        // The checkpoint service is reached on the host the peer address names.
        let checkpoint_adv = match info.peer_addr.rsplit_once(':') {
            Some((host, _)) => format!("{host}:{}", checkpoint_addr.port()),
            None => rozone_raft::server::advertised(None, checkpoint_addr),
        };
        let group_dir = config.node.data_dir.join("raft");
        let hooks = crate::join::ScmJoin {
            config: config.clone(),
            me: info.clone(),
        };
        // Decided from the join-state record before Raft creates anything.
        let prepared = rozone_raft::join::prepare(
            "SCM",
            &group_dir,
            config.node.id,
            config.startup.mode(),
            &hooks,
        )
        .await?;
        if let (true, Some(leader)) = (prepared.joins(), &prepared.leader) {
            // A join resumed after Raft started already holds the checkpoint.
            if !rozone_raft::join::flow::has_raft_data(&group_dir) {
                crate::join::take_leader_checkpoint(config, leader.clone()).await?;
            }
        }
        // The peer port answers the ring only once the join state allows it.
        let gc = GroupConfig::new(GROUP, config.node.id, info.clone(), group_dir)
            .with_section(&config.raft)
            .peers_closed();

        let registry = GroupRegistry::default();
        let channels = Arc::new(PeerChannels::new(security.channels()));
        let group = RaftGroup::start(gc, ScmLogic, &registry, channels)
            .await
            .context("open the SCM Raft group")?;
        let stop = CancellationToken::new();
        let node = ScmNode::new(group.clone(), config.scm.clone());
        let (raft, snap) = rozone_raft::server::peer_services(&registry, Role::Scm);
        let ring_svc = rozone_raft::ring::RingService::new(
            group.clone(),
            Arc::new(ScmRingHooks {
                checkpoint_addr: checkpoint_adv,
            }),
        )
        .server();
        let enroll_addr = enroll.as_ref().map(|(_, _, a)| *a);
        let mut servers = vec![
            rozone_raft::server::spawn_router(
                "peer",
                security
                    .server()?
                    .add_service(raft)
                    .add_service(snap.clone()),
                peer_l,
                security.connection_cap(),
                &stop,
            ),
            rozone_raft::server::spawn_router(
                "checkpoint",
                security.server()?.add_service(snap),
                cp_l,
                security.connection_cap(),
                &stop,
            ),
            rozone_raft::server::spawn_router(
                "client",
                security
                    .server()?
                    .add_service(ring_svc)
                    .add_service(ScmDatanodeServer::new(DatanodeService(node.clone())))
                    .add_service(ScmBlockServer::new(BlockService(node.clone())))
                    // An admin's write (a container close) is applied at most once per call.
                    // Not the block service: block allocation proposes the SCM's own id
                    // reservations inside the call, whose replies must never be replayed.
                    .add_service(CallScoped(ScmAdminServer::new(AdminService(node.clone())))),
                client_l,
                security.connection_cap(),
                &stop,
            ),
            crate::leader::background::spawn(node.clone(), stop.clone()),
        ];
        if let Some((ca, l, addr)) = enroll {
            info!(%addr, "enrollment port: certificates for join tokens");
            let svc = EnrollService {
                node: node.clone(),
                ca,
            };
            let mut server = security
                .enroll_server()?
                .context("scm.ca_key needs mutual TLS (security.insecure is set)")?;
            servers.push(rozone_raft::server::spawn_router(
                "enroll",
                server.add_service(ScmEnrollServer::new(svc)),
                l,
                security.connection_cap(),
                &stop,
            ));
        }
        let ring = Self {
            group,
            node,
            peer_addr,
            checkpoint_addr,
            client_addr,
            enroll_addr,
            servers,
            stop,
        };
        let policy = hooks.policy();
        let opened =
            match rozone_raft::join::finish(prepared, &ring.group, &hooks, policy, INIT_WAIT).await
            {
                Ok(_) => ring.cluster_id(config).await,
                Err(e) => Err(e),
            };
        if let Err(e) = opened {
            ring.stop().await;
            return Err(e);
        }
        Ok(ring)
    }

    /// Logs the cluster id; `--init` stamps one if its ring has none yet (a ring this start
    /// created, or one whose first start stopped before it stamped its id). A restarted
    /// member of a running ring comes back as a follower and does not wait to lead.
    async fn cluster_id(&self, config: &Config) -> anyhow::Result<()> {
        match read::cluster_id(&self.group.db())? {
            Some(id) => info!(cluster_id = %id, "cluster id"),
            None if config.startup.init => self.stamp_cluster_id().await?,
            None => {}
        }
        Ok(())
    }

    /// Waits to lead the new ring and records a fresh cluster id (once per cluster).
    async fn stamp_cluster_id(&self) -> anyhow::Result<()> {
        self.group
            .wait_for(
                INIT_WAIT,
                "lead the new SCM ring",
                rozone_raft::leader_ready,
            )
            .await?;
        if let Some(id) = read::cluster_id(&self.group.db())? {
            info!(cluster_id = %id, "cluster id");
            return Ok(());
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let cluster_id = format!("CID-{nanos:x}-{:x}", std::process::id());
        match self
            .group
            .write(ScmRequest::SetClusterId {
                cluster_id: cluster_id.clone(),
            })
            .await?
        {
            ScmResponse::ClusterIdSet { .. } => {
                info!(cluster_id = %cluster_id, "cluster created");
                Ok(())
            }
            other => bail!("could not set the cluster id: {other:?}"),
        }
    }

    /// Stops Raft and the servers; the databases are closed when this returns.
    pub async fn stop(self) {
        self.group.shutdown().await;
        self.stop.cancel();
        for s in self.servers {
            // Peers keep append streams open: give the graceful stop a moment, then cut.
            let abort = s.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), s)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}
