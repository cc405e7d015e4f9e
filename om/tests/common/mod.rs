//! Shared test harness: a fake SCM block service (so OM tests need no SCM ring; the real
//! SCM's block service has its own tests), OM configs on free loopback ports, in-process OM
//! rings over real gRPC and RocksDB, and the client calls the tests make (`rozone-client`).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rozone_client::om::{Exclude, OmClient};
use rozone_client::{ClientError, RetryPolicy};
use rozone_config::Peer;
use rozone_om::config::{Config, Startup};
use rozone_om::server::OmServer;
use rozone_proto::scm as spb;
use rozone_proto::scm::scm_block_server::{ScmBlock, ScmBlockServer};
use tonic::{Request, Response, Status};

/// Generous bound for anything a test waits on.
pub const WAIT: Duration = Duration::from_secs(30);
/// Block size the fake SCM hands out.
pub const BLOCK: u64 = 4 << 20;

/// A fake SCM `ScmBlock` service: unique block ids on one three-datanode pipeline.
#[derive(Default)]
pub struct FakeScm {
    next_local: AtomicU64,
    pub allocated: AtomicU64,
    /// `size` of every AllocateBlock call, in order.
    pub sizes: Mutex<Vec<u64>>,
    pub deleted: Mutex<Vec<(u64, u64)>>,
    /// When set, AllocateBlock is refused with UNAVAILABLE (no leader hint).
    pub unavailable: std::sync::atomic::AtomicBool,
}

/// The service face of a shared [`FakeScm`].
pub struct ScmHandle(pub Arc<FakeScm>);

impl std::ops::Deref for ScmHandle {
    type Target = FakeScm;
    fn deref(&self) -> &FakeScm {
        &self.0
    }
}

#[tonic::async_trait]
impl ScmBlock for ScmHandle {
    async fn allocate_block(
        &self,
        req: Request<spb::AllocateBlockRequest>,
    ) -> Result<Response<spb::AllocateBlockReply>, Status> {
        if self.unavailable.load(Ordering::Relaxed) {
            return Err(rozone_rpc::not_leader("fake SCM: no leader", None));
        }
        let r = req.into_inner();
        self.sizes.lock().unwrap().push(r.size);
        // As the real SCM: a block of unknown length (0) may hold a whole block.
        if r.size > BLOCK {
            return Err(Status::invalid_argument(format!(
                "size {} exceeds the SCM block size {BLOCK}",
                r.size
            )));
        }
        let max_size = if r.size == 0 { BLOCK } else { r.size };
        let members = (1..=3)
            .map(|i| spb::DatanodeDetails {
                id: i,
                hostname: format!("dn{i}"),
                container_addr: format!("127.0.0.1:{}", 19000 + i),
                raft_addr: format!("127.0.0.1:{}", 19100 + i),
                replication_addr: format!("127.0.0.1:{}", 19200 + i),
            })
            .collect::<Vec<_>>();
        let blocks = (0..r.count.max(1))
            .map(|_| {
                let local = self.next_local.fetch_add(1, Ordering::Relaxed) + 1;
                self.allocated.fetch_add(1, Ordering::Relaxed);
                spb::AllocatedBlock {
                    block_id: Some(spb::BlockId {
                        container_id: 1 + local / 100,
                        local_id: local,
                    }),
                    pipeline: Some(spb::Pipeline {
                        id: 7,
                        members: members.clone(),
                        leader_id: Some(1),
                        state: spb::PipelineState::PipelineOpen as i32,
                    }),
                    max_size,
                    block_token: Vec::new(),
                }
            })
            .collect();
        Ok(Response::new(spb::AllocateBlockReply { blocks }))
    }

    async fn delete_blocks(
        &self,
        req: Request<spb::DeleteBlocksRequest>,
    ) -> Result<Response<spb::DeleteBlocksReply>, Status> {
        let mut d = self.deleted.lock().unwrap();
        for b in req.into_inner().blocks {
            d.push((b.container_id, b.local_id));
        }
        Ok(Response::new(spb::DeleteBlocksReply { txn_ids: vec![] }))
    }

    /// No keys: the OMs under test run insecure and issue no block tokens.
    async fn get_secret_keys(
        &self,
        _req: Request<spb::GetSecretKeysRequest>,
    ) -> Result<Response<spb::GetSecretKeysReply>, Status> {
        Ok(Response::new(spb::GetSecretKeysReply::default()))
    }
}

/// Starts the fake SCM on a free loopback port.
pub async fn fake_scm() -> (Arc<FakeScm>, SocketAddr) {
    let scm = Arc::new(FakeScm::default());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let svc = ScmBlockServer::new(ScmHandle(scm.clone()));
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(l))
            .await;
    });
    (scm, addr)
}

pub use rozone_telemetry::testkit::free_port;

/// Peers `1..=n` on free ports.
pub fn peers(n: u64) -> Vec<Peer> {
    (1..=n)
        .map(|id| Peer {
            id,
            peer_addr: format!("127.0.0.1:{}", free_port()),
            client_addr: format!("127.0.0.1:{}", free_port()),
        })
        .collect()
}

