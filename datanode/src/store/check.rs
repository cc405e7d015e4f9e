//! Volume checks: each volume's filesystem is asked for its size and free space (statvfs)
//! in the background, under a deadline.
//!
//! statvfs on a dying disk or a hung mount can block for ever, in the kernel and
//! uninterruptibly. Asked inline (node reports, metrics, the choice of a volume for a new
//! container) it would hang the heartbeat loop, so the SCM would declare the whole node
//! dead for one bad disk. So:
//! * readers only take the last reading ([`Statfs`]) and never touch the disk;
//! * [`run`] refreshes the readings every heartbeat interval, each statvfs on a thread of
//!   its own (not a tokio worker, and not the blocking pool either: a runtime waits for its
//!   blocking tasks when it shuts down, and this one may never return);
//! * a volume whose statvfs does not answer within `datanode.volume_check_timeout` is
//!   marked failed, like a volume with I/O errors ([`super::faults`]): for the life of the
//!   process (a restart checks it afresh), reported failed to the SCM, which stops placing
//!   data there and re-replicates its containers. Its stuck thread is left behind; a failed
//!   volume is never checked again, so at most one thread per volume is lost.
//!
//! The `dn-statvfs-hang` failpoint (payload: a volume path suffix; none: every volume)
//! makes statvfs hang while it is configured.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{ContainerStore, Volume};

/// The last statvfs reading of a volume: (filesystem size, bytes free), `None` before the
/// first check or when statvfs failed.
#[derive(Debug, Default)]
pub struct Statfs(Mutex<Option<(u64, u64)>>);

impl Statfs {
    /// A reading taken now, inline (blocking).
    pub fn read(root: &Path) -> Self {
        Self(Mutex::new(statvfs(root)))
    }

    pub fn get(&self) -> Option<(u64, u64)> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set(&self, v: Option<(u64, u64)>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }
}

/// Size and free bytes of the filesystem holding `p`. Blocking, possibly for ever.
fn statvfs(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    hang_failpoint(p);
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `s` a properly sized out-parameter.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    if r != 0 {
        return None;
    }
    let frsize = s.f_frsize as u64;
    Some((
        (s.f_blocks as u64).saturating_mul(frsize),
        (s.f_bavail as u64).saturating_mul(frsize),
    ))
}

#[cfg(not(feature = "failpoints"))]
fn hang_failpoint(_root: &Path) {}

/// Holds while `dn-statvfs-hang` names this volume, as a hung statvfs would.
#[cfg(feature = "failpoints")]
fn hang_failpoint(root: &Path) {
    let hung = || {
        fail::eval("dn-statvfs-hang", |arg| {
            arg.is_none_or(|suffix| root.to_string_lossy().ends_with(suffix.trim()))
        })
        .unwrap_or(false)
    };
    while hung() {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What one check of a volume found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// statvfs answered (`None`: with an error).
    Answered(Option<(u64, u64)>),
    /// statvfs did not answer within the timeout.
    Hung,
}

/// Runs statvfs for `root` on a thread of its own and waits at most `timeout` for it.
pub async fn probe(root: PathBuf, timeout: Duration) -> std::io::Result<Checked> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("volume-check".into())
        .spawn(move || {
            let _ = tx.send(statvfs(&root));
        })?;
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(space)) => Ok(Checked::Answered(space)),
        Ok(Err(_)) => Err(std::io::Error::other("the volume check thread died")),
        Err(_) => Ok(Checked::Hung),
    }
}

/// Checks one volume and records what it found.
async fn check(v: &Volume, timeout: Duration) {
    match probe(v.root().to_path_buf(), timeout).await {
        Ok(Checked::Answered(space)) => v.statfs().set(space),
        Ok(Checked::Hung) => v.mark_failed(&format!(
            "volume check: statvfs did not answer within {timeout:?}"
        )),
        // No thread for the check (a thread limit): says nothing about the disk.
        Err(e) => tracing::warn!(volume = %v.root().display(), error = %e, "volume check not run"),
    }
}

/// Checks every volume not failed yet, all at once (one hung volume delays no other's
/// reading by more than the timeout).
pub async fn check_all(store: &ContainerStore, timeout: Duration) {
    let checks = store
        .volumes()
        .iter()
        .filter(|v| !v.is_failed())
        .map(|v| check(v, timeout));
    futures::future::join_all(checks).await;
}

/// Checks every volume each `every` until `stop`.
pub async fn run(
    store: std::sync::Arc<ContainerStore>,
    every: Duration,
    timeout: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = check_all(&store, timeout) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_probe_reads_the_filesystem_of_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let r = probe(dir.path().to_path_buf(), Duration::from_secs(30))
            .await
            .unwrap();
        let Checked::Answered(Some((size, free))) = r else {
            panic!("{r:?}");
        };
        assert!(size > 0 && free <= size, "{size} {free}");
        let r = probe("/no/such/dir".into(), Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(r, Checked::Answered(None));
    }
}
