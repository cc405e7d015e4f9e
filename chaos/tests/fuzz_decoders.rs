//! Fuzzing of every decoder that takes bytes from outside the process: the proto-to-domain
//! conversions (rozone-types, the daemons' convert.rs, the client's reply types), the Raft
//! log records and the replicated request envelopes of OM, SCM and pipelines, and the
//! config loader. No input may panic; every rejection must say something. Inputs are
//! mutations of valid samples (golden fixtures, encoded protos, sample configs); budget
//! and seed from `ROZONE_FUZZ_ITERS` / `ROZONE_FUZZ_SEED` (see docs/chaos.md).

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use rozone_chaos::fuzz::{budget, golden, run_bytes, run_text, Stats};
use rozone_proto::datanode as dpb;
use rozone_proto::om as opb;
use rozone_proto::scm as spb;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
}

fn fixture(rel: &str) -> Vec<Vec<u8>> {
    let p = root().join(rel);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    let g = golden(&text);
    assert!(!g.is_empty(), "no samples in {}", p.display());
    g
}

fn report(name: &str, r: Result<Stats, String>) {
    match r {
        Ok(s) => eprintln!("{name}: {} accepted, {} rejected", s.accepted, s.rejected),
        Err(e) => panic!("{e}"),
    }
}

/// `decode` a proto message of type `M` from the bytes, then convert it.
fn proto<M: Message + Default, T, E: std::fmt::Display>(
    b: &[u8],
    convert: impl Fn(M) -> Result<T, E>,
) -> Result<(), String> {
    let m = M::decode(b).map_err(|e| format!("decode: {e}"))?;
    convert(m).map(|_| ()).map_err(|e| e.to_string())
}

fn dn(id: u64) -> spb::DatanodeDetails {
    spb::DatanodeDetails {
        id,
        hostname: format!("h{id}"),
        container_addr: format!("127.0.0.1:{}", 9000 + id),
        raft_addr: format!("127.0.0.1:{}", 9100 + id),
        replication_addr: format!("127.0.0.1:{}", 9200 + id),
    }
}

fn allocated() -> spb::AllocatedBlock {
    spb::AllocatedBlock {
        block_id: Some(spb::BlockId {
            container_id: 3,
            local_id: 7,
        }),
        pipeline: Some(spb::Pipeline {
            id: 5,
            members: vec![dn(1), dn(2), dn(3)],
            leader_id: Some(1),
            state: spb::PipelineState::PipelineOpen as i32,
        }),
        max_size: 1 << 28,
        block_token: Vec::new(),
    }
}

fn chunk(offset: u64, len: u64) -> dpb::ChunkInfo {
    dpb::ChunkInfo {
        offset,
        len,
        checksum: Some(dpb::ChecksumData {
            r#type: dpb::ChecksumType::Crc32c as i32,
            bytes_per_checksum: 4096,
            checksums: vec![1; len.div_ceil(4096) as usize],
        }),
    }
}

