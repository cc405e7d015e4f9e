//! Server side of the Raft transport: one gRPC service per process, routing each RPC to its
//! group by id and checking the target node id (a misaddressed RPC can make openraft panic).
//!
//! Authorization (mutual TLS): only certificates of the ring's role (`scm` on an SCM,
//! `om` on an OM, `datanode` on a datanode) may call, and a Raft RPC only as the node its
//! certificate names: `from` and the sender inside the payload (the vote's node) must be
//! the certificate's id, so a member cannot speak for another and an outsider (a client,
//! another ring's member, a forged snapshot offer) is refused before anything changes.
//! Snapshot downloads need the ring's role only: a member joining by checkpoint fetches
//! before it is in the membership.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use openraft::raft::{StreamAppendError, TransferLeaderRequest, VoteRequest};
use rozone_proto::raft::raft_service_server::RaftService;
use rozone_proto::raft::snapshot_chunk::Kind;
use rozone_proto::raft::snapshot_service_server::SnapshotService;
use rozone_proto::raft::{FetchSnapshotRequest, FileChunk, RaftReply, RaftRequest, SnapshotChunk};
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tokio::io::AsyncReadExt;
use tonic::{Request, Response, Status, Streaming};

use crate::codec::decode;
use crate::registry::GroupRegistry;
use crate::wire::{reply, Reply, SnapshotOffer};

fn payload<T: serde::de::DeserializeOwned>(req: &RaftRequest) -> Result<T, Status> {
    decode(&req.payload).map_err(|e| Status::invalid_argument(format!("bad raft payload: {e}")))
}

/// The peer-port Raft service.
#[derive(Clone)]
pub struct RaftServiceImpl {
    pub registry: GroupRegistry,
    /// The role whose certificates may call (the ring's members).
    pub role: Role,
}

impl RaftServiceImpl {
    /// The caller's certificate must be the ring role's, with the id of `req.from`.
    fn check_sender<T>(
        &self,
        call: &Request<T>,
        req: &RaftRequest,
        what: &str,
    ) -> Result<(), Status> {
        link_cut(req.from, req.target)?;
        require_node(call, self.role, req.from, what)
    }
}

/// The sender a payload names (the vote's node) must be the request's `from`.
fn same_sender(req: &RaftRequest, payload_node: u64, what: &str) -> Result<(), Status> {
    if payload_node != req.from {
        return Err(Status::permission_denied(format!(
            "{what}: the payload speaks for node {payload_node} but the request comes from node {}",
            req.from
        )));
    }
    Ok(())
}

type ReplyStream = Pin<Box<dyn Stream<Item = Result<RaftReply, Status>> + Send>>;
type ChunkStream = Pin<Box<dyn Stream<Item = Result<SnapshotChunk, Status>> + Send>>;

#[tonic::async_trait]
impl RaftService for RaftServiceImpl {
    async fn vote(&self, call: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        self.check_sender(&call, call.get_ref(), "raft vote")?;
        let req = call.into_inner();
        let g = self.registry.route(&req)?;
        let v: VoteRequest<crate::types::TypeConfig> = payload(&req)?;
        same_sender(&req, v.vote.leader_id().node_id, "raft vote")?;
        let r = g.vote(v).await;
        Ok(Response::new(reply(&r)?))
    }

    async fn pre_vote(&self, call: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        self.check_sender(&call, call.get_ref(), "raft pre-vote")?;
        let req = call.into_inner();
        let g = self.registry.route(&req)?;
        let v: VoteRequest<crate::types::TypeConfig> = payload(&req)?;
        same_sender(&req, v.vote.leader_id().node_id, "raft pre-vote")?;
        let r = g.pre_vote(v).await;
        Ok(Response::new(reply(&r)?))
    }

    type StreamAppendStream = ReplyStream;

