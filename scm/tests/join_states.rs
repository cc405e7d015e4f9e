//! Join states on real `rozone-scm` processes (issue 12, item 2): an SCM whose join was
//! killed after it installed the leader's checkpoint and was added as a learner neither
//! starts on its own nor stays a learner: a plain start refuses with the way out, `--init`
//! refuses, and `--bootstrap` asks the leader to add it again until it is a voter.

use std::time::Duration;

use rozone_proto::ring as rpb;
use rozone_telemetry::proxy::Proxy;
use rozone_telemetry::testkit::{self, Daemon};
use rozone_tests::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-scm");
const WAIT: Duration = Duration::from_secs(60);

struct Node {
    id: u64,
    client: u16,
    peer: u16,
    checkpoint: u16,
}

impl Node {
    fn new(id: u64) -> Self {
        Self {
            id,
            client: free_port(),
            peer: free_port(),
            checkpoint: free_port(),
        }
    }
}

/// The config of `me`; `advertised` is each member's peer address as the ring knows it.
fn config(dir: &std::path::Path, me: &Node, all: &[(&Node, String)]) -> std::path::PathBuf {
    let mut toml = format!(
        "[node]\nid = {}\ndata_dir = {:?}\n[scm]\nclient_addr = \"127.0.0.1:{}\"\n\
         peer_addr = \"127.0.0.1:{}\"\ncheckpoint_addr = \"127.0.0.1:{}\"\n\
         bootstrap_retry_pause = \"200ms\"\n[http]\naddr = \"127.0.0.1:0\"\n[raft]\nfsync = false\n\
         election_timeout_min = \"300ms\"\nelection_timeout_max = \"600ms\"\n\
         heartbeat_interval = \"100ms\"\n",
        me.id,
        dir.join(format!("scm{}", me.id)),
        me.client,
        me.peer,
        me.checkpoint
    );
    for (n, peer) in all {
        toml += &format!(
            "[[peers]]\nid = {}\npeer_addr = \"{peer}\"\nclient_addr = \"127.0.0.1:{}\"\n",
            n.id, n.client
        );
    }
    let path = dir.join(format!("scm{}.toml", me.id));
    std::fs::write(&path, toml).expect("write config");
    path
}

fn spawn(config: &std::path::Path, flags: &[&str]) -> Daemon {
    // Not a security test: plaintext, asked for explicitly.
    let mut c = testkit::insecure_command(BIN);
    c.arg("--config").arg(config).args(flags);
    Daemon::spawn(c).expect("spawn rozone-scm")
}

async fn ring_info(client: u16) -> Option<rpb::RingInfoReply> {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{client}"))
        .ok()?
        .timeout(Duration::from_secs(3))
        .connect()
        .await
        .ok()?;
    rpb::ring_client::RingClient::new(ch)
        .ring_info(rpb::RingInfoRequest {})
        .await
        .ok()
        .map(|r| r.into_inner())
}

/// Waits until the SCM at `client` reports a membership for which `pred` holds.
async fn wait_members(client: u16, what: &str, pred: impl Fn(&[rpb::RingMember]) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(r) = ring_info(client).await {
            if pred(&r.members) {
                return;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn exited_stderr(mut d: Daemon) -> String {
    let status = d
        .wait_exit(WAIT)
        .unwrap_or_else(|e| panic!("expected an exit: {e}"));
    assert!(
        !status.success(),
        "a refusal exits non-zero:\n{}",
        d.stderr()
    );
    d.stderr()
}

/// Fails on cd62657 (run there once): the plain start after the killed join did not refuse
/// but came up from the installed checkpoint as if it were a member (openraft saw the
/// checkpoint's membership), still running after 60 s; and a `--bootstrap` restart only
/// logged "already joined" and never asked to be added again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_join_after_checkpoint_is_resumed_by_bootstrap_not_by_a_plain_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (n1, n2) = (Node::new(1), Node::new(2));
    let proxy = Proxy::start(format!("127.0.0.1:{}", n2.peer).parse().unwrap()).expect("proxy");
    let all = [
        (&n1, format!("127.0.0.1:{}", n1.peer)),
        (&n2, proxy.addr().to_string()),
    ];
    let (c1, c2) = (config(dir.path(), &n1, &all), config(dir.path(), &n2, &all));
    let s1 = spawn(&c1, &["--init"]);
    s1.wait_for_stderr("cluster created", WAIT)
        .expect("scm1 created the cluster");

    // scm1 cannot reach scm2's peer port: the join stops after the checkpoint was
    // installed and the learner added.
    proxy.cut();
    let mut s2 = spawn(&c2, &["--bootstrap"]);
    s2.wait_for_stderr("took the leader's checkpoint", WAIT)
        .unwrap_or_else(|e| panic!("{e}"));
    wait_members(n1.client, "learner 2", |m| m.iter().any(|m| m.id == 2)).await;
    s2.signal("KILL").expect("kill scm2");
    s2.wait_exit(WAIT).expect("scm2 gone");

    let err = exited_stderr(spawn(&c2, &[]));
    assert!(
        err.contains("started joining ring") && err.contains("--bootstrap to finish the join"),
        "{err}"
    );
    let err = exited_stderr(spawn(&c2, &["--init"]));
    assert!(err.contains("--init refused"), "{err}");

    proxy.heal();
    let s2 = spawn(&c2, &["--bootstrap"]);
    wait_members(n1.client, "scm2 a voter", |m| {
        m.iter().filter(|m| m.voter).map(|m| m.id).eq([1, 2])
    })
    .await;
    s2.wait_for_stderr("joined the SCM ring", WAIT)
        .unwrap_or_else(|e| panic!("{e}"));
    let (i1, i2) = (ring_info(n1.client).await, ring_info(n2.client).await);
    let (i1, i2) = (i1.expect("scm1"), i2.expect("scm2"));
    assert!(!i1.ring_id.is_empty());
    assert_eq!(i1.ring_id, i2.ring_id, "one ring id on both members");
    drop(s1);
}
