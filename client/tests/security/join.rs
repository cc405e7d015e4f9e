//! Join tokens on the real cluster: an admin makes one-time tokens; a new datanode started
//! with nothing but the CA certificate and a token gets its certificate at its first start
//! and registers; `rozone admin cert enroll` gets a user's certificate that then owns what
//! it creates; a token works once, a token for another node writes nothing, junk and
//! non-admins are refused.
//!
//! A new capability, not a defect fix: before it (aacaeb6) neither `rozone admin
//! join-token` nor the SCM's enrollment port existed. The follower-first enrollment found
//! a defect of 391d57f, where a follower hinted its own enrollment port as the leader's
//! (the dev cluster's SCMs use different ports): there the CLI gave up after 30 s (run
//! 2026-12-07).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::*;

/// A one-time token for `role`-`id`, made with the CLI.
fn token(c: &DevCluster, role: &str, id: u64) -> String {
    let out = ok(c.cli().args([
        "admin",
        "join-token",
        "create",
        "--role",
        role,
        "--id",
        &id.to_string(),
        "--ttl",
        "10m",
    ]));
    let t = out.trim().to_string();
    assert!(t.starts_with("rozone-join-"), "{out}");
    t
}

/// Starts a datanode of id `id` that has no certificate yet, only `token`.
fn datanode_with_token(c: &DevCluster, dir: &Path, id: u64, token: &str) -> Child {
    let scm = port(c.dir.path(), "scm", "client");
    let enroll: Vec<String> = follower_enroll(c).split(',').map(String::from).collect();
    let ca = c.dir.path().join("tls").join(pki::CA_CERT);
    let config = format!(
        "[node]\nid = {id}\ndata_dir = {:?}\n[http]\naddr = \"127.0.0.1:0\"\n\
         [datanode]\ncontainer_addr = \"127.0.0.1:0\"\nraft_addr = \"127.0.0.1:0\"\n\
         replication_addr = \"127.0.0.1:0\"\nscm_addrs = [{scm:?}]\n\
         [security]\nca_cert = {:?}\ncert = {:?}\nkey = {:?}\nenroll_addrs = {enroll:?}\n",
        dir.join("data").display().to_string(),
        ca.display().to_string(),
        dir.join("dn.crt").display().to_string(),
        dir.join("dn.key").display().to_string(),
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.toml"), config).unwrap();
    let log = std::fs::File::create(dir.join("stderr.log")).unwrap();
    Command::new(bin_dir().join("rozone-datanode"))
        .arg("--config")
        .arg(dir.join("config.toml"))
        // The environment, as an operator keeps a secret out of the process list.
        .env("ROZONE_SECURITY__JOIN_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start rozone-datanode")
}

/// Every SCM's enrollment address, one that does not lead (as `admin scm roles` says
/// now) first, comma-separated.
fn follower_enroll(c: &DevCluster) -> String {
    let leader = leader_of(c, "scm");
    let text = std::fs::read_to_string(c.dir.path().join("cluster.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut scms: Vec<&serde_json::Value> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "scm")
        .collect();
    scms.sort_by_key(|n| format!("scm{}", n["id"]) == leader);
    assert!(format!("scm{}", scms[0]["id"]) != leader, "no follower");
    scms.iter()
        .map(|n| format!("127.0.0.1:{}", n["enroll"]))
        .collect::<Vec<_>>()
        .join(",")
}

fn registered(c: &DevCluster, id: u64) -> bool {
    let v = c.json(&["admin", "datanode", "list"]);
    v.as_array()
        .is_some_and(|ds| ds.iter().any(|d| d["datanode"]["id"] == id))
}

pub fn join_tokens_give_certificates_once(c: &DevCluster) {
    let scratch = tempfile::tempdir().unwrap();

    // A new datanode: no certificate, a token for datanode-4 → it enrolls and registers.
    let dn_dir = scratch.path().join("dn4");
    let t4 = token(c, "datanode", 4);
    let mut dn = KillOnDrop(datanode_with_token(c, &dn_dir, 4, &t4));
    let deadline = Instant::now() + TIMEOUT;
    while !registered(c, 4) {
        if let Ok(Some(status)) = dn.0.try_wait() {
            panic!(
                "datanode 4 exited ({status}): {}",
                std::fs::read_to_string(dn_dir.join("stderr.log")).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "datanode 4 never registered");
        std::thread::sleep(Duration::from_millis(200));
    }
    let m = std::fs::metadata(dn_dir.join("dn.key")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    let s = Security::load(
        &c.dir.path().join("tls").join(pki::CA_CERT),
        &dn_dir.join("dn.crt"),
        &dn_dir.join("dn.key"),
    )
    .expect("the enrolled files load");
    assert_eq!(
        s.identity(),
        Some(Caller {
            role: Role::Datanode,
            id: 4
        })
    );
    drop(dn);

    // The same token again: refused, nothing written. The CLI is given a follower's
    // enrollment address first: refused there, it moves on to the others.
    let enroll = follower_enroll(c);
    let ca = c.dir.path().join("tls").join(pki::CA_CERT);
    let enroll_cmd = |token: &str, out: &Path| {
        let mut cmd = rozone();
        cmd.args([
            "admin",
            "cert",
            "enroll",
            "--enroll-addr",
            &enroll,
            "--ca-cert",
        ])
        .arg(&ca)
        .arg("--out")
        .arg(out)
        .env("ROZONE_JOIN_TOKEN", token);
        cmd
    };
    let again = scratch.path().join("again");
    fails_with(&mut enroll_cmd(&t4, &again), "unknown or already used");
    assert!(!again.exists(), "files written for a spent token");
    fails_with(
        &mut enroll_cmd("rozone-join-00", &again),
        "not a join token",
    );

    // A token for datanode-5 used by datanode 6: the process stops, writes nothing.
    let dn6 = scratch.path().join("dn6");
    let t5 = token(c, "datanode", 5);
    let status = datanode_with_token(c, &dn6, 6, &t5).wait().unwrap();
    assert!(!status.success());
    let log = std::fs::read_to_string(dn6.join("stderr.log")).unwrap();
    assert!(
        log.contains("was made for datanode-5, but this process is datanode-6"),
        "{log}"
    );
    assert!(!dn6.join("dn.crt").exists() && !dn6.join("dn.key").exists());

    // A user's certificate from the CLI: client-12 owns what it creates.
    let user = scratch.path().join("user");
    let t12 = token(c, "client", 12);
    let out = ok(&mut enroll_cmd(&t12, &user));
    assert!(out.contains("client-12"), "{out}");
    let mut cfg = c.client_config();
    cfg.ca_cert = Some(user.join(pki::CA_CERT));
    cfg.cert = Some(user.join("client-12.crt"));
    cfg.key = Some(user.join("client-12.key"));
    let rt = runtime();
    rt.block_on(async {
        let u = rozone_client::Client::new(&cfg).unwrap();
        u.om.create_volume("joined", "", None)
            .await
            .expect("create volume");
        let v =
            u.om.volume_info("joined", rozone_client::om::ReadMode::Default)
                .await
                .unwrap();
        assert_eq!(v.owner, "client-12");
        // A user may not make tokens.
        let e = u
            .scm()
            .unwrap()
            .create_join_token("admin", 1, Duration::from_secs(60))
            .await
            .expect_err("a user made a join token");
        assert!(
            e.to_string().contains("CreateJoinToken is for admin"),
            "{e}"
        );
    });
}

/// Kills the child when the test ends, passed or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
