//! Sections every daemon has: `[node]`, `[raft]`, `[http]`, `[log]`, and
//! the `[[peers]]` list of an SCM or OM ring, with the checks that go with them.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use humantime::format_duration;
use serde::{Deserialize, Serialize};

use crate::{Documented, Problems};

/// `0.0.0.0:port`: listen on every interface, as Ozone's defaults do.
pub const fn listen_on(port: u16) -> SocketAddr {
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)
}

crate::config_struct! {
    /// Who this node is and where it keeps its state.
    pub struct NodeSection {
        /// Raft node id of this member, unique within its ring. Never reuse
        /// the id of a removed member: peers may still hold log entries from it.
        pub id: u64 = 1,
        /// Directory for this node's databases and Raft log; created at
        /// startup if missing. Put it on durable local storage.
        pub data_dir: PathBuf = PathBuf::from("/var/lib/rozone"),
    }
}

impl NodeSection {
    /// Node 1 keeping its state in `data_dir`: each daemon's default.
    pub fn in_dir(data_dir: &str) -> Self {
        Self {
            data_dir: PathBuf::from(data_dir),
            ..Self::default()
        }
    }

    /// Records what is wrong with `[node]`.
    pub fn check(&self, problems: &mut Problems) {
        problems.check(!self.data_dir.as_os_str().is_empty(), || {
            "node.data_dir must not be empty".into()
        });
    }
}

crate::config_struct! {
    /// Raft timing and log compaction of this node's ring.
    pub struct RaftSection {
        /// Shortest time a follower waits without hearing from a leader before
        /// it stands for election; each wait is random in [min, max) so two
        /// followers rarely stand at once.
        #[serde(with = "crate::duration")]
        pub election_timeout_min: Duration = Duration::from_millis(1000),
        /// Longest such wait; must be above election_timeout_min.
        #[serde(with = "crate::duration")]
        pub election_timeout_max: Duration = Duration::from_millis(2000),
        /// How often a leader sends heartbeats; well below
        /// election_timeout_min, or followers depose a healthy leader.
        #[serde(with = "crate::duration")]
        pub heartbeat_interval: Duration = Duration::from_millis(250),
        /// Flush the Raft log to disk before acknowledging entries. Turn off
        /// only in throwaway test clusters: a node that forgets entries it
        /// acknowledged can make the ring lose committed writes.
        pub fsync: bool = true,
        /// Take a snapshot of the state machine after this many log entries
        /// since the last one, so the log does not grow without bound.
        pub snapshot_logs_since_last: u64 = 5000,
        /// Log entries kept behind a snapshot, so a briefly lagging follower
        /// catches up from the log instead of downloading a whole snapshot.
        pub max_in_snapshot_log_to_keep: u64 = 1000,
        /// How long a snapshot transfer may go without a byte arriving before it is
        /// abandoned (the follower stops its download; the leader offers again later).
        /// There is no bound on the whole transfer: a large snapshot over a slow link
        /// takes as long as it needs while it makes progress.
        #[serde(with = "crate::duration")]
        pub snapshot_stall_timeout: Duration = Duration::from_secs(30),
    }
}

/// How long a leader may serve reads from its own state after a quorum acknowledged an
/// append it sent: three quarters of the minimum election timeout. A follower that
/// acknowledged refuses other candidates for at least `election_timeout_min` after it received
/// the append; the quarter left over is the margin for the two clocks running at different
/// rates (far more than real clock drift, which is parts per million).
pub fn leader_lease(election_timeout_min: Duration) -> Duration {
    election_timeout_min.saturating_mul(3) / 4
}

impl RaftSection {
    /// This ring's leader lease (see [`leader_lease`]).
    pub fn leader_lease(&self) -> Duration {
        leader_lease(self.election_timeout_min)
    }