    async fn stream_append(
        &self,
        req: Request<Streaming<RaftRequest>>,
    ) -> Result<Response<ReplyStream>, Status> {
        let caller = rozone_rpc::Caller::of(&req)?;
        let mut input = req.into_inner();
        // The first message routes the whole stream.
        let Some(first) = input.next().await else {
            return Ok(Response::new(Box::pin(futures::stream::empty())));
        };
        let first = first?;
        link_cut(first.from, first.target)?;
        if let Some(c) = caller {
            if c.role != self.role || c.id != first.from {
                return Err(Status::permission_denied(format!(
                    "raft append as {}-{} needs that node's certificate; the caller is {c}",
                    self.role, first.from
                )));
            }
        }
        let g = self.registry.route(&first)?;
        let group = first.group_id.clone();
        let target = first.target;
        let from = first.from;
        let (meta_tx, mut meta_rx) = tokio::sync::mpsc::unbounded_channel();
        // Decode requests; remember (leader, term, leader_commit, echo) of each, in order, so the
        // result of each can be matched to the leader that sent it.
        let reqs = futures::stream::once(async move { Ok(first) })
            .chain(input)
            .take_while(move |r| {
                // Every message of the stream comes from the node that opened it.
                let ok = match r {
                    Ok(r) => {
                        r.group_id == group
                            && r.target == target
                            && r.from == from
                            && link_cut(from, target).is_ok()
                    }
                    Err(_) => false,
                };
                if let Ok(r) = r {
                    capture_failpoint(r);
                }
                async move { ok }
            })
            .filter_map(move |r| {
                let echo = r.as_ref().ok().and_then(|r| r.echo);
                let decoded = r.ok().and_then(|r| {
                    decode::<openraft::raft::AppendEntriesRequest<crate::types::TypeConfig>>(
                        &r.payload,
                    )
                    .ok()
                    // An append in the name of another leader ends the stream.
                    .filter(|d| d.vote.leader_id().node_id == from)
                });
                if let Some(d) = &decoded {
                    let leader = d.vote.leader_id().node_id;
                    let term = d.vote.leader_id().term;
                    let _ = meta_tx.send((leader, term, d.leader_commit, echo));
                }
                async move { decoded }
            });
        let contact = g.contact();
        let out = g.stream_append(Box::pin(reqs)).map(move |res| {
            let meta = meta_rx.try_recv().ok();
            let r: Reply<_> = match res {
                Ok(r) => {
                    // Accepted by vote (success or a log conflict): this is our leader.
                    let accepted = !matches!(r, Err(StreamAppendError::HigherVote(_)));
                    if let (true, Some((leader, term, commit, echo))) = (accepted, meta) {
                        contact.record(leader, term, commit, echo.as_ref());
                    }
                    Ok(r)
                }
                Err(fatal) => Err(fatal.to_string()),
            };
            reply(&r)
        });
        Ok(Response::new(Box::pin(out)))
    }

    type InstallSnapshotStream = crate::install::ProgressStream;

    async fn install_snapshot(
        &self,
        call: Request<RaftRequest>,
    ) -> Result<Response<Self::InstallSnapshotStream>, Status> {
        self.check_sender(&call, call.get_ref(), "raft snapshot offer")?;
        let req = call.into_inner();
        let g = self.registry.route(&req)?;
        let offer: SnapshotOffer = payload(&req)?;
        same_sender(&req, offer.vote.leader_id().node_id, "raft snapshot offer")?;
        Ok(Response::new(crate::install::serve(g, offer)))
    }

    async fn transfer_leader(
        &self,
        call: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        self.check_sender(&call, call.get_ref(), "raft leader transfer")?;
        let req = call.into_inner();
        let g = self.registry.route(&req)?;
        let t: TransferLeaderRequest<_> = payload(&req)?;
        let r = g.transfer_leader(t).await.map_err(|e| e.to_string());
        Ok(Response::new(reply(&r)?))
    }
}

/// Test hook (failpoint `raft-link-cut`, configured as `return(1>2,2>1,...)`): every Raft RPC
/// from the first node of a pair to the second is refused as unreachable, and an append
/// stream already open between them ends at its next message: an in-process network
/// partition, one direction per pair.
#[cfg(not(feature = "failpoints"))]
fn link_cut(_from: u64, _target: u64) -> Result<(), Status> {
    Ok(())
}

#[cfg(feature = "failpoints")]
fn link_cut(from: u64, target: u64) -> Result<(), Status> {
    let cut = fail::eval("raft-link-cut", |arg| {
        arg.is_some_and(|a| {
            a.split(',').any(|pair| {
                pair.trim().split_once('>').and_then(|(f, t)| {
                    Some((f.trim().parse::<u64>().ok()?, t.trim().parse::<u64>().ok()?))
                }) == Some((from, target))
            })
        })
    })
    .unwrap_or(false);
    if cut {
        return Err(Status::unavailable(format!(
            "link {from}>{target} cut (failpoint raft-link-cut)"
        )));
    }
    Ok(())
}

/// Test hook (failpoint `raft-append-capture`, configured as `return(<node id>)`): every
/// append message addressed to that node is copied, as received, into a slot that
/// [`take_captured_append`] empties. A test replays the copy later to act as a network that
/// delivered an old message late.
#[cfg(not(feature = "failpoints"))]
fn capture_failpoint(_r: &RaftRequest) {}

