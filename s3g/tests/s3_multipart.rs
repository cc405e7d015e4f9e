//! Multipart uploads through the real gateway with the AWS SDK: a 100 MiB object in parts
//! read back byte-identical with the multipart ETag, a part re-uploaded, ListParts,
//! ListMultipartUploads, a bad part list refused with the upload kept, abort; UploadPartCopy
//! from byte ranges of other objects.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use common::{code, data, Cluster};

fn md5(b: &[u8]) -> [u8; 16] {
    use md5::{Digest, Md5};
    Md5::digest(b).into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn completed(parts: &[(i32, String)]) -> CompletedMultipartUpload {
    CompletedMultipartUpload::builder()
        .set_parts(Some(
            parts
                .iter()
                .map(|(n, e)| CompletedPart::builder().part_number(*n).e_tag(e).build())
                .collect(),
        ))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multipart_upload_of_100_mib_reads_back_byte_identical() {
    let c = Cluster::up();
    let s3 = c.user("carol");
    s3.create_bucket().bucket("mpu").send().await.unwrap();

    const PART: usize = 20 << 20;
    let body = data(100 << 20, 7);
    let up = s3
        .create_multipart_upload()
        .bucket("mpu")
        .key("big")
        .content_type("application/x-big")
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap().to_string();
    let mut parts = Vec::new();
    for (i, chunk) in body.chunks(PART).enumerate() {
        let n = i as i32 + 1;
        // Part 2 is first uploaded wrong, then again: the second upload replaces it.
        if n == 2 {
            s3.upload_part()
                .bucket("mpu")
                .key("big")
                .upload_id(&id)
                .part_number(n)
                .body(ByteStream::from(vec![0u8; PART]))
                .send()
                .await
                .unwrap();
        }
        let r = s3
            .upload_part()
            .bucket("mpu")
            .key("big")
            .upload_id(&id)
            .part_number(n)
            .body(ByteStream::from(chunk.to_vec()))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.e_tag(),
            Some(format!("\"{}\"", hex(&md5(chunk))).as_str())
        );
        parts.push((n, r.e_tag().unwrap().to_string()));
    }
    let listed = s3
        .list_parts()
        .bucket("mpu")
        .key("big")
        .upload_id(&id)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.parts().len(), 5);
    assert_eq!(listed.parts()[1].e_tag(), Some(parts[1].1.as_str()));
    let uploads = s3
        .list_multipart_uploads()
        .bucket("mpu")
        .send()
        .await
        .unwrap();
    assert_eq!(uploads.uploads().len(), 1);
    assert_eq!(uploads.uploads()[0].upload_id(), Some(id.as_str()));
    // The key is not there before completion.
    let e = s3
        .head_object()
        .bucket("mpu")
        .key("big")
        .send()
        .await
        .unwrap_err();
    assert_eq!(common::status(&e), Some(404));

    // A wrong part list is refused and the upload kept.
    let mut wrong = parts.clone();
    wrong[0].1 = "\"00000000000000000000000000000000\"".into();
    let e = s3
        .complete_multipart_upload()
        .bucket("mpu")
        .key("big")
        .upload_id(&id)
        .multipart_upload(completed(&wrong))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidPart");

    let done = s3
        .complete_multipart_upload()
        .bucket("mpu")
        .key("big")
        .upload_id(&id)
        .multipart_upload(completed(&parts))
        .send()
        .await
        .unwrap();
    let mut all = Vec::new();
    for chunk in body.chunks(PART) {
        all.extend_from_slice(&md5(chunk));
    }
    let want_etag = format!("\"{}-5\"", hex(&md5(&all)));
    assert_eq!(done.e_tag(), Some(want_etag.as_str()));
    let got = s3
        .get_object()
        .bucket("mpu")
        .key("big")
        .send()
        .await
        .unwrap();
    assert_eq!(got.e_tag(), Some(want_etag.as_str()));
    assert_eq!(got.content_type(), Some("application/x-big"));
    let bytes = got.body.collect().await.unwrap().into_bytes();
    assert!(
        bytes.len() == body.len() && bytes[..] == body[..],
        "read back differs"
    );
    let e = s3
        .list_parts()
        .bucket("mpu")
        .key("big")
        .upload_id(&id)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchUpload");

    // Abort: the upload is gone and the bucket can be emptied and deleted.
    let up = s3
        .create_multipart_upload()
        .bucket("mpu")
        .key("gone")
        .send()
        .await
        .unwrap();
    let id2 = up.upload_id().unwrap();
    s3.upload_part()
        .bucket("mpu")
        .key("gone")
        .upload_id(id2)
        .part_number(1)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    s3.delete_object()
        .bucket("mpu")
        .key("big")
        .send()
        .await
        .unwrap();
    let e = s3.delete_bucket().bucket("mpu").send().await.unwrap_err();
    assert_eq!(code(&e), "BucketNotEmpty");
    s3.abort_multipart_upload()
        .bucket("mpu")
        .key("gone")
        .upload_id(id2)
        .send()
        .await
        .unwrap();
    assert!(s3
        .list_multipart_uploads()
        .bucket("mpu")
        .send()
        .await
        .unwrap()
        .uploads()
        .is_empty());
    s3.delete_bucket().bucket("mpu").send().await.unwrap();
}

