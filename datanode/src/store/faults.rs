//! Disk faults per volume: which I/O errors condemn a volume, which only mean "full", and
//! which are transient and condemn nothing.
//!
//! * **Failed** (EIO, EROFS, ENXIO, ENODEV; a RocksDB write error other than "no space",
//!   which leaves the volume's DB read-only): the volume is failed for the life of the
//!   process. Its containers are no longer served or reported (the SCM sees them lost and
//!   re-replicates them), no new container goes there, and the node report says `failed`.
//! * **Full** (ENOSPC, EDQUOT): the write is refused with `DISK_FULL`, nothing is marked
//!   UNHEALTHY, and the volume reports no remaining space (so the SCM places elsewhere)
//!   until a data write on it succeeds again or a probe shows space was freed (at most every
//!   [`PROBE_EVERY`], a [`PROBE_BYTES`] file is written, synced and removed: free-space
//!   readings alone would say "freed" whenever anything else on the disk shrinks).
//! * **Transient** (EMFILE, ENFILE, EACCES, EINTR, EAGAIN, anything else): the operation fails
//!   with `IO_ERROR`; no container and no volume is condemned.
//!
//! The `dn-disk-fault` failpoint (payload `<eio|enospc|emfile>[:<volume path suffix>]`)
//! makes file I/O on matching volumes fail with that errno, so every class is testable.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How an I/O error affects its volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Transient,
    Full,
    Failed,
}

/// How often a full volume probes whether space was freed.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// Bytes a probe writes: a volume that cannot take this much stays full.
pub const PROBE_BYTES: usize = 1 << 20;

/// The class of a file I/O error.
pub fn classify(e: &io::Error) -> Fault {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => Fault::Full,
        Some(libc::EIO) | Some(libc::EROFS) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
            Fault::Failed
        }
        _ => Fault::Transient,
    }
}

/// The class of a RocksDB write error, from its message (the only form RocksDB gives): an
/// I/O error or corruption leaves the DB refusing writes (its background error), so the
/// volume failed, unless it was "no space"; busy/try-again/timeouts are transient.
pub fn classify_db(message: &str) -> Fault {
    let lower = message.to_ascii_lowercase();
    if lower.contains("no space left") || lower.contains("nospace") {
        Fault::Full
    } else if lower.starts_with("io error") || lower.starts_with("corruption") {
        Fault::Failed
    } else {
        Fault::Transient
    }
}

/// The health of one volume (shared by every thread using it).
#[derive(Debug, Default)]
pub struct VolumeHealth {
    /// Why the volume failed; `None` while it works.
    failed: Mutex<Option<String>>,
    /// Set when the failure was seen by the reports (its containers were reported gone).
    announced: AtomicBool,
    /// While full: when it was last found full (ENOSPC, or a failed probe).
    full: Mutex<Option<Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl VolumeHealth {
    pub fn failed(&self) -> Option<String> {
        lock(&self.failed).clone()
    }

    pub fn is_failed(&self) -> bool {
        lock(&self.failed).is_some()
    }

    /// Marks the volume failed (the first reason is kept). Returns whether it was new.
    pub fn fail(&self, why: &str) -> bool {
        let mut f = lock(&self.failed);
        if f.is_some() {
            return false;
        }
        *f = Some(why.to_string());
        true
    }

    /// True once after the volume failed: the caller reports its containers gone.
    pub fn take_newly_failed(&self) -> bool {
        self.is_failed() && !self.announced.swap(true, Ordering::SeqCst)
    }

    /// Records ENOSPC.
    pub fn set_full(&self) {
        *lock(&self.full) = Some(Instant::now());
    }

    /// A data write succeeded: the volume is not full.
    pub fn wrote(&self) {
        *lock(&self.full) = None;
    }

    /// Whether the volume is full. Once `every` has passed since it was last found full,
    /// `probe` (true: space was freed) decides again.
    pub fn is_full(&self, every: Duration, probe: impl FnOnce() -> bool) -> bool {
        let mut f = lock(&self.full);
        match *f {
            None => false,
            Some(at) if at.elapsed() < every => true,
            Some(_) if probe() => {
                *f = None;
                false
            }
            Some(_) => {
                *f = Some(Instant::now());
                true
            }
        }
    }
}

/// The `dn-disk-fault` failpoint for a volume at `root`: `Err` with the configured errno
/// when the payload's path suffix (if any) matches.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn injected(root: &std::path::Path) -> io::Result<()> {
    fail::fail_point!("dn-disk-fault", |arg: Option<String>| {
        let arg = arg.unwrap_or_default();
        let (kind, suffix) = arg.split_once(':').unwrap_or((arg.as_str(), ""));
        if !suffix.is_empty() && !root.to_string_lossy().ends_with(suffix) {
            return Ok(());
        }
        let errno = match kind {
            "enospc" => libc::ENOSPC,
            "emfile" => libc::EMFILE,
            "eacces" => libc::EACCES,
            _ => libc::EIO,
        };
        Err(io::Error::from_raw_os_error(errno))
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_by_errno_and_db_message() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert_eq!(classify(&e(libc::EIO)), Fault::Failed);
        assert_eq!(classify(&e(libc::EROFS)), Fault::Failed);
        assert_eq!(classify(&e(libc::ENOSPC)), Fault::Full);
        for n in [
            libc::EMFILE,
            libc::ENFILE,
            libc::EACCES,
            libc::EINTR,
            libc::EAGAIN,
        ] {
            assert_eq!(classify(&e(n)), Fault::Transient, "errno {n}");
        }
        assert_eq!(classify(&io::Error::other("x")), Fault::Transient);
        assert_eq!(
            classify_db("IO error: No space left on device: /v/db/000012.log"),
            Fault::Full
        );
        assert_eq!(
            classify_db("IO error: While appending to file: /v/db/000012.log: Input/output error"),
            Fault::Failed
        );
        assert_eq!(
            classify_db("Corruption: block checksum mismatch"),
            Fault::Failed
        );
        assert_eq!(classify_db("Resource busy: "), Fault::Transient);
    }

    #[test]
    fn full_clears_on_a_write_or_when_a_probe_finds_space() {
        let h = VolumeHealth::default();
        let never = |_| -> bool { panic!("probed a volume that is not full") };
        assert!(!h.is_full(Duration::ZERO, || never(())));
        h.set_full();
        // Not probed again within the interval.
        assert!(h.is_full(Duration::from_secs(3600), || never(())));
        assert!(h.is_full(Duration::ZERO, || false));
        assert!(!h.is_full(Duration::ZERO, || true));
        assert!(!h.is_full(Duration::ZERO, || never(())));
        h.set_full();
        h.wrote();
        assert!(!h.is_full(Duration::ZERO, || never(())));
        assert!(!h.take_newly_failed());
        assert!(h.fail("EIO"));
        assert!(!h.fail("again"));
        assert_eq!(h.failed().as_deref(), Some("EIO"));
        assert!(h.take_newly_failed());
        assert!(!h.take_newly_failed());
    }
}
