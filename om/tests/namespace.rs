//! One OM over real gRPC and RocksDB with a fake SCM: the namespace and key write protocol,
//! paging, and bad input (clear errors, state unchanged).

mod common;

use std::time::Duration;

use common::*;
use rozone_proto::om as pb;
use rozone_proto::om::OmErrorCode as E;
use tonic::Code;

async fn single(tune: fn(&mut rozone_om::Config)) -> Ring {
    Ring::start(1, tune).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn volumes_buckets_keys_write_protocol_and_paging() {
    let ring = single(|_| {}).await;
    let mut c = om_client(&ring.addr(1)).await;
    let v = c
        .create_volume(pb::CreateVolumeRequest {
            name: "vol1".into(),
            owner: "alice".into(),
            quota_bytes: None,
        })
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!((v.name.as_str(), v.owner.as_str()), ("vol1", "alice"));
    c.create_bucket(pb::CreateBucketRequest {
        volume: "vol1".into(),
        name: "bkt1".into(),
        versioning: true,
        ..Default::default()
    })
    .await
    .unwrap();
    // A key of 2.5 blocks: three blocks allocated.
    let size = 2 * BLOCK + BLOCK / 2;
    let open = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            key: "dir/k1".into(),
            size,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(open.blocks.len(), 3);
    assert!(open.client_id > 0);
    let session = open.session.unwrap();
    assert!(session.expires_ms > session.created_ms);
    // One more block through AllocateBlock, not used in the commit: it is given back.
    let more = c
        .allocate_block(pb::AllocateBlockRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            key: "dir/k1".into(),
            client_id: open.client_id,
            count: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(more.blocks.len(), 1);
    let lens = [BLOCK, BLOCK, BLOCK / 2];
    let blocks: Vec<pb::CommitBlock> = open
        .blocks
        .iter()
        .zip(lens)
        .map(|(b, l)| pb::CommitBlock {
            block_id: b.block_id,
            length: l,
        })
        .collect();
    let key = c
        .commit_key(pb::CommitKeyRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            key: "dir/k1".into(),
            client_id: open.client_id,
            blocks: blocks.clone(),
            size,
            checksum: "crc32c:00".into(),
            s3: None,
            condition: None,
            deferred: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .key
        .unwrap();
    assert_eq!(key.size, size);
    assert_eq!(
        key.blocks.iter().map(|b| b.offset).collect::<Vec<_>>(),
        vec![0, BLOCK, 2 * BLOCK]
    );
    assert_eq!(key.version, 0);
    // The same client id cannot commit twice.
    let e = c
        .commit_key(pb::CommitKeyRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            key: "dir/k1".into(),
            client_id: open.client_id,
            blocks,
            size,
            checksum: String::new(),
            s3: None,
            condition: None,
            deferred: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::OpenKeyNotFound), "{e:?}");

    // Replace it: version 1 (versioned bucket keeps the old one's bytes in use).
    let client = ring_client(&ring.client_addrs());
    let k = put_key_metadata(&client, "vol1", "bkt1", "dir/k1", 10)
        .await
        .unwrap();
    assert_eq!((k.version, k.size), (1, 10));
    let b = c
        .bucket_info(pb::BucketInfoRequest {
            volume: "vol1".into(),
            name: "bkt1".into(),
            read: None,
        })
        .await
        .unwrap()
        .into_inner()
        .bucket
        .unwrap();
    assert_eq!((b.key_count, b.used_bytes), (1, size + 10));

    // Paging: 25 keys, pages of 10, with a prefix.
    for i in 0..25 {
        put_key_metadata(&client, "vol1", "bkt1", &format!("p/{i:02}"), 1)
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut after = String::new();
    loop {
        let page = c
            .list_keys(pb::ListKeysRequest {
                volume: "vol1".into(),
                bucket: "bkt1".into(),
                prefix: "p/".into(),
                start_after: after.clone(),
                limit: 10,
                read: None,
            })
            .await
            .unwrap()
            .into_inner();
        names.extend(page.keys.iter().map(|k| k.name.clone()));
        match page.keys.last() {
            Some(l) if page.truncated => after = l.name.clone(),
            _ => break,
        }
    }
    assert_eq!(
        names,
        (0..25).map(|i| format!("p/{i:02}")).collect::<Vec<_>>()
    );

    // Rename, then delete; delete of a non-empty bucket/volume is refused.
    c.rename_key(pb::RenameKeyRequest {
        volume: "vol1".into(),
        bucket: "bkt1".into(),
        from_key: "p/00".into(),
        to_key: "q/00".into(),
    })
    .await
    .unwrap();
    let e = c
        .rename_key(pb::RenameKeyRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            from_key: "p/01".into(),
            to_key: "q/00".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::KeyAlreadyExists));
    let e = c
        .delete_bucket(pb::DeleteBucketRequest {
            volume: "vol1".into(),
            name: "bkt1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), code(&e)),
        (Code::FailedPrecondition, Some(E::BucketNotEmpty))
    );
    let e = c
        .delete_volume(pb::DeleteVolumeRequest {
            name: "vol1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::VolumeNotEmpty));
    let all = c
        .list_keys(pb::ListKeysRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    for k in all.keys {
        c.delete_key(pb::DeleteKeyRequest {
            volume: "vol1".into(),
            bucket: "bkt1".into(),
            key: k.name,
        })
        .await
        .unwrap();
    }
    c.delete_bucket(pb::DeleteBucketRequest {
        volume: "vol1".into(),
        name: "bkt1".into(),
    })
    .await
    .unwrap();
    c.delete_volume(pb::DeleteVolumeRequest {
        name: "vol1".into(),
    })
    .await
    .unwrap();
    let e = c
        .volume_info(pb::VolumeInfoRequest {
            name: "vol1".into(),
            read: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), code(&e)),
        (Code::NotFound, Some(E::VolumeNotFound))
    );
    ring.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_gets_clear_errors_and_changes_nothing() {
    let ring = single(|c| c.om.max_request_size = rozone_config::ByteSize::kib(64)).await;
    let mut c = om_client(&ring.addr(1)).await;
    c.create_volume(pb::CreateVolumeRequest {
        name: "vol".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.create_bucket(pb::CreateBucketRequest {
        volume: "vol".into(),
        name: "bkt".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let before = snapshot(&mut c).await;

    for (name, why) in [
        ("UPPER", "'U' is not allowed"),
        ("ab", "3 to 63"),
        ("-vol", "start and end"),
        ("10.0.0.1", "IP address"),
    ] {
        let e = c
            .create_volume(pb::CreateVolumeRequest {
                name: name.into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(
            (e.code(), code(&e)),
            (Code::InvalidArgument, Some(E::InvalidName)),
            "{name}"
        );
        assert!(e.message().contains(why), "{name}: {}", e.message());
    }
    let e = c
        .create_bucket(pb::CreateBucketRequest {
            volume: "vol".into(),
            name: "Bad_Bucket".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        e.message()
            .starts_with("invalid bucket name \"Bad_Bucket\""),
        "{}",
        e.message()
    );
    let e = c
        .create_bucket(pb::CreateBucketRequest {
            volume: "nosuch".into(),
            name: "bkt".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (code(&e), e.message()),
        (Some(E::VolumeNotFound), "volume nosuch not found")
    );
    let e = c
        .create_volume(pb::CreateVolumeRequest {
            name: "vol".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), code(&e)),
        (Code::AlreadyExists, Some(E::VolumeAlreadyExists))
    );
    let e = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol".into(),
            bucket: "nobkt".into(),
            key: "k".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (code(&e), e.message()),
        (Some(E::BucketNotFound), "bucket vol/nobkt not found")
    );
    let e = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "a\0b".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::InvalidName));
    let e = c
        .lookup_key(pb::LookupKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "missing".into(),
            read: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (code(&e), e.message()),
        (Some(E::KeyNotFound), "key vol/bkt/missing not found")
    );
    // A key too big for om.max_blocks_per_key.
    let e = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "huge".into(),
            size: BLOCK * 5000,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), code(&e)),
        (Code::ResourceExhausted, Some(E::RequestTooLarge))
    );
    // A request over om.max_request_size is refused by the transport.
    let e = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "k".into(),
            exclude_datanodes: vec![1; 100_000],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_ne!(e.code(), Code::Ok);
    assert!(
        e.message().contains("too large") || e.message().contains("limit"),
        "{}",
        e.message()
    );
    assert_eq!(
        before,
        snapshot(&mut c).await,
        "refused requests change nothing"
    );

    // Wrong client id on commit; foreign block; lengths that do not add up.
    let open = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "k".into(),
            size: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let block = open.blocks[0].block_id;
    let commit = |client_id: u64, blocks: Vec<pb::CommitBlock>, size: u64| pb::CommitKeyRequest {
        volume: "vol".into(),
        bucket: "bkt".into(),
        key: "k".into(),
        client_id,
        blocks,
        size,
        checksum: String::new(),
        s3: None,
        condition: None,
        deferred: Vec::new(),
    };
    let e = c
        .commit_key(commit(
            open.client_id + 1,
            vec![pb::CommitBlock {
                block_id: block,
                length: 100,
            }],
            100,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), code(&e)),
        (Code::FailedPrecondition, Some(E::WrongClientId)),
        "{e:?}"
    );
    let foreign = Some(rozone_proto::scm::BlockId {
        container_id: 999,
        local_id: 999,
    });
    let e = c
        .commit_key(commit(
            open.client_id,
            vec![pb::CommitBlock {
                block_id: foreign,
                length: 100,
            }],
            100,
        ))
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::InvalidBlockList));
    assert!(
        e.message().contains("999/999 was not allocated"),
        "{}",
        e.message()
    );
    let e = c
        .commit_key(commit(
            open.client_id,
            vec![pb::CommitBlock {
                block_id: block,
                length: 100,
            }],
            101,
        ))
        .await
        .unwrap_err();
    assert!(
        e.message()
            .contains("add up to 100 bytes, but the size is 101"),
        "{}",
        e.message()
    );
    let e = c
        .commit_key(commit(
            open.client_id,
            vec![pb::CommitBlock {
                block_id: None,
                length: 100,
            }],
            100,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::InvalidArgument, "blocks[0].block_id is missing")
    );
    let e = c
        .volume_info(pb::VolumeInfoRequest {
            name: "vol".into(),
            read: Some(pb::ReadOptions {
                consistency: 42,
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // Nothing of the failed commits is visible; the open key still commits correctly.
    let e = c
        .lookup_key(pb::LookupKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "k".into(),
            read: None,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::KeyNotFound));
    c.commit_key(commit(
        open.client_id,
        vec![pb::CommitBlock {
            block_id: block,
            length: 100,
        }],
        100,
    ))
    .await
    .unwrap();
    ring.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_open_keys_and_replaced_blocks_are_cleaned_up_by_the_leader() {
    let ring = single(|c| {
        c.om.open_key_expiry = Duration::from_millis(300);
        c.om.cleanup_interval = Duration::from_millis(100);
    })
    .await;
    let mut c = om_client(&ring.addr(1)).await;
    c.create_volume(pb::CreateVolumeRequest {
        name: "vol".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.create_bucket(pb::CreateBucketRequest {
        volume: "vol".into(),
        name: "bkt".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let open = c
        .open_key(pb::OpenKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "abandoned".into(),
            size: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let abandoned = open.blocks[0].block_id.unwrap();
    let node = ring.oms[&1].node.clone();
    let id = rozone_om::state::types::OpenKeyId {
        volume: "vol".into(),
        bucket: "bkt".into(),
        key: "abandoned".into(),
        client_id: open.client_id,
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let gone = rozone_om::state::read::open_key(&node.group.db(), &id)
            .unwrap()
            .is_none();
        let deleted = ring
            .scm
            .deleted
            .lock()
            .unwrap()
            .contains(&(abandoned.container_id, abandoned.local_id));
        if gone && deleted {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "open key not expired / blocks not handed to SCM"
        );
        node.group
            .wait_for(Duration::from_millis(100), "next apply", |_| false)
            .await
            .ok();
    }
    let e = c
        .commit_key(pb::CommitKeyRequest {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "abandoned".into(),
            client_id: open.client_id,
            blocks: vec![pb::CommitBlock {
                block_id: Some(abandoned),
                length: 1,
            }],
            size: 1,
            checksum: String::new(),
            s3: None,
            condition: None,
            deferred: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::OpenKeyNotFound));
    let metrics = http_get(ring.oms[&1].http_addr, "/metrics").await;
    assert!(
        metrics.contains("rozone_om_open_keys_expired_total 1"),
        "{metrics}"
    );
    ring.shutdown().await;
}

/// Every volume, bucket and key as the OM lists them (to compare before/after).
async fn snapshot(
    c: &mut rozone_proto::om::om_service_client::OmServiceClient<tonic::transport::Channel>,
) -> String {
    let vols = c
        .list_volumes(pb::ListVolumesRequest {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .volumes;
    let mut out = format!("{vols:?}\n");
    for v in vols {
        let bs = c
            .list_buckets(pb::ListBucketsRequest {
                volume: v.name.clone(),
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .buckets;
        for b in bs {
            let ks = c
                .list_keys(pb::ListKeysRequest {
                    volume: v.name.clone(),
                    bucket: b.name.clone(),
                    limit: 1000,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .keys;
            out.push_str(&format!("{b:?} {ks:?}\n"));
        }
    }
    out
}
