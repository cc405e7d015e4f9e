//! The Replication service (replication port): serves a CLOSED (or QUASI_CLOSED) replica
//! to a datanode replicating it, as one stream: descriptor, block records, each block's
//! chunk file in pieces with its size and CRC32C, and a trailer with the counts and the
//! container checksum. The pulling side is [`crate::replication`].

use std::path::PathBuf;

use rozone_proto::datanode as pb;
use rozone_proto::datanode::pull_container_reply::Msg;
use rozone_proto::datanode::replication_server::Replication;
use rozone_types::checksum::crc32c_append;
use rozone_types::codes::DnCode;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::node;
use crate::error::DnError;
use crate::node::NodeRef;
use crate::store::{blocking, ContainerStore};
use crate::types::{BlockData, ContainerState, Descriptor};

/// Bytes per streamed file piece.
const PIECE: usize = 1 << 20;

pub struct ReplicationService {
    pub node: NodeRef,
}

fn exportable(
    store: &ContainerStore,
    cid: u64,
) -> Result<(Descriptor, Vec<BlockData>, PathBuf), DnError> {
    let (_, d) = store.live(cid)?;
    if !matches!(
        d.state,
        ContainerState::Closed | ContainerState::QuasiClosed
    ) {
        return Err(DnError::new(
            DnCode::ClosedContainerIo,
            format!(
                "container {cid} is {:?}: only CLOSED or QUASI_CLOSED replicas are replicated",
                d.state
            ),
        ));
    }
    Ok((d, store.blocks(cid)?, store.container_dir(cid)?))
}

fn send_container(
    d: Descriptor,
    blocks: Vec<BlockData>,
    dir: PathBuf,
    tx: tokio::sync::mpsc::Sender<Result<pb::PullContainerReply, Status>>,
) {
    let send = |m: Msg| {
        tx.blocking_send(Ok(pb::PullContainerReply { msg: Some(m) }))
            .is_ok()
    };
    if !send(Msg::Descriptor(d.to_proto(""))) {
        return;
    }
    for b in &blocks {
        if !send(Msg::Block(b.into())) {
            return;
        }
    }
    let mut files = 0u32;
    let mut sent_pieces = 0u64;
    for b in &blocks {
        let rel = format!("chunks/{}.block", b.id.local_id);
        let res = (|| -> std::io::Result<bool> {
            let mut f = std::fs::File::open(dir.join(&rel))?;
            let (mut off, mut crc, mut buf) = (0u64, 0u32, vec![0u8; PIECE]);
            loop {
                let n = std::io::Read::read(&mut f, &mut buf)?;
                if n == 0 {
                    break;
                }
                crc = crc32c_append(crc, &buf[..n]);
                let piece = pb::FilePiece {
                    path: rel.clone(),
                    offset: off,
                    data: buf[..n].to_vec(),
                };
                if !send(Msg::Piece(piece)) {
                    return Ok(false);
                }
                sent_pieces += 1;
                fail::fail_point!("dn-replication-cut", sent_pieces >= 1, |_| Err(
                    std::io::Error::other("failpoint dn-replication-cut")
                ));
                off += n as u64;
            }
            Ok(send(Msg::FileEnd(pb::FileEnd {
                path: rel.clone(),
                size: off,
                crc32c: crc,
            })))
        })();
        match res {
            Ok(true) => files += 1,
            Ok(false) => return,
            Err(e) => {
                let _ = tx.blocking_send(Err(Status::aborted(format!("reading {rel}: {e}"))));
                return;
            }
        }
    }
    send(Msg::Trailer(pb::PullTrailer {
        file_count: files,
        block_count: blocks.len() as u64,
        checksum: d.checksum.clone(),
    }));
}

#[tonic::async_trait]
impl Replication for ReplicationService {
    type PullContainerStream = ReceiverStream<Result<pb::PullContainerReply, Status>>;

    async fn pull_container(
        &self,
        req: Request<pb::PullContainerRequest>,
    ) -> Result<Response<Self::PullContainerStream>, Status> {
        rozone_rpc::auth::require_role(
            &req,
            &[rozone_rpc::Role::Datanode],
            "container replication",
        )?;
        let cid = req.into_inner().container_id;
        let node = node(&self.node)?;
        // Reads the block table: off the async worker.
        let store = node.store.clone();
        let (d, blocks, dir) = blocking(move || exportable(&store, cid)).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || send_container(d, blocks, dir, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
