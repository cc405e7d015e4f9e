//! Snapshots are RocksDB checkpoints (hard links, cheap) with a manifest of every file's
//! size and CRC32, stored under `<group>/snapshots/<id>/`.
//!
//! Transfer is a pull: the leader offers a snapshot, the follower downloads it into a staging
//! directory, checks every file against the manifest and checks that the applied log id
//! inside the checkpoint equals the offered meta. Only a verified local directory is handed
//! to openraft, whose install is then a local atomic swap (a failed install is fatal there).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::types::{SnapshotMeta, TypeConfig};

/// A snapshot as openraft passes it: meta plus our checkpoint directory.
pub type Snap = openraft::alias::SnapshotOf<TypeConfig, Checkpoint>;

/// The snapshot data openraft moves around: a local directory holding `db/` (the
/// checkpoint) and `MANIFEST.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub id: String,
    pub dir: PathBuf,
}

impl Checkpoint {
    pub fn db_dir(&self) -> PathBuf {
        self.dir.join(DB_DIR)
    }
}

pub(crate) const DB_DIR: &str = "db";
pub(crate) const MANIFEST: &str = "MANIFEST.json";

/// One file of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    pub size: u64,
    pub crc32: u32,
}

/// What a snapshot holds, written beside the checkpoint and sent first on download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub snapshot_id: String,
    pub meta: SnapshotMeta,
    pub files: Vec<FileEntry>,
}

/// Rejects ids and file names that could escape the snapshot directory.
pub(crate) fn check_name(kind: &str, name: &str) -> io::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid {kind} {name:?}"),
        ))
    }
}

/// CRC32 and size of a file, read in 1 MiB blocks.
pub(crate) fn file_crc(path: &Path) -> io::Result<(u64, u32)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((size, h.finalize()))
}

/// Lists every file of a checkpoint directory with its size and CRC.
pub(crate) fn list_files(db_dir: &Path) -> io::Result<Vec<FileEntry>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(db_dir)? {
        let e = e?;
        if !e.file_type()?.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let (size, crc32) = file_crc(&e.path())?;
        files.push(FileEntry { name, size, crc32 });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

pub(crate) fn write_manifest(dir: &Path, m: &Manifest) -> io::Result<()> {
    let tmp = dir.join("MANIFEST.json.tmp");
    let body = serde_json::to_vec_pretty(m).map_err(io::Error::other)?;
    std::fs::write(&tmp, body)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(MANIFEST))
}

pub(crate) fn read_manifest(dir: &Path) -> io::Result<Manifest> {
    let body = std::fs::read(dir.join(MANIFEST))?;
    serde_json::from_slice(&body).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad manifest in {}: {e}", dir.display()),
        )
    })
}

/// Checks every file of a downloaded checkpoint against the manifest (size and CRC), and that
/// no extra file is present.
pub(crate) fn verify_files(db_dir: &Path, m: &Manifest) -> io::Result<()> {
    let have = list_files(db_dir)?;
    let mut want = m.files.clone();
    want.sort_by(|a, b| a.name.cmp(&b.name));
    if have != want {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "checkpoint {} does not match its manifest ({} files on disk, {} listed)",
                m.snapshot_id,
                have.len(),
                want.len()
            ),
        ));
    }
    Ok(())
}

/// Fsyncs a directory so the entries created, renamed or removed in it are durable: the one
/// "fsync dir" of rozone (the daemons use it too, as `rozone_raft::sync_dir`).
///
/// Failpoint `sync-dir` (tests): a directory whose path ends with the failpoint's payload
/// (every directory without one) fails to sync.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(feature = "failpoints")]
    if let Some(suffix) = fail::eval("sync-dir", |arg| arg) {
        if suffix.is_none_or(|s| dir.ends_with(s)) {
            return Err(io::Error::other(format!(
                "failpoint sync-dir: {}",
                dir.display()
            )));
        }
    }
    std::fs::File::open(dir)?.sync_all()
}

