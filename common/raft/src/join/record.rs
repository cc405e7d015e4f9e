//! The join-state record: which ring this data dir belongs to and how far it got into it.
//!
//! One small text file next to the group's databases (`<group dir>/join-state`), written
//! to a temporary file, fsync'd, renamed over the old one and the directory fsync'd, so a
//! crash leaves either the old record or the new one. The format is versioned and carries
//! a CRC: a torn or edited record is a clear error at start, never a silent "no ring".
//!
//! Format (v1), one `key=value` per line after the header, then the CRC of everything
//! before the `crc32=` line:
//! ```text
//! rozone-join-state v1
//! ring_id=<32 hex digits>
//! node_id=<u64>
//! stage=founding|joining|member
//! origin=init|join|legacy
//! leader=<client address of the leader asked to add us; joining only>
//! crc32=<8 hex digits>
//! ```
//! Evolution is append-only: new keys may be added under a new version; a reader refuses
//! keys and versions it does not know, so a newer record is never misread by an older binary.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::types::NodeId;

/// The file name of the record inside the group dir.
pub const FILE: &str = "join-state";
const HEADER: &str = "rozone-join-state v1";

/// A ring's identity: random, 128 bits, stamped by the `--init` that created the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RingId(pub u128);

impl RingId {
    /// A fresh random ring id.
    pub fn random() -> Self {
        Self(rand::random::<u128>())
    }

    /// Parses the wire form; the empty string is "no ring id".
    pub fn parse_opt(s: &str) -> Result<Option<Self>, String> {
        if s.is_empty() {
            return Ok(None);
        }
        s.parse().map(Some)
    }
}

impl fmt::Display for RingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl std::str::FromStr for RingId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("ring id {s:?} is not 32 hex digits"));
        }
        u128::from_str_radix(s, 16)
            .map(Self)
            .map_err(|e| format!("ring id {s:?}: {e}"))
    }
}

/// How a member got into its ring (kept after it became a member: `--init` refuses a dir
/// that ever joined a ring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// This node created the ring with `--init`.
    Init,
    /// This node joined with `--bootstrap`.
    Join,
    /// Data written by a version without join records; stamped at its first start.
    Legacy,
}

/// How far this data dir got into its ring.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stage {
    /// `--init` stamped the ring but has not seen it initialised and led yet.
    Founding,
    /// `--bootstrap` began joining; the leader has not committed this node yet.
    Joining { leader: String },
    /// A member of the ring.
    Member { origin: Origin },
}

/// The record itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JoinRecord {
    pub ring_id: RingId,
    pub node_id: NodeId,
    pub stage: Stage,
}

/// A record that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("join-state record {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("join-state record {path} is corrupt ({why}); it says which ring this data belongs to, so the node will not start without it: restore it, or wipe the data dir and join the ring again")]
    Corrupt { path: PathBuf, why: String },
}

impl JoinRecord {
    pub fn encode(&self) -> String {
        let (stage, origin, leader) = match &self.stage {
            Stage::Founding => ("founding", "init", ""),
            Stage::Joining { leader } => ("joining", "join", leader.as_str()),
            Stage::Member { origin } => (
                "member",
                match origin {
                    Origin::Init => "init",
                    Origin::Join => "join",
                    Origin::Legacy => "legacy",
                },
                "",
            ),
        };
        let body = format!(
            "{HEADER}\nring_id={}\nnode_id={}\nstage={stage}\norigin={origin}\nleader={leader}\n",
            self.ring_id, self.node_id
        );
        let crc = crc32fast::hash(body.as_bytes());
        format!("{body}crc32={crc:08x}\n")
    }

