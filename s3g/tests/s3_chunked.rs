//! Chunked SigV4 uploads (`x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD`,
//! `Content-Encoding: aws-chunked`), as SDKs send bodies they do not hash up front: each
//! chunk carries a signature chained from the request's. Built here by hand (the SDK and
//! the CLI sign whole payloads over plain HTTP) from the AWS SigV4 streaming rules, so the
//! gateway's verification is checked against an independent implementation: a correctly
//! signed upload stores exactly the decoded bytes; one altered chunk is refused and
//! stores nothing.

mod common;

use common::{http, Cluster};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

const REGION: &str = "us-east-1";
const STREAMING: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

fn hmac(key: &[u8], msg: &str) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    m.update(msg.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// (`YYYYMMDDTHHMMSSZ`, `YYYYMMDD`) of now, UTC.
fn amz_date() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let day = format!("{y:04}{m:02}{d:02}");
    let time = format!(
        "{day}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    (time, day)
}

/// A chunked, signed PUT of `body` to `endpoint/bucket/key` in chunks of `chunk` bytes;
/// `tamper` flips one byte of the second chunk after it was signed.
fn chunked_put(
    endpoint: &str,
    (ak, sk): (&str, &str),
    bucket: &str,
    key: &str,
    body: &[u8],
    chunk: usize,
    tamper: bool,
) -> (u16, String) {
    let host = endpoint.strip_prefix("http://").unwrap();
    let (date, day) = amz_date();
    let scope = format!("{day}/{REGION}/s3/aws4_request");
    let path = format!("/{bucket}/{key}");
    let signed =
        "content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length";
    let canonical = format!(
        "PUT\n{path}\n\ncontent-encoding:aws-chunked\nhost:{host}\nx-amz-content-sha256:{STREAMING}\nx-amz-date:{date}\nx-amz-decoded-content-length:{}\n\n{signed}\n{STREAMING}",
        body.len()
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        sha256(canonical.as_bytes())
    );
    let mut signing = hmac(format!("AWS4{sk}").as_bytes(), &day);
    for part in [REGION, "s3", "aws4_request"] {
        signing = hmac(&signing, part);
    }
    let seed = hex(&hmac(&signing, &to_sign));
    let mut prev = seed.clone();
    let mut wire = Vec::new();
    let empty = sha256(b"");
    let chunks: Vec<&[u8]> = body.chunks(chunk).chain([&[][..]]).collect();
    for (i, c) in chunks.iter().enumerate() {
        let s = format!(
            "AWS4-HMAC-SHA256-PAYLOAD\n{date}\n{scope}\n{prev}\n{empty}\n{}",
            sha256(c)
        );
        let sig = hex(&hmac(&signing, &s));
        wire.extend_from_slice(format!("{:x};chunk-signature={sig}\r\n", c.len()).as_bytes());
        let start = wire.len();
        wire.extend_from_slice(c);
        if tamper && i == 1 {
            wire[start] ^= 0xff;
        }
        wire.extend_from_slice(b"\r\n");
        prev = sig;
    }
    let headers = [
        ("Content-Encoding", "aws-chunked".to_string()),
        ("x-amz-content-sha256", STREAMING.to_string()),
        ("x-amz-date", date),
        ("x-amz-decoded-content-length", body.len().to_string()),
        (
            "Authorization",
            format!("AWS4-HMAC-SHA256 Credential={ak}/{scope}, SignedHeaders={signed}, Signature={seed}"),
        ),
    ]
    .map(|(k, v)| (k.to_string(), v));
    let (status, out) = http("PUT", &format!("{endpoint}{path}"), &headers, &wire);
    (status, String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chunked_signed_upload_is_verified_chunk_by_chunk() {
    let c = Cluster::up();
    let (ak, sk) = c.secret("erin");
    let s3 = c.s3(&ak, &sk);
    s3.create_bucket().bucket("chunks").send().await.unwrap();
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let endpoint = c.endpoint.clone();
    let creds = (ak.clone(), sk.clone());
    let (body2, ep2) = (body.clone(), endpoint.clone());
    let (status, text) = tokio::task::spawn_blocking(move || {
        chunked_put(
            &ep2,
            (&creds.0, &creds.1),
            "chunks",
            "good",
            &body2,
            64 << 10,
            false,
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "chunked upload refused: {text}");
    let got = s3
        .get_object()
        .bucket("chunks")
        .key("good")
        .send()
        .await
        .unwrap();
    assert_eq!(got.content_length(), Some(body.len() as i64));
    let bytes = got.body.collect().await.unwrap().into_bytes();
    assert!(
        bytes[..] == body[..],
        "the stored bytes differ from the decoded body"
    );

    // One byte of the second chunk changed after signing: refused, nothing stored.
    let creds = (ak.clone(), sk.clone());
    let (body3, ep3) = (body.clone(), endpoint.clone());
    let (status, text) = tokio::task::spawn_blocking(move || {
        chunked_put(
            &ep3,
            (&creds.0, &creds.1),
            "chunks",
            "bad",
            &body3,
            64 << 10,
            true,
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 403, "a tampered chunk was accepted: {text}");
    assert!(text.contains("SignatureDoesNotMatch"), "{text}");
    let e = s3
        .head_object()
        .bucket("chunks")
        .key("bad")
        .send()
        .await
        .unwrap_err();
    assert_eq!(common::status(&e), Some(404), "a refused upload left a key");
}
