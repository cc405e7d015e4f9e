//! Test harness: a fake SCM (the real SCM's datanode service is being written in parallel),
//! in-process datanodes on 127.0.0.1 with fixed ports (so they restart at the same
//! addresses), and a small client over the real gRPC services.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rozone_datanode::{Config, Datanode};
use rozone_proto::datanode as pb;
use rozone_proto::datanode::container_client::ContainerClient;
use rozone_proto::scm as spb;
use rozone_proto::scm::scm_datanode_server::{ScmDatanode, ScmDatanodeServer};
use rozone_types::checksum::{ChecksumData, ChecksumType};
use rozone_types::codes::{dn_result, DnCode};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `f` until it returns `Some`, for up to 30 s.
pub async fn wait_until<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {WAIT:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub use rozone_telemetry::testkit::free_port;

// ---------------------------------------------------------------------------------------
// Fake SCM.

#[derive(Default)]
pub struct ScmState {
    pub registered: BTreeMap<u64, spb::DatanodeDetails>,
    /// (datanode, container) → latest replica state from full and incremental reports.
    pub replicas: BTreeMap<(u64, u64), spb::ContainerReplica>,
    pub actions: Vec<(u64, spb::PipelineAction)>,
    pub pipeline_reports: BTreeMap<(u64, u64), spb::PipelineReport>,
    pub statuses: BTreeMap<u64, spb::CommandStatus>,
    pub pending: BTreeMap<u64, Vec<spb::ScmCommand>>,
    pub next_cmd: u64,
    pub heartbeats: u64,
    /// Full container reports received in heartbeats.
    pub full_reports: u64,
    /// datanode → its latest node report (volumes).
    pub node_reports: BTreeMap<u64, spb::NodeReport>,
    /// When set, every call is refused as "not the leader" with this hint.
    pub refuse_with_hint: Option<String>,
}

#[derive(Clone, Default)]
pub struct FakeScm(pub Arc<Mutex<ScmState>>);

impl FakeScm {
    /// Serves a fake SCM on a free port; returns it and its address.
    pub async fn serve() -> (Self, String) {
        let scm = FakeScm::default();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let svc = ScmDatanodeServer::new(scm.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(l))
                .await
                .unwrap();
        });
        (scm, addr)
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, ScmState> {
        self.0.lock().unwrap()
    }

    /// Queues a command for a datanode; returns its id.
    pub fn send(&self, dn: u64, c: spb::scm_command::Command) -> u64 {
        let mut s = self.state();
        s.next_cmd += 1;
        let id = s.next_cmd;
        s.pending.entry(dn).or_default().push(spb::ScmCommand {
            id,
            term: 1,
            command: Some(c),
        });
        id
    }

    pub async fn wait_status(&self, id: u64) -> spb::CommandStatus {
        wait_until(&format!("status of command {id}"), || async {
            self.state()
                .statuses
                .get(&id)
                .filter(|s| s.status != spb::command_status::Status::Pending as i32)
                .cloned()
        })
        .await
    }

    /// Waits for a node report of `dn` whose first volume satisfies `f`.
    pub async fn wait_volume(
        &self,
        dn: u64,
        what: &str,
        f: impl Fn(&spb::StorageReport) -> bool,
    ) -> spb::StorageReport {
        wait_until(what, || async {
            self.state()
                .node_reports
                .get(&dn)
                .and_then(|r| r.storage.first())
                .filter(|v| f(v))
                .cloned()
        })
        .await
    }

    pub fn replica(&self, dn: u64, cid: u64) -> Option<spb::ContainerReplica> {
        self.state().replicas.get(&(dn, cid)).cloned()
    }
}

#[tonic::async_trait]
impl ScmDatanode for FakeScm {
    async fn register(
        &self,
        req: Request<spb::RegisterRequest>,
    ) -> Result<Response<spb::RegisterReply>, Status> {
        let r = req.into_inner();
        let d = r
            .datanode
            .ok_or_else(|| Status::invalid_argument("datanode missing"))?;
        let mut s = self.state();
        for rep in r.container_report.map(|c| c.replicas).unwrap_or_default() {
            s.replicas.insert((d.id, rep.container_id), rep);
        }
        let id = d.id;
        s.registered.insert(id, d);
        Ok(Response::new(spb::RegisterReply {
            cluster_id: "CID-test".into(),
            datanode_id: id,
            secret_keys: Vec::new(),
        }))
    }

