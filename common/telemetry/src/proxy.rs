//! A TCP forwarder that a test puts in front of a daemon's peer port (feature `testkit`), so
//! it can cut that daemon off from its ring and heal it again: real processes, a real
//! partition of every connection into the port, no packet filter needed.
//!
//! `cut` drops every open connection and refuses new ones until `heal`. Bytes a copy thread
//! read before the cut are either delivered before `cut` returns or not at all: after the cut
//! nothing more reaches the daemon (which is what a paused process needs, so that messages
//! from a newer leader do not wait in its socket buffers for it to wake up).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

#[derive(Default)]
struct Shared {
    cut: AtomicBool,
    open: Mutex<Vec<TcpStream>>,
}

/// A forwarder from its own loopback port to `target`.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a free 127.0.0.1 port and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(from) = conn else { continue };
                if s.cut.load(Ordering::SeqCst) {
                    let _ = from.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(to) = TcpStream::connect(target) else {
                    let _ = from.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = from.set_nodelay(true);
                let _ = to.set_nodelay(true);
                if let Err(e) = pipe(&s, from, to) {
                    eprintln!("proxy to {target}: {e}");
                }
            }
        });
        Ok(Self { addr, shared })
    }

    /// The address to give peers instead of the target's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        let open = std::mem::take(&mut *lock(&self.shared.open));
        for s in open {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Accepts connections again.
    pub fn heal(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}

fn lock(m: &Mutex<Vec<TcpStream>>) -> std::sync::MutexGuard<'_, Vec<TcpStream>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Copies both directions on their own threads, registering both sockets for `cut`.
fn pipe(s: &Arc<Shared>, from: TcpStream, to: TcpStream) -> io::Result<()> {
    {
        let mut open = lock(&s.open);
        open.push(from.try_clone()?);
        open.push(to.try_clone()?);
    }
    for (mut r, mut w) in [(from.try_clone()?, to.try_clone()?), (to, from)] {
        let s = Arc::clone(s);
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = match r.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if s.cut.load(Ordering::SeqCst) || w.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = r.shutdown(Shutdown::Both);
            let _ = w.shutdown(Shutdown::Both);
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        thread::spawn(move || {
            for c in l.incoming().flatten() {
                thread::spawn(move || {
                    let mut w = c.try_clone().unwrap();
                    let _ = io::copy(&mut &c, &mut w);
                });
            }
        });
        a
    }

    fn roundtrip(addr: SocketAddr) -> io::Result<Vec<u8>> {
        let mut c = TcpStream::connect(addr)?;
        c.write_all(b"ping")?;
        let mut got = [0u8; 4];
        c.read_exact(&mut got)?;
        Ok(got.to_vec())
    }

    #[test]
    fn forwards_until_cut_and_again_after_heal() {
        let p = Proxy::start(echo_server()).unwrap();
        assert_eq!(roundtrip(p.addr()).unwrap(), b"ping");
        let mut open = TcpStream::connect(p.addr()).unwrap();
        open.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        open.read_exact(&mut one).unwrap();
        p.cut();
        // The open connection is gone, and a new one is closed at once.
        let mut rest = Vec::new();
        assert!(matches!(open.read_to_end(&mut rest), Ok(0) | Err(_)));
        assert!(roundtrip(p.addr()).is_err());
        p.heal();
        assert_eq!(roundtrip(p.addr()).unwrap(), b"ping");
    }
}
