//! A GetObject whose bytes cannot be verified is cut, never passed off as complete: the
//! gateway streams verified ranges as they arrive, so when a later range fails on every
//! replica the response has already begun, and the only honest end is an error in the
//! body (the client sees a body that fails to read, not a 200 with bad or short bytes).
//!
//! Checked to fail when reads are not verified: with the datanode's window check, the
//! client's wire check and its whole-key CRC turned off, the full GET read back all 12 MiB
//! with the damaged bytes in it.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use aws_sdk_s3::primitives::ByteStream;
use common::{data, Cluster};

const MIB: usize = 1 << 20;

/// Every block file (`<container>/chunks/<local id>.block`) under `dir` of `len` bytes.
fn block_files(dir: &Path, len: u64, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            block_files(&p, len, out);
        } else if p.extension().is_some_and(|x| x == "block") && meta.len() == len {
            out.push(p);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_whose_later_range_fails_on_every_replica_is_cut_not_completed() {
    let c = Cluster::up();
    let s3 = c.user("alice");
    s3.create_bucket().bucket("dmg").send().await.unwrap();
    // Three of the client's 4 MiB read ranges; one block, so one file per replica.
    let body = data(12 * MIB, 21);
    s3.put_object()
        .bucket("dmg")
        .key("obj")
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .unwrap();

    // Damage the third range (at 9 MiB) in every replica, in place.
    // A write is acknowledged once a quorum of the pipeline has it; wait for the third
    // replica to catch up, so none is left intact.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let files = loop {
        let mut files = Vec::new();
        block_files(c.dir.path(), body.len() as u64, &mut files);
        if files.len() == 3 {
            break files;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "one block file per replica: {files:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    for f in &files {
        let mut file = std::fs::OpenOptions::new().write(true).open(f).unwrap();
        file.seek(SeekFrom::Start(9 * MIB as u64)).unwrap();
        let flipped: Vec<u8> = body[9 * MIB..9 * MIB + 4096].iter().map(|b| !b).collect();
        file.write_all(&flipped).unwrap();
        file.sync_all().unwrap();
    }

    // The intact start is still served.
    let head = s3
        .get_object()
        .bucket("dmg")
        .key("obj")
        .range(format!("bytes=0-{}", MIB - 1))
        .send()
        .await
        .unwrap();
    let got = head.body.collect().await.unwrap().into_bytes();
    assert!(got[..] == body[..MIB], "the first MiB differs");

    // The whole object: the response may begin (the first ranges verify), but its body must
    // end in an error, never read back as a complete object.
    match s3.get_object().bucket("dmg").key("obj").send().await {
        Err(_) => {}
        Ok(o) => {
            let read = o.body.collect().await;
            assert!(
                read.is_err(),
                "a body with an unverifiable range read back whole ({} bytes)",
                read.map(|b| b.into_bytes().len()).unwrap_or_default()
            );
        }
    }
}
