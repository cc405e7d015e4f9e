//! Ports for a new dev cluster, fixed in `cluster.json` before any daemon binds them.
//!
//! A port learned from `bind(127.0.0.1:0)` and released is in the kernel's ephemeral range,
//! which the kernel hands to the next outgoing connection of any process: on a busy machine
//! (the parallel test run) a daemon then failed to start with "Address already in use".
//! So ports come from below the ephemeral range, where the kernel never assigns one by
//! itself. Two `dev up`s choosing at once are kept apart by a reservation file per port:
//! the first to create it owns the port for [`RESERVED_FOR`], long enough for its daemons to
//! bind it, after which the bound socket itself keeps others away.

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};

/// The span ports are chosen from, cut below the ephemeral range if that starts lower.
/// Above the well-known and registered-service ports most machines use, and apart from the
/// 20000–32000 the workspace's tests reserve for themselves.
const FIRST: u16 = 10_000;
const LAST: u16 = 20_000;

/// How long a reservation keeps other `dev up`s off a port it has not bound yet: the
/// gateway binds last, once the cluster is ready, which `--ready-timeout` bounds.
const RESERVED_FOR: Duration = Duration::from_secs(15 * 60);

/// Chooses distinct free ports and keeps each bound until the picker is dropped, so one
/// layout never gets the same port twice.
pub struct Picker {
    dir: PathBuf,
    span: u16,
    next: u16,
    held: Vec<TcpListener>,
}

impl Picker {
    pub fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join("rozone-dev-ports");
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let last = ephemeral_start().map_or(LAST, |e| e.min(LAST));
        if last <= FIRST + 100 {
            bail!(
                "the kernel's ephemeral port range starts at {last}, leaving no room below it \
                 for the dev cluster's ports ({FIRST} and up); raise net.ipv4.ip_local_port_range"
            );
        }
        let span = last - FIRST;
        // A different start per process, so concurrent pickers rarely meet.
        let seed = std::process::id() as u128
            ^ SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
        let next = (seed.wrapping_mul(0x9e37_79b9) % u128::from(span)) as u16;
        Ok(Self {
            dir,
            span,
            next,
            held: Vec::new(),
        })
    }

    /// A port on 127.0.0.1 that is free now and reserved by no other `dev up`.
    pub fn port(&mut self) -> anyhow::Result<u16> {
        for _ in 0..self.span {
            let port = FIRST + self.next;
            self.next = (self.next + 1) % self.span;
            if !self.reserve(port) {
                continue;
            }
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                self.held.push(l);
                return Ok(port);
            }
        }
        bail!("no free port in 127.0.0.1:{FIRST}..{}", FIRST + self.span)
    }

    /// Claims `port`'s reservation file, taking over one older than [`RESERVED_FOR`].
    fn reserve(&self, port: u16) -> bool {
        let path = self.dir.join(port.to_string());
        let create = || OpenOptions::new().write(true).create_new(true).open(&path);
        if create().is_ok() {
            return true;
        }
        let stale = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > RESERVED_FOR);
        // Of two pickers that both find it stale, only one creates it anew.
        stale && std::fs::remove_file(&path).is_ok() && create().is_ok()
    }
}

/// The first port of the kernel's ephemeral range, if it can be read.
fn ephemeral_start() -> Option<u16> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_below_the_ephemeral_range_and_reserved() {
        let mut a = Picker::new().unwrap();
        let mut b = Picker::new().unwrap();
        let mut ports: Vec<u16> = (0..10).map(|_| a.port().unwrap()).collect();
        ports.extend((0..10).map(|_| b.port().unwrap()));
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len(), "{ports:?}");
        let limit = ephemeral_start().unwrap_or(LAST).min(LAST);
        for p in ports {
            assert!((FIRST..limit).contains(&p), "{p}");
            // A third picker cannot take a port whose reservation is fresh.
            assert!(!Picker::new().unwrap().reserve(p), "{p}");
        }
    }
}
