//! One request must never crash a datanode or spoil a container (issue 13, item 2): every
//! offset and length a request carries is checked and capped, through the real gRPC
//! services of in-process datanodes on loopback; committed bytes are immutable.

mod common;

use common::*;
use rozone_proto::datanode as pb;
use rozone_proto::datanode::container_client::ContainerClient;
use rozone_proto::datanode::pipeline_data_client::PipelineDataClient;
use rozone_types::codes::DnCode;

/// Largest block (`rozone_datanode::types::MAX_BLOCK`) and chunk (`MAX_CHUNK`).
const MAX_BLOCK: u64 = 1 << 30;
const MAX_CHUNK: u64 = 32 << 20;

fn peer(node: &Node) -> PipelineDataClient<tonic::transport::Channel> {
    let ch = tonic::transport::Endpoint::from_shared(format!(
        "http://{}",
        node.config.datanode.raft_addr
    ))
    .unwrap()
    .connect_lazy();
    PipelineDataClient::new(ch)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

fn pull(offset: u64, len: u64) -> pb::PullChunkRequest {
    pb::PullChunkRequest {
        pipeline_id: 1,
        block_id: Some(bid(1, 1)),
        chunk: Some(pb::ChunkInfo {
            offset,
            len,
            checksum: None,
        }),
    }
}

/// Every RPC field carrying an offset or a length, at and past its limit: a clear error
/// with a stable code, nothing stored, and the datanode keeps serving.
///
/// Fails on 00e069b: `PullChunk{offset: u64::MAX-1}` overflowed while formatting its error
/// and the worker panicked (INTERNAL "worker failed: ... attempt to add with overflow"; in
/// the daemon the panic hook exits the process). The old code had no block-size cap on
/// WriteChunk/PushChunk offsets and no read cap for `len: 0` either (read, not run: the
/// test stops at the first failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_wire_offset_and_length_is_checked_and_the_datanode_keeps_serving() {
    let c = Cluster::start(1).await;
    let leader = c.create_pipeline(1, &[0]).await;
    let mut l = c.client(leader);
    let data = bytes(1, 20_000);
    l.write_block(1, 1, 1, &data, 8192).await.unwrap();
    let mut p = peer(&c.nodes[leader]);

    // PullChunk: offset near u64::MAX, past the block limit, and len past the message cap.
    for (offset, len, want) in [
        (u64::MAX - 1, 10, DnCode::OutOfRange),
        (u64::MAX, 1, DnCode::OutOfRange),
        (MAX_BLOCK, 10, DnCode::OutOfRange),
        (MAX_BLOCK - 5, 10, DnCode::OutOfRange),
        (0, u64::MAX, DnCode::InvalidArgument),
        (0, 0, DnCode::InvalidArgument),
    ] {
        let e = p.pull_chunk(pull(offset, len)).await.unwrap_err();
        assert_eq!(code(&e), Some(want), "PullChunk [{offset}, +{len}): {e:?}");
    }
    assert_eq!(
        p.pull_chunk(pull(0, 100)).await.unwrap().into_inner().data,
        &data[..100]
    );

    // PushChunk and WriteChunk: offsets are capped by the block size limit.
    for offset in [1u64 << 40, MAX_BLOCK, MAX_BLOCK - 4, u64::MAX - 2] {
        let e = p
            .push_chunk(pb::PushChunkRequest {
                pipeline_id: 1,
                block_id: Some(bid(1, 2)),
                chunk: Some(chunk(offset, b"sparse")),
                data: b"sparse".to_vec(),
                target: c.nodes[leader].id,
            })
            .await
            .unwrap_err();
        assert_eq!(code(&e), Some(DnCode::OutOfRange), "PushChunk at {offset}");
        let e = l.write_chunk(1, 1, 2, offset, b"sparse").await.unwrap_err();
        assert_eq!(code(&e), Some(DnCode::OutOfRange), "WriteChunk at {offset}");
    }
    assert!(!c.nodes[leader]
        .volume()
        .join("containers/1/chunks/2.block")
        .exists());
    // Up to the limit is fine.
    l.write_chunk(1, 1, 2, MAX_BLOCK - 6, b"at end")
        .await
        .unwrap();

    // ReadChunk: offsets near u64::MAX, a len above the read limit.
    for (offset, len, want) in [
        (u64::MAX - 1, 10, DnCode::OutOfRange),
        (u64::MAX, 0, DnCode::OutOfRange),
        (10, u64::MAX, DnCode::InvalidArgument),
        (0, MAX_CHUNK + 1, DnCode::InvalidArgument),
    ] {
        let e =
            l.c.read_chunk(pb::ReadChunkRequest {
                block_id: Some(bid(1, 1)),
                offset,
                len,
            })
            .await
            .unwrap_err();
        assert_eq!(code(&e), Some(want), "ReadChunk [{offset}, +{len}): {e:?}");
    }

    // ReadChunk with len 0 ("to the end") on a streamed block larger than the read limit
    // is refused, not answered with the whole block; a bounded range of it reads fine.
    let big = bytes(2, (MAX_CHUNK + 4096) as usize);
    l.stream(1, 1, 3, &big, true, None).await.unwrap();
    let e =
        l.c.read_chunk(pb::ReadChunkRequest {
            block_id: Some(bid(1, 3)),
            offset: 0,
            len: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::OutOfRange), "{e:?}");
    let r =
        l.c.read_chunk(pb::ReadChunkRequest {
            block_id: Some(bid(1, 3)),
            offset: 4096,
            len: MAX_CHUNK,
        })
        .await
        .unwrap()
        .into_inner();
    let seg = &r.segments[0];
    let from = (4096 - seg.offset) as usize;
    assert_eq!(&seg.data[from..from + 100], &big[4096..4196]);

    // ListBlocks with an absurd count is capped, not refused.
    let r =
        l.c.list_blocks(pb::ListBlocksRequest {
            container_id: 1,
            start_local_id: 0,
            count: u32::MAX,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.blocks.len(), 2);

    // Still serving, and the container is healthy.
    assert_eq!(l.read_block(1, 1).await.unwrap().0, data);
    let d = l.container(1).await.unwrap();
    assert_eq!(d.state, pb::ContainerState::Open as i32);
}

/// A WriteChunk, PushChunk or stream over bytes that are already committed is refused and
/// changes nothing: every replica still reads the committed bytes. Re-sending the very
/// same chunk (a client retry) is still accepted.
///
/// Fails on 00e069b: the WriteChunk over the committed chunk was accepted (`unwrap_err` on
/// `Ok`) and overwrote its bytes on every member, whose block record kept the old checksums
/// (the next read fails verification and marks the replica UNHEALTHY).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_over_committed_bytes_is_refused_and_every_replica_stays_readable() {
    let c = Cluster::start(3).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let mut l = c.client(leader);
    let data = bytes(1, 20_000);
    l.write_block(1, 1, 1, &data, 8192).await.unwrap();
    // A chunk committed by its WriteChunk entry, its block not yet put.
    let loose = bytes(3, 5000);
    l.write_chunk(1, 1, 2, 0, &loose).await.unwrap();
    let before = l.container(1).await.unwrap();
    // Committed on every member (a push racing an entry not yet applied there would hit
    // uncommitted bytes, which are not protected).
    for i in 0..3 {
        c.wait_caught_up(1, leader, i).await;
    }

    let other = bytes(2, 8192);
    for (lid, offset, len) in [(1, 0, 8192), (1, 4096, 8192), (1, 16_000, 100), (2, 0, 10)] {
        let e = l
            .write_chunk(1, 1, lid, offset, &other[..len])
            .await
            .unwrap_err();
        assert_eq!(
            code(&e),
            Some(DnCode::InvalidArgument),
            "block {lid} [{offset}, +{len}): {e:?}"
        );
        assert!(e.message().contains("committed"), "{}", e.message());
    }
    // Pushed straight to a follower: refused there too.
    let f = (0..3).find(|&i| i != leader).unwrap();
    let e = peer(&c.nodes[f])
        .push_chunk(pb::PushChunkRequest {
            pipeline_id: 1,
            block_id: Some(bid(1, 1)),
            chunk: Some(chunk(0, &other)),
            data: other.clone(),
            target: c.nodes[f].id,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::InvalidArgument), "{e:?}");
    // A stream over a committed block.
    let e = l.stream(1, 1, 1, &other, true, None).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::InvalidArgument), "{e:?}");
    let e = l.stream(1, 1, 2, &other, false, None).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::InvalidArgument), "{e:?}");

    // A client retry of the very same chunk is fine.
    l.write_chunk(1, 1, 1, 0, &data[..8192]).await.unwrap();

    for i in 0..3 {
        c.wait_caught_up(1, leader, i).await;
        let mut cl = c.client(i);
        assert_eq!(cl.read_block(1, 1).await.unwrap().0, data, "node {i}");
        let d = cl.container(1).await.unwrap();
        assert_eq!(d.state, pb::ContainerState::Open as i32, "node {i}");
        assert_eq!(
            (d.block_count, d.used_bytes),
            (before.block_count, before.used_bytes),
            "node {i}"
        );
        assert_eq!(
            pull_raw(&c.nodes[i], 2, loose.len() as u64).await,
            loose,
            "node {i}"
        );
    }
    assert!(c.nodes[leader]
        .dn()
        .pipelines
        .get(1)
        .unwrap()
        .state
        .is_healthy());
}