/// The snapshots of one group on this node: only the newest is kept and served.
pub struct SnapshotStore {
    root: PathBuf,
    current: Mutex<Option<(Manifest, Checkpoint)>>,
}

impl SnapshotStore {
    /// Opens `root`, keeps the newest complete snapshot and removes everything else
    /// (half-built or superseded ones).
    pub fn open(root: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let mut best: Option<(Manifest, Checkpoint)> = None;
        let mut others = Vec::new();
        for e in std::fs::read_dir(root)? {
            let path = e?.path();
            match read_manifest(&path) {
                Ok(m) => {
                    let cp = Checkpoint {
                        id: m.snapshot_id.clone(),
                        dir: path.clone(),
                    };
                    let newer = best
                        .as_ref()
                        .is_none_or(|(b, _)| m.meta.last_log_id > b.meta.last_log_id);
                    if newer {
                        if let Some((_, old)) = best.replace((m, cp)) {
                            others.push(old.dir);
                        }
                    } else {
                        others.push(path);
                    }
                }
                Err(_) => others.push(path),
            }
        }
        for p in others {
            remove_path(&p);
        }
        Ok(Self {
            root: root.to_path_buf(),
            current: Mutex::new(best),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A fresh directory for building a snapshot, inside the store (same filesystem).
    pub(crate) fn tmp_dir(&self, id: &str) -> PathBuf {
        self.root.join(format!("tmp-{id}"))
    }

    /// The newest snapshot, if any.
    pub fn current(&self) -> Option<(Manifest, Checkpoint)> {
        self.current.lock().ok().and_then(|g| g.clone())
    }

    /// The snapshot with this id, if it is the one kept.
    pub fn get(&self, id: &str) -> Option<(Manifest, Checkpoint)> {
        self.current().filter(|(m, _)| m.snapshot_id == id)
    }

    /// Moves a complete snapshot directory (manifest written) into place and makes it
    /// current; the previous one is removed.
    pub(crate) fn publish(&self, built: &Path, m: Manifest) -> io::Result<Checkpoint> {
        let dest = self.root.join(&m.snapshot_id);
        if dest.exists() {
            remove_path(&dest);
        }
        std::fs::rename(built, &dest)?;
        sync_dir(&self.root)?;
        let cp = Checkpoint {
            id: m.snapshot_id.clone(),
            dir: dest,
        };
        let old = {
            let mut g = self
                .current
                .lock()
                .map_err(|_| io::Error::other("snapshot store lock poisoned"))?;
            g.replace((m, cp.clone()))
        };
        if let Some((_, old)) = old {
            if old.dir != cp.dir {
                remove_path(&old.dir);
            }
        }
        Ok(cp)
    }
}

pub(crate) fn remove_path(p: &Path) {
    let r = if p.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    };
    if let Err(e) = r {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(path = %p.display(), error = %e, "could not remove");
        }
    }
}

/// Hard-links (or copies, across filesystems) every file of `src` into a new `dst`.
pub(crate) fn link_dir(src: &Path, dst: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        if !e.file_type()?.is_file() {
            continue;
        }
        let to = dst.join(e.file_name());
        if std::fs::hard_link(e.path(), &to).is_err() {
            std::fs::copy(e.path(), &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_escape_are_rejected() {
        assert!(check_name("file", "000012.sst").is_ok());
        assert!(check_name("file", "CURRENT").is_ok());
        for bad in ["", ".", "..", "../x", "a/b", "x\0"] {
            assert!(check_name("file", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn verify_detects_a_changed_byte() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), b"hello").unwrap();
        let m = Manifest {
            snapshot_id: "s".into(),
            meta: Default::default(),
            files: list_files(d.path()).unwrap(),
        };
        verify_files(d.path(), &m).unwrap();
        std::fs::write(d.path().join("a"), b"hellp").unwrap();
        assert!(verify_files(d.path(), &m).is_err());
    }
}
