//! The batcher against a fake proposer that the test answers by hand: which writes share
//! an entry, in what order, and who gets which reply.

use super::*;
use crate::envelope::{frame_replies, open_batch, seal};

type Proposed = (Vec<u8>, oneshot::Sender<Reply>);

/// A batcher whose proposals arrive on the returned receiver, each to be answered.
fn batcher(limits: BatchLimits) -> (Batcher, mpsc::UnboundedReceiver<Proposed>) {
    let (tx, rx) = mpsc::unbounded_channel::<Proposed>();
    let propose: Propose = Arc::new(move |entry| {
        let tx = tx.clone();
        futures::FutureExt::boxed(async move {
            let (answer, wait) = oneshot::channel();
            tx.send((entry, answer)).map_err(|_| stopped())?;
            wait.await.map_err(|_| stopped())?
        })
    });
    (Batcher::start(limits, propose), rx)
}

fn limits(max_writes: usize, max_bytes: usize, in_flight: usize) -> BatchLimits {
    BatchLimits {
        max_writes,
        max_bytes,
        in_flight,
    }
}

fn req(n: u32) -> Vec<u8> {
    seal(&(n, "w".to_string())).unwrap()
}

/// The requests of a proposed entry (a lone write is proposed as itself).
fn requests(entry: &[u8]) -> Vec<Vec<u8>> {
    match open_batch(entry).unwrap() {
        Some(parts) => parts.into_iter().map(<[u8]>::to_vec).collect(),
        None => vec![entry.to_vec()],
    }
}

/// Answers an entry as a state machine would: each request's reply is "ok" and its bytes.
fn answer(entry: &[u8], to: oneshot::Sender<Reply>) {
    let replies: Vec<Vec<u8>> = requests(entry)
        .into_iter()
        .map(|r| [b"ok".to_vec(), r].concat())
        .collect();
    let resp = if open_batch(entry).unwrap().is_some() {
        frame_replies(&replies).unwrap()
    } else {
        replies[0].clone()
    };
    to.send(Ok(resp)).unwrap();
}

fn ok(r: &[u8]) -> Vec<u8> {
    [b"ok".to_vec(), r.to_vec()].concat()
}

/// Proposes a first write, queues writes 1..=n while it is in flight (so, with one slot,
/// they wait), then answers the first: returns the queued writes' receivers.
async fn queue_behind_one(
    b: &Batcher,
    proposed: &mut mpsc::UnboundedReceiver<Proposed>,
    n: u32,
) -> Vec<oneshot::Receiver<Reply>> {
    let first = b.enqueue(req(0)).unwrap();
    let (entry, to) = proposed.recv().await.unwrap();
    assert_eq!(entry, req(0));
    let waiting = (1..=n).map(|i| b.enqueue(req(i)).unwrap()).collect();
    answer(&entry, to);
    assert_eq!(first.await.unwrap().unwrap(), ok(&req(0)));
    waiting
}

#[tokio::test]
async fn a_lone_write_goes_alone_and_at_once() {
    let (b, mut proposed) = batcher(limits(64, 1 << 20, 2));
    let rx = b.enqueue(req(1)).unwrap();
    let (entry, to) = proposed.recv().await.unwrap();
    assert_eq!(entry, req(1), "not wrapped in a batch");
    answer(&entry, to);
    assert_eq!(rx.await.unwrap().unwrap(), ok(&req(1)));
    assert_eq!(b.stats().entries.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn writes_queued_behind_a_full_pipeline_share_one_entry_in_order() {
    let (b, mut proposed) = batcher(limits(64, 1 << 20, 1));
    // The one slot is taken: these wait, and go together once it frees.
    let waiting = queue_behind_one(&b, &mut proposed, 5).await;
    let (entry, to) = proposed.recv().await.unwrap();
    assert_eq!(entry[0], envelope::V3_BATCH);
    assert_eq!(requests(&entry), (1..=5).map(req).collect::<Vec<_>>());
    answer(&entry, to);
    for (n, rx) in (1..=5).zip(waiting) {
        assert_eq!(rx.await.unwrap().unwrap(), ok(&req(n)), "write {n}");
    }
    assert_eq!(b.stats().entries.load(Ordering::Relaxed), 2);
    assert_eq!(b.stats().writes.load(Ordering::Relaxed), 6);
}

#[tokio::test]
async fn batches_stop_at_their_count_and_byte_limits_keeping_order() {
    let one = req(0).len();
    // At most 3 writes, and at most 2 writes' bytes (the 3rd would overflow).
    for (lim, sizes) in [
        (limits(3, 1 << 20, 1), vec![3, 3, 1]),
        (limits(64, 2 * one, 1), vec![2, 2, 2, 1]),
    ] {
        let (b, mut proposed) = batcher(lim);
        let waiting = queue_behind_one(&b, &mut proposed, 7).await;
        let mut seen = Vec::new();
        let mut got_sizes = Vec::new();
        while seen.len() < 7 {
            let (e, to) = proposed.recv().await.unwrap();
            let r = requests(&e);
            got_sizes.push(r.len());
            seen.extend(r);
            answer(&e, to);
        }
        assert_eq!(got_sizes, sizes, "{lim:?}");
        assert_eq!(seen, (1..=7).map(req).collect::<Vec<_>>());
        for (n, rx) in (1..=7).zip(waiting) {
            assert_eq!(rx.await.unwrap().unwrap(), ok(&req(n)));
        }
    }
}

#[tokio::test]
async fn a_failed_proposal_fails_each_of_its_writes_with_the_same_error() {
    let (b, mut proposed) = batcher(limits(64, 1 << 20, 1));
    let waiting = queue_behind_one(&b, &mut proposed, 3).await;
    let (_, to) = proposed.recv().await.unwrap();
    let hint = Some((2, crate::types::NodeInfo::new("p:1", "c:2")));
    to.send(Err(RaftGroupError::NotLeader {
        leader: hint.clone(),
    }))
    .unwrap();
    for rx in waiting {
        match rx.await.unwrap() {
            Err(RaftGroupError::NotLeader { leader }) => assert_eq!(leader, hint),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_reply_that_does_not_match_the_batch_fails_its_writes() {
    let (b, mut proposed) = batcher(limits(64, 1 << 20, 1));
    let waiting = queue_behind_one(&b, &mut proposed, 2).await;
    let (_, to) = proposed.recv().await.unwrap();
    to.send(Ok(frame_replies(&[b"only one".to_vec()]).unwrap()))
        .unwrap();
    for rx in waiting {
        let e = rx.await.unwrap().unwrap_err().to_string();
        assert!(e.contains("2 writes was answered with 1"), "{e}");
    }
}