#[test]
fn proto_decoders_never_panic() {
    let (iters, seed) = budget();
    let ab = allocated().encode_to_vec();
    report(
        "om AllocatedBlock",
        run_bytes(
            "om AllocatedBlock",
            std::slice::from_ref(&ab),
            iters,
            seed,
            |b| {
                proto(b, |m: spb::AllocatedBlock| {
                    rozone_om::state::types::AllocatedBlock::try_from(m)
                })
            },
        ),
    );
    report(
        "client AllocatedBlock",
        run_bytes("client AllocatedBlock", &[ab], iters, seed, |b| {
            proto(b, |m: spb::AllocatedBlock| {
                rozone_client::types::AllocatedBlock::try_from(m)
            })
        }),
    );
    let key = opb::KeyInfo {
        volume: "v".into(),
        bucket: "b".into(),
        name: "k".into(),
        size: 10,
        blocks: vec![opb::KeyBlock {
            block_id: Some(spb::BlockId {
                container_id: 1,
                local_id: 2,
            }),
            length: 10,
            offset: 0,
            pipeline: allocated().pipeline,
            block_token: Vec::new(),
        }],
        checksum: "crc32c:1".into(),
        ..Default::default()
    };
    report(
        "client KeyInfo",
        run_bytes("client KeyInfo", &[key.encode_to_vec()], iters, seed, |b| {
            proto(b, |m: opb::KeyInfo| rozone_client::types::Key::try_from(m))
        }),
    );
    let c = chunk(0, 10000);
    report(
        "types ChecksumData",
        run_bytes(
            "types ChecksumData",
            &[c.checksum.clone().unwrap().encode_to_vec()],
            iters,
            seed,
            |b| {
                proto(b, |m: dpb::ChecksumData| {
                    rozone_types::checksum::ChecksumData::try_from(m)
                })
            },
        ),
    );
    report(
        "types BlockId",
        run_bytes(
            "types BlockId",
            &[spb::BlockId {
                container_id: 1,
                local_id: 2,
            }
            .encode_to_vec()],
            iters,
            seed,
            |b| proto(b, |m: spb::BlockId| rozone_types::ids::BlockId::try_from(m)),
        ),
    );
    report(
        "datanode ChunkInfo",
        run_bytes(
            "datanode ChunkInfo",
            &[c.encode_to_vec()],
            iters,
            seed,
            |b| {
                proto(b, |m: dpb::ChunkInfo| {
                    rozone_datanode::convert::chunk_from(Some(m), "chunk")
                })
            },
        ),
    );
    let block = dpb::BlockData {
        block_id: Some(dpb::BlockId {
            container_id: 1,
            local_id: 2,
        }),
        chunks: vec![chunk(0, 4096), chunk(4096, 100)],
        length: 4196,
        bcsid: 3,
    };
    report(
        "datanode BlockData",
        run_bytes(
            "datanode BlockData",
            &[block.encode_to_vec()],
            iters,
            seed,
            |b| {
                proto(b, |m: dpb::BlockData| {
                    rozone_datanode::convert::block_from(Some(m), "block")
                })
            },
        ),
    );
    let desc = dpb::ContainerDescriptor {
        container_id: 4,
        state: dpb::ContainerState::Closed as i32,
        bcsid: 9,
        block_count: 2,
        used_bytes: 100,
        origin_pipeline_id: 5,
        checksum: "ab".into(),
        data_dir: "/d".into(),
        ..Default::default()
    };
    report(
        "datanode ContainerDescriptor",
        run_bytes(
            "datanode ContainerDescriptor",
            &[desc.encode_to_vec()],
            iters,
            seed,
            |b| {
                proto(b, |m: dpb::ContainerDescriptor| {
                    rozone_datanode::types::Descriptor::from_proto(m)
                })
            },
        ),
    );
    let replica = spb::ContainerReplica {
        container_id: 4,
        state: spb::ReplicaState::ReplicaClosed as i32,
        bcsid: 9,
        block_count: 2,
        used_bytes: 100,
        origin_pipeline_id: 5,
        checksum: "ab".into(),
        ..Default::default()
    };
    let hb = spb::HeartbeatRequest {
        datanode_id: 2,
        node_report: Some(spb::NodeReport::default()),
        full_container_report: Some(spb::ContainerReport {
            replicas: vec![replica.clone()],
        }),
        incremental_container_report: vec![replica],
        pipeline_reports: vec![spb::PipelineReport {
            pipeline_id: 5,
            is_leader: true,
            term: 2,
            healthy: true,
        }],
        ..Default::default()
    };
    report(
        "scm HeartbeatRequest",
        run_bytes(
            "scm HeartbeatRequest",
            &[hb.encode_to_vec()],
            iters,
            seed,
            |b| {
                proto(b, |m: spb::HeartbeatRequest| {
                    rozone_scm::convert::heartbeat(&m)
                })
            },
        ),
    );
    report(
        "scm DatanodeDetails",
        run_bytes(
            "scm DatanodeDetails",
            &[dn(4).encode_to_vec()],
            iters,
            seed,
            |b| {
                proto(b, |m: spb::DatanodeDetails| {
                    rozone_scm::cluster::nodes::Datanode::try_from(&m)
                })
            },
        ),
    );
}

