//! `rozone dev up --insecure` (the plaintext side of `scripts/bench-tls.sh`): every port
//! answers plaintext, the client config says `insecure = true`, keys carry no block tokens
//! and data goes through; the next start without the flag is secure again and refuses the
//! same plaintext call; a second start of the running cluster is refused and leaves it to
//! `dev down`. Real daemons, real gRPC.

mod common;

use std::time::Duration;

use common::*;
use rozone_client::Client;
use rozone_proto::om::om_admin_client::OmAdminClient;
use rozone_proto::om::RolesRequest;
use tonic::transport::Endpoint;

/// The OM admin `Roles` call over a plaintext channel to the first OM's client port.
async fn plaintext_roles(c: &DevCluster) -> Result<(), String> {
    let addr = c.client_config().om_addrs[0].clone();
    let ch = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    OmAdminClient::new(ch)
        .roles(RolesRequest::default())
        .await
        .map(|_| ())
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
}

#[test]
fn an_insecure_dev_cluster_is_plaintext_and_the_next_secure_start_is_not() {
    let mut c = DevCluster::up(&["--insecure"]);
    let cfg = c.client_config();
    assert!(cfg.insecure, "client.toml says insecure = true");
    assert!(cfg.cert.is_none(), "no client certificate in client.toml");
    let rt = runtime();
    rt.block_on(async {
        plaintext_roles(&c)
            .await
            .expect("a plaintext call answered");
        let client = Client::new(&cfg).expect("client");
        volume_and_bucket(&client, "vol", "bkt").await;
        let bytes = data(100_000, 1);
        client
            .put_bytes("vol", "bkt", "k", &bytes)
            .await
            .expect("put");
        assert_eq!(
            client.get_bytes("vol", "bkt", "k").await.expect("get"),
            bytes
        );
        let k = client
            .om
            .lookup_key("vol", "bkt", "k", Default::default())
            .await
            .expect("lookup");
        assert!(
            k.blocks.iter().all(|b| b.token.is_empty()),
            "an insecure cluster issues no block tokens"
        );
    });
    c.down();
    c.start(&[]);
    let cfg = c.client_config();
    assert!(!cfg.insecure, "client.toml is secure again");
    rt.block_on(async {
        let e = plaintext_roles(&c)
            .await
            .expect_err("a plaintext call to a secure cluster");
        eprintln!("plaintext call refused: {e}");
        let client = Client::new(&cfg).expect("client");
        assert_eq!(
            client
                .get_bytes("vol", "bkt", "k")
                .await
                .expect("get over TLS"),
            data(100_000, 1)
        );
    });

    // A second `dev up` of the running cluster is refused and must leave it as it was:
    // `pids.json` kept, so `dev down` still stops every daemon. (Fails on ebc2cfe: the
    // refused start cleaned up as if it had started the daemons and removed `pids.json`;
    // `dev down` then said no daemon was running and all ten kept running.)
    let before = c.pids();
    assert!(!before.is_empty());
    fails_with(
        rozone()
            .args(["dev", "up", "--detach", "--dir"])
            .arg(c.dir.path()),
        "already running",
    );
    assert_eq!(c.pids(), before, "pids.json survives a refused start");
    c.down();
    for (name, pid) in before {
        assert!(!alive(pid), "{name} ({pid}) still runs after dev down");
    }
}
