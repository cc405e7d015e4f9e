//! The local cluster end to end, real processes only: `rozone dev up --detach`, a volume
//! and bucket, a 100 MiB file put and got back byte-identical, list/info/rename/delete,
//! every admin command in table and `--json` form, bad input on a live cluster, then the
//! whole cluster stopped and restarted from its data dir with every key still readable.

mod common;

use common::*;

fn volume_bucket(c: &DevCluster) {
    ok(c.cli().args(["sh", "volume", "create", "/vol1"]));
    ok(c.cli().args(["sh", "bucket", "create", "/vol1/bkt1"]));
    let v = c.json(&["sh", "volume", "info", "/vol1"]);
    assert_eq!(v["name"], "vol1");
    let bs = c.json(&["sh", "bucket", "list", "/vol1"]);
    assert_eq!(bs[0]["name"], "bkt1", "{bs}");
    let vs = ok(c.cli().args(["sh", "volume", "list"]));
    assert!(vs.lines().any(|l| l.starts_with("vol1 ")), "{vs}");
}

fn big_file_round_trip(c: &DevCluster) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("big.bin");
    let body = data(100 << 20, 1);
    std::fs::write(&src, &body).expect("write source");
    ok(c.cli()
        .args(["sh", "key", "put", "/vol1/bkt1/big"])
        .arg(&src));
    let got = dir.path().join("big.out");
    ok(c.cli()
        .args(["sh", "key", "get", "/vol1/bkt1/big"])
        .arg(&got));
    let back = std::fs::read(&got).expect("read back");
    assert!(
        back == body,
        "100 MiB key read back differs ({} vs {} bytes)",
        back.len(),
        body.len()
    );
    // A get never overwrites without --force.
    fails_with(
        c.cli()
            .args(["sh", "key", "get", "/vol1/bkt1/big"])
            .arg(&got),
        "exists",
    );
    let info = c.json(&["sh", "key", "info", "/vol1/bkt1/big"]);
    assert_eq!(info["size"], 100u64 << 20);
    assert!(
        info["checksum"]
            .as_str()
            .unwrap_or("")
            .starts_with("crc32:"),
        "{info}"
    );
    body
}

