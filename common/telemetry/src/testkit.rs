//! Drives a daemon binary from a test (feature `testkit`): start it, wait
//! for a line on its stderr, signal it, await its exit — each with a
//! timeout, never a fixed sleep.

mod ports;

pub use ports::free_port;

use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Generous, because test machines are small and busy: a timeout here
/// means "hung", not "slow".
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// `bin` with a hermetic environment: no `ROZONE_*` variables from the
/// developer's shell, and `RUST_LOG=info` so the lines tests wait for appear.
pub fn command(bin: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(bin);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ROZONE_") {
            command.env_remove(name);
        }
    }
    command.env("RUST_LOG", "info");
    command
}

/// [`command`] for a daemon run plaintext (`security.insecure = true`, set through the
/// environment): for tests that are not about security, so they need no certificates.
pub fn insecure_command(bin: impl AsRef<OsStr>) -> Command {
    let mut command = command(bin);
    command.env("ROZONE_SECURITY__INSECURE", "true");
    command
}

#[derive(Default)]
struct Output {
    text: String,
    closed: bool,
}

/// The resident set size of process `pid` now, from `/proc` (`None` if it is gone).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// A running daemon whose stderr is collected as it arrives. Killed with
/// SIGKILL on drop if it is still running, so a failed test leaves no orphan.
pub struct Daemon {
    pid: u32,
    stderr: Arc<(Mutex<Output>, Condvar)>,
    exit: mpsc::Receiver<io::Result<ExitStatus>>,
    status: Option<ExitStatus>,
}

impl Daemon {
    /// Starts `command` with stderr captured and stdin/stdout closed.
    pub fn spawn(mut command: Command) -> io::Result<Self> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let pid = child.id();
        let Some(pipe) = child.stderr.take() else {
            let _ = child.kill();
            return Err(io::Error::other("child has no stderr pipe"));
        };
        let stderr = Arc::new((Mutex::new(Output::default()), Condvar::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let (lock, changed) = &*sink;
                let mut out = lock.lock().unwrap_or_else(|e| e.into_inner());
                out.text.push_str(&line);
                out.text.push('\n');
                changed.notify_all();
            }
            let (lock, changed) = &*sink;
            lock.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
            changed.notify_all();
        });
        let (tx, exit) = mpsc::channel();
        std::thread::spawn(move || {
            let mut child: Child = child;
            let _ = tx.send(child.wait());
        });
        Ok(Self {
            pid,
            stderr,
            exit,
            status: None,
        })
    }

    /// Everything the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        let (lock, _) = &*self.stderr;
        lock.lock().unwrap_or_else(|e| e.into_inner()).text.clone()
    }

    /// Waits until stderr contains `needle`. Fails (with the stderr so far)
    /// on timeout or when the daemon closes stderr first, e.g. by exiting.
    pub fn wait_for_stderr(&self, needle: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let (lock, changed) = &*self.stderr;
        let mut out = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if out.text.contains(needle) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if out.closed || left.is_zero() {
                let why = if out.closed {
                    "stderr closed"
                } else {
                    "timed out"
                };
                return Err(format!(
                    "{why} waiting for {needle:?} on stderr; stderr so far:\n{}",
                    out.text
                ));
            }
            out = changed
                .wait_timeout(out, left)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The resident set size now (`None` once the process is gone).
    pub fn rss_bytes(&self) -> Option<u64> {
        rss_bytes(self.pid)
    }

    /// Sends a signal by name (`"TERM"`, `"INT"`, `"KILL"`) with kill(1),
    /// which every machine has, rather than a libc dependency.
    pub fn signal(&self, name: &str) -> io::Result<()> {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "kill -{name} {} failed: {status}",
                self.pid
            )))
        }
    }

    /// Waits (at most `timeout`) until the reader thread has seen the end of stderr: the
    /// process may exit before its last lines are read from the pipe, and a test that reads
    /// [`Self::stderr`] right after the exit must see them. (An exited daemon's refusal was
    /// missed this way under load.)
    fn wait_stderr_drained(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let (lock, changed) = &*self.stderr;
        let mut out = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !out.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            out = changed
                .wait_timeout(out, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits for the daemon to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        match self.exit.recv_timeout(timeout) {
            Ok(Ok(status)) => {
                self.status = Some(status);
                self.wait_stderr_drained(Duration::from_secs(10));
                Ok(status)
            }
            Ok(Err(e)) => Err(format!("wait for daemon: {e}")),
            Err(_) => Err(format!(
                "daemon still running after {timeout:?}; stderr:\n{}",
                self.stderr()
            )),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.status.is_none() && self.exit.try_recv().is_err() {
            let _ = self.signal("KILL");
        }
    }
}

/// Starts `bin args…`, waits for "started" on its stderr, sends SIGTERM and
/// asserts a clean exit (code 0, "stopped" logged) within [`TIMEOUT`].
pub fn assert_starts_and_stops_on_sigterm<S: AsRef<OsStr>>(bin: &str, args: &[S]) {
    let mut daemon = match Daemon::spawn({
        // Plaintext: this checks the process lifecycle, not TLS.
        let mut command = insecure_command(bin);
        command.args(args);
        command
    }) {
        Ok(daemon) => daemon,
        Err(e) => panic!("start {bin}: {e}"),
    };
    if let Err(e) = daemon.wait_for_stderr("started", TIMEOUT) {
        panic!("{bin}: {e}");
    }
    if let Err(e) = daemon.signal("TERM") {
        panic!("{bin}: {e}");
    }
    let status = match daemon.wait_exit(TIMEOUT) {
        Ok(status) => status,
        Err(e) => panic!("{bin}: {e}"),
    };
    let stderr = daemon.stderr();
    assert_eq!(
        status.code(),
        Some(0),
        "{bin} exit status; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("stopped"),
        "{bin} did not log \"stopped\":\n{stderr}"
    );
}

/// `bin --print-sample-config`, saved in `dir`, passes `bin --config-check`.
pub fn assert_sample_config_passes_check(bin: &str, dir: &Path) {
    let sample = run_to_end(command(bin).arg("--print-sample-config"));
    assert!(
        sample.status.success(),
        "{bin} --print-sample-config: {sample:?}"
    );
    let path = dir.join("sample.toml");
    if let Err(e) = std::fs::write(&path, &sample.stdout) {
        panic!("write {}: {e}", path.display());
    }
    let check = run_to_end(
        command(bin)
            .arg("--config-check")
            .arg("--config")
            .arg(&path),
    );
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && stdout.trim() == "config OK",
        "{bin} --config-check of its own sample: {check:?}"
    );
}

/// Runs `command` (with the given extra environment), expects exit code 1
/// and exactly one line on stderr containing `expected`.
pub fn assert_config_error(command: &mut Command, expected: &str) {
    let output = run_to_end(command);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "exit status; stderr:\n{stderr}"
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "want one line on stderr, got:\n{stderr}"
    );
    assert!(
        stderr.contains(expected),
        "want {expected:?} on stderr, got:\n{stderr}"
    );
}

fn run_to_end(command: &mut Command) -> std::process::Output {
    match command.stdin(Stdio::null()).output() {
        Ok(output) => output,
        Err(e) => panic!("run {command:?}: {e}"),
    }
}
