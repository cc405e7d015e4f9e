//! Durability on power loss (issue 13, item 4): before a write, a stream or an import is
//! acknowledged, every directory whose entries it changed is fsynced. The `sync-dir`
//! failpoint (`rozone_raft::sync_dir`, payload: a path suffix) makes one directory's fsync
//! fail; the operation must then fail and leave nothing acknowledged behind.

mod common;

use common::*;
use rozone_proto::datanode::ContainerState;
use rozone_proto::scm as spb;
use rozone_types::codes::DnCode;

/// Fails on 00e069b: with `containers/`'s fsync failing, the WriteChunk that created
/// container 1 was acknowledged (`unwrap_err` on `Ok`): the parent directories were not
/// fsynced, and the one dir fsync there ignored its errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_streams_and_imports_fsync_every_changed_directory_before_acknowledging() {
    let mut c = Cluster::start_with(1, |cfg| cfg.datanode.sync_writes = true).await;
    let leader = c.create_pipeline(1, &[0]).await;
    let mut l = c.client(leader);
    let vol = c.nodes[leader].volume();

    // A new container: `containers/` (its new `<cid>` entry) must be synced.
    fail::cfg("sync-dir", "return(containers)").unwrap();
    let e = l.write_chunk(1, 1, 1, 0, b"first").await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::IoError), "{e:?}");
    assert!(e.message().contains("fsync"), "{}", e.message());
    assert!(c.nodes[leader].dn().store.descriptor(1).is_none());
    assert!(
        !vol.join("containers/1").exists(),
        "no container without descriptor"
    );
    fail::remove("sync-dir");
    l.write_block(1, 1, 1, b"first", 4096).await.unwrap();

    // A new block file: its directory `chunks/` must be synced.
    fail::cfg("sync-dir", "return(chunks)").unwrap();
    let e = l.write_chunk(1, 1, 2, 0, b"second").await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::IoError), "{e:?}");
    assert!(!vol.join("containers/1/chunks/2.block").exists());
    // A stream's rename into `chunks/` likewise.
    let e = l.stream(1, 1, 3, b"third", true, None).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::IoError), "{e:?}");
    assert!(!vol.join("containers/1/chunks/3.block").exists());
    fail::remove("sync-dir");
    // The retries create (and sync) the files again.
    l.write_block(1, 1, 2, b"second", 4096).await.unwrap();
    l.stream(1, 1, 3, b"third", true, None).await.unwrap();
    assert_eq!(l.read_block(1, 2).await.unwrap().0, b"second");
    assert_eq!(l.read_block(1, 3).await.unwrap().0, b"third");

    // An import: the staged directories before the rename, `containers/` after it.
    c.scm.send(
        c.nodes[leader].id,
        spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
            container_id: 1,
            pipeline_id: 1,
            force: false,
        }),
    );
    wait_until("container 1 CLOSED", || {
        let mut cl = l.clone();
        async move {
            cl.container(1)
                .await
                .ok()
                .filter(|d| d.state == ContainerState::Closed as i32)
        }
    })
    .await;
    let new = c.add_node_with(|cfg| cfg.datanode.sync_writes = true).await;
    let source = c.nodes[leader].details();
    let replicate = |c: &Cluster| {
        c.scm.send(
            c.nodes[new].id,
            spb::scm_command::Command::ReplicateContainer(spb::ReplicateContainerCommand {
                container_id: 1,
                sources: vec![source.clone()],
            }),
        )
    };
    for suffix in ["chunks", "containers"] {
        fail::cfg("sync-dir", &format!("return({suffix})")).unwrap();
        let st = c.scm.wait_status(replicate(&c)).await;
        assert_eq!(
            st.status,
            spb::command_status::Status::Failed as i32,
            "{suffix}: {st:?}"
        );
        assert!(st.message.contains("fsync"), "{}", st.message);
        assert!(c.nodes[new].dn().store.descriptor(1).is_none(), "{suffix}");
        assert!(
            !c.nodes[new].volume().join("containers/1").exists(),
            "{suffix}"
        );
    }
    fail::remove("sync-dir");
    let st = c.scm.wait_status(replicate(&c)).await;
    assert_eq!(
        st.status,
        spb::command_status::Status::Executed as i32,
        "{st:?}"
    );
    assert_eq!(c.client(new).read_block(1, 3).await.unwrap().0, b"third");
}
