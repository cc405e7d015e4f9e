//! Issue 15's three named holes, closed: on a dev cluster (mutual TLS by default), a caller
//! without a certificate cannot delete committed blocks on the SCM, cannot add a member to
//! the OM ring with `AddMember{force}`, and cannot offer a forged snapshot to an OM's Raft
//! peer port; the cluster's state is unchanged afterwards.
//!
//! Written to fail on cd62657, where every port was plaintext and trusted every caller:
//! `DeleteBlocks` answered OK, `AddMember{force}` put node 9 into the OM membership, and the
//! forged `InstallSnapshot` reached the Raft handler (`INVALID_ARGUMENT bad raft payload`).
//! NOT YET RUN against cd62657 (no time in the session that wrote it): copy this file into
//! a checkout of that commit and run it once to confirm.
//! It uses only what that commit had (plain tonic channels, the proto crate, `dev up`).

mod common;

use std::time::Duration;

use common::*;
use rozone_proto::raft::raft_service_client::RaftServiceClient;
use rozone_proto::raft::RaftRequest;
use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::ring::AddMemberRequest;
use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_proto::scm::{BlockId, DeleteBlocksRequest};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

/// A plaintext channel, as any process that can reach the port could open.
async fn plain(port: u64) -> Result<Channel, String> {
    Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))
}

/// The port `field` of the first daemon of `kind` in `DIR/cluster.json`.
fn port(c: &DevCluster, kind: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(c.dir.path().join("cluster.json")).expect("cluster.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("cluster.json is JSON");
    v["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["kind"] == kind))
        .and_then(|n| n[field].as_u64())
        .unwrap_or_else(|| panic!("no {kind} {field} port in {v}"))
}

/// A refusal by the transport (no TLS, no certificate: tonic reports these as UNAVAILABLE,
/// UNKNOWN, CANCELLED or INTERNAL h2 errors) or by authorization: anything but the handler
/// having looked at the request (cd62657 answered INVALID_ARGUMENT `bad raft payload`).
fn refused(what: &str, r: Result<(), String>, code: Option<Code>) {
    assert!(
        r.is_err(),
        "{what} from a caller without a certificate was accepted"
    );
    if let Some(code) = code {
        assert!(
            matches!(
                code,
                Code::Unavailable
                    | Code::Unknown
                    | Code::Cancelled
                    | Code::Internal
                    | Code::Unauthenticated
                    | Code::PermissionDenied
            ),
            "{what} from a caller without a certificate reached its handler: {code:?} {r:?}"
        );
    }
}

#[test]
fn callers_without_a_certificate_cannot_delete_blocks_join_rings_or_offer_snapshots() {
    let c = DevCluster::up(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("k.bin");
    let body = data(200_000, 15);
    std::fs::write(&src, &body).expect("write source");
    ok(c.cli().args(["sh", "volume", "create", "/svol"]));
    ok(c.cli().args(["sh", "bucket", "create", "/svol/sbkt"]));
    ok(c.cli().args(["sh", "key", "put", "/svol/sbkt/k"]).arg(&src));
    let info = c.json(&["sh", "key", "info", "/svol/sbkt/k"]);
    let block = &info["blocks"][0]["block_id"];
    let (container_id, local_id) = (
        block["container_id"].as_u64().expect("container id"),
        block["local_id"].as_u64().expect("local id"),
    );
    let roles_before = c.json(&["admin", "om", "roles"]);
    let members_before = roles_before["members"].as_array().map(Vec::len);

    let rt = runtime();
    rt.block_on(async {
        let r = async {
            let ch = plain(port(&c, "scm", "client")).await?;
            ScmBlockClient::new(ch)
                .delete_blocks(DeleteBlocksRequest {
                    blocks: vec![BlockId {
                        container_id,
                        local_id,
                    }],
                })
                .await
                .map(|_| ())
                .map_err(|s| s.to_string())
        };
        refused("DeleteBlocks", r.await, None);

        let add = async {
            let ch = plain(port(&c, "om", "client")).await?;
            RingClient::new(ch)
                .add_member(AddMemberRequest {
                    id: 9,
                    peer_addr: "127.0.0.1:1".into(),
                    client_addr: "127.0.0.1:2".into(),
                    force: true,
                    ..Default::default()
                })
                .await
                .map(|_| ())
                .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
        };
        // A refusal is immediate; an accepted join waits for the new member to catch up.
        let r = tokio::time::timeout(Duration::from_secs(15), add)
            .await
            .unwrap_or(Ok(()));
        refused("AddMember{force}", r, None);

        let (r, code) = match plain(port(&c, "om", "peer")).await {
            Err(e) => (Err(e), None),
            Ok(ch) => {
                let r = RaftServiceClient::new(ch)
                    .install_snapshot(RaftRequest {
                        group_id: "om".into(),
                        target: 1,
                        from: 99,
                        payload: vec![0; 16],
                        ..Default::default()
                    })
                    .await;
                match r {
                    Ok(_) => (Ok(()), None),
                    Err(s) => (Err(s.message().to_string()), Some(s.code())),
                }
            }
        };
        refused("InstallSnapshot", r, code);
    });

    // Nothing changed: the same OM members, the key still whole.
    let roles_after = c.json(&["admin", "om", "roles"]);
    assert_eq!(
        roles_after["members"].as_array().map(Vec::len),
        members_before,
        "OM membership changed: {roles_after}"
    );
    assert!(
        !roles_after.to_string().contains("127.0.0.1:1\""),
        "{roles_after}"
    );
    let back = dir.path().join("k.out");
    ok(c.cli()
        .args(["sh", "key", "get", "/svol/sbkt/k"])
        .arg(&back));
    assert!(std::fs::read(&back).expect("read back") == body);
}