    async fn heartbeat(
        &self,
        req: Request<spb::HeartbeatRequest>,
    ) -> Result<Response<spb::HeartbeatReply>, Status> {
        let r = req.into_inner();
        let dn = r.datanode_id;
        let mut s = self.state();
        if let Some(h) = &s.refuse_with_hint {
            return Err(rozone_rpc::not_leader("not the SCM leader", Some(h)));
        }
        s.heartbeats += 1;
        if !s.registered.contains_key(&dn) {
            return Ok(Response::new(spb::HeartbeatReply {
                commands: vec![],
                reregister: true,
                secret_keys: Vec::new(),
            }));
        }
        if let Some(nr) = r.node_report {
            s.node_reports.insert(dn, nr);
        }
        if let Some(full) = r.full_container_report {
            s.full_reports += 1;
            s.replicas.retain(|(d, _), _| *d != dn);
            for rep in full.replicas {
                s.replicas.insert((dn, rep.container_id), rep);
            }
        }
        for rep in r.incremental_container_report {
            s.replicas.insert((dn, rep.container_id), rep);
        }
        for p in r.pipeline_reports {
            s.pipeline_reports.insert((dn, p.pipeline_id), p);
        }
        for a in r.pipeline_actions {
            s.actions.push((dn, a));
        }
        for st in r.command_status {
            s.statuses.insert(st.command_id, st);
        }
        let commands = s.pending.remove(&dn).unwrap_or_default();
        Ok(Response::new(spb::HeartbeatReply {
            commands,
            reregister: false,
            secret_keys: Vec::new(),
        }))
    }
}

// ---------------------------------------------------------------------------------------
// Datanodes.

pub struct Node {
    pub id: u64,
    pub config: Config,
    pub dn: Option<Datanode>,
}

impl Node {
    pub fn dn(&self) -> &Datanode {
        self.dn.as_ref().expect("datanode running")
    }

    pub fn details(&self) -> spb::DatanodeDetails {
        let dn = &self.config.datanode;
        spb::DatanodeDetails {
            id: self.id,
            hostname: "127.0.0.1".into(),
            container_addr: dn.container_addr.to_string(),
            raft_addr: dn.raft_addr.to_string(),
            replication_addr: dn.replication_addr.to_string(),
        }
    }

    pub fn container_addr(&self) -> String {
        self.config.datanode.container_addr.to_string()
    }

    pub fn volume(&self) -> PathBuf {
        self.config.volumes()[0].clone()
    }

    pub async fn stop(&mut self) {
        if let Some(dn) = self.dn.take() {
            dn.stop().await;
        }
    }

    pub async fn start(&mut self) {
        self.dn = Some(Datanode::start(&self.config).await.expect("start datanode"));
    }
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub scm: FakeScm,
    pub scm_addr: String,
    pub nodes: Vec<Node>,
}

fn config(dir: &std::path::Path, id: u64, scm: &str) -> Config {
    // Plaintext: not a security test (mutual TLS is tested in client/tests/security*.rs).
    let mut c = Config {
        security: rozone_config::SecuritySection::insecure(),
        ..Config::default()
    };
    c.node.id = id;
    c.node.data_dir = dir.join(format!("dn{id}"));
    let addr = |p: u16| format!("127.0.0.1:{p}").parse().unwrap();
    c.datanode.container_addr = addr(free_port());
    c.datanode.raft_addr = addr(free_port());
    c.datanode.replication_addr = addr(free_port());
    c.http.addr = addr(0);
    c.datanode.scm_addrs = vec![scm.to_string()];
    c.datanode.heartbeat_interval = Duration::from_millis(100);
    c.datanode.container_report_interval = Duration::from_secs(1);
    c.datanode.sync_writes = false;
    c.raft.fsync = false;
    c.raft.election_timeout_min = Duration::from_millis(1500);
    c.raft.election_timeout_max = Duration::from_millis(3000);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c
}

