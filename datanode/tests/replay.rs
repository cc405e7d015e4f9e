//! HDDS-17435, the replay defect: a container is created by a stream (or by WriteChunk),
//! closed, then deleted on one member; that member restarts from an older Raft snapshot and
//! replays the log. No container may be recreated: the apply fails with
//! CONTAINER_NOT_FOUND, the pipeline is reported unhealthy (a CLOSE pipeline action), and
//! the other members' replicas are untouched.

mod common;

use std::path::Path;

use common::*;
use rozone_datanode::types::ContainerState;
use rozone_proto::scm as spb;
use rozone_types::codes::DnCode;

#[derive(Clone, Copy, Debug)]
enum Mode {
    StreamInit,
    StreamWithBlock,
    WriteChunk,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

async fn scenario(mode: Mode) {
    let mut c = Cluster::start(3).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let victim = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let mut l = c.client(leader);
    let old = bytes(9, 5000);
    l.write_block(1, 1, 1, &old, 4096).await.unwrap();
    c.wait_caught_up(1, leader, victim).await;

    // The victim's older snapshot: taken before container 7 exists.
    let vgroup_dir = c.nodes[victim].dn().pipelines.dir(1).join("raft");
    let saved = c.dir.path().join("old-sm");
    {
        let g = c.nodes[victim].dn().pipelines.get(1).unwrap().group.clone();
        g.snapshot_now(WAIT).await.unwrap();
        let id = g.snapshot_id().unwrap();
        copy_dir(&vgroup_dir.join("snapshots").join(&id).join("db"), &saved);
    }

    // Container 7 is created by the write stage of this mode's first write.
    let data = bytes(7, 30_000);
    match mode {
        Mode::StreamInit => {
            let s = l.stream(1, 7, 1, &data, false, None).await.unwrap();
            l.put_block(1, 7, 1, vec![s.chunk.unwrap()]).await.unwrap();
        }
        Mode::StreamWithBlock => {
            l.stream(1, 7, 1, &data, true, None).await.unwrap();
        }
        Mode::WriteChunk => {
            l.write_block(1, 7, 1, &data, 8192).await.unwrap();
        }
    }
    // SCM closes it (through the pipeline) ...
    for n in &c.nodes {
        c.scm.send(
            n.id,
            spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
                container_id: 7,
                pipeline_id: 1,
                force: false,
            }),
        );
    }
    for i in 0..3 {
        let cl = c.client(i);
        wait_until("container 7 CLOSED", || {
            let mut cl = cl.clone();
            async move {
                cl.container(7)
                    .await
                    .ok()
                    .filter(|d| d.state == rozone_proto::datanode::ContainerState::Closed as i32)
            }
        })
        .await;
    }
    c.wait_caught_up(1, leader, victim).await;
    let closed_on_other = c.client(other).container(7).await.unwrap();
    // ... and deletes the victim's replica (e.g. the source of a balancer move).
    let del = c.scm.send(
        c.nodes[victim].id,
        spb::scm_command::Command::DeleteContainer(spb::DeleteContainerCommand {
            container_id: 7,
            force: true,
        }),
    );
    let st = c.scm.wait_status(del).await;
    assert_eq!(
        st.status,
        spb::command_status::Status::Executed as i32,
        "{st:?}"
    );
    let vid = c.nodes[victim].id;
    wait_until("deletion reported", || {
        let scm = c.scm.clone();
        async move {
            scm.replica(vid, 7)
                .filter(|r| r.state == spb::ReplicaState::ReplicaDeleted as i32)
                .map(|_| ())
        }
    })
    .await;
    let applied_before = c.nodes[victim]
        .dn()
        .pipelines
        .get(1)
        .unwrap()
        .group
        .metrics()
        .last_applied
        .unwrap()
        .index();

    // The victim crashes and comes back from the older snapshot: it must replay the
    // StreamInit / stream-with-block / WriteChunk, PutBlock and CloseContainer entries.
    c.nodes[victim].stop().await;
    let sm = vgroup_dir.join("sm");
    std::fs::remove_dir_all(&sm).unwrap();
    copy_dir(&saved, &sm.join("gen-0"));
    std::fs::write(sm.join("CURRENT"), "gen-0").unwrap();
    c.nodes[victim].start().await;

    let g = c.nodes[victim].dn().pipelines.get(1).unwrap().group.clone();
    g.wait_applied(applied_before, WAIT).await.unwrap();
    let action = wait_until("CLOSE pipeline action from the victim", || {
        let scm = c.scm.clone();
        async move {
            scm.state()
                .actions
                .iter()
                .find(|(dn, a)| *dn == vid && a.pipeline_id == 1)
                .map(|(_, a)| a.clone())
        }
    })
    .await;
    assert_eq!(action.action, spb::pipeline_action::Action::Close as i32);
    assert!(
        action.reason.contains("CONTAINER_NOT_FOUND"),
        "{}",
        action.reason
    );
    assert!(action.reason.contains("container 7"), "{}", action.reason);
    wait_until("unhealthy pipeline report", || {
        let scm = c.scm.clone();
        async move {
            scm.state()
                .pipeline_reports
                .get(&(vid, 1))
                .filter(|r| !r.healthy)
                .map(|_| ())
        }
    })
    .await;

    // No replica was recreated on the victim: not in the store, not on disk, not reported.
    let v = c.nodes[victim].dn();
    assert_eq!(
        v.store.descriptor(7).map(|d| d.state),
        Some(ContainerState::Deleted)
    );
    assert!(!c.nodes[victim].volume().join("containers/7").exists());
    let e = c.client(victim).container(7).await.unwrap_err();
    assert_eq!(code(&e), Some(DnCode::ContainerNotFound));
    assert!(v.store.descriptors().iter().all(|d| d.id != 7));
    // Its other container is intact.
    assert_eq!(c.client(victim).read_block(1, 1).await.unwrap().0, old);
    // Writes to the unhealthy pipeline are refused on the victim (were it to lead).
    assert!(!v.pipelines.get(1).unwrap().state.is_healthy());

    // The other members' replicas are untouched.
    for i in [leader, other] {
        let d = c.client(i).container(7).await.unwrap();
        assert_eq!(
            (d.state, d.bcsid, d.block_count, &d.checksum),
            (
                closed_on_other.state,
                closed_on_other.bcsid,
                1,
                &closed_on_other.checksum
            )
        );
        assert_eq!(c.client(i).read_block(7, 1).await.unwrap().0, data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replayed_stream_init_never_recreates_a_deleted_container() {
    scenario(Mode::StreamInit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replayed_stream_with_block_never_recreates_a_deleted_container() {
    scenario(Mode::StreamWithBlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replayed_write_chunk_put_block_close_never_recreate_a_deleted_container() {
    scenario(Mode::WriteChunk).await;
}
