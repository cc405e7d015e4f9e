//! Tests of [`super::SequenceIdGenerator`] over fake proposers: batches, lost
//! compare-and-sets, invalidation, bounded retries and exhausted sequences.

use std::sync::Arc;

use rozone_raft::{StateMachineLogic, Txn};

use super::*;
use crate::state::{read, COLUMN_FAMILIES, SEQ_CONTAINER_ID, SEQ_LOCAL_ID};

#[derive(Debug, thiserror::Error)]
#[error("fake proposer: {0}")]
struct FakeError(String);

/// Runs before each proposal of a [`FakeLog`].
type Hook = Box<dyn FnMut(&FakeLog) + Send>;

/// Applies proposals to a real database through `ScmLogic`, like a one-member log;
/// `before` runs first so a test can interleave another leader's proposal.
struct FakeLog {
    _dir: tempfile::TempDir,
    db: Arc<rozone_kv::rocksdb::DB>,
    proposals: Mutex<Vec<ScmRequest>>,
    fail: Mutex<bool>,
    before: Mutex<Option<Hook>>,
}

impl FakeLog {
    fn new() -> Arc<Self> {
        let dir = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
        Arc::new(Self {
            _dir: dir,
            db,
            proposals: Mutex::new(Vec::new()),
            fail: Mutex::new(false),
            before: Mutex::new(None),
        })
    }

    fn apply(&self, req: ScmRequest) -> ScmResponse {
        let mut txn = Txn::new(&self.db);
        let log_id = rozone_raft::types::log_id(1, 1, 1);
        let resp = ScmLogic.apply(&mut txn, &log_id, req).unwrap();
        self.db.write(txn.into_batch().unwrap()).unwrap();
        resp
    }
}

impl BatchProposer for FakeLog {
    type Error = FakeError;

    fn propose(
        &self,
        req: ScmRequest,
    ) -> impl Future<Output = Result<ScmResponse, FakeError>> + Send {
        let res = (|| {
            if let Some(f) = self.before.lock().unwrap().as_mut() {
                f(self);
            }
            if *self.fail.lock().unwrap() {
                return Err(FakeError("not the leader".into()));
            }
            self.proposals.lock().unwrap().push(req.clone());
            Ok(self.apply(req))
        })();
        std::future::ready(res)
    }
}

#[tokio::test]
async fn hands_out_consecutive_ids_and_refills_batches() {
    let log = FakeLog::new();
    let g = SequenceIdGenerator::new(log.clone(), 3);
    let ids: Vec<u64> = {
        let mut v = Vec::new();
        for _ in 0..7 {
            v.push(g.next_id(SEQ_CONTAINER_ID).await.unwrap());
        }
        v
    };
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7]);
    // 7 ids at 3 per batch: three proposals.
    assert_eq!(log.proposals.lock().unwrap().len(), 3);
    assert_eq!(
        read::sequence_id(&log.db, SEQ_CONTAINER_ID).unwrap(),
        Some(9)
    );
    // Names are independent.
    assert_eq!(g.next_id(SEQ_LOCAL_ID).await.unwrap(), 1);
}

#[tokio::test]
async fn adopts_current_after_cas_failure_and_never_repeats_an_id() {
    let log = FakeLog::new();
    // Another leader already reserved 1..=500.
    log.apply(ScmRequest::AllocateBatch {
        name: SEQ_CONTAINER_ID.into(),
        expected_last: 0,
        new_last: 500,
    });
    let g = SequenceIdGenerator::new(log.clone(), 10);
    assert_eq!(g.next_id(SEQ_CONTAINER_ID).await.unwrap(), 501);
    let p = log.proposals.lock().unwrap().clone();
    assert_eq!(p.len(), 2, "one failed CAS then a successful one: {p:?}");
}

#[tokio::test]
async fn invalidate_drops_batches_and_next_batch_starts_past_the_row() {
    let log = FakeLog::new();
    let g = SequenceIdGenerator::new(log.clone(), 100);
    assert_eq!(g.next_id(SEQ_CONTAINER_ID).await.unwrap(), 1);
    g.invalidate();
    // The rest of 1..=100 is abandoned: it may have been handed out elsewhere.
    assert_eq!(g.next_id(SEQ_CONTAINER_ID).await.unwrap(), 101);
}

#[tokio::test]
async fn gives_up_after_bounded_attempts_under_contention() {
    let log = FakeLog::new();
    // Before each of our proposals, a rival moves the row on.
    *log.before.lock().unwrap() = Some(Box::new(|l: &FakeLog| {
        let current = read::sequence_id(&l.db, SEQ_CONTAINER_ID)
            .unwrap()
            .unwrap_or(0);
        l.apply(ScmRequest::AllocateBatch {
            name: SEQ_CONTAINER_ID.into(),
            expected_last: current,
            new_last: current + 1,
        });
    }));
    let g = SequenceIdGenerator::new(log.clone(), 10).with_max_attempts(3);
    let e = g.next_id(SEQ_CONTAINER_ID).await.unwrap_err();
    assert!(
        matches!(e, SequenceIdError::Contended { attempts: 3, .. }),
        "{e}"
    );
    assert_eq!(log.proposals.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn proposal_errors_and_refusals_are_reported() {
    let log = FakeLog::new();
    let g = SequenceIdGenerator::new(log.clone(), 10);
    *log.fail.lock().unwrap() = true;
    assert!(matches!(
        g.next_id(SEQ_CONTAINER_ID).await,
        Err(SequenceIdError::Propose { .. })
    ));
    *log.fail.lock().unwrap() = false;
    assert!(matches!(
        g.next_id("nope").await,
        Err(SequenceIdError::Refused {
            response: ScmResponse::UnknownSequence { .. },
            ..
        })
    ));
    // A failed proposal leaves nothing behind: the next call starts at 1.
    assert_eq!(g.next_id(SEQ_CONTAINER_ID).await.unwrap(), 1);
}

#[tokio::test]
async fn exhausted_sequence_is_an_error() {
    let log = FakeLog::new();
    log.apply(ScmRequest::AllocateBatch {
        name: SEQ_CONTAINER_ID.into(),
        expected_last: 0,
        new_last: u64::MAX - 5,
    });
    let g = SequenceIdGenerator::new(log.clone(), 10);
    assert!(matches!(
        g.next_id(SEQ_CONTAINER_ID).await,
        Err(SequenceIdError::Exhausted { .. })
    ));
}
