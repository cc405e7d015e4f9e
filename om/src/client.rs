//! A small OM client with failover, for tests, tools and the CLI's client crate to reuse:
//! writes go to the leader (following `x-rozone-leader` hints), reads go where the chosen
//! read consistency allows, and a refused read is retried on another OM — the hinted
//! leader first, then the next OM — until a deadline. A refusal never switches follower
//! reads off (the client reaction HDDS-17548 got wrong): the next read starts again at the
//! OM that served last.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rozone_proto::om as pb;
use rozone_proto::om::om_service_client::OmServiceClient;
use tonic::transport::{Channel, Endpoint};
use tonic::Status;

const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

pub struct OmClient {
    addrs: Vec<String>,
    /// The leader as last learnt (writes go here first).
    leader: Mutex<Option<String>>,
    /// The OM that served the last read (reads start here).
    reader: Mutex<Option<String>>,
    channels: Mutex<HashMap<String, Channel>>,
    /// What every read asks for.
    pub read: pb::ReadOptions,
    /// Overall time a call may take, retries included.
    pub deadline: Duration,
    /// Refusals seen and retried (for tests and tools).
    pub retries: std::sync::atomic::AtomicU64,
}

impl OmClient {
    pub fn new(addrs: Vec<String>, consistency: pb::ReadConsistency) -> Self {
        Self {
            addrs,
            leader: Mutex::new(None),
            reader: Mutex::new(None),
            channels: Mutex::new(HashMap::new()),
            read: pb::ReadOptions {
                consistency: consistency as i32,
                lease_time_ms: None,
                log_limit: None,
            },
            deadline: Duration::from_secs(30),
            retries: Default::default(),
        }
    }

    fn channel(&self, addr: &str) -> Result<OmServiceClient<Channel>, Status> {
        let mut g = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        let ch = match g.get(addr) {
            Some(c) => c.clone(),
            None => {
                let c = Endpoint::from_shared(format!("http://{addr}"))
                    .map_err(|e| Status::invalid_argument(format!("bad OM address {addr:?}: {e}")))?
                    .connect_timeout(Duration::from_secs(2))
                    .timeout(Duration::from_secs(10))
                    .connect_lazy();
                g.insert(addr.to_string(), c.clone());
                c
            }
        };
        Ok(OmServiceClient::new(ch))
    }

    fn next_after(&self, addr: &str) -> String {
        let i = self
            .addrs
            .iter()
            .position(|a| a == addr)
            .map_or(0, |i| i + 1);
        self.addrs[i % self.addrs.len()].clone()
    }