/// A config for member `id` of `peers`, data under `root`, fast Raft timing.
pub fn config(root: &std::path::Path, id: u64, peers: &[Peer], scm: SocketAddr) -> Config {
    // Plaintext: not a security test (mutual TLS is tested in client/tests/security*.rs).
    let mut c = Config {
        security: rozone_config::SecuritySection::insecure(),
        ..Config::default()
    };
    c.node.id = id;
    c.node.data_dir = root.join(format!("om{id}"));
    let me = peers.iter().find(|p| p.id == id).expect("peer listed");
    c.om.client_addr = me.client_addr.parse().unwrap();
    c.om.peer_addr = me.peer_addr.parse().unwrap();
    c.om.scm_addrs = vec![scm.to_string()];
    c.om.block_size = rozone_config::ByteSize(BLOCK);
    c.om.scm_timeout = Duration::from_secs(5);
    c.om.local_lease_enabled = true;
    c.om.local_lease_log_limit = -1;
    c.http.addr = "127.0.0.1:0".parse().unwrap();
    c.raft.fsync = false;
    c.raft.election_timeout_min = Duration::from_millis(500);
    c.raft.election_timeout_max = Duration::from_millis(1000);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c.peers = peers.to_vec();
    c
}

/// An in-process ring: member 1 `--init`, the others `--bootstrap` (with the check).
pub struct Ring {
    pub root: tempfile::TempDir,
    pub peers: Vec<Peer>,
    pub scm: Arc<FakeScm>,
    pub scm_addr: SocketAddr,
    pub oms: std::collections::BTreeMap<u64, OmServer>,
    pub tune: fn(&mut Config),
}

impl Ring {
    pub async fn start(n: u64, tune: fn(&mut Config)) -> Self {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let (scm, scm_addr) = fake_scm().await;
        let mut ring = Self {
            root: tempfile::tempdir().unwrap(),
            peers: peers(n),
            scm,
            scm_addr,
            oms: Default::default(),
            tune,
        };
        for id in 1..=n {
            let startup = if id == 1 {
                Startup {
                    init: true,
                    ..Default::default()
                }
            } else {
                Startup {
                    bootstrap: true,
                    ..Default::default()
                }
            };
            ring.start_member(id, startup).await;
        }
        ring.wait_members(n).await;
        ring
    }

    pub fn config(&self, id: u64) -> Config {
        let mut c = config(self.root.path(), id, &self.peers, self.scm_addr);
        (self.tune)(&mut c);
        c
    }

    pub async fn start_member(&mut self, id: u64, startup: Startup) {
        let mut c = self.config(id);
        c.startup = startup;
        let s = OmServer::start(c).await.expect("OM starts");
        self.oms.insert(id, s);
    }

    /// Waits until every running OM sees `n` voters.
    pub async fn wait_members(&self, n: u64) {
        for s in self.oms.values() {
            s.group()
                .wait_for(WAIT, "all voters", move |m| {
                    m.membership_config.membership().voter_ids().count() as u64 == n
                })
                .await
                .expect("membership");
        }
    }

    /// The ready leader among the running OMs (waits for one).
    pub async fn leader(&self) -> u64 {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            for (id, s) in &self.oms {
                if s.group().is_ready_leader() {
                    return *id;
                }
            }
            assert!(std::time::Instant::now() < deadline, "no ready leader");
            let any = self.oms.values().next().expect("an OM runs");
            let _ = any
                .group()
                .wait_for(Duration::from_millis(200), "leader change", |m| {
                    m.current_leader.is_some()
                })
                .await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(&mut self, id: u64) {
        if let Some(s) = self.oms.remove(&id) {
            s.stop().await;
        }
    }

    pub fn client_addrs(&self) -> Vec<String> {
        self.peers.iter().map(|p| p.client_addr.clone()).collect()
    }

    pub fn addr(&self, id: u64) -> String {
        self.peers
            .iter()
            .find(|p| p.id == id)
            .unwrap()
            .client_addr
            .clone()
    }

    pub async fn shutdown(mut self) {
        let ids: Vec<u64> = self.oms.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}

pub async fn om_client(
    addr: &str,
) -> rozone_proto::om::om_service_client::OmServiceClient<tonic::transport::Channel> {
    rozone_proto::om::om_service_client::OmServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect OM")
}

pub async fn admin_client(
    addr: &str,
) -> rozone_proto::om::om_admin_client::OmAdminClient<tonic::transport::Channel> {
    rozone_proto::om::om_admin_client::OmAdminClient::connect(format!("http://{addr}"))
        .await
        .expect("connect OM admin")
}

/// A client of the OMs at `addrs`, made as the CLI makes one (the `rozone-client` crate:
/// leader failover, hints followed, 30 s per call), plaintext like these test clusters.
pub fn ring_client(addrs: &[String]) -> OmClient {
    let ring = rozone_client::Ring::new(
        "OM",
        addrs,
        RetryPolicy::default(),
        rozone_client::ChannelFactory::insecure(),
    )
    .expect("OM addresses");
    OmClient::new(ring)
}

/// Writes the metadata of a `size`-byte key: opens it and commits the allocated blocks,
/// filled in order (the OM's part of a write; no datanode holds the bytes, and the OM does
/// not ask).
pub async fn put_key_metadata(
    c: &OmClient,
    volume: &str,
    bucket: &str,
    key: &str,
    size: u64,
) -> Result<rozone_client::types::Key, ClientError> {
    let open = c
        .open_key(volume, bucket, key, size, &Exclude::default())
        .await?;
    let mut left = size;
    let blocks: Vec<_> = open
        .blocks
        .iter()
        .map(|b| {
            let len = left.min(b.max_size);
            left -= len;
            (b.block_id, len)
        })
        .collect();
    if left > 0 {
        return Err(ClientError::Invalid(format!(
            "the allocated blocks hold {left} bytes less than {size}"
        )));
    }
    c.commit_key(&open, &blocks, "").await
}

/// The OM error code a status carries (`rozone_types::codes::OM_ERROR`).
pub fn code(s: &Status) -> Option<rozone_proto::om::OmErrorCode> {
    rozone_types::codes::om_error(s)
}

/// GET over a raw TCP socket (no HTTP client crate needed).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