    /// Records what is wrong with `[raft]`.
    pub fn check(&self, problems: &mut Problems) {
        let (min, max, beat) = (
            self.election_timeout_min,
            self.election_timeout_max,
            self.heartbeat_interval,
        );
        problems.check(!beat.is_zero(), || {
            "raft.heartbeat_interval must be above 0".into()
        });
        problems.check(min < max, || {
            format!(
                "raft.election_timeout_min ({}) must be less than raft.election_timeout_max ({})",
                format_duration(min),
                format_duration(max)
            )
        });
        problems.check(beat < min, || {
            format!(
                "raft.heartbeat_interval ({}) must be less than raft.election_timeout_min ({})",
                format_duration(beat),
                format_duration(min)
            )
        });
        // A leader renews its lease with heartbeats: one that beats slower than its lease
        // lasts loses the lease between beats and refuses reads while healthy.
        problems.check(
            min >= max || beat >= min || beat < leader_lease(min),
            || {
                format!(
                    "raft.heartbeat_interval ({}) must be less than the leader lease ({}, 3/4 of \
                 raft.election_timeout_min)",
                    format_duration(beat),
                    format_duration(leader_lease(min))
                )
            },
        );
        problems.check(!self.snapshot_stall_timeout.is_zero(), || {
            "raft.snapshot_stall_timeout must be above 0".into()
        });
        problems.check(self.snapshot_logs_since_last > 0, || {
            "raft.snapshot_logs_since_last must be above 0".into()
        });
    }
}

crate::config_struct! {
    /// The HTTP endpoint for /metrics, /health and /ready.
    pub struct HttpSection {
        /// Address the HTTP endpoint listens on (port 0: any free port).
        pub addr: SocketAddr = listen_on(0),
    }
}

impl HttpSection {
    /// Listening on every interface at `port`: each daemon's default.
    pub const fn on(port: u16) -> Self {
        Self {
            addr: listen_on(port),
        }
    }
}

/// How log lines are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line per event: time, level, target, message, fields, spans.
    #[default]
    Text,
    /// Shorter lines: span names and targets are abbreviated.
    Compact,
}

impl Documented for LogFormat {}

crate::config_struct! {
    /// Logging. Which events are logged is set with `RUST_LOG`
    /// (default `info`), e.g. `RUST_LOG=info,rozone_raft=debug`.
    pub struct LogSection {
        /// "text" (full lines) or "compact"; logs go to stderr.
        pub format: LogFormat = LogFormat::Text,
    }
}

/// One member of an SCM or OM ring, as every member's config lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// The member's `node.id`.
    pub id: u64,
    /// `host:port` of its peer (Raft) listener.
    pub peer_addr: String,
    /// `host:port` of its client listener.
    pub client_addr: String,
}

/// Records a problem unless `value` is `host:port` with a non-zero port:
/// an address to dial (a listen address may use port 0; a dial one may not).
pub fn check_host_port(key: &str, value: &str, problems: &mut Problems) {
    let ok = value
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0));
    problems.check(ok, || {
        format!("{key} ({value:?}) must be host:port with a port above 0")
    });
}

/// Records a problem unless `values` is a non-empty list of `host:port`s,
/// e.g. the SCM addresses an OM or datanode dials.
pub fn check_host_ports(key: &str, values: &[String], problems: &mut Problems) {
    problems.check(!values.is_empty(), || {
        format!("{key} must list at least one host:port")
    });
    for (i, value) in values.iter().enumerate() {
        check_host_port(&format!("{key}[{i}]"), value, problems);
    }
}

/// Records every pair of listen addresses that would collide: the same
/// non-zero port on the same IP, or on any IP when either is `0.0.0.0`/`::`.
/// Entries are `(key, address)`.
pub fn check_listen_addrs(addrs: &[(&str, SocketAddr)], problems: &mut Problems) {
    for (i, (key, addr)) in addrs.iter().enumerate() {
        for (earlier_key, earlier) in &addrs[..i] {
            let overlap = addr.ip() == earlier.ip()
                || addr.ip().is_unspecified()
                || earlier.ip().is_unspecified();
            problems.check(
                addr.port() == 0 || addr.port() != earlier.port() || !overlap,
                || format!("{key} ({addr}) uses the same port as {earlier_key} ({earlier})"),
            );
        }
    }
}

