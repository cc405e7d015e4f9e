//! Failures under load, real processes: the OM leader SIGKILLed during a loop of puts
//! (every put that returned success is read back afterwards, and puts carry on), and a
//! datanode of the pipeline SIGKILLed (puts carry on, existing keys are read from the
//! other replicas).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rozone_client::Client;

fn prepare(c: &DevCluster) {
    ok(c.cli().args(["sh", "volume", "create", "/vol"]));
    ok(c.cli().args(["sh", "bucket", "create", "/vol/bkt"]));
}

/// Puts keys `prefix-N` of `size` bytes until `stop`, recording those that succeeded.
fn put_loop(
    client: Arc<Client>,
    rt: &tokio::runtime::Runtime,
    prefix: &'static str,
    size: usize,
    stop: Arc<AtomicBool>,
    done: Arc<Mutex<Vec<u64>>>,
) -> tokio::task::JoinHandle<(u64, Option<String>)> {
    rt.spawn(async move {
        let mut failed = 0;
        let mut last_err = None;
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let body = data(size, i + 1000);
            match client
                .put_bytes("vol", "bkt", &format!("{prefix}-{i}"), &body)
                .await
            {
                Ok(_) => done.lock().unwrap().push(i),
                Err(e) => {
                    failed += 1;
                    last_err = Some(e.to_string());
                }
            }
            i += 1;
        }
        (failed, last_err)
    })
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_all_back(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    prefix: &str,
    size: usize,
    ids: &[u64],
) {
    for i in ids {
        let got = rt
            .block_on(client.get_bytes("vol", "bkt", &format!("{prefix}-{i}")))
            .unwrap_or_else(|e| panic!("acknowledged put {prefix}-{i} not readable: {e}"));
        assert!(got == data(size, i + 1000), "{prefix}-{i} differs");
    }
}

#[test]
fn om_leader_killed_during_puts_loses_no_acknowledged_key() {
    let c = DevCluster::up(&[]);
    prepare(&c);
    let rt = runtime();
    let client = Arc::new({
        let _g = rt.enter();
        Client::new(&c.client_config()).expect("client")
    });
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Mutex::new(Vec::new()));
    let task = put_loop(
        client.clone(),
        &rt,
        "om",
        64 << 10,
        stop.clone(),
        done.clone(),
    );
    wait_until("puts before the kill", || done.lock().unwrap().len() >= 10);
    let leader = leader_of(&c, "om");
    c.kill(&leader);
    let at_kill = done.lock().unwrap().len();
    wait_until("puts after the kill", || {
        done.lock().unwrap().len() >= at_kill + 10
    });
    stop.store(true, Ordering::Relaxed);
    let (failed, last_err) = rt.block_on(task).expect("put loop");
    let ids = done.lock().unwrap().clone();
    eprintln!(
        "{} puts acknowledged, {failed} failed (last error: {last_err:?})",
        ids.len()
    );
    let new_leader = leader_of(&c, "om");
    assert_ne!(new_leader, leader, "a new OM leader took over");
    read_all_back(&rt, &client, "om", 64 << 10, &ids);
}

#[test]
fn datanode_killed_puts_continue_and_existing_keys_read_from_other_replicas() {
    let c = DevCluster::up(&["--datanodes", "4"]);
    prepare(&c);
    let rt = runtime();
    let client = Arc::new({
        let _g = rt.enter();
        Client::new(&c.client_config()).expect("client")
    });
    let size = 3 << 20;
    let mut before = Vec::new();
    for i in 0..5u64 {
        rt.block_on(client.put_bytes("vol", "bkt", &format!("dn-{i}"), &data(size, i + 1000)))
            .expect("put before");
        before.push(i);
    }
    // Kill a member of the pipeline that holds the first key: its leader if known.
    let k = c.json(&["sh", "key", "info", "/vol/bkt/dn-0"]);
    let p = &k["blocks"][0]["pipeline"];
    let victim = p["leader_id"]
        .as_u64()
        .or_else(|| p["members"][0]["id"].as_u64())
        .unwrap_or_else(|| panic!("pipeline without members: {k}"));
    c.kill(&format!("dn{victim}"));
    read_all_back(&rt, &client, "dn", size, &before);
    let mut after = Vec::new();
    for i in 5..10u64 {
        rt.block_on(client.put_bytes("vol", "bkt", &format!("dn-{i}"), &data(size, i + 1000)))
            .unwrap_or_else(|e| {
                panic!(
                    "put after killing dn{victim}: {e}\n--- scm log ---\n{}",
                    c.log(&leader_of(&c, "scm"))
                )
            });
        after.push(i);
    }
    read_all_back(&rt, &client, "dn", size, &before);
    read_all_back(&rt, &client, "dn", size, &after);
}