/// Raw bytes `[0, len)` of block (1, `lid`) on a member, through its PullChunk (committed
/// or not).
async fn pull_raw(node: &Node, lid: u64, len: u64) -> Vec<u8> {
    let mut r = pull(0, len);
    r.block_id = Some(bid(1, lid));
    peer(node).pull_chunk(r).await.unwrap().into_inner().data
}

/// A connection of its own (`connect`, not lazy) to node `i`'s container port; `Err` when
/// the connection or its first call fails at the transport level.
async fn own_connection(
    c: &Cluster,
    i: usize,
) -> Result<ContainerClient<tonic::transport::Channel>, String> {
    let ch =
        tonic::transport::Endpoint::from_shared(format!("http://{}", c.nodes[i].container_addr()))
            .unwrap()
            .connect()
            .await
            .map_err(|e| format!("connect: {e}"))?;
    let mut cl = ContainerClient::new(ch);
    answered(&mut cl).await?;
    Ok(cl)
}

/// One call; `Ok` when the datanode itself answered (container 99 does not exist).
async fn answered(cl: &mut ContainerClient<tonic::transport::Channel>) -> Result<(), String> {
    match cl
        .get_container(pb::GetContainerRequest { container_id: 99 })
        .await
    {
        Err(s) if code(&s) == Some(DnCode::ContainerNotFound) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

/// `rpc.max_connections` caps the connections one port holds: one over the cap is closed
/// at once (its caller gets a transport error, never a hang), the connections already
/// held keep being served, and once one of them ends a new connection is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_over_rpc_max_connections_is_closed_and_held_ones_are_still_served() {
    let c = Cluster::start_with(1, |cfg| cfg.rpc.max_connections = 2).await;
    let mut a = own_connection(&c, 0).await.unwrap();
    let b = own_connection(&c, 0).await.unwrap();
    let refused = tokio::time::timeout(WAIT, own_connection(&c, 0))
        .await
        .expect("a connection over the cap is answered at once, not left hanging");
    assert!(refused.is_err(), "a third connection was served");
    answered(&mut a).await.unwrap();
    drop(b);
    let _c = wait_until("a new connection served once one ended", || async {
        own_connection(&c, 0).await.ok()
    })
    .await;
    answered(&mut a).await.unwrap();
}

/// A client keeping more calls open on one connection than `rpc.max_streams_per_connection`
/// allows is not refused: the server announces the limit (HTTP/2 SETTINGS) and the client
/// (tonic/h2, every rozone client) queues the calls beyond it, so all of them are answered
/// and none is cancelled (docs/security.md says what happens to a client ignoring it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_beyond_the_stream_limit_of_a_connection_wait_and_are_all_answered() {
    let c = Cluster::start_with(1, |cfg| {
        cfg.rpc.max_streams_per_connection = 4;
        cfg.rpc.max_requests_per_connection = 1024;
    })
    .await;
    let cl = own_connection(&c, 0).await.unwrap();
    let calls = (0..200).map(|_| {
        let mut cl = cl.clone();
        async move { answered(&mut cl).await }
    });
    let results = futures::future::join_all(calls).await;
    let failed: Vec<_> = results.into_iter().filter_map(Result::err).collect();
    assert!(
        failed.is_empty(),
        "{} calls failed: {:?}",
        failed.len(),
        failed.first()
    );
}
