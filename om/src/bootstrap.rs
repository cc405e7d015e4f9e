//! `--bootstrap`: how a new OM joins a running ring (Ozone's HDDS-16838 done right).
//!
//! 1. Before anything changes (no Raft storage is created, no member is asked to add it),
//!    the new OM asks every OM in its own `[[peers]]` for its ring info — that OM's
//!    configured peers and its Raft membership, with addresses — and whether its config
//!    lists the new OM ([`check`]). Any ring member (in any peer list or membership) that
//!    has no address in the new OM's config, any OM that does not list the new one, and any
//!    ring member that cannot be asked, refuses the bootstrap with one message naming every
//!    such member and the config key to fix. `--force` skips this check.
//! 2. The shared join procedure ([`rozone_raft::join`]) records "joining", starts Raft with
//!    the peer port closed, asks the leader whether it admits this OM (a wiped member is
//!    refused), opens the peer port and asks the leader to add it: learner first (it
//!    catches up by log or by the leader's checkpoint over the peer port), voter after.
//!
//! Whatever the config says, applying a membership change never depends on it: addresses
//! travel in the membership (see `tasks::watch_membership` for the warning).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use futures::FutureExt;
use rozone_config::Peer;
use rozone_proto::ring as pb;
use rozone_proto::ring::ring_client::RingClient;
use rozone_raft::join::{JoinAsk, JoinHooks, JoinPolicy, RingId};
use rozone_raft::NodeInfo;
use tonic::transport::Channel;
use tracing::warn;

use crate::config::Config;

const RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// What one OM of the new OM's config answered (or why it did not).
#[derive(Debug, Clone)]
pub struct PeerAnswer {
    pub peer: Peer,
    pub answer: Result<(pb::RingInfoReply, pb::KnowsNodeReply), String>,
}

async fn client(config: &Config, addr: &str) -> anyhow::Result<RingClient<Channel>> {
    let ch = config
        .security()?
        .channels()
        .endpoint(addr)?
        .timeout(RPC_TIMEOUT)
        .connect()
        .await
        .with_context(|| format!("connect to OM at {addr}"))?;
    Ok(RingClient::new(ch))
}

/// Asks every other OM in this OM's config for its ring info and whether it knows us.
pub async fn ask_peers(config: &Config, me: &NodeInfo) -> Vec<PeerAnswer> {
    let mut out = Vec::new();
    for p in config.peers.iter().filter(|p| p.id != config.node.id) {
        let answer = async {
            let mut c = client(config, &p.client_addr).await?;
            let ring = c.ring_info(pb::RingInfoRequest {}).await?.into_inner();
            let knows = c
                .knows_node(pb::KnowsNodeRequest {
                    node_id: config.node.id,
                    peer_addr: me.peer_addr.clone(),
                    client_addr: me.client_addr.clone(),
                })
                .await?
                .into_inner();
            anyhow::Ok((ring, knows))
        }
        .await
        .map_err(|e| format!("{e:#}"));
        out.push(PeerAnswer {
            peer: p.clone(),
            answer,
        });
    }
    out
}

