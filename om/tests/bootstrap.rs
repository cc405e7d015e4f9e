//! `rozone-om --bootstrap` with real processes (HDDS-16838): a new OM whose config lacks a
//! ring member is refused before anything changes (checked on every OM); with a complete
//! config it joins and serves; with `--force` and the incomplete config it joins and stays
//! up, using the address from the Raft membership.

use rozone_telemetry::testkit::free_port;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rozone_proto::om as pb;
use rozone_telemetry::testkit::{self, Daemon, TIMEOUT};

const BIN: &str = env!("CARGO_BIN_EXE_rozone-om");

struct P {
    id: u64,
    peer: String,
    client: String,
}

fn ports(n: u64) -> Vec<P> {
    (1..=n)
        .map(|id| P {
            id,
            peer: format!("127.0.0.1:{}", free_port()),
            client: format!("127.0.0.1:{}", free_port()),
        })
        .collect()
}

/// Writes the config of `id` listing `listed` peers; returns its path.
fn write_config(dir: &Path, all: &[P], id: u64, listed: &[u64], name: &str) -> std::path::PathBuf {
    let me = &all[(id - 1) as usize];
    let mut s = format!(
        "[node]\nid = {id}\ndata_dir = {:?}\n\n[om]\nclient_addr = {:?}\npeer_addr = {:?}\nscm_addrs = [\"127.0.0.1:9\"]\nbootstrap_retry_pause = \"200ms\"\n\n[http]\naddr = \"127.0.0.1:0\"\n\n[raft]\nfsync = false\n\n",
        dir.join(name).display().to_string(),
        me.client,
        me.peer
    );
    for p in all.iter().filter(|p| listed.contains(&p.id)) {
        s.push_str(&format!(
            "[[peers]]\nid = {}\npeer_addr = {:?}\nclient_addr = {:?}\n\n",
            p.id, p.peer, p.client
        ));
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, s).unwrap();
    path
}

/// A plaintext OM (these tests are about joining, not security).
fn om(config: &Path, flags: &[&str]) -> Command {
    let mut c = testkit::insecure_command(BIN);
    c.arg("--config").arg(config).args(flags);
    c
}

fn start(config: &Path, flags: &[&str]) -> Daemon {
    let d = Daemon::spawn(om(config, flags)).expect("spawn");
    d.wait_for_stderr("rozone-om started", TIMEOUT)
        .unwrap_or_else(|e| panic!("OM did not start: {e}\n{}", d.stderr()));
    d
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn members(addr: &str) -> Vec<u64> {
    let mut c = rozone_proto::ring::ring_client::RingClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let r = c
        .ring_info(rozone_proto::ring::RingInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    r.members.iter().map(|m| m.id).collect()
}

async fn wait_members(addr: &str, want: &[u64]) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        if members(addr).await == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "membership at {addr} never became {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running ring of OM 1 (--init) and OM 2 (--bootstrap), both configs listing 1, 2, 3.
fn ring(dir: &Path, all: &[P]) -> (Daemon, Daemon) {
    let c1 = write_config(dir, all, 1, &[1, 2, 3], "om1");
    let c2 = write_config(dir, all, 2, &[1, 2, 3], "om2");
    let om1 = start(&c1, &["--init"]);
    let om2 = start(&c2, &["--bootstrap"]);
    rt().block_on(wait_members(&all[0].client, &[1, 2]));
    (om1, om2)
}

/// Creates a volume through the leader (OM 1) and reads it on `addr` after a read index.
async fn serves(all: &[P], addr: &str, volume: &str) {
    let mut leader =
        pb::om_service_client::OmServiceClient::connect(format!("http://{}", all[0].client))
            .await
            .unwrap();
    leader
        .create_volume(pb::CreateVolumeRequest {
            name: volume.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut c = pb::om_service_client::OmServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let read = Some(pb::ReadOptions {
        consistency: pb::ReadConsistency::LinearizableAllowFollower as i32,
        ..Default::default()
    });
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        match c
            .volume_info(pb::VolumeInfoRequest {
                name: volume.into(),
                read,
            })
            .await
        {
            Ok(r) => {
                assert_eq!(r.into_inner().volume.unwrap().name, volume);
                return;
            }
            Err(e) if rozone_rpc::is_retryable(&e) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("read on {addr}: {e:?}"),
        }
    }
}

#[test]
fn incomplete_config_is_refused_with_the_message_and_the_ring_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let all = ports(3);
    let (_om1, _om2) = ring(dir.path(), &all);
    // OM 3 knows only OM 1: OM 2 is in OM 1's peer list and Raft membership.
    let c3 = write_config(dir.path(), &all, 3, &[1, 3], "om3");
    let out = om(&c3, &["--bootstrap"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bootstrap refused, nothing was changed"),
        "{err}"
    );
    assert!(
        err.contains("OM(s) [2] are members of the ring but have no address in this OM's config"),
        "{err}"
    );
    assert!(
        err.contains("add a [[peers]] entry (id, peer_addr, client_addr)"),
        "{err}"
    );
    assert!(
        !dir.path().join("om3").join("raft").exists(),
        "no Raft storage was created"
    );
    let rt = rt();
    for p in &all[..2] {
        assert_eq!(
            rt.block_on(members(&p.client)),
            vec![1, 2],
            "membership on OM {}",
            p.id
        );
    }
}

#[test]
fn complete_config_joins_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let all = ports(3);
    let (_om1, _om2) = ring(dir.path(), &all);
    let c3 = write_config(dir.path(), &all, 3, &[1, 2, 3], "om3");
    let om3 = start(&c3, &["--bootstrap"]);
    assert!(om3.stderr().contains("joined the OM ring"));
    let rt = rt();
    for p in &all {
        rt.block_on(wait_members(&p.client, &[1, 2, 3]));
    }
    rt.block_on(serves(&all, &all[2].client, "joined"));
}

#[test]
fn force_with_incomplete_config_joins_and_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let all = ports(3);
    let (_om1, _om2) = ring(dir.path(), &all);
    let c3 = write_config(dir.path(), &all, 3, &[1, 3], "om3");
    let mut om3 = start(&c3, &["--bootstrap", "--force"]);
    let rt = rt();
    rt.block_on(wait_members(&all[0].client, &[1, 2, 3]));
    om3.wait_for_stderr("ring member 2 is not in this OM's [[peers]] config; using the address from the Raft membership", TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}\n{}", om3.stderr()));
    rt.block_on(serves(&all, &all[2].client, "forced"));
    rt.block_on(wait_members(&all[2].client, &[1, 2, 3]));
    // Still running: SIGTERM stops it cleanly (a crashed node would have exited already).
    om3.signal("TERM").unwrap();
    let status = om3.wait_exit(TIMEOUT).unwrap();
    assert!(status.success(), "{status:?}\n{}", om3.stderr());
}
