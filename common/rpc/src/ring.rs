//! Calls to a replicated ring (SCM or OM) that find the leader and survive its change: the
//! one failover client of rozone (the CLI, the OM's SCM client, the datanode's heartbeats).
//!
//! A [`Ring`] holds one lazily connected channel per member address, built by its
//! [`ChannelFactory`]. A call goes to the
//! member believed to lead; on a retryable refusal ([`crate::is_retryable`]) it
//! moves on: to the leader the refusal names (`x-rozone-leader`, added to the list when it
//! is an address the caller did not know), else to the next member; it pauses with a
//! bounded exponential backoff once every member has been tried in a round and for
//! `leader-not-ready`. Each attempt has a timeout and the whole call a deadline, after
//! which it fails with [`RpcError::Unavailable`] naming the last error.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::{Response, Status};

use crate::channel::ChannelFactory;
use crate::error::RpcError;
use crate::is_retryable;
use crate::CallIds;

type Result<T, E = RpcError> = std::result::Result<T, E>;

/// How hard a call tries before it gives up.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// The whole call, every retry included.
    pub deadline: Duration,
    /// One attempt on one member.
    pub attempt_timeout: Duration,
    /// First pause after a full round of refusals.
    pub backoff_initial: Duration,
    /// Longest pause.
    pub backoff_max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(500),
        }
    }
}

struct Member {
    addr: String,
    channel: Channel,
}

struct Inner {
    service: String,
    members: RwLock<Vec<Member>>,
    /// Index of the member believed to lead; `usize::MAX` when unknown.
    leader: AtomicUsize,
    /// Start of the next `call_any` round, so reads spread over members.
    rotate: AtomicUsize,
    /// Attempts that failed in a way worth retrying, over all calls (see [`Ring::retries`]).
    retries: AtomicU64,
    policy: RetryPolicy,
    channels: ChannelFactory,
    /// Numbers this ring's calls, so the ring's retries of a write apply it at most once.
    calls: CallIds,
}

/// The members of one replicated ring, and the client-side knowledge of who leads.
#[derive(Clone)]
pub struct Ring {
    inner: Arc<Inner>,
}

/// Whom a call goes to first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The leader (as far as known), then whoever the refusals name.
    Leader,
    /// Any member, rotating; a refusal's hint is still followed.
    Any,
}

