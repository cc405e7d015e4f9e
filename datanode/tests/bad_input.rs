//! Bad input gets a clear error with a stable result code, and nothing is stored.

mod common;

use common::*;
use rozone_proto::datanode as pb;
use rozone_proto::scm as spb;
use rozone_types::codes::DnCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_with_clear_codes_and_nothing_stored() {
    let c = Cluster::start(3).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let mut l = c.client(leader);
    let data = bytes(1, 20_000);
    l.write_block(1, 1, 1, &data, 8192).await.unwrap();

    // Unknown container and block ids.
    let e = l.block(99, 1).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ContainerNotFound), "{e:?}");
    let e = l.block(1, 42).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::NoSuchBlock), "{e:?}");
    let e = l.read_block(1, 42).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::NoSuchBlock));
    let e = l.write_chunk(77, 1, 2, 0, b"abc").await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::PipelineNotFound), "{e:?}");

    // Missing fields are named.
    let e =
        l.c.get_block(pb::GetBlockRequest { block_id: None })
            .await
            .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::InvalidArgument));
    assert!(
        e.message().contains("block_id is missing"),
        "{}",
        e.message()
    );
    let e =
        l.c.write_chunk(pb::WriteChunkRequest {
            pipeline_id: 1,
            block_id: Some(bid(5, 1)),
            chunk: Some(pb::ChunkInfo {
                offset: 0,
                len: 3,
                checksum: None,
            }),
            data: b"abc".to_vec(),
        })
        .await
        .unwrap_err();
    assert!(
        e.message().contains("chunk.checksum is missing"),
        "{}",
        e.message()
    );

    // Chunk checksum mismatch: refused, and container 5 was not even created.
    let mut bad = chunk(0, b"hello");
    bad.checksum.as_mut().unwrap().checksums[0] ^= 1;
    let e =
        l.c.write_chunk(pb::WriteChunkRequest {
            pipeline_id: 1,
            block_id: Some(bid(5, 1)),
            chunk: Some(bad),
            data: b"hello".to_vec(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ChecksumMismatch), "{e:?}");
    let e = l
        .stream(1, 5, 2, &data, true, Some(sums(b"other")))
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ChecksumMismatch), "{e:?}");
    for n in &c.nodes {
        assert!(
            n.dn().store.descriptor(5).is_none(),
            "container 5 exists on node {}",
            n.id
        );
        assert!(!n.volume().join("containers/5").exists());
        assert_eq!(
            std::fs::read_dir(n.volume().join("tmp")).unwrap().count(),
            0
        );
    }

    // Offsets past the end.
    let e =
        l.c.read_chunk(pb::ReadChunkRequest {
            block_id: Some(bid(1, 1)),
            offset: 19_000,
            len: 2000,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::OutOfRange), "{e:?}");
    let e =
        l.c.read_chunk(pb::ReadChunkRequest {
            block_id: Some(bid(1, 1)),
            offset: 20_000,
            len: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::OutOfRange));
    // A partial read inside the block works and verifies.
    let r =
        l.c.read_chunk(pb::ReadChunkRequest {
            block_id: Some(bid(1, 1)),
            offset: 10_000,
            len: 100,
        })
        .await
        .unwrap()
        .into_inner();
    let seg = &r.segments[0];
    let from = (10_000 - seg.offset) as usize;
    assert_eq!(&seg.data[from..from + 100], &data[10_000..10_100]);

    // PutBlock naming a chunk that was never written: refused, block not committed.
    let e = l
        .put_block(1, 1, 2, vec![chunk(0, b"never written")])
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::InvalidArgument), "{e:?}");
    assert!(e.message().contains("never written"), "{}", e.message());
    assert_eq!(
        code(&l.block(1, 2).await.unwrap_err()),
        Some(DnCode::NoSuchBlock)
    );
    // PutBlock whose length disagrees with its chunks.
    let e =
        l.c.put_block(pb::PutBlockRequest {
            pipeline_id: 1,
            block: Some(pb::BlockData {
                block_id: Some(bid(1, 1)),
                chunks: vec![chunk(0, &data[..8192])],
                length: 5,
                bcsid: 0,
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DnCode::InvalidArgument));

    // Writes to a CLOSED container.
    let before = l.container(1).await.unwrap();
    for n in &c.nodes {
        c.scm.send(
            n.id,
            spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
                container_id: 1,
                pipeline_id: 1,
                force: false,
            }),
        );
    }
    wait_until("container 1 CLOSED", || {
        let mut cl = l.clone();
        async move {
            cl.container(1)
                .await
                .ok()
                .filter(|d| d.state == pb::ContainerState::Closed as i32)
        }
    })
    .await;
    let mut l = c.client(leader);
    let e = l.write_chunk(1, 1, 3, 0, b"late").await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ClosedContainerIo), "{e:?}");
    let e = l.stream(1, 1, 3, b"late", true, None).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ClosedContainerIo), "{e:?}");
    let after = l.container(1).await.unwrap();
    assert_eq!(
        (after.block_count, after.used_bytes),
        (before.block_count, before.used_bytes)
    );
    assert!(!c.nodes[leader]
        .volume()
        .join("containers/1/chunks/3.block")
        .exists());

    // Deleting a non-empty container without force is refused.
    let cmd = c.scm.send(
        c.nodes[leader].id,
        spb::scm_command::Command::DeleteContainer(spb::DeleteContainerCommand {
            container_id: 1,
            force: false,
        }),
    );
    let st = c.scm.wait_status(cmd).await;
    assert_eq!(st.status, spb::command_status::Status::Failed as i32);
    assert!(st.message.contains("CONTAINER_NOT_EMPTY"), "{}", st.message);
    assert!(l.container(1).await.is_ok());
}
