//! systemd's readiness protocol (`sd_notify`), so the unit files can use `Type=notify`:
//! `systemctl start` returns, and units ordered `After=` a daemon start, only once the daemon
//! is ready to serve its role (its Raft group has a ready leader it follows or is), not when
//! the process merely exists.
//!
//! The protocol: when systemd starts a `Type=notify` service it sets `NOTIFY_SOCKET` to a Unix
//! datagram socket, a filesystem path or, starting with `@`, a name in the Linux abstract
//! namespace. The service sends newline-separated `KEY=value` assignments to it: `READY=1`,
//! `STATUS=<free text shown by systemctl status>`, `STOPPING=1`. Std only, no libsystemd.
//!
//! Without `NOTIFY_SOCKET` (not started by systemd) every function here does nothing.
//! [`watch_readiness`] is what [`crate::http::serve_http`] spawns: every daemon passes its
//! readiness there already.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::health::HealthSource;

/// The environment variable systemd passes the notification socket in.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// How often [`watch_readiness`] asks the daemon whether it is ready yet.
const POLL: Duration = Duration::from_millis(200);

/// Sends `state` (e.g. `"READY=1\nSTATUS=serving"`) to the socket named by `socket`, a path
/// or `@name` for the abstract namespace.
pub fn send_to(socket: &OsStr, state: &str) -> io::Result<()> {
    let bytes = socket.as_encoded_bytes();
    let Some(first) = bytes.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NOTIFY_SOCKET is empty",
        ));
    };
    let sock = UnixDatagram::unbound()?;
    let sent = if *first == b'@' {
        send_abstract(&sock, &bytes[1..], state)?
    } else if *first == b'/' {
        sock.send_to(state.as_bytes(), socket)?
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "NOTIFY_SOCKET {} is neither an absolute path nor @abstract",
                socket.to_string_lossy()
            ),
        ));
    };
    if sent != state.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("sent {sent} of {} bytes of a notification", state.len()),
        ));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn send_abstract(sock: &UnixDatagram, name: &[u8], state: &str) -> io::Result<usize> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    sock.send_to_addr(state.as_bytes(), &addr)
}

#[cfg(not(target_os = "linux"))]
fn send_abstract(_: &UnixDatagram, _: &[u8], _: &str) -> io::Result<usize> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract-namespace NOTIFY_SOCKET outside Linux",
    ))
}

/// The socket systemd gave this process, if any.
pub fn socket_from_env() -> Option<OsString> {
    std::env::var_os(NOTIFY_SOCKET).filter(|s| !s.is_empty())
}

/// Sends `state` to `$NOTIFY_SOCKET`. `Ok(false)`: not started by systemd, nothing sent.
pub fn notify(state: &str) -> io::Result<bool> {
    match socket_from_env() {
        Some(socket) => send_to(&socket, state).map(|()| true),
        None => Ok(false),
    }
}

/// One `STATUS=` line: systemd shows it on one line, so newlines in a reason are flattened.
fn status(text: &str) -> String {
    format!("STATUS={}", text.replace('\n', " "))
}

/// Reports to `socket` until `shutdown`: `STATUS=<why not>` whenever the reason the daemon is
/// not ready changes, then `READY=1` once, the first time `source.ready()` is `Ok`; and
/// `STOPPING=1` when `shutdown` is cancelled. Readiness is announced once only: systemd's
/// notion is "start-up finished", and later losses of a leader show on `/ready` and in
/// `STATUS=`.
pub async fn watch_readiness(
    socket: OsString,
    source: Arc<dyn HealthSource>,
    shutdown: CancellationToken,
) {
    let send = |state: String| {
        if let Err(e) = send_to(&socket, &state) {
            tracing::warn!(error = %e, "could not notify systemd ({state:?})");
        }
    };
    let mut ready = false;
    let mut last_reason: Option<String> = None;
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                send(format!("STOPPING=1\n{}", status("stopping")));
                return;
            }
            _ = tick.tick() => {}
        }
        match source.ready() {
            Ok(()) if !ready => {
                ready = true;
                last_reason = None;
                send(format!("READY=1\n{}", status("ready")));
            }
            Ok(()) => {
                if last_reason.take().is_some() {
                    send(status("ready"));
                }
            }
            Err(why) if last_reason.as_deref() != Some(why.as_str()) => {
                let prefix = if ready { "not ready" } else { "starting" };
                send(status(&format!("{prefix}: {why}")));
                last_reason = Some(why);
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn receiver(dir: &tempfile::TempDir) -> (UnixDatagram, OsString) {
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        (sock, path.into_os_string())
    }

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a notification within 30 s");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let (sock, path) = receiver(&dir);
        send_to(&path, "READY=1\nSTATUS=ready").unwrap();
        assert_eq!(recv(&sock), "READY=1\nSTATUS=ready");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("rozone-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        send_to(OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        assert_eq!(recv(&sock), "STOPPING=1");
    }

    #[test]
    fn rejects_relative_and_empty_socket_names() {
        let e = send_to(OsStr::new("notify.sock"), "READY=1").unwrap_err();
        assert!(e.to_string().contains("neither an absolute path"), "{e}");
        assert!(send_to(OsStr::new(""), "READY=1").is_err());
    }

    #[test]
    fn unreachable_socket_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone.sock").into_os_string();
        assert!(send_to(&missing, "READY=1").is_err());
    }

    /// Not ready for the first answers, then ready.
    struct Scripted(Mutex<Vec<Result<(), String>>>);

    impl HealthSource for Scripted {
        fn ready(&self) -> Result<(), String> {
            let mut answers = self.0.lock().unwrap();
            if answers.len() > 1 {
                answers.remove(0)
            } else {
                answers[0].clone()
            }
        }
        fn metrics(&self) -> String {
            String::new()
        }
    }

    #[tokio::test]
    async fn reports_why_not_ready_then_ready_once_then_stopping() {
        let dir = tempfile::tempdir().unwrap();
        let (sock, path) = receiver(&dir);
        let source = Arc::new(Scripted(Mutex::new(vec![
            Err("no leader known".into()),
            Err("no leader known".into()),
            Err("leader has not applied an entry of its term yet".into()),
            Ok(()),
        ])));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(watch_readiness(path, source, shutdown.clone()));
        let sock = Arc::new(sock);
        let next = |sock: Arc<UnixDatagram>| async move {
            tokio::task::spawn_blocking(move || recv(&sock))
                .await
                .unwrap()
        };
        // A repeated reason is not sent twice.
        assert_eq!(next(sock.clone()).await, "STATUS=starting: no leader known");
        assert_eq!(
            next(sock.clone()).await,
            "STATUS=starting: leader has not applied an entry of its term yet"
        );
        assert_eq!(next(sock.clone()).await, "READY=1\nSTATUS=ready");
        // Still ready on every later poll: nothing more until shutdown.
        shutdown.cancel();
        assert_eq!(next(sock.clone()).await, "STOPPING=1\nSTATUS=stopping");
        task.await.unwrap();
        sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        assert!(sock.recv(&mut buf).is_err(), "READY=1 is sent only once");
    }
}
