//! The OM's client of the SCM's `ScmBlock` service, with failover over `om.scm_addrs`:
//! it follows the leader hint of a refusal (`rozone_rpc::leader_hint`), otherwise tries the
//! next SCM, retries retryable statuses with bounded backoff, and gives up at a deadline.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_proto::scm::{AllocateBlockReply, AllocateBlockRequest, BlockId, DeleteBlocksRequest};
use tonic::transport::{Channel, Endpoint};
use tonic::Status;
use tracing::debug;

use crate::error::OmError;

const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// One attempt may take at most this long (the overall deadline may be shorter).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ScmClient {
    addrs: Vec<String>,
    /// The SCM that answered last (or a leader hint): tried first.
    current: Mutex<Option<String>>,
    channels: Mutex<std::collections::HashMap<String, Channel>>,
    deadline: Duration,
}

impl ScmClient {
    pub fn new(addrs: Vec<String>, deadline: Duration) -> Self {
        Self {
            addrs,
            current: Mutex::new(None),
            channels: Mutex::new(Default::default()),
            deadline,
        }
    }

    fn channel(&self, addr: &str) -> Result<Channel, Status> {
        let mut g = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = g.get(addr) {
            return Ok(c.clone());
        }
        let ep = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Status::invalid_argument(format!("bad SCM address {addr:?}: {e}")))?
            .connect_timeout(Duration::from_secs(3))
            .timeout(ATTEMPT_TIMEOUT);
        let c = ep.connect_lazy();
        g.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Runs `call` against SCMs until one answers, a non-retryable status comes back, or
    /// the deadline passes.
    async fn with_failover<T, F, Fut>(&self, what: &str, call: F) -> Result<T, OmError>
    where
        F: Fn(ScmBlockClient<Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let start = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        let mut next = 0usize;
        let mut last = String::from("no SCM address configured");
        loop {
            let addr = {
                let cur = self
                    .current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                match cur {
                    Some(a) => a,
                    None if self.addrs.is_empty() => break,
                    None => {
                        let a = self.addrs[next % self.addrs.len()].clone();
                        next += 1;
                        a
                    }
                }
            };
            let res = match self.channel(&addr) {
                Ok(ch) => call(ScmBlockClient::new(ch)).await,
                Err(s) => Err(s),
            };
            match res {
                Ok(r) => {
                    *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
                    return Ok(r.into_inner());
                }
                Err(s) if retryable(&s) => {
                    last = format!("{addr}: {}", s.message());
                    let hint = rozone_rpc::leader_hint(&s);
                    debug!(scm = %addr, hint = ?hint, error = %s.message(), "{what}: SCM refused, retrying");
                    *self.current.lock().unwrap_or_else(|p| p.into_inner()) = hint;
                }
                Err(s) => {
                    return Err(OmError::Scm(format!("{what} at {addr}: {}", s.message())));
                }
            }
            if start.elapsed() + backoff > self.deadline {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        Err(OmError::ScmUnavailable(format!(
            "{what}: no SCM answered within {:?}; last: {last}",
            self.deadline
        )))
    }

    /// Asks the SCM leader for `count` blocks.
    pub async fn allocate(&self, req: AllocateBlockRequest) -> Result<AllocateBlockReply, OmError> {
        let want = req.count;
        let reply = self
            .with_failover("allocate blocks", |mut c| {
                let r = req.clone();
                async move { c.allocate_block(r).await }
            })
            .await?;
        if reply.blocks.len() != want as usize {
            return Err(OmError::Scm(format!(
                "asked for {want} block(s), got {}",
                reply.blocks.len()
            )));
        }
        Ok(reply)
    }

    /// Hands blocks no key refers to any more to the SCM for deletion.
    pub async fn delete_blocks(&self, blocks: Vec<BlockId>) -> Result<(), OmError> {
        self.with_failover("delete blocks", |mut c| {
            let r = DeleteBlocksRequest {
                blocks: blocks.clone(),
            };
            async move { c.delete_blocks(r).await }
        })
        .await
        .map(|_| ())
    }
}

/// A refusal worth trying again (elsewhere or later): leadership, unreachable (tonic
/// reports a failed connection as UNAVAILABLE), timeout, or a connection that broke under
/// the call (an SCM going away answers in-flight calls with an HTTP/2 GOAWAY, which tonic
/// reports with a transport error as its source).
fn retryable(s: &Status) -> bool {
    rozone_rpc::is_retryable(s)
        || std::error::Error::source(s)
            .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some())
}