/// UploadPartCopy: parts made of byte ranges of existing objects (and a whole one), next
/// to an uploaded part, complete into the concatenation; a range outside the source and a
/// missing source are refused and leave the upload as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upload_part_copy_assembles_ranges_of_other_objects() {
    let c = Cluster::up();
    let s3 = c.user("dave");
    s3.create_bucket().bucket("src").send().await.unwrap();
    s3.create_bucket().bucket("dst").send().await.unwrap();
    const MIB: usize = 1 << 20;
    let a = data(12 * MIB, 11);
    let b = data(5 * MIB + 3, 12);
    for (key, body) in [("a", &a), ("b", &b)] {
        s3.put_object()
            .bucket("src")
            .key(key)
            .body(ByteStream::from(body.clone()))
            .send()
            .await
            .unwrap();
    }
    let id = s3
        .create_multipart_upload()
        .bucket("dst")
        .key("joined")
        .send()
        .await
        .unwrap()
        .upload_id()
        .unwrap()
        .to_string();

    // A range past the end of the source, and a source that does not exist.
    let e = s3
        .upload_part_copy()
        .bucket("dst")
        .key("joined")
        .upload_id(&id)
        .part_number(1)
        .copy_source("src/a")
        .copy_source_range(format!("bytes=0-{}", a.len()))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "InvalidArgument");
    let e = s3
        .upload_part_copy()
        .bucket("dst")
        .key("joined")
        .upload_id(&id)
        .part_number(1)
        .copy_source("src/missing")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchKey");
    let none = s3
        .list_parts()
        .bucket("dst")
        .key("joined")
        .upload_id(&id)
        .send()
        .await
        .unwrap();
    assert!(none.parts().is_empty(), "a refused copy left a part");

    let mut parts = Vec::new();
    let mut want = Vec::new();
    // Part 1: bytes 1 MiB .. 7 MiB of a; part 2: all of b; part 3: the rest of a.
    for (n, source, range) in [
        (1, "src/a", Some((MIB, 7 * MIB))),
        (2, "src/b", None),
        (3, "src/a", Some((7 * MIB, a.len()))),
    ] {
        let mut req = s3
            .upload_part_copy()
            .bucket("dst")
            .key("joined")
            .upload_id(&id)
            .part_number(n)
            .copy_source(source);
        let bytes = match (source, range) {
            ("src/a", Some((from, to))) => {
                req = req.copy_source_range(format!("bytes={from}-{}", to - 1));
                &a[from..to]
            }
            _ => &b[..],
        };
        let r = req.send().await.unwrap();
        let tag = r.copy_part_result().and_then(|p| p.e_tag()).unwrap();
        assert_eq!(tag, format!("\"{}\"", hex(&md5(bytes))));
        parts.push((n, tag.to_string()));
        want.extend_from_slice(bytes);
    }
    // Part 4: an uploaded tail.
    let tail = data(1000, 13);
    let r = s3
        .upload_part()
        .bucket("dst")
        .key("joined")
        .upload_id(&id)
        .part_number(4)
        .body(ByteStream::from(tail.clone()))
        .send()
        .await
        .unwrap();
    parts.push((4, r.e_tag().unwrap().to_string()));
    want.extend_from_slice(&tail);
    s3.complete_multipart_upload()
        .bucket("dst")
        .key("joined")
        .upload_id(&id)
        .multipart_upload(completed(&parts))
        .send()
        .await
        .unwrap();
    let got = s3
        .get_object()
        .bucket("dst")
        .key("joined")
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert!(
        got.len() == want.len() && got[..] == want[..],
        "the assembled object differs ({} bytes, want {})",
        got.len(),
        want.len()
    );
    // The sources are untouched.
    let a_back = s3
        .get_object()
        .bucket("src")
        .key("a")
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert!(a_back[..] == a[..], "the copy source changed");
}