impl Ring {
    /// A ring of `addrs` (`host:port` each) serving `service` ("OM", "SCM"), reached over
    /// channels from `channels`.
    pub fn new(
        service: &str,
        addrs: &[String],
        policy: RetryPolicy,
        channels: ChannelFactory,
    ) -> Result<Self> {
        if addrs.is_empty() {
            return Err(RpcError::Invalid(format!("no {service} address given")));
        }
        let mut members = Vec::new();
        for a in addrs {
            let addr = crate::channel::host_port(a)?.to_string();
            if members.iter().any(|m: &Member| m.addr == addr) {
                continue;
            }
            let channel = channels.lazy(&addr)?;
            members.push(Member { addr, channel });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                service: service.to_string(),
                members: RwLock::new(members),
                leader: AtomicUsize::new(usize::MAX),
                rotate: AtomicUsize::new(0),
                retries: AtomicU64::new(0),
                policy,
                channels,
                calls: CallIds::new(),
            }),
        })
    }

    /// The service name this ring was created with.
    pub fn service(&self) -> &str {
        &self.inner.service
    }

    /// The call numbering of this ring's clients: a write starts a [`crate::call::Call`]
    /// before its first attempt and sends its id on every attempt.
    pub fn call_ids(&self) -> &CallIds {
        &self.inner.calls
    }

    /// The policy calls use.
    pub fn policy(&self) -> &RetryPolicy {
        &self.inner.policy
    }

    /// The factory this ring's channels come from (for clients of the same cluster that
    /// are not ring members, e.g. datanodes).
    pub fn channels(&self) -> &ChannelFactory {
        &self.inner.channels
    }

    /// Every member address known: the configured ones, then any learned from hints.
    pub fn addrs(&self) -> Vec<String> {
        self.read_members().iter().map(|m| m.addr.clone()).collect()
    }

    /// The address of the member believed to lead, if any call has found it.
    pub fn leader_addr(&self) -> Option<String> {
        let i = self.inner.leader.load(Ordering::Relaxed);
        self.read_members().get(i).map(|m| m.addr.clone())
    }

    /// How many attempts of calls through this ring failed retryably (a refusal, a timeout,
    /// an unreachable member) and were tried again or given up on: 0 means every call was
    /// answered by the first member asked. For tests and tools that check where calls land.
    pub fn retries(&self) -> u64 {
        self.inner.retries.load(Ordering::Relaxed)
    }

    fn read_members(&self) -> std::sync::RwLockReadGuard<'_, Vec<Member>> {
        self.inner.members.read().unwrap_or_else(|e| e.into_inner())
    }

    fn channel(&self, i: usize) -> Option<(String, Channel)> {
        self.read_members()
            .get(i)
            .map(|m| (m.addr.clone(), m.channel.clone()))
    }

    fn len(&self) -> usize {
        self.read_members().len()
    }

    /// Index of `addr`, adding it (a leader we were told about) when new.
    fn index_of(&self, addr: &str) -> Option<usize> {
        let addr = crate::channel::host_port(addr).ok()?;
        if let Some(i) = self.read_members().iter().position(|m| m.addr == addr) {
            return Some(i);
        }
        let channel = self.inner.channels.lazy(addr).ok()?;
        let mut members = self
            .inner
            .members
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(i) = members.iter().position(|m| m.addr == addr) {
            return Some(i);
        }
        members.push(Member {
            addr: addr.to_string(),
            channel,
        });
        Some(members.len() - 1)
    }

    /// A channel to the member at `addr` (known or not), for calls that must reach one
    /// particular member (e.g. asking each for its role).
    pub fn channel_to(&self, addr: &str) -> Result<Channel> {
        match self.index_of(addr).and_then(|i| self.channel(i)) {
            Some((_, ch)) => Ok(ch),
            None => Err(RpcError::Invalid(format!("bad address {addr:?}"))),
        }
    }

    /// Calls the leader: `f` gets a channel and makes one attempt of the RPC.
    pub async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = std::result::Result<Response<T>, Status>>,
    {
        self.run(what, Target::Leader, f).await
    }

    /// Calls any member (reads a follower may serve), starting at the next in rotation.
    pub async fn call_any<T, F, Fut>(&self, what: &str, f: F) -> Result<T>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = std::result::Result<Response<T>, Status>>,
    {
        self.run(what, Target::Any, f).await
    }

    async fn run<T, F, Fut>(&self, what: &str, target: Target, mut f: F) -> Result<T>
    where
        F: FnMut(Channel) -> Fut,
        Fut: Future<Output = std::result::Result<Response<T>, Status>>,
    {
        let policy = &self.inner.policy;
        let started = Instant::now();
        let deadline = started + policy.deadline;
        let mut idx = match target {
            Target::Leader => match self.inner.leader.load(Ordering::Relaxed) {
                i if i < self.len() => i,
                _ => 0,
            },
            Target::Any => self.inner.rotate.fetch_add(1, Ordering::Relaxed) % self.len(),
        };
        // Members tried since the last pause: a full round of refusals means "pause".
        let mut tried_in_round = 0usize;
        let mut backoff = policy.backoff_initial;
        let mut last_err;
        loop {
            let Some((addr, channel)) = self.channel(idx) else {
                idx = 0;
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = tokio::time::timeout(policy.attempt_timeout.min(left), f(channel)).await;
            let status = match attempt {
                Ok(Ok(reply)) => {
                    if target == Target::Leader {
                        self.inner.leader.store(idx, Ordering::Relaxed);
                    }
                    return Ok(reply.into_inner());
                }
                Ok(Err(s)) => s,
                Err(_) => Status::deadline_exceeded(format!(
                    "no answer within {:?}",
                    policy.attempt_timeout.min(left)
                )),
            };
            if !is_retryable(&status) {
                if target == Target::Leader {
                    // A definite answer comes from a member able to decide: keep it.
                    self.inner.leader.store(idx, Ordering::Relaxed);
                }
                return Err(RpcError::Status {
                    service: self.inner.service.clone(),
                    status,
                });
            }
            self.inner.retries.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(service = %self.inner.service, what, member = %addr, code = ?status.code(), message = status.message(), "retrying");
            last_err = format!("{addr}: {}", status.message());
            let reason = crate::retry_reason(&status);
            let hinted = crate::leader_hint(&status).and_then(|h| self.index_of(&h));
            tried_in_round += 1;
            let mut pause = false;
            match (reason, hinted) {
                (_, Some(h)) if h != idx => {
                    // Follow the hint at once: the leader is usually right there.
                    idx = h;
                    self.inner.leader.store(h, Ordering::Relaxed);
                }
                (Some(crate::REASON_LEADER_NOT_READY), _) => {
                    // It leads but is catching up: wait for it rather than ask followers.
                    pause = true;
                }
                _ => {
                    if self.inner.leader.load(Ordering::Relaxed) == idx {
                        self.inner.leader.store(usize::MAX, Ordering::Relaxed);
                    }
                    idx = (idx + 1) % self.len();
                }
            }
            if tried_in_round >= self.len() {
                pause = true;
            }
            if pause {
                tried_in_round = 0;
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                tokio::time::sleep(backoff.min(left)).await;
                backoff = (backoff * 2).min(policy.backoff_max);
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(RpcError::Unavailable {
            service: self.inner.service.clone(),
            detail: format!(
                "{what}: gave up after {:.1?}; last error: {last_err}",
                started.elapsed()
            ),
        })
    }
}
