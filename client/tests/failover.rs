//! The failover channel against small fake ring members (real tonic servers on 127.0.0.1):
//! it follows leader hints (known and new addresses), waits out a not-ready leader, skips
//! dead and hanging members, survives the leader's death, gives up at the deadline naming
//! the last error, and passes definite answers through after one attempt.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rozone_client::{ChannelFactory, ClientError, RetryPolicy, Ring};
use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::ring::ring_server::{Ring as RingRpc, RingServer};
use rozone_proto::ring::*;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

/// What a fake member answers to its next `RingInfo`.
#[derive(Clone)]
enum Act {
    Ok,
    NotLeader(Option<String>),
    NotReady,
    NotFound,
    Hang,
}

struct Fake {
    id: u64,
    /// Scripted answers; when empty, `then` forever.
    script: Mutex<VecDeque<Act>>,
    then: Mutex<Act>,
    calls: AtomicUsize,
}

#[derive(Clone)]
struct Svc(Arc<Fake>);

#[tonic::async_trait]
impl RingRpc for Svc {
    async fn ring_info(
        &self,
        _: Request<RingInfoRequest>,
    ) -> Result<Response<RingInfoReply>, Status> {
        let f = &self.0;
        f.calls.fetch_add(1, Ordering::SeqCst);
        let act = {
            let next = f.script.lock().unwrap().pop_front();
            next.unwrap_or_else(|| f.then.lock().unwrap().clone())
        };
        match act {
            Act::Ok => Ok(Response::new(RingInfoReply {
                node_id: f.id,
                ..Default::default()
            })),
            Act::NotLeader(hint) => Err(rozone_rpc::not_leader("not leader", hint.as_deref())),
            Act::NotReady => Err(rozone_rpc::leader_not_ready("not ready")),
            Act::NotFound => Err(Status::not_found("no such thing")),
            Act::Hang => {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Err(Status::internal("woke up"))
            }
        }
    }
    async fn prepare_checkpoint(
        &self,
        _: Request<PrepareCheckpointRequest>,
    ) -> Result<Response<PrepareCheckpointReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn add_member(
        &self,
        _: Request<AddMemberRequest>,
    ) -> Result<Response<AddMemberReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn remove_member(
        &self,
        _: Request<RemoveMemberRequest>,
    ) -> Result<Response<RemoveMemberReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn knows_node(
        &self,
        _: Request<KnowsNodeRequest>,
    ) -> Result<Response<KnowsNodeReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn transfer_leader(
        &self,
        _: Request<TransferLeaderRequest>,
    ) -> Result<Response<TransferLeaderReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn read_index(
        &self,
        _: Request<ReadIndexRequest>,
    ) -> Result<Response<ReadIndexReply>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

/// A fake member served by its own runtime on its own thread, so killing it (dropping that
/// runtime) closes every connection at once, as a dying process does.
struct Member {
    fake: Arc<Fake>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Member {
    fn calls(&self) -> usize {
        self.fake.calls.load(Ordering::SeqCst)
    }
    fn set(&self, act: Act) {
        *self.fake.then.lock().unwrap() = act;
    }
    fn script(&self, acts: &[Act]) {
        self.fake
            .script
            .lock()
            .unwrap()
            .extend(acts.iter().cloned());
    }
    async fn kill(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            tokio::task::spawn_blocking(move || t.join())
                .await
                .unwrap()
                .unwrap();
        }
    }
}

async fn member(id: u64, then: Act) -> Member {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = Arc::new(Fake {
        id,
        script: Mutex::new(VecDeque::new()),
        then: Mutex::new(then),
        calls: AtomicUsize::new(0),
    });
    let (tx, rx) = oneshot::channel::<()>();
    let svc = RingServer::new(Svc(fake.clone()));
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let serve = tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
            tokio::select! {
                _ = serve => {}
                _ = rx => {}
            }
        });
        // Dropping the runtime drops every connection task: the sockets close.
        rt.shutdown_background();
    });
    Member {
        fake,
        addr,
        stop: Some(tx),
        thread: Some(thread),
    }
}

fn policy(deadline_ms: u64) -> RetryPolicy {
    RetryPolicy {
        deadline: Duration::from_millis(deadline_ms),
        attempt_timeout: Duration::from_millis(500),
        backoff_initial: Duration::from_millis(5),
        backoff_max: Duration::from_millis(50),
    }
}

fn ring(addrs: &[String], p: RetryPolicy) -> Ring {
    // Plaintext fakes: this is about failover, not TLS.
    Ring::new("SCM", addrs, p, ChannelFactory::insecure()).unwrap()
}

async fn info(r: &Ring) -> Result<u64, ClientError> {
    r.call("ring info", |ch| async move {
        RingClient::new(ch).ring_info(RingInfoRequest {}).await
    })
    .await
    .map(|r| r.node_id)
    .map_err(ClientError::from)
}

