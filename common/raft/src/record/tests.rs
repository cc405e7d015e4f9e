//! Round trips and golden fixtures of the log store's records.

use std::collections::{BTreeMap, BTreeSet};

use openraft::entry::RaftEntry;

use super::*;

fn membership() -> Membership {
    let nodes: BTreeMap<u64, NodeInfo> = (1..=4)
        .map(|i| (i, NodeInfo::new(format!("h{i}:9894"), format!("h{i}:9862"))))
        .collect();
    let voters = vec![BTreeSet::from([1, 2, 3])];
    Membership::new(voters, nodes).unwrap()
}

fn entries() -> Vec<(&'static str, Entry)> {
    vec![
        ("blank", Entry::new(log_id(3, 1, 17), EntryPayload::Blank)),
        (
            "normal",
            Entry::new(
                log_id(3, 1, 18),
                EntryPayload::Normal(AppRequest(vec![1, 0, 0xff])),
            ),
        ),
        (
            "membership",
            Entry::new(log_id(4, 2, 19), EntryPayload::Membership(membership())),
        ),
    ]
}

fn golden(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(name)
}

/// Entries written by format 1 decode in this build, and this build writes them the same.
#[test]
fn log_entries_match_their_golden_bytes() {
    crate::golden::check(
        &golden("log-entries-v1.txt"),
        &entries(),
        encode_entry,
        decode_entry,
    );
}

#[test]
fn vote_log_id_and_membership_match_their_golden_bytes() {
    let votes = [
        ("vote", Vote::new(5, 2)),
        ("vote-committed", Vote::new_committed(6, 3)),
    ];
    crate::golden::check(&golden("votes-v1.txt"), &votes, encode_vote, decode_vote);
    let ids = [("none", None), ("some", Some(log_id(7, 1, 1000)))];
    crate::golden::check(
        &golden("log-ids-v1.txt"),
        &ids,
        encode_log_id,
        decode_log_id,
    );
    let ms = [
        ("empty", StoredMembership::default()),
        (
            "three",
            StoredMembership::new(Some(log_id(4, 2, 19)), membership()),
        ),
    ];
    crate::golden::check(
        &golden("memberships-v1.txt"),
        &ms,
        encode_membership,
        decode_membership,
    );
}

/// What a build before the envelope wrote (bare postcard of openraft's entry) is refused
/// with a clear error, not misread.
#[test]
fn records_from_before_the_envelope_are_refused() {
    let old = crate::codec::encode(&entries()[1].1).unwrap();
    let e = decode_entry(&old).unwrap_err().to_string();
    assert!(e.starts_with("log entry: format"), "{e}");
    let e = decode_vote(&[]).unwrap_err().to_string();
    assert_eq!(e, "vote: empty record");
    let mut bad = encode_entry(&entries()[2].1).unwrap();
    bad.truncate(bad.len() - 3);
    assert!(decode_entry(&bad).is_err());
    assert_eq!(entries()[2].1.index(), 19);
}
