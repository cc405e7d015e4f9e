//! One OM process's servers and Raft group: binds the client, peer and HTTP listeners,
//! opens (or creates with `--init`, or joins with `--bootstrap`) the OM ring, serves
//! `OmService`, `OmAdmin` and the shared `Ring` service on the client port, Raft and checkpoint downloads on
//! the peer port, and runs the background tasks. [`OmServer::stop`] closes it all.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rozone_proto::om::om_admin_server::OmAdminServer;
use rozone_proto::om::om_s3_server::OmS3Server;
use rozone_proto::om::om_service_server::OmServiceServer;
use rozone_raft::{GroupConfig, GroupRegistry, NodeInfo, PeerChannels, RaftGroup};
use rozone_rpc::{CallScoped, Role};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::Config;
use crate::node::OmNode;
use crate::service::{admin::AdminService, ring::OmRingHooks, s3::S3Service, OmServiceImpl};
use crate::state::OmLogic;

/// Raft group id of the OM ring.
pub const GROUP: &str = "om";

/// How long `--init` waits for its own ring to elect it.
const INIT_WAIT: Duration = Duration::from_secs(30);

/// A running OM.
pub struct OmServer {
    pub node: Arc<OmNode>,
    pub client_addr: SocketAddr,
    pub peer_addr: SocketAddr,
    pub http_addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
    stop: CancellationToken,
}

impl OmServer {
    pub fn group(&self) -> &Arc<RaftGroup<OmLogic>> {
        &self.node.group
    }

    /// Binds, opens the ring as the startup flags say, and starts serving.
    pub async fn start(config: Config) -> anyhow::Result<Self> {
        let config = Arc::new(config);
        let security = config.security()?;
        security.announce("rozone-om");
        let (node_id, om) = (config.node.id, &config.om);
        tokio::fs::create_dir_all(&config.node.data_dir)
            .await
            .with_context(|| format!("create data dir {}", config.node.data_dir.display()))?;
        let (peer_l, peer_addr) = rozone_raft::server::bind(&om.peer_addr.to_string())
            .await
            .with_context(|| format!("bind om.peer_addr {}", om.peer_addr))?;
        let (client_l, client_addr) = rozone_raft::server::bind(&om.client_addr.to_string())
            .await
            .with_context(|| format!("bind om.client_addr {}", om.client_addr))?;
        let me = config.peers.iter().find(|p| p.id == node_id);
        let info = NodeInfo::new(
            me.map(|p| p.peer_addr.clone())
                .unwrap_or_else(|| rozone_raft::server::advertised(None, peer_addr)),
            me.map(|p| p.client_addr.clone())
                .unwrap_or_else(|| rozone_raft::server::advertised(None, client_addr)),
        );
        let group_dir = config.node.data_dir.join("raft");
        let hooks = crate::bootstrap::OmJoin {
            config: config.clone(),
            me: info.clone(),
        };
        // Decided from the join-state record before Raft creates anything.
        let prepared =
            rozone_raft::join::prepare("OM", &group_dir, node_id, config.startup.mode(), &hooks)
                .await?;
        // The peer port answers the ring only once the join state allows it (finish below).
        let gc = GroupConfig::new(GROUP, node_id, info.clone(), group_dir)
            .with_section(&config.raft)
            .peers_closed();
        let registry = GroupRegistry::default();
        let group = RaftGroup::start(
            gc,
            OmLogic::new(node_id),
            &registry,
            Arc::new(PeerChannels::new(security.channels())),
        )
        .await
        .context("open the OM Raft group")?;
        let node = Arc::new(OmNode::new(
            group.clone(),
            config.clone(),
            security.channels(),
        ));
        let stop = CancellationToken::new();
        let (raft, snap) = rozone_raft::server::peer_services(&registry, Role::Om);
        let max = om.max_request_size.as_u64() as usize;
        let client = security
            .server()?
            // Key and S3 writes carry their call's id to the Raft layer: a retried call
            // is applied at most once (rozone_rpc::call).
            .add_service(CallScoped(
                OmServiceServer::new(OmServiceImpl { node: node.clone() })
                    .max_decoding_message_size(max),
            ))
            .add_service(OmAdminServer::new(AdminService { node: node.clone() }))
            .add_service(
                rozone_raft::ring::RingService::new(
                    group.clone(),
                    Arc::new(OmRingHooks { node: node.clone() }),
                )
                .server(),
            )
            .add_service(CallScoped(OmS3Server::new(S3Service {
                node: node.clone(),
            })));
        let mut tasks = vec![
            rozone_raft::server::spawn_router(
                "peer",
                security.server()?.add_service(raft).add_service(snap),
                peer_l,
                security.connection_cap(),
                &stop,
            ),
            rozone_raft::server::spawn_router(
                "client",
                client,
                client_l,
                security.connection_cap(),
                &stop,
            ),
        ];
        let http = rozone_telemetry::http::serve_http(
            config.http.addr,
            Arc::new(crate::health::OmHealth { node: node.clone() }),
            stop.clone(),
        )
        .await;
        let (http_addr, http_task) = match http {
            Ok(x) => x,
            Err(e) => {
                stop.cancel();
                group.shutdown().await;
                return Err(e).with_context(|| format!("bind http.addr {}", config.http.addr));
            }
        };
        tasks.push(http_task);
        let server = Self {
            node: node.clone(),
            client_addr,
            peer_addr,
            http_addr,
            tasks,
            stop,
        };
        let policy = hooks.policy();
        let opened = rozone_raft::join::finish(prepared, &group, &hooks, policy, INIT_WAIT).await;
        if let Err(e) = opened {
            server.stop().await;
            return Err(e);
        }
        let mut server = server;
        server.tasks.push(tokio::spawn(crate::tasks::cleanup_loop(
            node.clone(),
            server.stop.clone(),
        )));
        server
            .tasks
            .push(tokio::spawn(crate::tasks::watch_membership(
                node,
                server.stop.clone(),
            )));
        info!(node_id, client_addr = %client_addr, peer_addr = %peer_addr, http_addr = %http_addr, "OM serving");
        Ok(server)
    }

    /// Stops Raft, the servers and the tasks; the databases are closed when this returns.
    pub async fn stop(self) {
        self.node.group.shutdown().await;
        self.stop.cancel();
        for t in self.tasks {
            // Peers keep append streams open: give the graceful stop a moment, then cut.
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}
