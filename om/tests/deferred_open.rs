//! Deferred opens (docs/om.md, "Key write protocol"): a writer of one block is opened
//! without a log entry and its commit records the open key and the key in one entry,
//! taking a block the leader reserved through the log when its pool fetched it. OMs over
//! real gRPC and RocksDB with the fake SCM.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rozone_client::om::{Exclude, OmClient};
use rozone_types::codes::{om_error, OmErrorCode as E};

async fn with_bucket(ring: &Ring) -> OmClient {
    let c = ring_client(&ring.client_addrs());
    c.create_volume("vol", "alice", None).await.unwrap();
    c.create_bucket("vol", "bkt", None).await.unwrap();
    c
}

/// The leader's last log index.
async fn last_index(ring: &Ring) -> u64 {
    let id = ring.leader().await;
    ring.oms[&id].group().metrics().last_log_index.unwrap_or(0)
}

/// Log entries `keys` metadata-only keys cost, each a one-block open and a commit.
async fn entries_per_keys(ring: &Ring, c: &OmClient, keys: u64, prefix: &str) -> (u64, bool) {
    let before = last_index(ring).await;
    let mut deferred = true;
    for i in 0..keys {
        let open = c
            .open_key_single_block("vol", "bkt", &format!("{prefix}{i}"), 0)
            .await
            .unwrap();
        deferred &= open.deferred;
        c.commit_key(&open, &[], "").await.unwrap();
    }
    (last_index(ring).await - before, deferred)
}

/// Before deferred opens a key was two entries (open, commit): 64 for 32 keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_one_block_key_costs_one_log_entry_plus_a_share_of_a_reservation() {
    let ring = Ring::start(1, |_| {}).await;
    let c = with_bucket(&ring).await;
    let (entries, deferred) = entries_per_keys(&ring, &c, 32, "k").await;
    assert!(deferred, "every one-block open was deferred");
    // 32 commits and the pool's refills (1, 2, 4, 8, 16, 32 blocks: at most 6 reservations).
    assert!(
        (32..=38).contains(&entries),
        "{entries} log entries for 32 keys"
    );
    ring.shutdown().await;

    // Turned off, every open is an entry of its own again.
    let ring = Ring::start(1, |c| c.om.deferred_open = false).await;
    let c = with_bucket(&ring).await;
    let (entries, deferred) = entries_per_keys(&ring, &c, 32, "k").await;
    assert!(!deferred);
    assert!(entries >= 64, "{entries} log entries for 32 keys");
    ring.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deferred_block_is_committed_once_and_gets_no_company() {
    let ring = Ring::start(1, |_| {}).await;
    let c = with_bucket(&ring).await;
    let open = c
        .open_key_single_block("vol", "bkt", "k", 100)
        .await
        .unwrap();
    assert!(open.deferred);
    assert_eq!(open.blocks.len(), 1);
    let b = open.blocks[0].block_id;
    // No open key exists to add blocks to.
    let e = c
        .allocate_block(&open, &Exclude::default())
        .await
        .unwrap_err();
    assert_eq!(om_code(&e), Some(E::OpenKeyNotFound), "{e}");
    // The same block named by another writer's deferred commit (a forged open) is refused
    // once the first commit took it.
    let key = c.commit_key(&open, &[(b, 100)], "crc").await.unwrap();
    assert_eq!((key.size, key.blocks.len()), (100, 1));
    assert_eq!(key.blocks[0].block_id, b);
    let mut forged = open.clone();
    forged.key = "other".into();
    forged.client_id += 1;
    let e = c.commit_key(&forged, &[(b, 100)], "crc").await.unwrap_err();
    assert_eq!(om_code(&e), Some(E::OpenKeyNotFound), "{e}");
    assert!(c
        .lookup_key("vol", "bkt", "other", Default::default())
        .await
        .unwrap_err()
        .is_not_found());
    // A second commit of the open (a new call, not a retry of the first) finds it gone, as
    // for any open: the writer's commit() then looks the key up and accepts it as its own.
    let e = c.commit_key(&open, &[(b, 100)], "crc").await.unwrap_err();
    assert_eq!(om_code(&e), Some(E::OpenKeyNotFound), "{e}");
    ring.shutdown().await;
}

/// The block a deferred open handed out is in the replicated state (reserved), not in the
/// leader's memory: the next leader commits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deferred_open_is_committed_by_the_next_leader() {
    let mut ring = Ring::start(3, |_| {}).await;
    let c = with_bucket(&ring).await;
    let old = ring.leader().await;
    let open = c
        .open_key_single_block("vol", "bkt", "k", 10)
        .await
        .unwrap();
    assert!(open.deferred);
    let b = open.blocks[0].block_id;
    ring.stop(old).await;
    let new = ring.leader().await;
    assert_ne!(new, old);
    let key = c.commit_key(&open, &[(b, 10)], "crc").await.unwrap();
    assert_eq!(key.blocks[0].block_id, b);
    ring.shutdown().await;
}

/// A writer that never commits: its reserved block, and the pool's blocks no open took,
/// go to the SCM for deletion once their reservation expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_abandoned_deferred_open_gives_its_block_back() {
    let ring = Ring::start(1, |c| {
        c.om.open_key_expiry = Duration::from_secs(1);
        c.om.cleanup_interval = Duration::from_millis(100);
    })
    .await;
    let c = with_bucket(&ring).await;
    let open = c
        .open_key_single_block("vol", "bkt", "k", 10)
        .await
        .unwrap();
    assert!(open.deferred);
    let b = open.blocks[0].block_id;
    let want = (b.container_id, b.local_id);
    let deadline = Instant::now() + WAIT;
    while !ring.scm.deleted.lock().unwrap().contains(&want) {
        assert!(Instant::now() < deadline, "block {b} never handed back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = c.commit_key(&open, &[(b, 10)], "crc").await.unwrap_err();
    assert_eq!(om_code(&e), Some(E::OpenKeyNotFound), "{e}");
    ring.shutdown().await;
}

fn om_code(e: &rozone_client::ClientError) -> Option<E> {
    match e {
        rozone_client::ClientError::Status { status, .. } => om_error(status),
        _ => None,
    }
}