    /// Calls `f` on OMs until one answers or a non-retryable status comes back. `write`
    /// starts at the leader; a read starts at the OM that served the last read.
    pub async fn call<T, F, Fut>(&self, write: bool, f: F) -> Result<T, Status>
    where
        F: Fn(OmServiceClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        if self.addrs.is_empty() {
            return Err(Status::invalid_argument("no OM address given"));
        }
        let start = Instant::now();
        let sticky = if write { &self.leader } else { &self.reader };
        // Two statements: `sticky` may be `self.leader`, and a guard lives to the end of
        // its statement.
        let first = sticky.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let leader = self
            .leader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut addr = first.or(leader).unwrap_or_else(|| self.addrs[0].clone());
        let mut backoff = FIRST_BACKOFF;
        loop {
            let r = match self.channel(&addr) {
                Ok(c) => f(c).await,
                Err(s) => Err(s),
            };
            match r {
                Ok(r) => {
                    *sticky.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
                    return Ok(r.into_inner());
                }
                Err(s) if retryable(&s) && start.elapsed() < self.deadline => {
                    self.retries
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let hint = rozone_rpc::leader_hint(&s).filter(|h| *h != addr);
                    if let Some(h) = &hint {
                        *self.leader.lock().unwrap_or_else(|p| p.into_inner()) = Some(h.clone());
                    }
                    let not_ready =
                        rozone_rpc::retry_reason(&s) == Some(rozone_rpc::REASON_LEADER_NOT_READY);
                    addr = match hint {
                        Some(h) => h,
                        // A leader that is not ready yet will be soon: try others meanwhile
                        // for reads, wait on it for writes.
                        None if not_ready && write => addr,
                        None => self.next_after(&addr),
                    };
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(s) => return Err(s),
            }
        }
    }

    pub async fn create_volume(&self, name: &str) -> Result<pb::CreateVolumeReply, Status> {
        self.call(true, |mut c| {
            let r = pb::CreateVolumeRequest {
                name: name.to_string(),
                ..Default::default()
            };
            async move { c.create_volume(r).await }
        })
        .await
    }

    pub async fn create_bucket(
        &self,
        volume: &str,
        name: &str,
    ) -> Result<pb::CreateBucketReply, Status> {
        self.call(true, |mut c| {
            let r = pb::CreateBucketRequest {
                volume: volume.to_string(),
                name: name.to_string(),
                ..Default::default()
            };
            async move { c.create_bucket(r).await }
        })
        .await
    }

    /// Opens a key and commits it with the allocated blocks filled to `size` (the data
    /// itself is the caller's business: this is the metadata protocol).
    pub async fn put_key_metadata(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: u64,
    ) -> Result<pb::KeyInfo, Status> {
        let open = self
            .call(true, |mut c| {
                let r = pb::OpenKeyRequest {
                    volume: volume.to_string(),
                    bucket: bucket.to_string(),
                    key: key.to_string(),
                    size,
                    ..Default::default()
                };
                async move { c.open_key(r).await }
            })
            .await?;
        let mut left = size;
        let blocks = open
            .blocks
            .iter()
            .map(|b| {
                let len = left.min(b.max_size);
                left -= len;
                pb::CommitBlock {
                    block_id: b.block_id,
                    length: len,
                }
            })
            .collect::<Vec<_>>();
        if left > 0 {
            return Err(Status::failed_precondition(format!(
                "the allocated blocks hold {} bytes less than {size}",
                left
            )));
        }
        let committed = self
            .call(true, |mut c| {
                let r = pb::CommitKeyRequest {
                    volume: volume.to_string(),
                    bucket: bucket.to_string(),
                    key: key.to_string(),
                    client_id: open.client_id,
                    blocks: blocks.clone(),
                    size,
                    checksum: String::new(),
                };
                async move { c.commit_key(r).await }
            })
            .await?;
        committed
            .key
            .ok_or_else(|| Status::internal("CommitKey reply without the key"))
    }

    pub async fn lookup_key(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
    ) -> Result<pb::LookupKeyReply, Status> {
        self.call(false, |mut c| {
            let r = pb::LookupKeyRequest {
                volume: volume.to_string(),
                bucket: bucket.to_string(),
                key: key.to_string(),
                read: Some(self.read),
            };
            async move { c.lookup_key(r).await }
        })
        .await
    }

    pub async fn list_keys(
        &self,
        volume: &str,
        bucket: &str,
        start_after: &str,
        limit: u32,
    ) -> Result<pb::ListKeysReply, Status> {
        self.call(false, |mut c| {
            let r = pb::ListKeysRequest {
                volume: volume.to_string(),
                bucket: bucket.to_string(),
                start_after: start_after.to_string(),
                limit,
                read: Some(self.read),
                ..Default::default()
            };
            async move { c.list_keys(r).await }
        })
        .await
    }
}

/// A refusal to retry elsewhere, or a connection that broke under the call (an OM going
/// away answers in-flight calls with an HTTP/2 GOAWAY, which tonic reports as INTERNAL with
/// a transport error as its source). A retried write may have happened: callers of writes
/// see a refusal such as ALREADY_EXISTS then, never a silent double effect.
pub fn retryable(s: &Status) -> bool {
    rozone_rpc::is_retryable(s)
        || std::error::Error::source(s)
            .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some())
}
