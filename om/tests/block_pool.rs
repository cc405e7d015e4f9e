//! What an open asks the SCM for: opens of unknown length share one AllocateBlock call per
//! batch of blocks fetched ahead (`om/src/block_pool.rs`), and a key that fits one block
//! asks for its size, so the SCM does not count a whole block against the container for
//! it. One OM over real gRPC and RocksDB with the fake SCM, which records every call.

mod common;

use std::collections::BTreeSet;

use common::*;
use rozone_client::om::Exclude;

async fn ring_with_bucket() -> (Ring, rozone_client::om::OmClient) {
    let ring = Ring::start(1, |_| {}).await;
    let c = ring_client(&ring.client_addrs());
    c.create_volume("vol", "alice", None).await.unwrap();
    c.create_bucket("vol", "bkt", None).await.unwrap();
    (ring, c)
}

/// Before the pool every open made its own SCM call (200 calls for 200 opens). Failed on
/// main 0e32de5.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opens_of_unknown_length_share_scm_calls_and_never_a_block() {
    let (ring, c) = ring_with_bucket().await;
    let c = std::sync::Arc::new(c);
    let mut tasks = Vec::new();
    for t in 0..8 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..25 {
                let key = format!("k{t}-{i}");
                let open = c
                    .open_key("vol", "bkt", &key, 0, &Exclude::default())
                    .await
                    .unwrap();
                assert_eq!(open.blocks.len(), 1);
                assert_eq!(open.blocks[0].max_size, BLOCK);
                ids.push(open.blocks[0].block_id);
                c.commit_key(&open, &[], "").await.unwrap();
            }
            ids
        }));
    }
    let mut seen = BTreeSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(seen.insert(id), "block {id} given to two open keys");
        }
    }
    assert_eq!(seen.len(), 200);
    let sizes = ring.scm.sizes.lock().unwrap().clone();
    assert!(sizes.iter().all(|s| *s == 0), "{sizes:?}");
    assert!(
        sizes.len() <= 50,
        "{} SCM calls for 200 opens of unknown length",
        sizes.len()
    );
    ring.shutdown().await;
}

/// Before, every open asked for blocks of unknown length (`size = 0`), which the SCM
/// counts as whole blocks. Failed on main 0e32de5 (the 1 MiB open asked for 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_that_fits_one_block_asks_for_its_size() {
    let (ring, c) = ring_with_bucket().await;
    let sizes = || ring.scm.sizes.lock().unwrap().clone();
    // The SCM's block size is learnt from a block of unknown length first.
    put_key_metadata(&c, "vol", "bkt", "first", 1 << 20)
        .await
        .unwrap();
    assert_eq!(sizes(), vec![0]);
    let k = put_key_metadata(&c, "vol", "bkt", "small", 1 << 20)
        .await
        .unwrap();
    assert_eq!(k.size, 1 << 20);
    assert_eq!(sizes().last(), Some(&(1 << 20)));
    // A whole block, still one block.
    put_key_metadata(&c, "vol", "bkt", "whole", BLOCK)
        .await
        .unwrap();
    assert_eq!(sizes().last(), Some(&BLOCK));
    // More than one block: blocks of unknown length (all but the last are full).
    let k = put_key_metadata(&c, "vol", "bkt", "big", 2 * BLOCK + 1)
        .await
        .unwrap();
    assert_eq!(k.blocks.len(), 3);
    assert_eq!(sizes().last(), Some(&0));
    ring.shutdown().await;
}
