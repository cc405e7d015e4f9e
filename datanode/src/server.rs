//! One datanode process: opens the container store, reopens its pipelines, binds and
//! serves the three gRPC listeners (container, pipeline Raft + PipelineData, replication)
//! and the HTTP one, and starts the SCM link. [`Datanode::start`] returns once everything
//! is serving; [`Datanode::stop`] stops it and closes every database before returning
//! (tests restart datanodes in-process).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rozone_proto::datanode::container_server::ContainerServer;
use rozone_proto::datanode::pipeline_data_server::PipelineDataServer;
use rozone_proto::datanode::replication_server::ReplicationServer;
use rozone_raft::server::{advertised, spawn_router};
use rozone_raft::GroupRegistry;
use rozone_rpc::Role;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clients::{Clients, MAX_MESSAGE};
use crate::commands::Executor;
use crate::config::Config;
use crate::health::DatanodeHealth;
use crate::node::{Node, NodeRef};
use crate::pipeline::Pipelines;
use crate::scm::{LinkStatus, ScmLink};
use crate::service::container::ContainerService;
use crate::service::peer::PeerService;
use crate::service::replication::ReplicationService;
use crate::store::ContainerStore;
use crate::tokens::TokenVerifier;

/// A running datanode.
pub struct Datanode {
    pub node_id: u64,
    pub container_addr: SocketAddr,
    pub raft_addr: SocketAddr,
    pub replication_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub store: Arc<ContainerStore>,
    pub pipelines: Arc<Pipelines>,
    pub executor: Arc<Executor>,
    pub link: Arc<LinkStatus>,
    node: Arc<Node>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

async fn bind(key: &str, a: SocketAddr) -> anyhow::Result<(TcpListener, SocketAddr)> {
    rozone_raft::server::bind(&a.to_string())
        .await
        .with_context(|| format!("bind {key} {a}"))
}

impl Datanode {
    pub async fn start(config: &Config) -> anyhow::Result<Self> {
        let dn = &config.datanode;
        let node_id = config.node.id;
        let security = config.security()?;
        security.announce("rozone-datanode");
        let volumes = config.volumes();
        for dir in std::iter::once(&config.node.data_dir).chain(&volumes) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("create directory {}", dir.display()))?;
        }
        let (vols, cap, sync) = (volumes.clone(), dn.volume_capacity.as_u64(), dn.sync_writes);
        let store = Arc::new(
            tokio::task::spawn_blocking(move || ContainerStore::open(&vols, cap, sync))
                .await?
                .context("open the container store")?,
        );
        let (container_l, container_addr) =
            bind("datanode.container_addr", dn.container_addr).await?;
        let (raft_l, raft_addr) = bind("datanode.raft_addr", dn.raft_addr).await?;
        let (repl_l, replication_addr) =
            bind("datanode.replication_addr", dn.replication_addr).await?;
        let host = dn.advertise_host.as_str();
        let clients = Arc::new(Clients::new(security.channels()));
        let registry = GroupRegistry::default();
        let pipelines = Arc::new(Pipelines::new(
            node_id,
            config.node.data_dir.join("pipelines"),
            store.clone(),
            registry.clone(),
            clients.clone(),
            config.raft.clone(),
        ));
        pipelines.reopen_all().await.context("reopen pipelines")?;
        let executor = Arc::new(Executor::new(
            store.clone(),
            pipelines.clone(),
            clients.clone(),
        ));
        let stop = CancellationToken::new();
        let scm_policy = rozone_rpc::RetryPolicy {
            deadline: dn.heartbeat_interval,
            ..rozone_rpc::RetryPolicy::default()
        };
        let scm_ring =
            rozone_rpc::Ring::new("SCM", &dn.scm_addrs, scm_policy, security.channels())?;
        // Block tokens are a check of a secure cluster: an insecure one trusts every caller.
        let tokens = Arc::new(if config.security.insecure {
            TokenVerifier::disabled()
        } else {
            TokenVerifier::new(Some(scm_ring.clone()))
        });
        let node = Arc::new(Node {
            store: store.clone(),
            pipelines: pipelines.clone(),
            clients: clients.clone(),
            tokens: tokens.clone(),
        });
        let weak = NodeRef::new(&node);
        let (raft_svc, snap_svc) = rozone_raft::server::peer_services(&registry, Role::Datanode);
        let peer = PipelineDataServer::new(PeerService { node: weak.clone() })
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let container = ContainerServer::new(ContainerService { node: weak.clone() })
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let repl = ReplicationServer::new(ReplicationService { node: weak.clone() })
            .max_encoding_message_size(MAX_MESSAGE);
        let mut tasks = vec![
            spawn_router(
                "raft",
                security
                    .server()?
                    .add_service(raft_svc)
                    .add_service(snap_svc)
                    .add_service(peer),
                raft_l,
                security.connection_cap(),
                &stop,
            ),
            spawn_router(
                "container",
                security.server()?.add_service(container),
                container_l,
                security.connection_cap(),
                &stop,
            ),
            spawn_router(
                "replication",
                security.server()?.add_service(repl),
                repl_l,
                security.connection_cap(),
                &stop,
            ),
        ];
        let link = Arc::new(LinkStatus::default());
        let details = rozone_proto::scm::DatanodeDetails {
            id: node_id,
            hostname: if host.is_empty() {
                "127.0.0.1".into()
            } else {
                host.to_string()
            },
            container_addr: advertised(Some(host), container_addr),
            raft_addr: advertised(Some(host), raft_addr),
            replication_addr: advertised(Some(host), replication_addr),
        };
        let scm = ScmLink {
            ring: scm_ring,
            tokens,
            addrs: dn.scm_addrs.clone(),
            details,
            store: store.clone(),
            pipelines: pipelines.clone(),
            executor: executor.clone(),
            interval: dn.heartbeat_interval,
            interval_without_pipeline: dn.heartbeat_interval_without_pipeline,
            full_report_interval: dn.container_report_interval,
            status: link.clone(),
        };
        let s = stop.clone();
        tasks.push(tokio::spawn(scm.run(s)));
        tasks.push(tokio::spawn(crate::store::check::run(
            store.clone(),
            dn.heartbeat_interval,
            dn.volume_check_timeout,
            stop.clone(),
        )));
        let health = Arc::new(DatanodeHealth {
            node: weak.clone(),
            link: link.clone(),
        });
        let (http_addr, http_task) = match rozone_telemetry::http::serve_http(
            config.http.addr,
            health,
            stop.clone(),
        )
        .await
        {
            Ok(x) => x,
            Err(e) => {
                let node = Self {
                    node_id,
                    container_addr,
                    raft_addr,
                    replication_addr,
                    http_addr: config.http.addr,
                    store,
                    pipelines,
                    executor,
                    link,
                    node,
                    stop,
                    tasks,
                };
                node.stop().await;
                return Err(e).with_context(|| format!("bind http.addr {}", config.http.addr));
            }
        };
        tasks.push(http_task);
        Ok(Self {
            node_id,
            container_addr,
            raft_addr,
            replication_addr,
            http_addr,
            store,
            pipelines,
            executor,
            link,
            node,
            stop,
            tasks,
        })
    }

    /// Stops listeners, the SCM link and every pipeline; databases are closed on return.
    pub async fn stop(self) {
        self.pipelines.stop_all().await;
        self.stop.cancel();
        for mut t in self.tasks {
            if tokio::time::timeout(Duration::from_secs(2), &mut t)
                .await
                .is_err()
            {
                t.abort();
                let _ = t.await;
            }
        }
        let store = Arc::downgrade(&self.store);
        drop((self.node, self.store, self.pipelines, self.executor));
        // In-flight requests and background commands finish, then the databases close.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while store.strong_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if store.strong_count() > 0 {
            tracing::warn!("container store still in use after stop");
        }
    }
}
