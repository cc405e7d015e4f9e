//! A write whose answer is lost after it committed, resent by the client library, is applied
//! once: real daemons of a dev cluster, real gRPC. The failpoint `raft-call-reply-lost`
//! (set with `PUT /failpoints/NAME` on each OM's HTTP port; test builds only) makes the OM
//! leader answer its next write of a client call with "not leader" after the write
//! committed, as a leader deposed after appending does; the client's ring resends the call.
//!
//! This is the chaos suite's violation 1 (RELIABILITY.md: a retried `DeleteVolume` applied
//! twice). Fails without the retry cache: with the cache's lookup removed from
//! `rozone_raft::state_machine` (this branch otherwise unchanged, so the failpoint exists;
//! on main before it, every resent write was applied again), the resent create is applied a
//! second time and refused, and `create_volume` fails with "volume once already exists".

mod common;

use std::io::{Read, Write};

use common::*;
use rozone_client::Client;

/// The HTTP ports of the cluster's OMs, from `rozone dev up`'s `cluster.json`.
fn om_http_ports(c: &DevCluster) -> Vec<u16> {
    let t = std::fs::read_to_string(c.dir.path().join("cluster.json")).expect("cluster.json");
    let v: serde_json::Value = serde_json::from_str(&t).expect("cluster.json is JSON");
    v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["kind"] == "om")
        .map(|n| n["http"].as_u64().expect("http port") as u16)
        .collect()
}

/// One plaintext HTTP/1.0 request to 127.0.0.1:`port`; the whole answer.
fn http(method: &str, port: u16, path: &str, body: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// The value of an unlabelled sample in a `/metrics` page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn a_resent_write_whose_answer_was_lost_is_applied_once() {
    let c = DevCluster::up(&[]);
    let ports = om_http_ports(&c);
    assert_eq!(ports.len(), 3);
    // On every OM: whichever leads loses the answer of its next call's write, once.
    for p in &ports {
        let r = http("PUT", *p, "/failpoints/raft-call-reply-lost", "1*return");
        assert!(
            r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200"),
            "{r}"
        );
    }
    let rt = runtime();
    let _in_rt = rt.enter();
    let client = Client::new(&c.client_config()).expect("client");
    let leader = leader_of(&c, "om");
    rt.block_on(async {
        // The first call's answer is lost once; the resent call gets the first answer.
        let v = client
            .om
            .create_volume("once", "alice", None)
            .await
            .expect("a create whose answer was lost, resent, answers as the first time");
        assert_eq!(v.name, "once");
        assert_eq!(v.owner, "alice");
        assert!(
            client.om.ring().retries() >= 1,
            "the client resent the call"
        );
        // Later calls are applied as usual: a second create of the name is refused.
        let again = client.om.create_volume("once", "bob", None).await;
        assert!(again.is_err(), "a new call is a new write: {again:?}");
        // A delete and a create after it: each applied once.
        client.om.delete_volume("once").await.expect("delete");
        client
            .om
            .create_volume("once", "carol", None)
            .await
            .expect("create after delete");
        let v = client
            .om
            .volume_info("once", rozone_client::om::ReadMode::Linearizable)
            .await
            .expect("info");
        assert_eq!(v.owner, "carol");
    });
    let hits: f64 = ports
        .iter()
        .filter_map(|p| {
            sample(
                &http("GET", *p, "/metrics", ""),
                "rozone_raft_retry_cache_hits_total",
            )
        })
        .sum();
    // The leader counted its hit before it answered; followers count theirs as they apply.
    assert!(hits >= 1.0, "no OM answered from its cache ({hits} hits)");
    let log =
        std::fs::read_to_string(c.dir.path().join(&leader).join("stderr.log")).unwrap_or_default();
    assert!(
        log.contains("a retried write was answered from the retry cache"),
        "the leader {leader} answered the resent call from its cache:\n{}",
        c.log(&leader)
    );
    c.down();
}
