//! Container lifecycle, container creation, bcsid and pipeline rules of the SCM logic.

use super::*;

#[test]
fn container_lifecycle_allows_only_listed_transitions() {
    use ContainerEvent as E;
    use ContainerState as S;
    let allowed = [
        (S::Open, E::Finalize, S::Closing),
        (S::Closing, E::QuasiClose, S::QuasiClosed),
        (S::Closing, E::Close, S::Closed),
        (S::QuasiClosed, E::Close, S::Closed),
        (S::Closed, E::Delete, S::Deleting),
        (S::Deleting, E::Cleanup, S::Deleted),
    ];
    // A path to each state from OPEN, to put a fresh container in it.
    let path_to = |s: S| -> Vec<E> {
        match s {
            S::Open => vec![],
            S::Closing => vec![E::Finalize],
            S::QuasiClosed => vec![E::Finalize, E::QuasiClose],
            S::Closed => vec![E::Finalize, E::Close],
            S::Deleting => vec![E::Finalize, E::Close, E::Delete],
            S::Deleted => vec![E::Finalize, E::Close, E::Delete, E::Cleanup],
        }
    };
    let mut f = fixture();
    let mut next_id = 1;
    for from in S::ALL {
        for event in E::ALL {
            let id = next_id;
            next_id += 1;
            assert_eq!(
                f.apply(ScmRequest::CreateContainer(container(id))),
                ScmResponse::ContainerCreated { id }
            );
            for e in path_to(from) {
                assert!(matches!(
                    f.apply(ScmRequest::UpdateContainer { id, event: e }),
                    ScmResponse::ContainerUpdated { .. }
                ));
            }
            let before = read::container(&f.db, id).unwrap().unwrap();
            assert_eq!(before.state, from);
            let resp = f.apply(ScmRequest::UpdateContainer { id, event });
            let after = read::container(&f.db, id).unwrap().unwrap();
            match allowed.iter().find(|(s, e, _)| *s == from && *e == event) {
                Some((_, _, to)) => {
                    assert_eq!(resp, ScmResponse::ContainerUpdated { id, state: *to });
                    assert_eq!(after.state, *to);
                }
                None => {
                    assert_eq!(resp, ScmResponse::InvalidTransition { id, from, event });
                    assert_eq!(after, before, "{from} + {event:?} changed the container");
                }
            }
        }
    }
    assert_eq!(
        f.apply(ScmRequest::UpdateContainer {
            id: 999,
            event: E::Finalize
        }),
        ScmResponse::ContainerNotFound { id: 999 }
    );
    let deleted = read::containers(&f.db, Some(S::Deleted)).unwrap();
    assert!(deleted.iter().all(|c| c.state == S::Deleted));
    assert_eq!(
        read::containers(&f.db, None).unwrap().len(),
        S::ALL.len() * E::ALL.len()
    );
}

#[test]
fn create_container_needs_new_id_and_open_state() {
    let mut f = fixture();
    assert_eq!(
        f.apply(ScmRequest::CreateContainer(container(1))),
        ScmResponse::ContainerCreated { id: 1 }
    );
    let mut again = container(1);
    again.owner = "other".into();
    assert_eq!(
        f.apply(ScmRequest::CreateContainer(again)),
        ScmResponse::ContainerExists { id: 1 }
    );
    assert_eq!(read::container(&f.db, 1).unwrap().unwrap().owner, "om1");
    let mut closed = container(2);
    closed.state = ContainerState::Closed;
    assert!(matches!(
        f.apply(ScmRequest::CreateContainer(closed)),
        ScmResponse::InvalidContainer { id: 2, .. }
    ));
    assert_eq!(read::container(&f.db, 2).unwrap(), None);
}

#[test]
fn bcsid_never_goes_backwards() {
    let mut f = fixture();
    f.apply(ScmRequest::CreateContainer(container(1)));
    let usage = |used_bytes, key_count, bcsid| ScmRequest::UpdateContainerUsage {
        id: 1,
        used_bytes,
        key_count,
        bcsid,
    };
    assert_eq!(
        f.apply(usage(100, 2, 10)),
        ScmResponse::UsageUpdated { id: 1, bcsid: 10 }
    );
    // Same BCSID is allowed (a repeated report); a lower one changes nothing.
    assert_eq!(
        f.apply(usage(120, 3, 10)),
        ScmResponse::UsageUpdated { id: 1, bcsid: 10 }
    );
    assert_eq!(
        f.apply(usage(50, 1, 9)),
        ScmResponse::BcsidRegression {
            id: 1,
            current: 10,
            requested: 9
        }
    );
    let c = read::container(&f.db, 1).unwrap().unwrap();
    assert_eq!((c.used_bytes, c.key_count, c.bcsid), (120, 3, 10));
    assert_eq!(
        f.apply(ScmRequest::UpdateContainerUsage {
            id: 2,
            used_bytes: 0,
            key_count: 0,
            bcsid: 0
        }),
        ScmResponse::ContainerNotFound { id: 2 }
    );
}

fn pipeline(id: u64, members: Vec<u64>, leader: Option<u64>) -> PipelineInfo {
    PipelineInfo {
        id,
        members,
        leader,
        state: PipelineState::Open,
    }
}

#[test]
fn pipelines_need_three_distinct_members_and_close_idempotently() {
    let mut f = fixture();
    for bad in [
        pipeline(1, vec![1, 2], None),
        pipeline(1, vec![1, 2, 3, 4], None),
        pipeline(1, vec![1, 2, 2], None),
        pipeline(1, vec![1, 2, 3], Some(9)),
        PipelineInfo {
            state: PipelineState::Closed,
            ..pipeline(1, vec![1, 2, 3], None)
        },
    ] {
        assert!(
            matches!(
                f.apply(ScmRequest::CreatePipeline(bad.clone())),
                ScmResponse::InvalidPipeline { id: 1, .. }
            ),
            "{bad:?} accepted"
        );
    }
    assert_eq!(read::pipelines(&f.db).unwrap(), vec![]);
    let good = pipeline(1, vec![1, 2, 3], Some(2));
    assert_eq!(
        f.apply(ScmRequest::CreatePipeline(good.clone())),
        ScmResponse::PipelineCreated { id: 1 }
    );
    assert_eq!(
        f.apply(ScmRequest::CreatePipeline(pipeline(1, vec![4, 5, 6], None))),
        ScmResponse::PipelineExists { id: 1 }
    );
    assert_eq!(read::pipeline(&f.db, 1).unwrap(), Some(good));
    for _ in 0..2 {
        assert_eq!(
            f.apply(ScmRequest::ClosePipeline { id: 1 }),
            ScmResponse::PipelineClosed { id: 1 }
        );
    }
    assert_eq!(
        read::pipeline(&f.db, 1).unwrap().unwrap().state,
        PipelineState::Closed
    );
    assert_eq!(
        f.apply(ScmRequest::ClosePipeline { id: 2 }),
        ScmResponse::PipelineNotFound { id: 2 }
    );
}