/// Starts an upload of `key` with one part of `body`; returns its id and the part list.
async fn one_part_upload(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: &[u8],
) -> (String, Vec<(i32, String)>) {
    let id = s3
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap()
        .upload_id()
        .unwrap()
        .to_string();
    let r = s3
        .upload_part()
        .bucket(bucket)
        .key(key)
        .upload_id(&id)
        .part_number(1)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .unwrap();
    (id, vec![(1, r.e_tag().unwrap().to_string())])
}

async fn read(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> (String, Vec<u8>) {
    let got = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap();
    let etag = got.e_tag().unwrap().to_string();
    (
        etag,
        got.body.collect().await.unwrap().into_bytes().to_vec(),
    )
}

/// CompleteMultipartUpload with `If-None-Match: *` and `If-Match`: refused completions
/// answer PreconditionFailed (NoSuchKey for If-Match on a missing key) and keep the upload,
/// which then completes under the right condition; of two uploads completing one new key
/// create-only, exactly one wins. Also: user metadata of a multipart object, and ListParts
/// and ListMultipartUploads in pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conditional_completion_metadata_and_paged_listings() {
    let c = Cluster::up();
    let s3 = c.user("erin");
    s3.create_bucket().bucket("cond").send().await.unwrap();
    let old = s3
        .put_object()
        .bucket("cond")
        .key("k")
        .body(ByteStream::from_static(b"old bytes"))
        .send()
        .await
        .unwrap();
    let old_etag = old.e_tag().unwrap().to_string();

    let (id, parts) = one_part_upload(&s3, "cond", "k", b"new bytes").await;
    let complete = || {
        s3.complete_multipart_upload()
            .bucket("cond")
            .key("k")
            .upload_id(&id)
            .multipart_upload(completed(&parts))
    };
    let e = complete().if_none_match("*").send().await.unwrap_err();
    assert_eq!(code(&e), "PreconditionFailed");
    let e = complete()
        .if_match("\"0123456789abcdef0123456789abcdef\"")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "PreconditionFailed");
    // Refused: the old object is whole and the upload still lists its part.
    assert_eq!(
        read(&s3, "cond", "k").await,
        (old_etag.clone(), b"old bytes".to_vec())
    );
    let listed = s3
        .list_parts()
        .bucket("cond")
        .key("k")
        .upload_id(&id)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.parts().len(), 1);
    let done = complete().if_match(&old_etag).send().await.unwrap();
    assert_eq!(
        read(&s3, "cond", "k").await,
        (done.e_tag().unwrap().to_string(), b"new bytes".to_vec())
    );

    // If-Match on a key that does not exist.
    let (id, parts) = one_part_upload(&s3, "cond", "absent", b"x").await;
    let e = s3
        .complete_multipart_upload()
        .bucket("cond")
        .key("absent")
        .upload_id(&id)
        .multipart_upload(completed(&parts))
        .if_match(&old_etag)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "NoSuchKey");

    // Two uploads of one new key, both create-only: the first completion wins, the second
    // is refused and the object keeps the winner's bytes.
    let (a, a_parts) = one_part_upload(&s3, "cond", "race", b"writer a").await;
    let (b, b_parts) = one_part_upload(&s3, "cond", "race", b"writer b").await;
    let (ra, rb) = tokio::join!(
        s3.complete_multipart_upload()
            .bucket("cond")
            .key("race")
            .upload_id(&a)
            .multipart_upload(completed(&a_parts))
            .if_none_match("*")
            .send(),
        s3.complete_multipart_upload()
            .bucket("cond")
            .key("race")
            .upload_id(&b)
            .multipart_upload(completed(&b_parts))
            .if_none_match("*")
            .send(),
    );
    let winner: &[u8] = match (&ra, &rb) {
        (Ok(_), Err(e)) => {
            assert_eq!(code(e), "PreconditionFailed");
            b"writer a"
        }
        (Err(e), Ok(_)) => {
            assert_eq!(code(e), "PreconditionFailed");
            b"writer b"
        }
        other => panic!("exactly one create-only completion must win: {other:?}"),
    };
    assert_eq!(read(&s3, "cond", "race").await.1, winner);

    // User metadata given at CreateMultipartUpload is the object's.
    let id = s3
        .create_multipart_upload()
        .bucket("cond")
        .key("meta")
        .metadata("colour", "blue")
        .content_type("text/x-meta")
        .send()
        .await
        .unwrap()
        .upload_id()
        .unwrap()
        .to_string();
    let mut parts = Vec::new();
    for n in 1..=3 {
        let r = s3
            .upload_part()
            .bucket("cond")
            .key("meta")
            .upload_id(&id)
            .part_number(n)
            .body(ByteStream::from(data(5 << 20, n as u64)))
            .send()
            .await
            .unwrap();
        parts.push((n, r.e_tag().unwrap().to_string()));
    }
    // ListParts two at a time: parts 1 and 2, then 3 from the marker.
    let page = s3
        .list_parts()
        .bucket("cond")
        .key("meta")
        .upload_id(&id)
        .max_parts(2)
        .send()
        .await
        .unwrap();
    let numbers = |p: &[aws_sdk_s3::types::Part]| -> Vec<i32> {
        p.iter().filter_map(|p| p.part_number()).collect()
    };
    assert_eq!(numbers(page.parts()), [1, 2]);
    assert_eq!(page.is_truncated(), Some(true));
    assert_eq!(page.next_part_number_marker(), Some("2"));
    let rest = s3
        .list_parts()
        .bucket("cond")
        .key("meta")
        .upload_id(&id)
        .max_parts(2)
        .part_number_marker("2")
        .send()
        .await
        .unwrap();
    assert_eq!(numbers(rest.parts()), [3]);
    assert_eq!(rest.is_truncated(), Some(false));

    // ListMultipartUploads one at a time over the three still open: "absent" (refused),
    // the race's loser (a refused completion keeps its upload) and "meta".
    let mut seen = Vec::new();
    let (mut key_marker, mut id_marker) = (None::<String>, None::<String>);
    loop {
        let page = s3
            .list_multipart_uploads()
            .bucket("cond")
            .max_uploads(1)
            .set_key_marker(key_marker.clone())
            .set_upload_id_marker(id_marker.clone())
            .send()
            .await
            .unwrap();
        assert!(page.uploads().len() <= 1);
        seen.extend(
            page.uploads()
                .iter()
                .filter_map(|u| u.key().map(String::from)),
        );
        if page.is_truncated() != Some(true) {
            break;
        }
        key_marker = page.next_key_marker().map(String::from);
        id_marker = page.next_upload_id_marker().map(String::from);
        assert!(seen.len() < 10, "paging does not end: {seen:?}");
    }
    assert_eq!(seen, ["absent", "meta", "race"]);

    s3.complete_multipart_upload()
        .bucket("cond")
        .key("meta")
        .upload_id(&id)
        .multipart_upload(completed(&parts))
        .send()
        .await
        .unwrap();
    let head = s3
        .head_object()
        .bucket("cond")
        .key("meta")
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.metadata()
            .and_then(|m| m.get("colour"))
            .map(String::as_str),
        Some("blue")
    );
    assert_eq!(head.content_type(), Some("text/x-meta"));
    assert_eq!(head.e_tag().map(|e| e.ends_with("-3\"")), Some(true));
}
