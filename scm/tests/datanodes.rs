//! The datanode protocol against a running SCM, with fake datanodes over real gRPC:
//! registration, heartbeats, safe mode, pipeline creation and its commands, block
//! allocation, and the HEALTHY → STALE → DEAD transitions that close a pipeline.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use rozone_proto::scm as pb;
use rozone_proto::scm::scm_command::Command;
use tonic::Code;

async fn datanodes(c: &mut Clients) -> Vec<pb::DatanodeStatus> {
    c.admin
        .list_datanodes(pb::ListDatanodesRequest {})
        .await
        .unwrap()
        .into_inner()
        .datanodes
}

fn alloc(count: u32) -> pb::AllocateBlockRequest {
    pb::AllocateBlockRequest {
        size: 0,
        count,
        owner: "om1".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn register_heartbeat_pipeline_blocks_then_stale_and_dead() {
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |c| {
        c.scm.safe_mode_min_datanodes = 3;
        c.scm.datanode_stale_after = Duration::from_millis(800);
        c.scm.datanode_dead_after = Duration::from_millis(2000);
    })
    .await;
    let mut c = clients(&scm).await;
    let mut dns: Vec<FakeDn> = (1..=3).map(|i| FakeDn::new(i, &c)).collect();

    // Unknown to this leader: told to register.
    assert!(dns[0].beat().await.reregister);
    let reg = dns[0].register(vec![]).await;
    assert!(reg.cluster_id.starts_with("CID-"), "{reg:?}");
    assert_eq!(reg.datanode_id, 1);
    assert!(!dns[0].beat().await.reregister);

    // One datanode is not enough to leave safe mode (min 3): allocation is refused.
    let e = c.block.allocate_block(alloc(1)).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("safe mode"), "{e:?}");

    for d in &mut dns[1..] {
        d.register(vec![]).await;
    }
    // Safe mode ends; a pipeline of the three is created and each member gets the command.
    eventually!("every member got CreatePipeline", {
        for d in dns.iter_mut() {
            d.beat().await;
        }
        dns.iter()
            .all(|d| {
                !d.got(|c| matches!(c, Command::CreatePipeline(_)))
                    .is_empty()
            })
            .then_some(())
    });
    let mut ids = BTreeSet::new();
    for d in &dns {
        for cmd in &d.commands {
            assert!(ids.insert(cmd.id), "command id {} repeated", cmd.id);
            assert!(cmd.term >= 1);
        }
        let Some(Command::CreatePipeline(p)) = d.got(|c| matches!(c, Command::CreatePipeline(_)))
            [0]
        .command
        .clone() else {
            unreachable!()
        };
        let members: BTreeSet<u64> = p.members.iter().map(|m| m.id).collect();
        assert_eq!(members, BTreeSet::from([1, 2, 3]));
        assert!(p.members.iter().all(|m| !m.container_addr.is_empty()));
    }
    let sm = out_of_safe_mode(&c).await;
    assert!(!sm.forced_exit, "{sm:?}");
    assert_eq!(sm.healthy_datanodes, 3);

    // Blocks: container, local id and the pipeline's members; ids never repeat.
    let mut seen = BTreeSet::new();
    for _ in 0..3 {
        let r = c.block.allocate_block(alloc(7)).await.unwrap().into_inner();
        assert_eq!(r.blocks.len(), 7);
        for b in r.blocks {
            let id = b.block_id.unwrap();
            assert!(id.container_id > 0 && id.local_id > 0);
            assert!(
                seen.insert((id.container_id, id.local_id)),
                "block {id:?} handed out twice"
            );
            assert!(
                seen.iter().filter(|(_, l)| *l == id.local_id).count() == 1,
                "local id reused"
            );
            let p = b.pipeline.unwrap();
            assert_eq!(p.state, pb::PipelineState::PipelineOpen as i32);
            let members: BTreeSet<u64> = p.members.iter().map(|m| m.id).collect();
            assert_eq!(members, BTreeSet::from([1, 2, 3]));
            assert_eq!(b.max_size, 4 << 20);
        }
    }
    let open = c
        .admin
        .list_containers(pb::ListContainersRequest {
            state: Some(pb::ContainerState::ContainerOpen as i32),
            start_after: 0,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        open.containers.len(),
        3,
        "open_containers_per_pipeline containers: {open:?}"
    );
    assert!(open.containers.iter().all(|c| c.owner == "om1"));

    // Datanode 3 goes silent: STALE, then DEAD; its pipeline closes and the others are
    // told to close it too.
    let (first, rest) = dns.split_at_mut(2);
    let d3 = &mut rest[0];
    let mut health_seen = BTreeSet::new();
    eventually!("datanode 3 DEAD", {
        for d in first.iter_mut() {
            d.beat().await;
        }
        let h = datanodes(&mut c)
            .await
            .into_iter()
            .find(|d| d.datanode.as_ref().unwrap().id == 3)
            .unwrap()
            .health;
        health_seen.insert(h);
        (h == pb::NodeHealth::NodeDead as i32).then_some(())
    });
    assert!(
        health_seen.contains(&(pb::NodeHealth::NodeStale as i32)),
        "went STALE before DEAD"
    );
    eventually!("members 1 and 2 told to close the pipeline", {
        for d in first.iter_mut() {
            d.beat().await;
        }
        first
            .iter()
            .all(|d| !d.got(|c| matches!(c, Command::ClosePipeline(_))).is_empty())
            .then_some(())
    });
    let pipelines = c
        .admin
        .list_pipelines(pb::ListPipelinesRequest { state: None })
        .await
        .unwrap()
        .into_inner()
        .pipelines;
    assert!(pipelines
        .iter()
        .all(|p| p.pipeline.as_ref().unwrap().state == pb::PipelineState::PipelineClosed as i32));
    // Its containers were finalized and members got close commands.
    assert!(!first[0]
        .got(|c| matches!(c, Command::CloseContainer(_)))
        .is_empty());
    // No healthy pipeline is left: allocation says so.
    let e = c.block.allocate_block(alloc(1)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    // The dead datanode must register again.
    assert!(d3.beat().await.reregister);
    d3.register(vec![]).await;
    assert!(!d3.beat().await.reregister);
    scm.stop().await;
}