/// The bootstrap check over the answers: `Ok` or one message naming every problem.
pub fn check(config: &Config, me: &NodeInfo, answers: &[PeerAnswer]) -> Result<(), String> {
    let my_id = config.node.id;
    let known: BTreeSet<u64> = config.peers.iter().map(|p| p.id).collect();
    if answers.is_empty() {
        return Err(format!(
            "--bootstrap needs the ring's other OMs in this OM's config: add a [[peers]] entry (id, peer_addr, client_addr) for each (node.id = {my_id})"
        ));
    }
    // Members of the ring as any reachable OM reports them: its Raft membership and its
    // configured peers, each with where it was seen.
    let mut seen_in: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut ring_members = BTreeSet::new();
    let mut problems = Vec::new();
    for a in answers {
        let Ok((ring, knows)) = &a.answer else {
            continue;
        };
        for m in &ring.members {
            ring_members.insert(m.id);
            seen_in
                .entry(m.id)
                .or_default()
                .insert(format!("the Raft membership of OM {}", a.peer.id));
        }
        for p in &ring.config_peers {
            seen_in
                .entry(p.id)
                .or_default()
                .insert(format!("the [[peers]] of OM {}", a.peer.id));
        }
        if !knows.known {
            problems.push(format!(
                "OM {} ({}) does not list this OM (node.id = {my_id}) in its [[peers]]: add it there first",
                a.peer.id, a.peer.client_addr
            ));
        } else if knows.configured_peer_addr != me.peer_addr
            || knows.configured_client_addr != me.client_addr
        {
            problems.push(format!(
                "OM {} lists this OM at peer {} / client {}, but this OM is at peer {} / client {}",
                a.peer.id,
                knows.configured_peer_addr,
                knows.configured_client_addr,
                me.peer_addr,
                me.client_addr
            ));
        }
    }
    if seen_in.is_empty() && problems.is_empty() {
        let why: Vec<String> = answers
            .iter()
            .filter_map(|a| {
                a.answer
                    .as_ref()
                    .err()
                    .map(|e| format!("OM {}: {e}", a.peer.id))
            })
            .collect();
        return Err(format!(
            "no OM in this OM's [[peers]] answered, so the ring cannot be checked: {}",
            why.join("; ")
        ));
    }
    for a in answers {
        if let Err(e) = &a.answer {
            // An OM of our config that is not in the ring yet may be down; a member may not.
            if ring_members.contains(&a.peer.id) {
                problems.push(format!(
                    "OM {} ({}) is a member of the ring but could not be asked: {e}",
                    a.peer.id, a.peer.client_addr
                ));
            }
        }
    }
    let missing: Vec<(u64, &BTreeSet<String>)> = seen_in
        .iter()
        .filter(|(id, _)| !known.contains(id))
        .map(|(id, w)| (*id, w))
        .collect();
    if !missing.is_empty() {
        let ids: Vec<String> = missing.iter().map(|(id, _)| id.to_string()).collect();
        let wheres: Vec<String> = missing
            .iter()
            .map(|(id, w)| {
                format!(
                    "OM {id} is in {}",
                    w.iter().cloned().collect::<Vec<_>>().join(" and ")
                )
            })
            .collect();
        problems.insert(
            0,
            format!(
                "OM(s) [{}] are members of the ring but have no address in this OM's config ({}): add a [[peers]] entry (id, peer_addr, client_addr) for each to this OM's config before --bootstrap",
                ids.join(", "),
                wheres.join("; ")
            ),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "bootstrap refused, nothing was changed: {}",
            problems.join("; ")
        ))
    }
}

/// The leader's client address and the ring id, as the answering OMs report them (the
/// ring id from the leader's own answer when it is among them).
pub fn leader_of(answers: &[PeerAnswer]) -> Option<(String, String)> {
    let ok = || answers.iter().filter_map(|a| a.answer.as_ref().ok());
    let (leader_id, leader) = ok().find_map(|(r, _)| {
        Some((r.leader_id?, r.leader_client_addr.clone())).filter(|(_, l)| !l.is_empty())
    })?;
    let ring = ok()
        .find(|(r, _)| r.node_id == leader_id)
        .or_else(|| ok().find(|(r, _)| !r.ring_id.is_empty()))
        .map(|(r, _)| r.ring_id.clone())
        .unwrap_or_default();
    Some((leader, ring))
}

/// Step 1: the check (unless `--force`), then the leader to ask and its ring id.
pub async fn check_and_find_leader(
    config: &Config,
    me: &NodeInfo,
) -> anyhow::Result<(String, RingId)> {
    let om = &config.om;
    for attempt in 1..=om.bootstrap_attempts {
        let answers = ask_peers(config, me).await;
        if config.startup.force {
            warn!("--force: skipping the check that the ring and this OM's config agree");
        } else {
            check(config, me, &answers).map_err(anyhow::Error::msg)?;
        }
        if let Some((l, ring)) = leader_of(&answers) {
            if let Some(ring) = RingId::parse_opt(&ring).map_err(anyhow::Error::msg)? {
                return Ok((l, ring));
            }
            warn!(attempt, leader = %l, "the OM leader reports no ring id yet; asking again");
        } else {
            warn!(attempt, "no OM knows a leader yet; asking again");
        }
        tokio::time::sleep(om.bootstrap_retry_pause).await;
    }
    bail!(
        "no OM leader found after {} attempt(s)",
        om.bootstrap_attempts
    )
}

/// The OM's part of the shared join procedure ([`rozone_raft::join`]): the peer-config
/// check and leader search, and its `AddMember` call.
pub struct OmJoin {
    pub config: Arc<Config>,
    pub me: NodeInfo,
}

impl OmJoin {
    pub fn policy(&self) -> JoinPolicy {
        JoinPolicy {
            attempts: self.config.om.bootstrap_attempts,
            pause: self.config.om.bootstrap_retry_pause,
        }
    }
}

