//! Multipart uploads left behind: the leader aborts an upload older than
//! `om.s3_upload_expiry` through the log and hands its parts' blocks to the SCM; a young
//! upload is left alone. One OM over real gRPC and RocksDB with a fake SCM.

mod common;

use std::time::Duration;

use common::*;
use rozone_proto::om as pb;
use rozone_proto::om::om_s3_client::OmS3Client;
use rozone_proto::om::OmErrorCode as E;

/// Volume and bucket, one upload of `key` with one committed part: (upload id, the part's
/// block).
async fn upload_with_a_part(ring: &Ring, key: &str) -> (String, (u64, u64)) {
    let addr = ring.addr(1);
    let mut c = om_client(&addr).await;
    let mut s3 = OmS3Client::connect(format!("http://{addr}")).await.unwrap();
    // The second upload of a test finds the volume and bucket made.
    let made = |e: tonic::Status| {
        assert!(
            matches!(
                code(&e),
                Some(E::VolumeAlreadyExists | E::BucketAlreadyExists)
            ),
            "{e}"
        )
    };
    c.create_volume(pb::CreateVolumeRequest {
        name: "s3v".into(),
        ..Default::default()
    })
    .await
    .map(drop)
    .unwrap_or_else(made);
    c.create_bucket(pb::CreateBucketRequest {
        volume: "s3v".into(),
        name: "bkt".into(),
        ..Default::default()
    })
    .await
    .map(drop)
    .unwrap_or_else(made);
    let upload = s3
        .create_multipart_upload(pb::CreateMultipartUploadRequest {
            volume: "s3v".into(),
            bucket: "bkt".into(),
            key: key.into(),
            meta: None,
        })
        .await
        .unwrap()
        .into_inner()
        .upload
        .unwrap();
    let open = c
        .open_key(pb::OpenKeyRequest {
            volume: "s3v".into(),
            bucket: "bkt".into(),
            key: key.into(),
            size: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let block = open.blocks[0].block_id.unwrap();
    s3.commit_multipart_part(pb::CommitMultipartPartRequest {
        volume: "s3v".into(),
        bucket: "bkt".into(),
        key: key.into(),
        upload_id: upload.upload_id.clone(),
        part_number: 1,
        client_id: open.client_id,
        blocks: vec![pb::CommitBlock {
            block_id: Some(block),
            length: 10,
        }],
        size: 10,
        etag: "0123456789abcdef0123456789abcdef".into(),
    })
    .await
    .unwrap();
    (upload.upload_id, (block.container_id, block.local_id))
}

/// Fails on 0e32de5 (main before this test): nothing aborted old uploads, so the upload
/// and its part stayed for good and the wait below ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_abandoned_upload_is_aborted_after_its_expiry_and_its_blocks_deleted() {
    let ring = Ring::start(1, |c| {
        c.om.s3_upload_expiry = Duration::from_millis(300);
        c.om.cleanup_interval = Duration::from_millis(100);
    })
    .await;
    let (upload_id, block) = upload_with_a_part(&ring, "abandoned").await;
    let node = ring.oms[&1].node.clone();
    let id = rozone_om::state::types::UploadId {
        volume: "s3v".into(),
        bucket: "bkt".into(),
        key: "abandoned".into(),
        upload_id: upload_id.clone(),
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let gone = rozone_om::state::read::s3_upload(&node.group.db(), &id)
            .unwrap()
            .is_none();
        let deleted = ring.scm.deleted.lock().unwrap().contains(&block);
        if gone && deleted {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "upload not aborted (gone: {gone}) / part's block not handed to the SCM"
        );
        node.group
            .wait_for(Duration::from_millis(100), "next apply", |_| false)
            .await
            .ok();
    }
    let mut s3 = OmS3Client::connect(format!("http://{}", ring.addr(1)))
        .await
        .unwrap();
    let e = s3
        .abort_multipart_upload(pb::AbortMultipartUploadRequest {
            volume: "s3v".into(),
            bucket: "bkt".into(),
            key: "abandoned".into(),
            upload_id,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(E::NoSuchUpload), "{e}");
    let metrics = http_get(ring.oms[&1].http_addr, "/metrics").await;
    assert!(
        metrics.contains("rozone_om_s3_uploads_expired_total 1"),
        "{metrics}"
    );
    ring.shutdown().await;
}

/// An upload younger than the expiry survives a cleanup round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_young_upload_survives_the_cleanup() {
    let ring = Ring::start(1, |_| {}).await;
    let (upload_id, _) = upload_with_a_part(&ring, "young").await;
    let node = ring.oms[&1].node.clone();
    assert_eq!(
        rozone_om::tasks::abort_expired_uploads(&node)
            .await
            .unwrap(),
        0
    );
    let id = rozone_om::state::types::UploadId {
        volume: "s3v".into(),
        bucket: "bkt".into(),
        key: "young".into(),
        upload_id,
    };
    assert!(rozone_om::state::read::s3_upload(&node.group.db(), &id)
        .unwrap()
        .is_some());
    ring.shutdown().await;
}