fn small_keys(c: &DevCluster) {
    let dir = tempfile::tempdir().expect("temp dir");
    for i in 0..3 {
        let p = dir.path().join(format!("s{i}"));
        std::fs::write(&p, data(1000 + i * 7, 10 + i as u64)).expect("write");
        ok(c.cli()
            .args(["sh", "key", "put", &format!("/vol1/bkt1/dir/s{i}")])
            .arg(&p));
    }
    // Empty key, and stdin/stdout.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").expect("write");
    ok(c.cli()
        .args(["sh", "key", "put", "/vol1/bkt1/empty"])
        .arg(&empty));
    let out = run(c.cli().args(["sh", "key", "get", "/vol1/bkt1/dir/s1", "-"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, data(1007, 11));
    let keys = c.json(&["sh", "key", "list", "/vol1/bkt1", "--prefix", "dir/"]);
    let names: Vec<&str> = keys
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert_eq!(names, ["dir/s0", "dir/s1", "dir/s2"]);
    ok(c.cli()
        .args(["sh", "key", "rename", "/vol1/bkt1/dir/s2", "dir/s2-renamed"]));
    ok(c.cli().args(["sh", "key", "delete", "/vol1/bkt1/dir/s0"]));
    let keys = c.json(&["sh", "key", "list", "/vol1/bkt1", "--prefix", "dir/"]);
    let names: Vec<&str> = keys
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert_eq!(names, ["dir/s1", "dir/s2-renamed"]);
}

fn admin(c: &DevCluster) {
    let scm = c.json(&["admin", "scm", "roles"]);
    let scm_members = scm["members"].as_array().expect("members");
    assert_eq!(scm_members.len(), 3, "{scm}");
    assert_eq!(
        scm_members.iter().filter(|m| m["role"] == "LEADER").count(),
        1,
        "{scm}"
    );
    let om = c.json(&["admin", "om", "roles"]);
    let om_members = om["members"].as_array().expect("members");
    assert_eq!(om_members.len(), 3, "{om}");
    assert_eq!(
        om_members.iter().filter(|m| m["role"] == "LEADER").count(),
        1,
        "{om}"
    );
    let table = ok(c.cli().args(["admin", "om", "roles"]));
    assert!(
        table.starts_with("ID") && table.contains("LEADER"),
        "{table}"
    );
    let dns = c.json(&["admin", "datanode", "list"]);
    assert_eq!(dns.as_array().expect("array").len(), 3, "{dns}");
    assert!(
        dns.as_array()
            .unwrap()
            .iter()
            .all(|d| d["health"] == "HEALTHY"),
        "{dns}"
    );
    let ps = c.json(&["admin", "pipeline", "list"]);
    assert!(!ps.as_array().expect("array").is_empty(), "{ps}");
    let cs = c.json(&["admin", "container", "list"]);
    let first = cs
        .as_array()
        .expect("array")
        .first()
        .cloned()
        .expect("a container holds the keys");
    let id = first["id"].as_u64().expect("id").to_string();
    let info = c.json(&["admin", "container", "info", &id]);
    assert_eq!(info["container"]["id"], first["id"]);
    ok(c.cli().args(["admin", "container", "info", &id]));
    let open = c.json(&["admin", "container", "list", "--state", "open"]);
    assert!(open.is_array());
    let sm = c.json(&["admin", "safemode", "status"]);
    assert_eq!(sm["in_safe_mode"], false, "{sm}");
    ok(c.cli().args(["admin", "safemode", "wait"]));
    let rm = c.json(&["admin", "replicationmanager", "status"]);
    assert!(rm["runs"].is_u64(), "{rm}");
    for args in [
        &["admin", "scm", "roles"][..],
        &["admin", "datanode", "list"],
        &["admin", "pipeline", "list"],
        &["admin", "container", "list"],
        &["admin", "safemode", "status"],
        &["admin", "replicationmanager", "status"],
    ] {
        let t = ok(c.cli().args(args));
        assert!(!t.trim().is_empty(), "{args:?} printed nothing");
    }
}

fn bad_input_on_a_live_cluster(c: &DevCluster) {
    fails_with(
        c.cli().args(["sh", "bucket", "create", "/vol1"]),
        "want /VOLUME/BUCKET",
    );
    fails_with(
        c.cli()
            .args(["sh", "key", "put", "/vol1/bkt1/x", "/no/such/file"]),
        "/no/such/file",
    );
    fails_with(
        c.cli().args(["sh", "bucket", "create", "/nosuchvol/bkt"]),
        "nosuchvol",
    );
    fails_with(
        c.cli().args(["sh", "key", "info", "/vol1/bkt1/nosuchkey"]),
        "nosuchkey",
    );
    fails_with(c.cli().args(["sh", "volume", "create", "/vol1"]), "vol1");
    fails_with(c.cli().args(["sh", "volume", "delete", "/vol1"]), "vol1");
    fails_with(
        c.cli().args(["admin", "container", "info", "999999"]),
        "999999",
    );
    fails_with(
        c.cli()
            .args(["admin", "container", "list", "--state", "shiny"]),
        "shiny",
    );
}

#[test]
fn local_cluster_put_get_admin_and_restart_from_data_dir() {
    let mut c = DevCluster::up(&[]);
    assert_eq!(c.up_json["fresh"], true);
    volume_bucket(&c);
    let body = big_file_round_trip(&c);
    small_keys(&c);
    admin(&c);
    bad_input_on_a_live_cluster(&c);

    // The whole cluster down, then up again from its data: every key still readable.
    c.down();
    assert!(c.pids().is_empty(), "dev down removes pids.json");
    c.start(&[]);
    assert_eq!(c.up_json["fresh"], false);
    let dir = tempfile::tempdir().expect("temp dir");
    let got = dir.path().join("big.after-restart");
    ok(c.cli()
        .args(["sh", "key", "get", "/vol1/bkt1/big"])
        .arg(&got));
    assert!(
        std::fs::read(&got).expect("read") == body,
        "100 MiB key differs after restart"
    );
    let out = run(c.cli().args(["sh", "key", "get", "/vol1/bkt1/dir/s1", "-"]));
    assert_eq!(out.stdout, data(1007, 11), "{}", text(&out.stderr));
    let out = run(c
        .cli()
        .args(["sh", "key", "get", "/vol1/bkt1/dir/s2-renamed", "-"]));
    assert_eq!(out.stdout, data(1014, 12), "{}", text(&out.stderr));

    // Delete everything; the volume goes last.
    for k in ["big", "dir/s1", "dir/s2-renamed", "empty"] {
        ok(c.cli()
            .args(["sh", "key", "delete", &format!("/vol1/bkt1/{k}")]));
    }
    ok(c.cli().args(["sh", "bucket", "delete", "/vol1/bkt1"]));
    ok(c.cli().args(["sh", "volume", "delete", "/vol1"]));
    let vs = c.json(&["sh", "volume", "list"]);
    assert!(
        vs.as_array()
            .expect("array")
            .iter()
            .all(|v| v["name"] != "vol1"),
        "{vs}"
    );
    c.down();
}
