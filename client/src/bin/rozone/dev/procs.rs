//! Daemon processes of a local cluster: finding the binaries, starting one with its config
//! and log file, asking its HTTP `/ready`, and stopping (SIGTERM, wait, then SIGKILL).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::layout::{alive, Kind, Node};

/// Where the daemon binaries are: `--bin-dir`, else next to this executable (cargo puts
/// every binary of the workspace in one target dir), else on `PATH`.
pub fn find_binary(kind: Kind, bin_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let name = kind.binary();
    if let Some(d) = bin_dir {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
        bail!("{name} not found in --bin-dir {}", d.display());
    }
    let here = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    if let Some(d) = &here {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!(
        "{name} not found next to {} or on PATH: build the daemons (cargo build --workspace --bins) or pass --bin-dir",
        here.map(|d| d.display().to_string()).unwrap_or_else(|| "rozone".into())
    )
}

/// Starts `bin --config <node_dir>/config.toml <flags>`, its output appended to
/// `<node_dir>/stderr.log`. In its own process group, so a Ctrl-C meant for `rozone dev
/// up` (which then stops everything in order) or for the shell after `--detach` does not
/// hit the daemons directly.
pub fn spawn(bin: &Path, node_dir: &Path, flags: &[&str]) -> anyhow::Result<Child> {
    use std::os::unix::process::CommandExt;
    let log_path = node_dir.join("stderr.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("open {}", log_path.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("--config")
        .arg(node_dir.join("config.toml"))
        .args(flags);
    // The daemons read ROZONE_<SECTION>__<KEY> overrides: none of the caller's may leak in.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ROZONE_") {
            cmd.env_remove(k);
        }
    }
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info");
    }
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().context("log file")?)
        .stderr(log)
        .process_group(0);
    cmd.spawn()
        .with_context(|| format!("start {}", bin.display()))
}

/// Sends `signal` (e.g. "TERM") with kill(1).
pub fn signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    let st = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .context("run kill")?;
    if !st.success() && alive(pid) {
        bail!("kill -{signal} {pid} failed");
    }
    Ok(())
}

/// SIGTERM to every pid, then waits for all to exit; SIGKILL to those still running after
/// `grace`. `reap` collects children of this process (so they do not stay zombies).
pub async fn stop_all(
    pids: &[(String, u32)],
    grace: Duration,
    reap: &mut dyn FnMut(),
) -> Vec<String> {
    for (_, pid) in pids {
        let _ = signal(*pid, "TERM");
    }
    let deadline = Instant::now() + grace;
    loop {
        reap();
        let left: Vec<&(String, u32)> = pids.iter().filter(|(_, p)| alive(*p)).collect();
        if left.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            let mut killed = Vec::new();
            for (name, pid) in left {
                let _ = signal(*pid, "KILL");
                killed.push(name.clone());
            }
            reap();
            return killed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /ready` on the daemon's HTTP port: `Ok(())` on 200, otherwise the reason.
pub async fn ready(node: &Node) -> Result<(), String> {
    let addr = format!("127.0.0.1:{}", node.http);
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("http {addr}: {e}"))?;
        s.write_all(
            format!("GET /ready HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf);
        if text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200") {
            Ok(())
        } else {
            let body = text
                .split("\r\n\r\n")
                .nth(1)
                .unwrap_or("")
                .trim()
                .to_string();
            Err(if body.is_empty() {
                text.lines().next().unwrap_or("").to_string()
            } else {
                body
            })
        }
    };
    match tokio::time::timeout(Duration::from_secs(2), fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("http {addr}: no answer")),
    }
}
