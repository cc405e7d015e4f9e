//! End-to-end test harness: a real local cluster started by the real `rozone dev up
//! --detach` (real daemon binaries, real processes, loopback ports), driven by the real
//! `rozone` binary and by the client library, stopped by `rozone dev down` (and SIGKILL of
//! every recorded pid on drop, so a failed test leaves no daemon behind).
//!
//! The daemons are found next to `rozone` in cargo's target dir: `cargo nextest run
//! --workspace` (scripts/test.sh) builds every binary of the workspace before the tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const ROZONE: &str = env!("CARGO_BIN_EXE_rozone");

/// Generous: a timeout here means "hung", not "slow" (2 shared cores, 9+ processes).
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// `rozone` with a hermetic environment (no ROZONE_* of the developer's shell).
pub fn rozone() -> Command {
    let mut c = Command::new(ROZONE);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ROZONE_") {
            c.env_remove(k);
        }
    }
    c.env_remove("RUST_LOG");
    c.stdin(Stdio::null());
    c
}

pub fn bin_dir() -> PathBuf {
    let dir = Path::new(ROZONE)
        .parent()
        .expect("rozone has a parent dir")
        .to_path_buf();
    for b in ["rozone-scm", "rozone-om", "rozone-datanode"] {
        assert!(
            dir.join(b).is_file(),
            "{b} not found in {}: build the daemons first (cargo build --workspace --bins; scripts/test.sh does)",
            dir.display()
        );
    }
    dir
}

/// Runs `cmd` to the end.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"))
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts success, returning stdout.
pub fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Asserts a failure reported as exactly one line on stderr containing `want`, with no
/// panic or backtrace. Returns that line.
pub fn fails_with(cmd: &mut Command, want: &str) -> String {
    let out = run(cmd);
    let err = text(&out.stderr);
    assert!(
        !out.status.success(),
        "{cmd:?} succeeded; stdout:\n{}",
        text(&out.stdout)
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{cmd:?}: exit status; stderr:\n{err}"
    );
    assert_eq!(
        err.lines().count(),
        1,
        "{cmd:?}: want one line on stderr, got:\n{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert!(err.starts_with("rozone: "), "{err}");
    assert!(
        err.contains(want),
        "{cmd:?}: want {want:?} in stderr, got:\n{err}"
    );
    err.trim_end().to_string()
}

/// A local cluster in a temporary directory.
pub struct DevCluster {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub up_json: serde_json::Value,
}

impl DevCluster {
    /// `rozone dev up --detach` with `extra` flags (e.g. `--datanodes 4`).
    pub fn up(extra: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rozone-e2e")
            .tempdir()
            .expect("temp dir");
        let mut c = DevCluster {
            config: dir.path().join("client.toml"),
            dir,
            up_json: serde_json::Value::Null,
        };
        c.start(extra);
        c
    }

    /// Starts (or restarts from its data) the cluster in this directory.
    pub fn start(&mut self, extra: &[&str]) {
        let out = ok(rozone()
            .args([
                "--json",
                "dev",
                "up",
                "--detach",
                "--ready-timeout",
                "90s",
                "--bin-dir",
            ])
            .arg(bin_dir())
            .arg("--dir")
            .arg(self.dir.path())
            .args(extra));
        self.up_json =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("dev up --json: {e}: {out}"));
        assert!(self.config.is_file(), "client.toml written");
    }

    /// `rozone dev down`.
    pub fn down(&self) {
        ok(rozone().args(["dev", "down", "--dir"]).arg(self.dir.path()));
    }

    /// `rozone --config client.toml ARGS`.
    pub fn cli(&self) -> Command {
        let mut c = rozone();
        c.arg("--config").arg(&self.config);
        c
    }

    /// `rozone --config client.toml --json ARGS` parsed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = ok(self.cli().arg("--json").args(args));
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{args:?} --json is not JSON ({e}): {out}"))
    }

    /// The client config of this cluster.
    pub fn client_config(&self) -> rozone_client::ClientConfig {
        rozone_client::ClientConfig::load(&self.config).expect("client.toml")
    }

    /// Running daemons by name (scm1, om2, dn3, ...).
    pub fn pids(&self) -> HashMap<String, u32> {
        let text = std::fs::read_to_string(self.dir.path().join("pids.json")).unwrap_or_default();
        let v: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        v.iter()
            .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["pid"].as_u64()? as u32)))
            .collect()
    }

    /// SIGKILLs a daemon and waits until it is gone.
    pub fn kill(&self, name: &str) {
        let pid = *self
            .pids()
            .get(name)
            .unwrap_or_else(|| panic!("no pid for {name}"));
        signal(pid, "KILL");
        let deadline = Instant::now() + TIMEOUT;
        while alive(pid) {
            assert!(
                Instant::now() < deadline,
                "{name} ({pid}) still alive after SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Tail of a daemon's log, for failure messages.
    pub fn log(&self, name: &str) -> String {
        let t = std::fs::read_to_string(self.dir.path().join(name).join("stderr.log"))
            .unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let _ = rozone()
            .args(["dev", "down", "--dir"])
            .arg(self.dir.path())
            .output();
        for pid in self.pids().values() {
            if alive(*pid) {
                signal(*pid, "KILL");
            }
        }
    }
}

pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty()
        && !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
}

/// Deterministic pseudo-random bytes (xorshift), different per `seed`.
pub fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// The daemon name (`scm2`, `om1`) of the leader of `ring` ("scm" or "om"), as `admin
/// <ring> roles` reports it.
pub fn leader_of(c: &DevCluster, ring: &str) -> String {
    let r = c.json(&["admin", ring, "roles"]);
    let members = r["members"].as_array().expect("members");
    let l = members
        .iter()
        .find(|m| m["role"] == "LEADER")
        .unwrap_or_else(|| panic!("no {ring} leader: {r}"));
    let id = l["node_id"]
        .as_u64()
        .or_else(|| l["id"].as_u64())
        .expect("leader id");
    format!("{ring}{id}")
}

/// A multi-threaded runtime for the client library.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Creates volume `vol` (owner "admin") and its bucket `bkt` with the defaults.
pub async fn volume_and_bucket(client: &rozone_client::Client, vol: &str, bkt: &str) {
    client
        .om
        .create_volume(vol, "admin", None)
        .await
        .expect("volume");
    client
        .om
        .create_bucket(vol, bkt, None)
        .await
        .expect("bucket");
}
