//! A TCP forwarder in front of one daemon's peer port that can cut single links.
//!
//! Raft addresses travel in the replicated membership, so every member dials the same
//! address for a peer: a proxy per (from, to) pair cannot be given out by config. Instead
//! the proxy asks the kernel who dialled: the accepted connection's remote port names a
//! socket in `/proc/net/tcp`, whose inode is held open by exactly one of the harness's
//! child processes (`/proc/PID/fd`). A link `from → to` is cut by refusing (and dropping)
//! the connections from `from` at `to`'s proxy; the other direction is a separate link, so
//! one-way partitions come for free. Loopback only, no root, no packet filter: it runs the
//! same in CI and on a laptop (see docs/chaos.md for why not network namespaces).

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

/// The harness's children, as (name, pid): who may own a connecting socket.
pub type Owners = Arc<Mutex<Vec<(String, u32)>>>;

/// A connection's source: a named child, or something else (a client, the harness).
const OTHER: &str = "?";

#[derive(Default)]
struct Shared {
    /// Sources whose connections are refused; `*` refuses everyone.
    blocked: HashSet<String>,
    open: Vec<(String, TcpStream)>,
}

/// A forwarder from its own loopback port to `target`.
pub struct LinkProxy {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LinkProxy {
    /// Listens on a free 127.0.0.1 port (bound, never guessed) and forwards to `target`.
    pub fn start(target: SocketAddr, owners: Owners) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let s = Arc::clone(&shared);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(from) = conn else { continue };
                let source = from
                    .peer_addr()
                    .ok()
                    .and_then(|p| owner_of(p, addr, &lock(&owners)))
                    .unwrap_or_else(|| OTHER.to_string());
                if is_blocked(&lock(&s), &source) {
                    let _ = from.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(to) = TcpStream::connect(target) else {
                    let _ = from.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = from.set_nodelay(true);
                let _ = to.set_nodelay(true);
                let _ = pipe(&s, source, from, to);
            }
        });
        Ok(Self { addr, shared })
    }

    /// The address to give peers instead of the target's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts the link from `source` (a child's name, or `*` for every source): drops its
    /// open connections and refuses new ones until [`Self::heal`].
    pub fn block(&self, source: &str) {
        let mut s = lock(&self.shared);
        s.blocked.insert(source.to_string());
        let open = std::mem::take(&mut s.open);
        for (src, conn) in open {
            if source == "*" || src == source {
                let _ = conn.shutdown(Shutdown::Both);
            } else {
                s.open.push((src, conn));
            }
        }
    }

    /// Accepts every source again.
    pub fn heal(&self) {
        lock(&self.shared).blocked.clear();
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.block("*");
    }
}

fn is_blocked(s: &Shared, source: &str) -> bool {
    s.blocked.contains("*") || s.blocked.contains(source)
}

/// Copies both directions on their own threads; a block of the source ends both.
fn pipe(s: &Arc<Mutex<Shared>>, source: String, from: TcpStream, to: TcpStream) -> io::Result<()> {
    {
        let mut g = lock(s);
        g.open.push((source.clone(), from.try_clone()?));
        g.open.push((source.clone(), to.try_clone()?));
    }
    for (mut r, mut w) in [(from.try_clone()?, to.try_clone()?), (to, from)] {
        let s = Arc::clone(s);
        let source = source.clone();
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = match r.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if is_blocked(&lock(&s), &source) || w.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = r.shutdown(Shutdown::Both);
            let _ = w.shutdown(Shutdown::Both);
        });
    }
    Ok(())
}

/// Which child owns the socket at `local` connected to `remote` (both loopback IPv4).
fn owner_of(local: SocketAddr, remote: SocketAddr, owners: &[(String, u32)]) -> Option<String> {
    let inode = socket_inode(local, remote)?;
    let want = format!("socket:[{inode}]");
    for (name, pid) in owners {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == want) {
                return Some(name.clone());
            }
        }
    }
    None
}

/// The inode of the TCP socket `local → remote` from `/proc/net/tcp` (IPv4 loopback).
fn socket_inode(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let (l, r) = (hex_addr(local)?, hex_addr(remote)?);
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == l && f[2] == r)
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

/// `/proc/net/tcp`'s form of an IPv4 address: little-endian hex IP, big-endian hex port.
fn hex_addr(a: SocketAddr) -> Option<String> {
    match a {
        SocketAddr::V4(v4) => Some(format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(v4.ip().octets()),
            v4.port()
        )),
        SocketAddr::V6(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_address_form() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(hex_addr(a).unwrap(), "0100007F:1F90");
    }

    #[test]
    fn finds_the_owner_of_a_connection_and_cuts_only_its_link() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        thread::spawn(move || {
            for c in echo.incoming().flatten() {
                thread::spawn(move || {
                    let mut w = c.try_clone().unwrap();
                    let _ = io::copy(&mut &c, &mut w);
                });
            }
        });
        // This test process plays the child named "me".
        let owners: Owners = Arc::new(Mutex::new(vec![("me".into(), std::process::id())]));
        let p = LinkProxy::start(target, owners).unwrap();
        let ping = |addr| -> io::Result<()> {
            let mut c = TcpStream::connect(addr)?;
            c.write_all(b"ping")?;
            let mut got = [0u8; 4];
            c.read_exact(&mut got)?;
            Ok(())
        };
        ping(p.addr()).unwrap();
        p.block("someone-else");
        ping(p.addr()).unwrap();
        p.block("me");
        assert!(ping(p.addr()).is_err(), "the link from me is cut");
        p.heal();
        ping(p.addr()).unwrap();
    }
}
