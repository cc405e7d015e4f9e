//! A read's options decoded into the node's [`ReadOptions`], and who served it
//! ([`ReadInfo`]) encoded.

use rozone_proto::om as pb;

use crate::error::OmError;
use crate::node::types::{Consistency, ReadInfo, ReadOptions};

/// A read's options; absent ones are the defaults (DEFAULT consistency).
pub fn read_options(o: Option<pb::ReadOptions>) -> Result<ReadOptions, OmError> {
    let o = o.unwrap_or_default();
    let consistency = match pb::ReadConsistency::try_from(o.consistency) {
        Ok(pb::ReadConsistency::Default) => Consistency::Default,
        Ok(pb::ReadConsistency::LinearizableLeaderOnly) => Consistency::LinearizableLeaderOnly,
        Ok(pb::ReadConsistency::LinearizableAllowFollower) => {
            Consistency::LinearizableAllowFollower
        }
        Ok(pb::ReadConsistency::LocalLease) => Consistency::LocalLease,
        Err(_) => {
            return Err(OmError::InvalidArgument(format!(
                "unknown read consistency {}",
                o.consistency
            )))
        }
    };
    Ok(ReadOptions {
        consistency,
        lease_time_ms: o.lease_time_ms,
        log_limit: o.log_limit,
    })
}

fn consistency_pb(c: Consistency) -> pb::ReadConsistency {
    match c {
        Consistency::Default => pb::ReadConsistency::Default,
        Consistency::LinearizableLeaderOnly => pb::ReadConsistency::LinearizableLeaderOnly,
        Consistency::LinearizableAllowFollower => pb::ReadConsistency::LinearizableAllowFollower,
        Consistency::LocalLease => pb::ReadConsistency::LocalLease,
    }
}

impl From<ReadInfo> for pb::ReadInfo {
    fn from(i: ReadInfo) -> Self {
        Self {
            served_by: i.served_by,
            applied_index: i.applied_index,
            consistency: consistency_pb(i.consistency) as i32,
        }
    }
}
