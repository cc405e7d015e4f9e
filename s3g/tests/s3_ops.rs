//! The S3 operations through the real gateway with the AWS SDK: buckets, objects with
//! metadata, ranges and read conditions, server-side copy, listing with delimiters across
//! pages, deletes, conditional writes, and anonymous requests refused.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use common::{code, data, http, status, Cluster};

fn md5_hex(b: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_operations_through_the_gateway() {
    let c = Cluster::up();
    let s3 = c.user("alice");

    // Anonymous access is refused.
    let (st, body) = http("GET", &format!("{}/", c.endpoint), &[], b"");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(st, 403, "{text}");
    assert!(text.contains("AccessDenied"), "{text}");

    // Buckets.
    s3.create_bucket().bucket("bkt1").send().await.unwrap();
    let e = s3.create_bucket().bucket("bkt1").send().await.unwrap_err();
    assert_eq!(code(&e), "BucketAlreadyOwnedByYou");
    let e = s3
        .create_bucket()
        .bucket("bad_name")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidBucketName");
    s3.head_bucket().bucket("bkt1").send().await.unwrap();
    let e = s3
        .head_bucket()
        .bucket("nobucket")
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&e), Some(404));
    let names: Vec<String> = s3
        .list_buckets()
        .send()
        .await
        .unwrap()
        .buckets()
        .iter()
        .filter_map(|b| b.name().map(str::to_string))
        .collect();
    assert_eq!(names, ["bkt1"]);

    // An object with Content-Type and user metadata; ETag = MD5.
    let body = data(3 << 20, 1);
    let put = s3
        .put_object()
        .bucket("bkt1")
        .key("dir/obj")
        .content_type("text/plain")
        .metadata("color", "blue")
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .unwrap();
    let etag = format!("\"{}\"", md5_hex(&body));
    assert_eq!(put.e_tag(), Some(etag.as_str()));
    let h = s3
        .head_object()
        .bucket("bkt1")
        .key("dir/obj")
        .send()
        .await
        .unwrap();
    assert_eq!(h.content_length(), Some(body.len() as i64));
    assert_eq!(h.content_type(), Some("text/plain"));
    assert_eq!(h.e_tag(), Some(etag.as_str()));
    assert_eq!(
        h.metadata()
            .and_then(|m| m.get("color"))
            .map(String::as_str),
        Some("blue")
    );
    let got = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .send()
        .await
        .unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes(), body);

    // Ranges.
    let part = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .range("bytes=1000-1999999")
        .send()
        .await
        .unwrap();
    assert_eq!(
        part.content_range(),
        Some(format!("bytes 1000-1999999/{}", body.len()).as_str())
    );
    assert_eq!(
        part.body.collect().await.unwrap().into_bytes(),
        body[1000..2_000_000]
    );
    let tail = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .range("bytes=-10")
        .send()
        .await
        .unwrap();
    assert_eq!(
        tail.body.collect().await.unwrap().into_bytes(),
        body[body.len() - 10..]
    );
    let e = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .range(format!("bytes={}-", body.len() + 5))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidRange");

    // Read conditions.
    let e = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_none_match(&etag)
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&e), Some(304));
    let e = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_match("\"0123\"")
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&e), Some(412));
    let future = aws_sdk_s3::primitives::DateTime::from_secs(
        (std::time::SystemTime::now() + std::time::Duration::from_secs(3600))
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64,
    );
    let e = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_modified_since(future)
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&e), Some(304));
    s3.get_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_match(&etag)
        .send()
        .await
        .unwrap();

    // Server-side copy: metadata copied by default, replaced on request.
    let copied = s3
        .copy_object()
        .bucket("bkt1")
        .key("dir/copy1")
        .copy_source("bkt1/dir/obj")
        .send()
        .await
        .unwrap();
    assert_eq!(
        copied.copy_object_result().and_then(|r| r.e_tag()),
        Some(etag.as_str())
    );
    let h = s3
        .head_object()
        .bucket("bkt1")
        .key("dir/copy1")
        .send()
        .await
        .unwrap();
    assert_eq!(h.content_type(), Some("text/plain"));
    assert_eq!(
        h.metadata()
            .and_then(|m| m.get("color"))
            .map(String::as_str),
        Some("blue")
    );
    s3.copy_object()
        .bucket("bkt1")
        .key("dir/copy2")
        .copy_source("bkt1/dir/obj")
        .metadata_directive(aws_sdk_s3::types::MetadataDirective::Replace)
        .content_type("application/x-test")
        .send()
        .await
        .unwrap();
    let got = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/copy2")
        .send()
        .await
        .unwrap();
    assert_eq!(got.content_type(), Some("application/x-test"));
    assert!(got.metadata().is_none_or(|m| m.is_empty()));
    assert_eq!(got.body.collect().await.unwrap().into_bytes(), body);
    let e = s3
        .copy_object()
        .bucket("bkt1")
        .key("dir/copy3")
        .copy_source("bkt1/nokey")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchKey");
    // The copies share the source's blocks: no byte was read or written for them.
    let block_ids = |key: &str| {
        let out = c.cli(&["--json", "sh", "key", "info", &format!("/s3v/bkt1/{key}")]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("key info JSON");
        v["blocks"]
            .as_array()
            .expect("blocks")
            .iter()
            .map(|b| b["block_id"].clone())
            .collect::<Vec<_>>()
    };
    let src_blocks = block_ids("dir/obj");
    assert!(!src_blocks.is_empty());
    assert_eq!(block_ids("dir/copy1"), src_blocks);
    assert_eq!(block_ids("dir/copy2"), src_blocks);
    // Onto itself only with new metadata, as S3.
    let e = s3
        .copy_object()
        .bucket("bkt1")
        .key("dir/obj")
        .copy_source("bkt1/dir/obj")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidRequest");

    // Conditional writes: create-only and compare-and-set on the ETag.
    let e = s3
        .put_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_none_match("*")
        .body(ByteStream::from_static(b"new"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "PreconditionFailed");
    let e = s3
        .put_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_match("\"00000000000000000000000000000000\"")
        .body(ByteStream::from_static(b"new"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "PreconditionFailed");
    let cas = s3
        .put_object()
        .bucket("bkt1")
        .key("dir/obj")
        .if_match(&etag)
        .body(ByteStream::from_static(b"new"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        cas.e_tag(),
        Some(format!("\"{}\"", md5_hex(b"new")).as_str())
    );
    // The source replaced and one copy deleted, the other copy still reads whole: its
    // blocks lost a reference each time, not their data.
    s3.delete_object()
        .bucket("bkt1")
        .key("dir/copy2")
        .send()
        .await
        .unwrap();
    let got = s3
        .get_object()
        .bucket("bkt1")
        .key("dir/copy1")
        .send()
        .await
        .unwrap();
    assert_eq!(got.e_tag(), Some(etag.as_str()));
    assert_eq!(got.body.collect().await.unwrap().into_bytes(), body);
    s3.put_object()
        .bucket("bkt1")
        .key("fresh")
        .if_none_match("*")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();

    // Listing with a delimiter across pages.
    for k in ["a/1", "a/2", "a/b/3", "b", "c/1", "c/2", "d"] {
        s3.put_object()
            .bucket("bkt1")
            .key(k)
            .body(ByteStream::from_static(b"k"))
            .send()
            .await
            .unwrap();
    }
    let (mut keys, mut prefixes, mut token, mut pages) = (Vec::new(), Vec::new(), None, 0);
    loop {
        let r = s3
            .list_objects_v2()
            .bucket("bkt1")
            .delimiter("/")
            .max_keys(2)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap();
        pages += 1;
        keys.extend(
            r.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_string)),
        );
        prefixes.extend(
            r.common_prefixes()
                .iter()
                .filter_map(|p| p.prefix().map(str::to_string)),
        );
        if r.is_truncated() != Some(true) {
            break;
        }
        token = r.next_continuation_token().map(str::to_string);
        assert!(pages < 20, "listing does not end");
    }
    assert_eq!(keys, ["b", "d", "fresh"]);
    assert_eq!(prefixes, ["a/", "c/", "dir/"]);
    assert_eq!(pages, 3);
    let r = s3
        .list_objects_v2()
        .bucket("bkt1")
        .prefix("a/")
        .delimiter("/")
        .send()
        .await
        .unwrap();
    let ks: Vec<&str> = r.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(ks, ["a/1", "a/2"]);
    assert_eq!(r.common_prefixes()[0].prefix(), Some("a/b/"));
    let r = s3
        .list_objects_v2()
        .bucket("bkt1")
        .start_after("c/1")
        .max_keys(2)
        .send()
        .await
        .unwrap();
    let ks: Vec<&str> = r.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(ks, ["c/2", "d"]);
    let v1 = s3
        .list_objects()
        .bucket("bkt1")
        .marker("b")
        .max_keys(3)
        .send()
        .await
        .unwrap();
    let ks: Vec<&str> = v1.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(ks, ["c/1", "c/2", "d"]);
    assert_eq!(v1.is_truncated(), Some(true));

    // Deletes: a non-empty bucket stays; deleting a missing key succeeds.
    let e = s3.delete_bucket().bucket("bkt1").send().await.unwrap_err();
    assert_eq!(code(&e), "BucketNotEmpty");
    s3.delete_object()
        .bucket("bkt1")
        .key("b")
        .send()
        .await
        .unwrap();
    s3.delete_object()
        .bucket("bkt1")
        .key("b")
        .send()
        .await
        .unwrap();
    let e = s3
        .get_object()
        .bucket("bkt1")
        .key("b")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchKey");
    let rest: Vec<ObjectIdentifier> = [
        "a/1",
        "a/2",
        "a/b/3",
        "c/1",
        "c/2",
        "d",
        "dir/obj",
        "dir/copy1",
        "dir/copy2",
        "fresh",
    ]
    .iter()
    .map(|k| ObjectIdentifier::builder().key(*k).build().unwrap())
    .collect();
    // Quiet mode: nothing listed for keys deleted, a missing key counts as deleted (as S3).
    s3.put_object()
        .bucket("bkt1")
        .key("quiet")
        .body(ByteStream::from_static(b"q"))
        .send()
        .await
        .unwrap();
    let quiet: Vec<ObjectIdentifier> = ["quiet", "never-was"]
        .iter()
        .map(|k| ObjectIdentifier::builder().key(*k).build().unwrap())
        .collect();
    let d = s3
        .delete_objects()
        .bucket("bkt1")
        .delete(
            Delete::builder()
                .set_objects(Some(quiet))
                .quiet(true)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert!(d.deleted().is_empty() && d.errors().is_empty(), "{d:?}");
    let e = s3
        .head_object()
        .bucket("bkt1")
        .key("quiet")
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&e), Some(404));
    let d = s3
        .delete_objects()
        .bucket("bkt1")
        .delete(Delete::builder().set_objects(Some(rest)).build().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(d.deleted().len(), 10);
    assert!(d.errors().is_empty());
    s3.delete_bucket().bucket("bkt1").send().await.unwrap();
    let e = s3.head_bucket().bucket("bkt1").send().await.unwrap_err();
    assert_eq!(status(&e), Some(404));
    let e = s3
        .put_object()
        .bucket("bkt1")
        .key("k")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchBucket");

    // The gateway's own endpoint: alive, and counting what it served above.
    let web = c.gateway_http();
    let (st, _) = http("GET", &format!("{web}/health"), &[], b"");
    assert_eq!(st, 200);
    let (st, body) = http("GET", &format!("{web}/metrics"), &[], b"");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(st, 200, "{text}");
    let value = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    assert!(value("rozone_s3g_requests_total") > 50);
    // Refusals above: anonymous, an existing bucket, a bad name, missing keys, ...
    assert!(value("rozone_s3g_errors_total") >= 5);
    assert!(value("rozone_s3g_bytes_in_total") > 0);
    assert!(value("rozone_s3g_bytes_out_total") > 0);
}