#[test]
fn raft_records_and_replicated_requests_never_panic() {
    let (iters, seed) = budget();
    use rozone_raft::record;
    let ok = |r: std::io::Result<()>| r.map_err(|e| e.to_string());
    report(
        "log entry",
        run_bytes(
            "log entry",
            &fixture("common/raft/golden/log-entries-v1.txt"),
            iters,
            seed,
            |b| ok(record::decode_entry(b).map(|_| ())),
        ),
    );
    report(
        "log id",
        run_bytes(
            "log id",
            &fixture("common/raft/golden/log-ids-v1.txt"),
            iters,
            seed,
            |b| ok(record::decode_log_id(b).map(|_| ())),
        ),
    );
    report(
        "vote",
        run_bytes(
            "vote",
            &fixture("common/raft/golden/votes-v1.txt"),
            iters,
            seed,
            |b| ok(record::decode_vote(b).map(|_| ())),
        ),
    );
    report(
        "membership",
        run_bytes(
            "membership",
            &fixture("common/raft/golden/memberships-v1.txt"),
            iters,
            seed,
            |b| ok(record::decode_membership(b).map(|_| ())),
        ),
    );
    use rozone_raft::envelope::open;
    report(
        "OM request",
        run_bytes(
            "OM request",
            &fixture("om/golden/requests-v1.txt"),
            iters,
            seed,
            |b| ok(open::<rozone_om::state::request::OmRequest>(b, "OM request").map(|_| ())),
        ),
    );
    report(
        "SCM request",
        run_bytes(
            "SCM request",
            &fixture("scm/golden/requests-v1.txt"),
            iters,
            seed,
            |b| ok(open::<rozone_scm::state::request::ScmRequest>(b, "SCM request").map(|_| ())),
        ),
    );
    report(
        "pipeline request",
        run_bytes(
            "pipeline request",
            &fixture("datanode/golden/pipeline-requests-v1.txt"),
            iters,
            seed,
            |b| {
                ok(
                    open::<rozone_datanode::pipeline::logic::PipelineRequest>(
                        b,
                        "pipeline request",
                    )
                    .map(|_| ()),
                )
            },
        ),
    );
}

fn config_target<C: rozone_config::DaemonConfig>(name: &str, iters: u64, seed: u64) {
    let sample = rozone_config::sample_config::<C>().expect("sample config");
    // A second seed with the peers and addresses a real config has.
    let filled = format!(
        "{sample}\n[[peers]]\nid = 1\npeer_addr = \"127.0.0.1:1\"\nclient_addr = \"127.0.0.1:2\"\n"
    );
    report(
        name,
        run_text(name, &[sample, filled], iters, seed, |t| {
            rozone_config::load::<C>(&rozone_config::Sources::from_toml(t))
                .map(|_| ())
                .map_err(|e| e.to_string())
        }),
    );
    // The environment layer takes the same hostile values.
    let mut m = rozone_chaos::fuzz::Mutator::new(seed);
    for key in [
        "ROZONE_RAFT__ELECTION_TIMEOUT_MIN",
        "ROZONE_NODE__ID",
        "ROZONE_HTTP__ADDR",
    ] {
        for _ in 0..(iters / 30).max(10) {
            let v = m.text("x = 1");
            let value = v
                .split_once('=')
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or(v);
            let sources = rozone_config::Sources {
                env: BTreeMap::from([(key.to_string(), value.clone())]),
                ..Default::default()
            };
            let r = std::panic::catch_unwind(|| rozone_config::load::<C>(&sources).map(|_| ()));
            match r {
                Ok(Err(e)) => assert!(
                    !e.to_string().trim().is_empty(),
                    "{name}: empty error for {key}={value:?}"
                ),
                Ok(Ok(())) => {}
                Err(_) => panic!("{name}: PANIC on {key}={value:?}"),
            }
        }
    }
}

#[test]
fn config_loaders_never_panic() {
    let (iters, seed) = budget();
    config_target::<rozone_om::config::Config>("OM config", iters, seed);
    config_target::<rozone_scm::config::Config>("SCM config", iters, seed);
    config_target::<rozone_datanode::config::Config>("datanode config", iters, seed);
}
