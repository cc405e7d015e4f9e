//! Ids of the cluster's objects, and their one conversion from the wire.
//!
//! Container, pipeline and datanode ids are plain `u64` aliases (the SCM hands them out from
//! replicated sequences and never hands out 0); a block is a (container id, local id) pair.
//! A 0 arriving from the wire means "not set" (proto3 has no presence for scalars), so the
//! conversions refuse it, naming the field.

use std::fmt;

use rozone_proto::{datanode as pb_dn, scm as pb_scm};
use serde::{Deserialize, Serialize};

/// A container's id (the SCM's `containerId` sequence; never 0).
pub type ContainerId = u64;
/// A pipeline's id (never 0).
pub type PipelineId = u64;
/// A datanode's node id (never 0).
pub type DatanodeId = u64;

/// A field of a request that is missing or malformed: `field` names it the way the wire
/// does (`block.chunks[2].len`), `problem` says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct Invalid {
    pub field: String,
    pub problem: String,
}

impl Invalid {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The field is absent.
    pub fn missing(field: impl Into<String>) -> Self {
        Self::new(field, "is missing")
    }

    /// Names the field inside `outer` (`block_id.local_id` from `local_id`).
    pub fn within(mut self, outer: &str) -> Self {
        self.field = if self.field.is_empty() {
            outer.to_string()
        } else {
            format!("{outer}.{}", self.field)
        };
        self
    }
}

/// A required sub-message: `None` is refused as missing.
pub fn required<T>(v: Option<T>, field: &str) -> Result<T, Invalid> {
    v.ok_or_else(|| Invalid::missing(field))
}

/// An id that must be set (above 0).
pub fn nonzero(v: u64, field: &str) -> Result<u64, Invalid> {
    if v == 0 {
        Err(Invalid::new(field, "must be set (above 0)"))
    } else {
        Ok(v)
    }
}

/// A block: (container id, local id). The local id comes from the SCM's replicated
/// `localId` sequence, so a block id never repeats, across containers and leaders.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
pub struct BlockId {
    pub container_id: ContainerId,
    pub local_id: u64,
}

impl BlockId {
    pub fn new(container_id: ContainerId, local_id: u64) -> Self {
        Self {
            container_id,
            local_id,
        }
    }

    fn checked(container_id: u64, local_id: u64) -> Result<Self, Invalid> {
        Ok(Self {
            container_id: nonzero(container_id, "container_id")?,
            local_id: nonzero(local_id, "local_id")?,
        })
    }

    /// A required block id field of a request: present, with both ids set.
    pub fn from_field<P: WireBlockId>(v: Option<P>, field: &str) -> Result<Self, Invalid> {
        let (c, l) = required(v, field)?.parts();
        Self::checked(c, l).map_err(|e| e.within(field))
    }
}

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.container_id, self.local_id)
    }
}

/// A block id as one of the protocols carries it (scm.proto and datanode.proto each
/// declare one).
pub trait WireBlockId {
    /// (container id, local id), unchecked.
    fn parts(&self) -> (u64, u64);
}

macro_rules! wire_block_id {
    ($pb:ty) => {
        impl WireBlockId for $pb {
            fn parts(&self) -> (u64, u64) {
                (self.container_id, self.local_id)
            }
        }

        impl TryFrom<$pb> for BlockId {
            type Error = Invalid;
            fn try_from(b: $pb) -> Result<Self, Invalid> {
                Self::checked(b.container_id, b.local_id)
            }
        }

        impl From<BlockId> for $pb {
            fn from(b: BlockId) -> Self {
                Self {
                    container_id: b.container_id,
                    local_id: b.local_id,
                }
            }
        }
    };
}

wire_block_id!(pb_scm::BlockId);
wire_block_id!(pb_dn::BlockId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_or_missing_ids_are_refused_naming_the_field() {
        let e = BlockId::from_field(None::<pb_dn::BlockId>, "block_id").unwrap_err();
        assert_eq!(e.to_string(), "block_id is missing");
        let e =
            BlockId::from_field(Some(pb_scm::BlockId::from(BlockId::new(1, 0))), "b").unwrap_err();
        assert_eq!(e.to_string(), "b.local_id must be set (above 0)");
        let e = BlockId::try_from(pb_dn::BlockId {
            container_id: 0,
            local_id: 3,
        })
        .unwrap_err();
        assert_eq!(e.field, "container_id");
        let ok = BlockId::from_field(Some(pb_dn::BlockId::from(BlockId::new(4, 5))), "b");
        assert_eq!(ok, Ok(BlockId::new(4, 5)));
        assert_eq!(BlockId::new(4, 5).to_string(), "4/5");
    }
}
