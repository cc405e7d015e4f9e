//! Ports for test configs that must name every address up front (a ring's peer list).
//!
//! Asking the kernel for a free port (bind to port 0, read it, close) and binding it later
//! races with everything else on the machine: the kernel hands the same port to the next
//! `bind(0)` or outgoing connection of any process, and in the full parallel test run that
//! happened ("Address already in use"). So ports come from below the kernel's ephemeral
//! range, where it never assigns one by itself, and each is reserved for the life of the test
//! process by an exclusive lock on a file named after it, which every test process honours.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Mutex;

/// Below Linux's default ephemeral range (32768–60999) and above the well-known ports.
const FIRST: u16 = 20_000;
const LAST: u16 = 32_000;

/// Lock files held open for the life of this process: closing one would free its port.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A port on 127.0.0.1 that no other test process holds and that is free right now; it
/// stays reserved for this process until it exits. Panics if the whole range is taken.
pub fn free_port() -> u16 {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir).expect("create the test port lock dir");
    let span = u32::from(LAST - FIRST);
    // Start at a different place in each process so that processes rarely contend.
    let start = (std::process::id().wrapping_mul(7919)) % span;
    for i in 0..span {
        let port = FIRST + ((start + i) % span) as u16;
        let Some(lock) = try_reserve(&dir, port) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            HELD.lock().unwrap_or_else(|p| p.into_inner()).push(lock);
            return port;
        }
    }
    panic!("no free test port in {FIRST}..{LAST}");
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("rozone-test-ports")
}

/// The port's lock file, locked exclusively by this process, or `None` if another holds it.
fn try_reserve(dir: &std::path::Path, port: u16) -> Option<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
        .ok()?;
    // SAFETY: flock on a file descriptor this function owns; no memory is involved.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    (r == 0).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ports.len(), "{ports:?}");
        for p in ports {
            assert!((FIRST..LAST).contains(&p));
            // Still reserved by this process, so a second reservation fails.
            assert!(try_reserve(&lock_dir(), p).is_none());
        }
    }
}
