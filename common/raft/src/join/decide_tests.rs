use super::*;

const R: RingId = RingId(7);

fn rec(stage: Stage) -> JoinRecord {
    JoinRecord {
        ring_id: R,
        node_id: 3,
        stage,
    }
}

fn joining() -> JoinRecord {
    rec(Stage::Joining {
        leader: "l:1".into(),
    })
}

#[test]
fn only_init_on_an_empty_dir_creates_a_ring() {
    use StartMode::*;
    assert_eq!(plan(Init, 3, None, false, "OM"), Ok(Plan::Found));
    assert_eq!(plan(Bootstrap, 3, None, false, "OM"), Ok(Plan::Join));
    assert!(plan(Plain, 3, None, false, "OM")
        .unwrap_err()
        .contains("--init"));
    for m in [Plain, Init, Bootstrap] {
        // Older data: decided once openraft says whether the ring is initialised.
        assert_eq!(plan(m, 3, None, true, "OM"), Ok(Plan::Legacy));
        // A plain or bootstrap start of a founding dir never initialises.
        assert_eq!(
            plan(m, 3, Some(&rec(Stage::Founding)), true, "OM"),
            Ok(Plan::Founding {
                ring_id: R,
                may_initialize: m == Init
            })
        );
    }
}

#[test]
fn a_started_join_resumes_with_bootstrap_and_is_refused_otherwise() {
    use StartMode::*;
    let j = joining();
    assert_eq!(
        plan(Bootstrap, 3, Some(&j), true, "OM"),
        Ok(Plan::ResumeJoin { ring_id: R })
    );
    let e = plan(Plain, 3, Some(&j), true, "OM").unwrap_err();
    assert!(e.contains("--bootstrap to finish the join"), "{e}");
    assert!(e.contains("rozone admin om remove 3"), "{e}");
    let e = plan(Init, 3, Some(&j), false, "OM").unwrap_err();
    assert!(e.contains("--init refused"), "{e}");
    let joined = rec(Stage::Member {
        origin: Origin::Join,
    });
    assert!(plan(Init, 3, Some(&joined), true, "SCM")
        .unwrap_err()
        .contains("--init refused"));
    assert_eq!(
        plan(Plain, 3, Some(&joined), true, "SCM"),
        Ok(Plan::Member { ring_id: R })
    );
    let founded = rec(Stage::Member {
        origin: Origin::Init,
    });
    assert_eq!(
        plan(Init, 3, Some(&founded), true, "SCM"),
        Ok(Plan::Member { ring_id: R })
    );
    assert!(plan(Plain, 4, Some(&founded), true, "SCM")
        .unwrap_err()
        .contains("node.id is 4"));
}

fn joiner(ring: Option<RingId>, last: Option<u64>) -> Joiner {
    Joiner {
        id: 3,
        peer_addr: "p3".into(),
        ring_id: ring,
        last_log_index: last,
    }
}

fn present(voter: bool, matched: Option<u64>) -> Present {
    Present {
        peer_addr: "p3".into(),
        voter,
        matched,
    }
}

#[test]
fn a_new_node_is_added_as_learner_and_a_wiped_member_is_refused() {
    assert_eq!(
        admit("OM", R, &joiner(None, None), None),
        Ok(Admission::AddLearner)
    );
    // Wiped voter: no ring id, empty log.
    let e = admit("OM", R, &joiner(None, None), Some(&present(true, Some(9)))).unwrap_err();
    assert!(matches!(e, Refusal::WipedMember(_)));
    assert_eq!(
        e.to_string(),
        "member 3 is in the ring; remove it first (`rozone admin om remove 3`) then bootstrap again"
    );
    // Wiped, then refused once (it recorded the ring id): still empty.
    assert!(admit("OM", R, &joiner(Some(R), None), Some(&present(true, None))).is_err());
    // A learner whose log is behind what it acknowledged.
    assert!(admit(
        "OM",
        R,
        &joiner(Some(R), Some(3)),
        Some(&present(false, Some(5)))
    )
    .is_err());
    // A different ring.
    assert!(matches!(
        admit("OM", R, &joiner(Some(RingId(8)), Some(9)), None),
        Err(Refusal::OtherRing(_))
    ));
    let mut moved = present(true, Some(1));
    moved.peer_addr = "elsewhere".into();
    assert!(matches!(
        admit("OM", R, &joiner(Some(R), Some(9)), Some(&moved)),
        Err(Refusal::OtherAddress(_))
    ));
}

#[test]
fn a_repeated_or_resumed_join_is_idempotent() {
    assert_eq!(
        admit(
            "SCM",
            R,
            &joiner(Some(R), Some(9)),
            Some(&present(true, Some(9)))
        ),
        Ok(Admission::AlreadyVoter)
    );
    assert_eq!(
        admit(
            "SCM",
            R,
            &joiner(Some(R), Some(4)),
            Some(&present(false, Some(4)))
        ),
        Ok(Admission::ResumeLearner)
    );
    // A learner killed before it received anything: nothing to revert.
    assert_eq!(
        admit(
            "SCM",
            R,
            &joiner(Some(R), None),
            Some(&present(false, None))
        ),
        Ok(Admission::ResumeLearner)
    );
}

#[test]
fn caught_up_is_within_the_lag() {
    assert!(caught_up(Some(95), Some(100), 10));
    assert!(!caught_up(Some(80), Some(100), 10));
    assert!(!caught_up(None, Some(1), 10));
    assert!(caught_up(None, None, 0));
}
