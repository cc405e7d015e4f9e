//! SCM opens a container when it hands out a block; a block may never be written. Closing
//! such a container must not poison the pipeline: the close is a no-op, reported EXECUTED,
//! and the pipeline keeps taking writes.

mod common;

use common::*;
use rozone_proto::datanode as pb;
use rozone_proto::scm as spb;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_a_container_never_written_leaves_the_pipeline_healthy() {
    let c = Cluster::start(3).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let mut ids = Vec::new();
    for n in &c.nodes {
        ids.push(c.scm.send(
            n.id,
            spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
                container_id: 50,
                pipeline_id: 1,
                force: false,
            }),
        ));
    }
    for id in ids {
        let st = c.scm.wait_status(id).await;
        assert_eq!(
            st.status,
            spb::command_status::Status::Executed as i32,
            "close of an unwritten container: {st:?}"
        );
    }
    // The pipeline still commits writes on every member, and nothing was created.
    let mut l = c.client(leader);
    let data = bytes(7, 10_000);
    l.write_block(1, 1, 1, &data, 4096).await.unwrap();
    for i in 0..3 {
        c.wait_caught_up(1, leader, i).await;
        let mut cl = c.client(i);
        let d = cl.container(1).await.unwrap();
        assert_eq!(d.state, pb::ContainerState::Open as i32);
        assert!(cl.container(50).await.is_err(), "container 50 appeared");
    }
    let healthy = wait_until("pipeline reports from every member", || async {
        let s = c.scm.state();
        let r: Vec<bool> = c
            .nodes
            .iter()
            .filter_map(|n| s.pipeline_reports.get(&(n.id, 1)).map(|p| p.healthy))
            .collect();
        (r.len() == 3).then_some(r)
    })
    .await;
    assert_eq!(healthy, vec![true; 3]);
}