    /// Decodes a record; every way it can be wrong is named.
    pub fn decode(text: &str) -> Result<Self, String> {
        let at = text.rfind("crc32=").ok_or("no crc32 line (torn write?)")?;
        let (body, crc_line) = text.split_at(at);
        let want = u32::from_str_radix(crc_line.trim_end().trim_start_matches("crc32="), 16)
            .map_err(|_| format!("bad crc32 line {:?}", crc_line.trim_end()))?;
        let got = crc32fast::hash(body.as_bytes());
        if want != got {
            return Err(format!(
                "crc32 mismatch: recorded {want:08x}, computed {got:08x}"
            ));
        }
        let mut lines = body.lines();
        match lines.next() {
            Some(HEADER) => {}
            Some(h) if h.starts_with("rozone-join-state ") => {
                return Err(format!("unknown version {h:?} (this binary reads v1)"))
            }
            other => return Err(format!("not a join-state record (first line {other:?})")),
        }
        let (mut ring, mut node, mut stage, mut origin, mut leader) =
            (None, None, None, None, None);
        for l in lines {
            let (k, v) = l.split_once('=').ok_or_else(|| format!("bad line {l:?}"))?;
            let slot = match k {
                "ring_id" => &mut ring,
                "node_id" => &mut node,
                "stage" => &mut stage,
                "origin" => &mut origin,
                "leader" => &mut leader,
                _ => return Err(format!("unknown key {k:?}")),
            };
            if slot.replace(v).is_some() {
                return Err(format!("key {k:?} twice"));
            }
        }
        fn need<'a>(v: Option<&'a str>, k: &str) -> Result<&'a str, String> {
            v.ok_or_else(|| format!("missing {k}"))
        }
        let ring_id: RingId = need(ring, "ring_id")?.parse()?;
        let node_id: NodeId = need(node, "node_id")?
            .parse()
            .map_err(|e| format!("node_id: {e}"))?;
        let origin = match need(origin, "origin")? {
            "init" => Origin::Init,
            "join" => Origin::Join,
            "legacy" => Origin::Legacy,
            o => return Err(format!("unknown origin {o:?}")),
        };
        let leader = need(leader, "leader")?;
        let stage = match (need(stage, "stage")?, origin) {
            ("founding", Origin::Init) => Stage::Founding,
            ("joining", Origin::Join) => Stage::Joining {
                leader: leader.to_string(),
            },
            ("member", origin) => Stage::Member { origin },
            (s, o) => return Err(format!("stage {s:?} with origin {o:?}")),
        };
        Ok(Self {
            ring_id,
            node_id,
            stage,
        })
    }

    /// Reads the record of `group_dir`; `None` when there is none.
    pub fn load(group_dir: &Path) -> Result<Option<Self>, RecordError> {
        let path = group_dir.join(FILE);
        let text = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RecordError::Io { path, source }),
        };
        let text = String::from_utf8(text).map_err(|_| RecordError::Corrupt {
            path: path.clone(),
            why: "not UTF-8".into(),
        })?;
        Self::decode(&text)
            .map(Some)
            .map_err(|why| RecordError::Corrupt { path, why })
    }

    /// Writes the record durably (temp file, fsync, rename, fsync of the dir).
    pub fn store(&self, group_dir: &Path) -> Result<(), RecordError> {
        let path = group_dir.join(FILE);
        let io = |source| RecordError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(group_dir).map_err(io)?;
        let tmp = group_dir.join(format!("{FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(self.encode().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io)?;
        crate::snapshot::sync_dir(group_dir).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(stage: Stage) -> JoinRecord {
        JoinRecord {
            ring_id: RingId(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
            node_id: 3,
            stage,
        }
    }

    #[test]
    fn every_stage_round_trips_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(JoinRecord::load(dir.path()).unwrap().is_none());
        for s in [
            Stage::Founding,
            Stage::Joining {
                leader: "127.0.0.1:9862".into(),
            },
            Stage::Member {
                origin: Origin::Init,
            },
            Stage::Member {
                origin: Origin::Join,
            },
            Stage::Member {
                origin: Origin::Legacy,
            },
        ] {
            let r = rec(s);
            r.store(dir.path()).unwrap();
            assert_eq!(JoinRecord::load(dir.path()).unwrap(), Some(r));
        }
    }

    #[test]
    fn corrupt_records_are_clear_errors() {
        let good = rec(Stage::Member {
            origin: Origin::Join,
        })
        .encode();
        let flipped = good.replace("node_id=3", "node_id=4");
        assert!(JoinRecord::decode(&flipped)
            .unwrap_err()
            .contains("crc32 mismatch"));
        let torn = &good[..good.len() / 2];
        assert!(JoinRecord::decode(torn).unwrap_err().contains("no crc32"));
        let v2 = good.replace("v1", "v2");
        let v2 = JoinRecord::decode(&v2).unwrap_err();
        assert!(v2.contains("crc32") || v2.contains("version"), "{v2}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "garbage").unwrap();
        let e = JoinRecord::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is corrupt"), "{e}");
        assert!(e.contains("wipe the data dir"), "{e}");
    }

    #[test]
    fn a_well_formed_but_unknown_version_or_key_is_refused() {
        let body = "rozone-join-state v2\nring_id=00000000000000000000000000000001\n";
        let text = format!("{body}crc32={:08x}\n", crc32fast::hash(body.as_bytes()));
        assert!(JoinRecord::decode(&text)
            .unwrap_err()
            .contains("unknown version"));
        let body = format!("{HEADER}\nring_id=00000000000000000000000000000001\nnew=1\n");
        let text = format!("{body}crc32={:08x}\n", crc32fast::hash(body.as_bytes()));
        assert!(JoinRecord::decode(&text)
            .unwrap_err()
            .contains("unknown key"));
    }

    #[test]
    fn ring_ids_parse_strictly() {
        let r = RingId::random();
        assert_eq!(r.to_string().parse::<RingId>(), Ok(r));
        assert_eq!(RingId::parse_opt(""), Ok(None));
        assert!("xyz".parse::<RingId>().is_err());
        assert!("1".parse::<RingId>().is_err());
    }
}
