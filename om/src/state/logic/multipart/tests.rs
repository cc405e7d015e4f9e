//! Tests of S3 multipart uploads over a real `Txn`: completion of the listed parts,
//! refused part lists, abort.

use super::super::testkit::*;
use super::*;
use crate::state::read;
use crate::state::request::OmRequest;

fn upload() -> UploadId {
    UploadId {
        volume: "v".into(),
        bucket: "b".into(),
        key: "k".into(),
        upload_id: "u1".into(),
    }
}

fn started() -> Fixture {
    let mut f = Fixture::new();
    f.volume("v");
    f.bucket("v", "b");
    let r = f.apply(OmRequest::S3CreateUpload {
        upload: S3Upload {
            volume: "v".into(),
            bucket: "b".into(),
            key: "k".into(),
            upload_id: "u1".into(),
            created_ms: NOW,
            content_type: "text/plain".into(),
            metadata: vec![],
        },
    });
    assert!(matches!(r, OmResponse::S3UploadCreated(_)), "{r:?}");
    f
}

/// Writes part `n` through open key client id `n` with block (1, local) of `size`.
fn part(f: &mut Fixture, n: u32, local: u64, size: u64, etag: &str) -> OmResponse {
    let id = open_id("k", u64::from(n) + 100 * local);
    f.open(&id, vec![block(1, local, 100)]);
    f.apply(OmRequest::S3CommitPart {
        upload: upload(),
        part_number: n,
        id,
        blocks: vec![(bid(1, local), size)],
        size,
        etag: etag.into(),
        now_ms: NOW,
    })
}

fn complete(parts: &[(u32, &str)], min: u64) -> OmRequest {
    OmRequest::S3CompleteUpload {
        upload: upload(),
        parts: parts.iter().map(|(n, e)| (*n, e.to_string())).collect(),
        etag: "final-2".into(),
        min_part_size: min,
        now_ms: NOW + 5,
        condition: None,
    }
}

#[test]
fn completion_commits_the_listed_parts_in_order_and_frees_the_rest() {
    let mut f = started();
    assert!(matches!(
        part(&mut f, 1, 1, 10, "e1"),
        OmResponse::S3PartCommitted(_)
    ));
    assert!(matches!(
        part(&mut f, 2, 2, 7, "e2"),
        OmResponse::S3PartCommitted(_)
    ));
    assert!(matches!(
        part(&mut f, 3, 3, 5, "e3"),
        OmResponse::S3PartCommitted(_)
    ));
    // Re-uploading part 3 replaces it.
    assert!(matches!(
        part(&mut f, 3, 4, 6, "e3b"),
        OmResponse::S3PartCommitted(_)
    ));
    assert!(read::key(&f.db, "v", "b", "k").unwrap().is_none());
    let r = f.apply_at(77, complete(&[(1, "e1"), (3, "\"e3b\"")], 10));
    let OmResponse::KeyCommitted(k) = r else {
        panic!("{r:?}")
    };
    assert_eq!(k.size, 16);
    assert_eq!(
        k.blocks
            .iter()
            .map(|b| (b.id, b.offset, b.length))
            .collect::<Vec<_>>(),
        [(bid(1, 1), 0, 10), (bid(1, 4), 10, 6)]
    );
    let meta = read::s3_meta(&f.db, "v", "b", "k").unwrap().unwrap();
    assert_eq!(
        (meta.etag.as_str(), meta.content_type.as_str()),
        ("final-2", "text/plain")
    );
    // Part 2 (unlisted) is freed; the upload and its parts are gone.
    let freed: Vec<BlockId> = read::deleted_blocks(&f.db, 10)
        .unwrap()
        .into_iter()
        .filter(|(i, _)| *i == 77)
        .flat_map(|(_, d)| d.blocks)
        .collect();
    assert_eq!(freed, [bid(1, 2)]);
    assert_eq!(
        f.refused(complete(&[(1, "e1")], 0)),
        Refusal::NoSuchUpload {
            path: "v/b/k".into(),
            upload_id: "u1".into()
        }
    );
    assert_eq!(read::count(&f.db, CF_S3_PARTS).unwrap(), 0);
    assert_eq!(read::count(&f.db, CF_OPEN_KEYS).unwrap(), 0);
}

#[test]
fn completion_refuses_bad_part_lists_and_changes_nothing() {
    let mut f = started();
    part(&mut f, 1, 1, 3, "e1");
    part(&mut f, 2, 2, 7, "e2");
    for (list, want) in [
        (vec![(2, "e2"), (1, "e1")], "ascending"),
        (vec![(1, "e1"), (5, "e5")], "not uploaded"),
        (vec![(1, "zz")], "ETag"),
    ] {
        match f.refused(complete(&list, 0)) {
            Refusal::InvalidPart { reason, .. } => assert!(reason.contains(want), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        f.refused(complete(&[(1, "e1"), (2, "e2")], 5)),
        Refusal::PartTooSmall { part: 1, .. }
    ));
    assert!(read::key(&f.db, "v", "b", "k").unwrap().is_none());
    assert_eq!(read::count(&f.db, CF_S3_PARTS).unwrap(), 2);
    assert_eq!(read::count(&f.db, CF_OPEN_KEYS).unwrap(), 0);
}

#[test]
fn abort_frees_every_part() {
    let mut f = started();
    part(&mut f, 1, 1, 3, "e1");
    part(&mut f, 2, 2, 7, "e2");
    assert_eq!(
        f.apply_at(88, OmRequest::S3AbortUpload { upload: upload() }),
        OmResponse::S3UploadAborted
    );
    let freed: Vec<BlockId> = read::deleted_blocks(&f.db, 10)
        .unwrap()
        .into_iter()
        .filter(|(i, _)| *i == 88)
        .flat_map(|(_, d)| d.blocks)
        .collect();
    assert_eq!(freed, [bid(1, 1), bid(1, 2)]);
    assert_eq!(read::count(&f.db, CF_S3_UPLOADS).unwrap(), 0);
}