#[cfg(feature = "failpoints")]
static CAPTURED: std::sync::Mutex<Option<RaftRequest>> = std::sync::Mutex::new(None);

#[cfg(feature = "failpoints")]
fn capture_failpoint(r: &RaftRequest) {
    let armed = fail::eval("raft-append-capture", |arg| {
        arg.and_then(|a| a.trim().parse::<u64>().ok()) == Some(r.target)
    })
    .unwrap_or(false);
    if armed {
        let mut g = CAPTURED.lock().unwrap_or_else(|p| p.into_inner());
        *g = Some(r.clone());
    }
}

/// The append message the `raft-append-capture` failpoint copied last, if any.
#[cfg(feature = "failpoints")]
pub fn take_captured_append() -> Option<RaftRequest> {
    CAPTURED.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Serves this node's snapshots (checkpoints) for download, on the peer port and, for SCM,
/// on its own checkpoint port too.
#[derive(Clone)]
pub struct SnapshotServiceImpl {
    pub registry: GroupRegistry,
    /// The role whose certificates may download (the ring's members and joiners).
    pub role: Role,
}

const CHUNK: usize = 1 << 20;

#[tonic::async_trait]
impl SnapshotService for SnapshotServiceImpl {
    type FetchSnapshotStream = ChunkStream;

    async fn fetch_snapshot(
        &self,
        req: Request<FetchSnapshotRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        require_role(&req, &[self.role], "snapshot download")?;
        let req = req.into_inner();
        let g = self
            .registry
            .get(&req.group_id)
            .ok_or_else(|| Status::not_found(format!("no raft group {:?} here", req.group_id)))?;
        // An empty id asks for the newest snapshot (a member joining by checkpoint).
        let found = if req.snapshot_id.is_empty() {
            g.snapshots().current()
        } else {
            g.snapshots().get(&req.snapshot_id)
        };
        let (manifest, cp) = found.ok_or_else(|| {
            Status::not_found(format!(
                "snapshot {:?} of group {:?} is not kept here (superseded?)",
                req.snapshot_id, req.group_id
            ))
        })?;
        let body = serde_json::to_vec(&manifest).map_err(|e| Status::internal(e.to_string()))?;
        // Every file is opened before the first byte goes out: a newer snapshot that
        // replaces this one mid-transfer removes its directory, and open files stay readable
        // after that, so a slow download is never cut short by the leader moving on.
        let mut files = Vec::with_capacity(manifest.files.len());
        for f in &manifest.files {
            let file = tokio::fs::File::open(cp.db_dir().join(&f.name))
                .await
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Status::not_found(format!(
                        "snapshot {:?} was superseded while it was being opened",
                        manifest.snapshot_id
                    )),
                    _ => Status::internal(format!("open {}: {e}", f.name)),
                })?;
            files.push((f.name.clone(), file));
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<SnapshotChunk, Status>>(4);
        tokio::spawn(async move {
            let _ = tx
                .send(Ok(SnapshotChunk {
                    kind: Some(Kind::Manifest(body)),
                }))
                .await;
            for (name, file) in files {
                if let Err(e) = send_file(&tx, file, &name).await {
                    let _ = tx
                        .send(Err(Status::internal(format!("read {name}: {e}"))))
                        .await;
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

async fn send_file(
    tx: &tokio::sync::mpsc::Sender<Result<SnapshotChunk, Status>>,
    mut f: tokio::fs::File,
    name: &str,
) -> std::io::Result<()> {
    let mut offset = 0u64;
    loop {
        let mut buf = vec![0u8; CHUNK];
        let mut filled = 0;
        while filled < CHUNK {
            let n = f.read(&mut buf[filled..]).await?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            return Ok(());
        }
        buf.truncate(filled);
        let chunk = SnapshotChunk {
            kind: Some(Kind::File(FileChunk {
                name: name.to_string(),
                offset,
                data: buf,
            })),
        };
        offset += filled as u64;
        if tx.send(Ok(chunk)).await.is_err() {
            return Ok(()); // receiver went away
        }
        send_pace_failpoint().await;
        if filled < CHUNK {
            return Ok(());
        }
    }
}

/// Test hook (failpoint `raft-snapshot-send-pace`, configured as `return(<ms>)`): waits that
/// long after each chunk sent, as a slow link would.
#[cfg(not(feature = "failpoints"))]
async fn send_pace_failpoint() {}

#[cfg(feature = "failpoints")]
async fn send_pace_failpoint() {
    let pause = fail::eval("raft-snapshot-send-pace", |arg| {
        arg.and_then(|a| a.trim().parse::<u64>().ok())
    })
    .flatten();
    if let Some(ms) = pause {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}