/// Records what is wrong with a ring's `[[peers]]`: bad addresses, ids or
/// addresses listed twice, or (when any are listed) this node missing.
pub fn check_peers(peers: &[Peer], node_id: u64, problems: &mut Problems) {
    let mut ids = BTreeSet::new();
    let mut addrs = BTreeSet::new();
    for (i, peer) in peers.iter().enumerate() {
        check_host_port(&format!("peers[{i}].peer_addr"), &peer.peer_addr, problems);
        check_host_port(
            &format!("peers[{i}].client_addr"),
            &peer.client_addr,
            problems,
        );
        problems.check(ids.insert(peer.id), || {
            format!("peers[{i}].id ({}) is listed twice", peer.id)
        });
        problems.check(addrs.insert(&peer.peer_addr), || {
            format!(
                "peers[{i}].peer_addr ({:?}) is listed twice",
                peer.peer_addr
            )
        });
    }
    problems.check(peers.is_empty() || ids.contains(&node_id), || {
        format!("peers must include this node (node.id = {node_id})")
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(f: impl FnOnce(&mut Problems)) -> String {
        let mut p = Problems::default();
        f(&mut p);
        p.into_result()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn raft_timeouts_must_be_ordered() {
        let raft = RaftSection {
            election_timeout_min: Duration::from_millis(300),
            election_timeout_max: Duration::from_millis(150),
            heartbeat_interval: Duration::from_millis(400),
            ..RaftSection::default()
        };
        assert_eq!(
            problems(|p| raft.check(p)),
            "raft.election_timeout_min (300ms) must be less than raft.election_timeout_max (150ms); \
             raft.heartbeat_interval (400ms) must be less than raft.election_timeout_min (300ms)"
        );
        assert_eq!(problems(|p| RaftSection::default().check(p)), "");
    }

    #[test]
    fn heartbeats_must_renew_the_leader_lease() {
        let raft = RaftSection {
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            heartbeat_interval: Duration::from_millis(800),
            ..RaftSection::default()
        };
        assert_eq!(raft.leader_lease(), Duration::from_millis(750));
        assert_eq!(
            problems(|p| raft.check(p)),
            "raft.heartbeat_interval (800ms) must be less than the leader lease (750ms, 3/4 of \
             raft.election_timeout_min)"
        );
    }

    #[test]
    fn address_lists_need_one_good_entry_or_more() {
        assert_eq!(
            problems(|p| check_host_ports("om.scm_addrs", &[], p)),
            "om.scm_addrs must list at least one host:port"
        );
        assert_eq!(
            problems(|p| check_host_ports("om.scm_addrs", &["a:1".into(), "b".into()], p)),
            "om.scm_addrs[1] (\"b\") must be host:port with a port above 0"
        );
    }

    #[test]
    fn listen_addrs_must_not_collide() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let addrs = [
            ("x.client_addr", a("0.0.0.0:9860")),
            ("x.peer_addr", a("127.0.0.1:9860")),
            ("x.other_addr", a("127.0.0.2:9894")),
            ("x.fine_addr", a("127.0.0.3:9894")),
            ("x.any_addr", a("127.0.0.1:0")),
            ("x.any2_addr", a("127.0.0.1:0")),
        ];
        assert_eq!(
            problems(|p| check_listen_addrs(&addrs, p)),
            "x.peer_addr (127.0.0.1:9860) uses the same port as x.client_addr (0.0.0.0:9860)"
        );
    }

    #[test]
    fn peers_need_addresses_unique_ids_and_this_node() {
        let peer = |id, peer_addr: &str| Peer {
            id,
            peer_addr: peer_addr.into(),
            client_addr: "scm1:9860".into(),
        };
        assert_eq!(problems(|p| check_peers(&[], 1, p)), "");
        assert_eq!(
            problems(|p| check_peers(&[peer(1, "scm1:9894"), peer(2, "[::1]:9894")], 1, p)),
            ""
        );
        assert_eq!(
            problems(|p| check_peers(&[peer(2, "scm2"), peer(2, "scm3:0")], 1, p)),
            "peers[0].peer_addr (\"scm2\") must be host:port with a port above 0; \
             peers[1].peer_addr (\"scm3:0\") must be host:port with a port above 0; \
             peers[1].id (2) is listed twice; \
             peers must include this node (node.id = 1)"
        );
    }
}
