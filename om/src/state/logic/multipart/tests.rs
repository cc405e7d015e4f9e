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

/// Writes key "k" outside the upload (an ordinary S3 put) with ETag `etag`, through open
/// key client id `client` and block (1, `local`).
fn put_key(f: &mut Fixture, client: u64, local: u64, etag: &str) {
    let id = open_id("k", client);
    f.open(&id, vec![block(1, local, 100)]);
    let r = f.apply(OmRequest::S3CommitKey {
        id,
        blocks: vec![(bid(1, local), 4)],
        size: 4,
        checksum: String::new(),
        now_ms: NOW + 1,
        meta: S3Meta {
            etag: etag.into(),
            content_type: "text/plain".into(),
            metadata: vec![],
        },
        condition: None,
    });
    assert!(matches!(r, OmResponse::KeyCommitted(_)), "{r:?}");
}

fn complete_if(parts: &[(u32, &str)], condition: S3Condition) -> OmRequest {
    let OmRequest::S3CompleteUpload {
        upload,
        parts,
        etag,
        min_part_size,
        now_ms,
        ..
    } = complete(parts, 0)
    else {
        unreachable!()
    };
    OmRequest::S3CompleteUpload {
        upload,
        parts,
        etag,
        min_part_size,
        now_ms,
        condition: Some(condition),
    }
}

/// CompleteMultipartUpload with `If-None-Match: *` or `If-Match` is decided where the key is
/// installed, in the same apply: a refused completion leaves the existing key, the upload and
/// every part as they were (S3 keeps the upload so the client can retry or abort).
#[test]
fn conditional_completion_is_decided_at_apply_and_a_refusal_keeps_the_upload() {
    let mut f = started();
    part(&mut f, 1, 1, 10, "e1");
    part(&mut f, 2, 2, 7, "e2");
    put_key(&mut f, 50, 50, "old");
    let parts = [(1, "e1"), (2, "e2")];

    // The key exists: create-only is refused.
    assert!(matches!(
        f.refused(complete_if(&parts, S3Condition::IfNoneMatchAny)),
        Refusal::PreconditionFailed { .. }
    ));
    // It exists with another ETag: replace-only-that-version is refused.
    assert!(matches!(
        f.refused(complete_if(&parts, S3Condition::IfMatch("other".into()))),
        Refusal::PreconditionFailed { .. }
    ));
    // Nothing changed: the old key, both parts, the upload, no open key, nothing freed.
    let old = read::key(&f.db, "v", "b", "k").unwrap().unwrap();
    assert_eq!(old.size, 4);
    assert_eq!(
        read::s3_meta(&f.db, "v", "b", "k").unwrap().unwrap().etag,
        "old"
    );
    assert_eq!(read::count(&f.db, CF_S3_PARTS).unwrap(), 2);
    assert_eq!(read::count(&f.db, CF_S3_UPLOADS).unwrap(), 1);
    assert_eq!(read::count(&f.db, CF_OPEN_KEYS).unwrap(), 0);
    assert!(read::deleted_blocks(&f.db, 10).unwrap().is_empty());

    // The right ETag: the upload replaces the key, and the old key's block is freed.
    let r = f.apply_at(90, complete_if(&parts, S3Condition::IfMatch("old".into())));
    let OmResponse::KeyCommitted(k) = r else {
        panic!("{r:?}")
    };
    assert_eq!(k.size, 17);
    assert_eq!(
        read::s3_meta(&f.db, "v", "b", "k").unwrap().unwrap().etag,
        "final-2"
    );
    let freed: Vec<BlockId> = read::deleted_blocks(&f.db, 10)
        .unwrap()
        .into_iter()
        .filter(|(i, _)| *i == 90)
        .flat_map(|(_, d)| d.blocks)
        .collect();
    assert_eq!(freed, [bid(1, 50)]);
    assert_eq!(read::count(&f.db, CF_S3_UPLOADS).unwrap(), 0);
}

/// `If-None-Match: *` completes when no key has the name, and `If-Match` on a missing key
/// answers NoSuchKey, as S3 does.
#[test]
fn create_only_completion_succeeds_on_a_free_name() {
    let mut f = started();
    part(&mut f, 1, 1, 10, "e1");
    assert_eq!(
        f.refused(complete_if(&[(1, "e1")], S3Condition::IfMatch("x".into()))),
        Refusal::KeyNotFound {
            path: "v/b/k".into()
        }
    );
    assert_eq!(read::count(&f.db, CF_S3_UPLOADS).unwrap(), 1);
    let r = f.apply(complete_if(&[(1, "e1")], S3Condition::IfNoneMatchAny));
    assert!(matches!(r, OmResponse::KeyCommitted(_)), "{r:?}");
    assert_eq!(read::key(&f.db, "v", "b", "k").unwrap().unwrap().size, 10);
}
