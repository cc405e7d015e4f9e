//! Credentials and the conditional-create race through the real gateway: a wrong secret is
//! SignatureDoesNotMatch, an unknown key InvalidAccessKeyId, a revoked key stops working;
//! 16 concurrent `If-None-Match: *` puts of one key: exactly one wins, and its bytes are
//! what a read returns; presigned GET and PUT URLs work until they expire, and tampered or
//! expired ones are refused for that reason without writing anything.

mod common;

use std::time::{Duration, Instant};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use common::{code, http, Cluster};

fn headers(r: &aws_sdk_s3::presigning::PresignedRequest) -> Vec<(String, String)> {
    r.headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credentials_and_the_conditional_create_race() {
    let c = Cluster::up();
    let (ak, sk) = c.secret("bob");
    // getsecret is get-or-create: the same secret again.
    assert_eq!(c.secret("bob"), (ak.clone(), sk.clone()));
    let s3 = c.s3(&ak, &sk);
    s3.create_bucket().bucket("race").send().await.unwrap();

    let wrong = c.s3(&ak, "not-the-secret-at-all-0000000000000000000");
    let e = wrong.list_buckets().send().await.unwrap_err();
    assert_eq!(code(&e), "SignatureDoesNotMatch");
    let unknown = c.s3("nobody", &sk);
    let e = unknown.list_buckets().send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidAccessKeyId");

    // 16 writers race to create one key.
    let mut tasks = Vec::new();
    for i in 0..16u8 {
        let s3 = s3.clone();
        tasks.push(tokio::spawn(async move {
            let body = vec![i; 1000 + i as usize];
            let r = s3
                .put_object()
                .bucket("race")
                .key("once")
                .if_none_match("*")
                .body(ByteStream::from(body.clone()))
                .send()
                .await;
            (body, r.map_err(|e| code(&e)))
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        let (body, r) = t.await.unwrap();
        match r {
            Ok(_) => winners.push(body),
            Err(code) => assert_eq!(code, "PreconditionFailed"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one conditional create wins");
    let got = s3
        .get_object()
        .bucket("race")
        .key("once")
        .send()
        .await
        .unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes(), winners[0]);

    // Presigned URLs: a PUT and a GET anyone holding the URL may use until it expires; a
    // tampered one is refused.
    let presign = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let put = s3
        .put_object()
        .bucket("race")
        .key("presigned")
        .presigned(presign.clone())
        .await
        .unwrap();
    let (st, body) = http("PUT", put.uri(), &headers(&put), b"by url");
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    let get = s3
        .get_object()
        .bucket("race")
        .key("presigned")
        .presigned(presign)
        .await
        .unwrap();
    let (st, body) = http("GET", get.uri(), &headers(&get), b"");
    assert_eq!((st, body.as_slice()), (200, &b"by url"[..]));
    // Tampered (another key than the one signed) and expired URLs, GET and PUT: refused
    // for that reason, and a refused PUT writes nothing.
    let refused = |(st, body): (u16, Vec<u8>), want: &str| {
        let text = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(st, 403, "{text}");
        assert!(text.contains(want), "want {want}: {text}");
    };
    let tampered = get.uri().replace("presigned?", "other?");
    refused(
        http("GET", &tampered, &headers(&get), b""),
        "<Code>SignatureDoesNotMatch</Code>",
    );
    let tampered = put.uri().replace("presigned?", "other?");
    refused(
        http("PUT", &tampered, &headers(&put), b"forged"),
        "<Code>SignatureDoesNotMatch</Code>",
    );
    let expired = PresigningConfig::builder()
        .start_time(std::time::SystemTime::now() - Duration::from_secs(3600))
        .expires_in(Duration::from_secs(60))
        .build()
        .unwrap();
    let old = s3
        .get_object()
        .bucket("race")
        .key("presigned")
        .presigned(expired.clone())
        .await
        .unwrap();
    refused(
        http("GET", old.uri(), &headers(&old), b""),
        "Request has expired",
    );
    let old = s3
        .put_object()
        .bucket("race")
        .key("late")
        .presigned(expired)
        .await
        .unwrap();
    refused(
        http("PUT", old.uri(), &headers(&old), b"too late"),
        "Request has expired",
    );
    for key in ["other", "late"] {
        let e = s3
            .head_object()
            .bucket("race")
            .key(key)
            .send()
            .await
            .unwrap_err();
        assert_eq!(common::status(&e), Some(404), "{key} was written");
    }

    // Revoked: refused once the gateway's secret cache (s3g.secret_cache_ttl) expires.
    c.cli(&["admin", "s3", "revoke", "--user", "bob"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match s3.list_buckets().send().await {
            Err(e) => {
                assert_eq!(code(&e), "InvalidAccessKeyId");
                break;
            }
            Ok(_) => assert!(Instant::now() < deadline, "revoked key still accepted"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