impl Cluster {
    /// A fake SCM and `n` running datanodes (ids 1..=n).
    pub async fn start(n: u64) -> Self {
        Self::start_with(n, |_| {}).await
    }

    /// As [`Cluster::start`], with `tweak` applied to every datanode's config.
    pub async fn start_with(n: u64, tweak: impl Fn(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (scm, scm_addr) = FakeScm::serve().await;
        let mut c = Self {
            dir,
            scm,
            scm_addr,
            nodes: Vec::new(),
        };
        for _ in 0..n {
            c.add_node_with(&tweak).await;
        }
        c
    }

    pub async fn add_node(&mut self) -> usize {
        self.add_node_with(|_| {}).await
    }

    pub async fn add_node_with(&mut self, tweak: impl Fn(&mut Config)) -> usize {
        let id = self.nodes.len() as u64 + 1;
        let mut config = config(self.dir.path(), id, &self.scm_addr);
        tweak(&mut config);
        let mut node = Node {
            id,
            config,
            dn: None,
        };
        node.start().await;
        self.nodes.push(node);
        let scm = self.scm.clone();
        wait_until("registration", || async {
            scm.state().registered.contains_key(&id).then_some(())
        })
        .await;
        self.nodes.len() - 1
    }

    /// Asks the first `members` datanodes (by index) to form pipeline `pid`; returns the
    /// leader's index once it is ready and every member runs the group.
    pub async fn create_pipeline(&self, pid: u64, members: &[usize]) -> usize {
        let details: Vec<_> = members.iter().map(|&i| self.nodes[i].details()).collect();
        for &i in members {
            self.scm.send(
                self.nodes[i].id,
                spb::scm_command::Command::CreatePipeline(spb::CreatePipelineCommand {
                    pipeline_id: pid,
                    members: details.clone(),
                }),
            );
        }
        self.leader(pid, members).await
    }

    pub async fn leader(&self, pid: u64, members: &[usize]) -> usize {
        wait_until(&format!("a ready leader of pipeline {pid}"), || async {
            let all_in = members.iter().all(|&i| {
                self.nodes[i]
                    .dn
                    .as_ref()
                    .is_some_and(|d| d.pipelines.get(pid).is_ok())
            });
            if !all_in {
                return None;
            }
            members.iter().copied().find(|&i| {
                self.nodes[i]
                    .dn()
                    .pipelines
                    .get(pid)
                    .is_ok_and(|p| p.group.is_ready_leader())
            })
        })
        .await
    }

    pub fn client(&self, i: usize) -> Client {
        Client::new(&self.nodes[i].container_addr())
    }

    /// Waits until member `i` of pipeline `pid` has applied everything its leader has.
    pub async fn wait_caught_up(&self, pid: u64, leader: usize, i: usize) {
        let target = self.nodes[leader]
            .dn()
            .pipelines
            .get(pid)
            .unwrap()
            .group
            .wait_log_applied(WAIT)
            .await
            .unwrap();
        self.nodes[i]
            .dn()
            .pipelines
            .get(pid)
            .unwrap()
            .group
            .wait_applied(target, WAIT)
            .await
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// Client.

#[derive(Clone)]
pub struct Client {
    pub c: ContainerClient<Channel>,
}

pub fn bid(cid: u64, lid: u64) -> pb::BlockId {
    pb::BlockId {
        container_id: cid,
        local_id: lid,
    }
}

pub fn sums(data: &[u8]) -> pb::ChecksumData {
    (&ChecksumData::compute(ChecksumType::Crc32c, 4096, data)).into()
}

pub fn chunk(offset: u64, data: &[u8]) -> pb::ChunkInfo {
    pb::ChunkInfo {
        offset,
        len: data.len() as u64,
        checksum: Some(sums(data)),
    }
}

pub fn code(s: &Status) -> Option<DnCode> {
    dn_result(s)
}

/// Deterministic test bytes.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

impl Client {
    pub fn new(addr: &str) -> Self {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_lazy();
        Self {
            c: ContainerClient::new(ch)
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20),
        }
    }

    pub async fn write_chunk(
        &mut self,
        pid: u64,
        cid: u64,
        lid: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<u64, Status> {
        let r = self
            .c
            .write_chunk(pb::WriteChunkRequest {
                pipeline_id: pid,
                block_id: Some(bid(cid, lid)),
                chunk: Some(chunk(offset, data)),
                data: data.to_vec(),
            })
            .await?;
        Ok(r.into_inner().bcsid)
    }

    pub async fn put_block(
        &mut self,
        pid: u64,
        cid: u64,
        lid: u64,
        chunks: Vec<pb::ChunkInfo>,
    ) -> Result<pb::PutBlockReply, Status> {
        let length = chunks.iter().map(|c| c.len).sum();
        let block = pb::BlockData {
            block_id: Some(bid(cid, lid)),
            chunks,
            length,
            bcsid: 0,
        };
        Ok(self
            .c
            .put_block(pb::PutBlockRequest {
                pipeline_id: pid,
                block: Some(block),
            })
            .await?
            .into_inner())
    }

    /// Writes a block as chunks of `chunk_len` and commits it; returns the PutBlock bcsid.
    pub async fn write_block(
        &mut self,
        pid: u64,
        cid: u64,
        lid: u64,
        data: &[u8],
        chunk_len: usize,
    ) -> Result<u64, Status> {
        let mut chunks = Vec::new();
        for (i, piece) in data.chunks(chunk_len).enumerate() {
            let off = (i * chunk_len) as u64;
            self.write_chunk(pid, cid, lid, off, piece).await?;
            chunks.push(chunk(off, piece));
        }
        Ok(self.put_block(pid, cid, lid, chunks).await?.bcsid)
    }

    /// Streams a block; `declared` overrides the end checksums (to send bad ones).
    pub async fn stream(
        &mut self,
        pid: u64,
        cid: u64,
        lid: u64,
        data: &[u8],
        put_block: bool,
        declared: Option<pb::ChecksumData>,
    ) -> Result<pb::StreamBlockReply, Status> {
        use pb::stream_block_request::Msg;
        let mut msgs = vec![pb::StreamBlockRequest {
            msg: Some(Msg::Header(pb::StreamHeader {
                pipeline_id: pid,
                block_id: Some(bid(cid, lid)),
                checksum_type: pb::ChecksumType::Crc32c as i32,
                bytes_per_checksum: 4096,
                put_block,
            })),
        }];
        for piece in data.chunks(10_000) {
            msgs.push(pb::StreamBlockRequest {
                msg: Some(Msg::Data(piece.to_vec())),
            });
        }
        msgs.push(pb::StreamBlockRequest {
            msg: Some(Msg::End(pb::StreamEnd {
                checksum: Some(declared.unwrap_or_else(|| sums(data))),
                length: data.len() as u64,
            })),
        });
        Ok(self
            .c
            .stream_block(futures::stream::iter(msgs))
            .await?
            .into_inner())
    }

    /// Reads a whole committed block, verifying every segment's checksums client-side.
    pub async fn read_block(&mut self, cid: u64, lid: u64) -> Result<(Vec<u8>, u64), Status> {
        let r = self
            .c
            .read_chunk(pb::ReadChunkRequest {
                block_id: Some(bid(cid, lid)),
                offset: 0,
                len: 0,
            })
            .await?
            .into_inner();
        let mut out = Vec::new();
        for s in r.segments {
            let c: ChecksumData = s.checksum.unwrap().try_into().unwrap();
            c.verify(&s.data).expect("segment verifies client-side");
            assert_eq!(s.offset, out.len() as u64);
            out.extend_from_slice(&s.data);
        }
        Ok((out, r.bcsid))
    }

    pub async fn container(&mut self, cid: u64) -> Result<pb::ContainerDescriptor, Status> {
        Ok(self
            .c
            .get_container(pb::GetContainerRequest { container_id: cid })
            .await?
            .into_inner()
            .container
            .unwrap())
    }

    pub async fn block(&mut self, cid: u64, lid: u64) -> Result<pb::BlockData, Status> {
        Ok(self
            .c
            .get_block(pb::GetBlockRequest {
                block_id: Some(bid(cid, lid)),
            })
            .await?
            .into_inner()
            .block
            .unwrap())
    }
}

/// A plain HTTP/1.1 GET: (status code, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (code, body)
}
