//! Multipart uploads through the real gateway with the AWS SDK: a 100 MiB object in parts
//! read back byte-identical with the multipart ETag, a part re-uploaded, ListParts,
//! ListMultipartUploads, a bad part list refused with the upload kept, abort; UploadPartCopy
//! from byte ranges of other objects.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use common::{code, Cluster};

fn md5(b: &[u8]) -> [u8; 16] {
    use md5::{Digest, Md5};
    Md5::digest(b).into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
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