impl JoinHooks for OmJoin {
    fn find_leader(&self) -> BoxFuture<'_, anyhow::Result<(String, RingId)>> {
        // Before anything changes, here or in the ring (HDDS-16838).
        check_and_find_leader(&self.config, &self.me).boxed()
    }

    fn add_member<'a>(
        &'a self,
        leader: &'a str,
        ask: &'a JoinAsk,
    ) -> BoxFuture<'a, Result<(), tonic::Status>> {
        async move {
            let mut c = client(&self.config, leader)
                .await
                .map_err(|e| tonic::Status::unavailable(format!("{e:#}")))?;
            c.add_member(pb::AddMemberRequest {
                id: self.config.node.id,
                peer_addr: self.me.peer_addr.clone(),
                client_addr: self.me.client_addr.clone(),
                force: self.config.startup.force,
                ring_id: ask.ring_id.map(|r| r.to_string()).unwrap_or_default(),
                last_log_index: ask.last_log_index,
                check_only: ask.check_only,
            })
            .await
            .map(|_| ())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(id: u64) -> Peer {
        Peer {
            id,
            peer_addr: format!("127.0.0.1:{}", 7000 + id),
            client_addr: format!("127.0.0.1:{}", 8000 + id),
        }
    }

    fn config(me: u64, peers: &[u64]) -> Config {
        let mut c = Config::default();
        c.node.id = me;
        c.peers = peers.iter().map(|id| peer(*id)).collect();
        c
    }

    fn answer(from: u64, members: &[u64], config_peers: &[u64], knows: bool) -> PeerAnswer {
        let me = peer(4);
        PeerAnswer {
            peer: peer(from),
            answer: Ok((
                pb::RingInfoReply {
                    node_id: from,
                    config_peers: config_peers
                        .iter()
                        .map(|id| pb::PeerAddress {
                            id: *id,
                            peer_addr: peer(*id).peer_addr,
                            client_addr: peer(*id).client_addr,
                        })
                        .collect(),
                    members: members
                        .iter()
                        .map(|id| pb::RingMember {
                            id: *id,
                            peer_addr: peer(*id).peer_addr,
                            client_addr: peer(*id).client_addr,
                            voter: true,
                            ..Default::default()
                        })
                        .collect(),
                    leader_id: Some(1),
                    leader_client_addr: peer(1).client_addr,
                    leader_ready: true,
                    role: "FOLLOWER".into(),
                    ring_id: format!("r{from}"),
                    term: 1,
                },
                pb::KnowsNodeReply {
                    known: knows,
                    configured_peer_addr: if knows { me.peer_addr } else { String::new() },
                    configured_client_addr: if knows { me.client_addr } else { String::new() },
                },
            )),
        }
    }

    fn me() -> NodeInfo {
        NodeInfo::new(peer(4).peer_addr, peer(4).client_addr)
    }

    #[test]
    fn complete_config_passes() {
        let c = config(4, &[1, 2, 3, 4]);
        let a = [1, 2, 3].map(|f| answer(f, &[1, 2, 3], &[1, 2, 3, 4], true));
        assert_eq!(check(&c, &me(), &a), Ok(()));
        assert_eq!(leader_of(&a), Some((peer(1).client_addr, "r1".to_string())));
    }

    #[test]
    fn member_missing_from_own_config_is_named_with_the_key() {
        // HDDS-16838: only OM 1 is in the new OM's config; OM 2 and 3 are in the ring.
        let c = config(4, &[1, 4]);
        let a = [answer(1, &[1, 2], &[1, 2, 3, 4], true)];
        let e = check(&c, &me(), &a).unwrap_err();
        assert!(
            e.contains("OM(s) [2, 3] are members of the ring but have no address"),
            "{e}"
        );
        assert!(e.contains("[[peers]]"), "{e}");
        assert!(
            e.contains("OM 2 is in the Raft membership of OM 1 and the [[peers]] of OM 1"),
            "{e}"
        );
    }

    #[test]
    fn peer_that_does_not_know_us_and_unreachable_member_are_refused() {
        let c = config(4, &[1, 2, 4]);
        let mut down = answer(2, &[], &[], true);
        down.answer = Err("connection refused".into());
        let a = [answer(1, &[1, 2], &[1, 2], false), down];
        let e = check(&c, &me(), &a).unwrap_err();
        assert!(
            e.contains("OM 1 (127.0.0.1:8001) does not list this OM (node.id = 4)"),
            "{e}"
        );
        assert!(
            e.contains("OM 2 (127.0.0.1:8002) is a member of the ring but could not be asked"),
            "{e}"
        );
    }

    #[test]
    fn configured_future_member_that_is_down_is_not_a_problem() {
        let c = config(4, &[1, 4, 5]);
        let mut down = answer(5, &[], &[], true);
        down.answer = Err("connection refused".into());
        let a = [answer(1, &[1], &[1, 4, 5], true), down];
        assert_eq!(check(&c, &me(), &a), Ok(()));
    }

    #[test]
    fn no_answer_at_all_or_no_peers_is_refused() {
        let c = config(4, &[4]);
        assert!(check(&c, &me(), &[]).unwrap_err().contains("[[peers]]"));
        let c = config(4, &[1, 4]);
        let mut down = answer(1, &[], &[], true);
        down.answer = Err("refused".into());
        assert!(check(&c, &me(), &[down])
            .unwrap_err()
            .contains("no OM in this OM's [[peers]] answered"));
    }
}