#[tokio::test]
async fn follows_the_leader_hint_and_remembers_the_leader() {
    let b = member(2, Act::Ok).await;
    let a = member(1, Act::NotLeader(Some(b.addr.to_string()))).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    assert_eq!(info(&r).await.unwrap(), 2);
    assert_eq!(info(&r).await.unwrap(), 2);
    assert_eq!(
        (a.calls(), b.calls()),
        (1, 2),
        "second call goes straight to the leader"
    );
    assert_eq!(r.leader_addr(), Some(b.addr.to_string()));
}

#[tokio::test]
async fn a_hint_naming_an_unlisted_member_is_followed() {
    let c = member(3, Act::Ok).await;
    let a = member(1, Act::NotLeader(Some(c.addr.to_string()))).await;
    let r = ring(&[a.addr.to_string()], policy(5_000));
    assert_eq!(info(&r).await.unwrap(), 3);
    assert!(r.addrs().contains(&c.addr.to_string()));
}

#[tokio::test]
async fn waits_for_a_leader_that_is_not_ready_yet() {
    let a = member(1, Act::Ok).await;
    a.script(&[Act::NotReady, Act::NotReady, Act::NotReady]);
    let b = member(2, Act::NotLeader(Some(a.addr.to_string()))).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    assert_eq!(info(&r).await.unwrap(), 1);
    assert_eq!(a.calls(), 4);
}

#[tokio::test]
async fn skips_a_dead_member_and_a_member_without_a_leader() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let lost = member(1, Act::NotLeader(None)).await;
    let b = member(2, Act::Ok).await;
    let r = ring(
        &[dead, lost.addr.to_string(), b.addr.to_string()],
        policy(5_000),
    );
    assert_eq!(info(&r).await.unwrap(), 2);
}

#[tokio::test]
async fn a_hanging_member_costs_one_attempt_timeout() {
    let a = member(1, Act::Hang).await;
    let b = member(2, Act::Ok).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    assert_eq!(info(&r).await.unwrap(), 2);
}

#[tokio::test]
async fn fails_over_when_the_leader_dies() {
    let a = member(1, Act::Ok).await;
    let b = member(2, Act::NotLeader(Some(a.addr.to_string()))).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    assert_eq!(info(&r).await.unwrap(), 1);
    // The leader dies with a connection open; b takes over.
    let a_addr = a.addr.to_string();
    a.kill().await;
    b.set(Act::Ok);
    assert_eq!(info(&r).await.unwrap(), 2);
    assert_ne!(r.leader_addr(), Some(a_addr));
}

#[tokio::test]
async fn gives_up_at_the_deadline_naming_the_last_error() {
    let a = member(1, Act::NotLeader(None)).await;
    let b = member(2, Act::NotReady).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(400));
    let started = Instant::now();
    let err = info(&r).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, ClientError::Unavailable { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("SCM unavailable: ring info: gave up after"),
        "{msg}"
    );
    assert!(
        msg.contains("not leader") || msg.contains("not ready"),
        "{msg}"
    );
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    // Bounded backoff: many attempts, but not a spin.
    let attempts = a.calls() + b.calls();
    assert!((4..200).contains(&attempts), "{attempts} attempts");
}

#[tokio::test]
async fn a_definite_answer_is_returned_after_one_attempt() {
    let a = member(1, Act::NotFound).await;
    let b = member(2, Act::Ok).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    let err = info(&r).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(err.to_string(), "SCM: no such thing");
    assert_eq!((a.calls(), b.calls()), (1, 0));
}

#[tokio::test]
async fn retries_count_the_attempts_tried_again_and_nothing_else() {
    let b = member(2, Act::Ok).await;
    let a = member(1, Act::NotLeader(Some(b.addr.to_string()))).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    assert_eq!(r.retries(), 0);
    assert_eq!(info(&r).await.unwrap(), 2);
    assert_eq!(r.retries(), 1, "a's refusal");
    assert_eq!(info(&r).await.unwrap(), 2);
    assert_eq!(
        r.retries(),
        1,
        "the second call went straight to the leader"
    );
    // A definite answer is returned, not retried.
    b.set(Act::NotFound);
    assert!(info(&r).await.unwrap_err().is_not_found());
    assert_eq!(r.retries(), 1);
}

#[tokio::test]
async fn call_any_spreads_over_members() {
    let a = member(1, Act::Ok).await;
    let b = member(2, Act::Ok).await;
    let r = ring(&[a.addr.to_string(), b.addr.to_string()], policy(5_000));
    for _ in 0..4 {
        r.call_any("ring info", |ch| async move {
            RingClient::new(ch).ring_info(RingInfoRequest {}).await
        })
        .await
        .unwrap();
    }
    assert_eq!((a.calls(), b.calls()), (2, 2));
}

#[test]
fn bad_addresses_are_rejected_by_name() {
    let err = Ring::new(
        "OM",
        &["nope".to_string()],
        RetryPolicy::default(),
        ChannelFactory::insecure(),
    )
    .err()
    .unwrap();
    assert_eq!(err.to_string(), "bad address \"nope\": want host:port");
    let err = Ring::new(
        "OM",
        &[],
        RetryPolicy::default(),
        ChannelFactory::insecure(),
    )
    .err()
    .unwrap();
    assert_eq!(err.to_string(), "no OM address given");
}
