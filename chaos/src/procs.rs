//! One daemon process: started with its stderr appended to a log file (every incarnation
//! in one file, kept for the report), signalled with kill(1), waited for by polling its
//! log or its exit against a deadline.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A running daemon. SIGKILLed on drop.
pub struct Proc {
    child: Child,
    log: PathBuf,
    /// Where this incarnation's output starts in the log.
    from: u64,
}

impl Proc {
    /// Starts `cmd`, appending its stderr to `log`.
    pub fn spawn(mut cmd: Command, log: &Path) -> anyhow::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("open {}", log.display()))?;
        let from = file.metadata().map(|m| m.len()).unwrap_or(0);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .spawn()
            .with_context(|| format!("start {cmd:?}"))?;
        Ok(Self {
            child,
            log: log.to_path_buf(),
            from,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// This incarnation's output so far.
    pub fn output(&self) -> String {
        let all = std::fs::read(&self.log).unwrap_or_default();
        let from = (self.from as usize).min(all.len());
        String::from_utf8_lossy(&all[from..]).into_owned()
    }

    /// Waits until this incarnation wrote `needle`; fails if it exits first.
    pub fn wait_line(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.output().contains(needle) {
                return Ok(());
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                bail!(
                    "exited ({st}) before logging {needle:?}:\n{}",
                    tail(&self.output())
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "did not log {needle:?} within {timeout:?}:\n{}",
                    tail(&self.output())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a signal by name ("KILL", "STOP", "CONT").
    pub fn signal(&self, name: &str) -> anyhow::Result<()> {
        let st = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .context("run kill")?;
        if !st.success() {
            bail!("kill -{name} {} failed: {st}", self.pid());
        }
        Ok(())
    }

    /// SIGKILL and reap.
    pub fn kill(mut self) -> anyhow::Result<()> {
        let _ = self.child.kill();
        self.child.wait().context("reap")?;
        Ok(())
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.signal("CONT");
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last lines of a log, for an error message.
fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
