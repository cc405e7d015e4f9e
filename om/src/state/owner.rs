//! Owners: who, besides admins, may touch a volume or a bucket (docs/security.md, "Owners").
//!
//! A volume's owner is the `owner` of its row; a bucket's is the user in `CF_BUCKET_OWNERS`
//! (set when a client certificate's user created it) or, without a row, its volume's owner.
//! A user may change a volume it owns, and a bucket (its keys included) it owns or whose
//! volume it owns. The same decision serves the state machine (over the batch's `Txn`, so
//! it is the same on every member) and the reads a node serves (over its database).
//!
//! Something that does not exist is not denied: the command or read then says "not found"
//! as it would for anyone, and there is nothing of another user's to protect.

use std::io;

use rozone_raft::Rows;

use super::types::{Bucket, Volume};
use super::{bucket_key, CF_BUCKETS, CF_BUCKET_OWNERS, CF_VOLUMES};

/// Whether a user may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Allowed,
    Denied,
}

impl Access {
    fn of(allowed: bool) -> Access {
        if allowed {
            Access::Allowed
        } else {
            Access::Denied
        }
    }
}

/// The user recorded as the bucket's creator, if any.
pub fn bucket_owner<R: Rows>(rows: &R, volume: &str, bucket: &str) -> io::Result<Option<String>> {
    rows.get_row(CF_BUCKET_OWNERS, &bucket_key(volume, bucket))
}

/// Who owns each of `buckets`, as replies show it: the user who created it, or else its
/// volume's owner (read once for a run of buckets of one volume, as a listing is).
pub fn shown_owners<R: Rows>(rows: &R, buckets: &[Bucket]) -> io::Result<Vec<String>> {
    let mut volume_owner: Option<(&str, String)> = None;
    let mut out = Vec::with_capacity(buckets.len());
    for b in buckets {
        if let Some(user) = bucket_owner(rows, &b.volume, &b.name)? {
            out.push(user);
            continue;
        }
        let owner = match &volume_owner {
            Some((v, owner)) if *v == b.volume => owner.clone(),
            _ => {
                let owner = rows
                    .get_row::<Volume>(CF_VOLUMES, b.volume.as_bytes())?
                    .map(|v| v.owner)
                    .unwrap_or_default();
                volume_owner = Some((&b.volume, owner.clone()));
                owner
            }
        };
        out.push(owner);
    }
    Ok(out)
}

/// May `user` change volume `volume` (delete it, create buckets in it)?
pub fn volume_access<R: Rows>(rows: &R, user: &str, volume: &str) -> io::Result<Access> {
    Ok(
        match rows.get_row::<Volume>(CF_VOLUMES, volume.as_bytes())? {
            None => Access::Allowed,
            Some(v) => Access::of(v.owner == user),
        },
    )
}

/// May `user` touch bucket `volume/bucket` and its keys?
pub fn bucket_access<R: Rows>(
    rows: &R,
    user: &str,
    volume: &str,
    bucket: &str,
) -> io::Result<Access> {
    if rows
        .get_bytes(CF_BUCKETS, &bucket_key(volume, bucket))?
        .is_none()
    {
        return Ok(Access::Allowed);
    }
    if bucket_owner(rows, volume, bucket)?.as_deref() == Some(user) {
        return Ok(Access::Allowed);
    }
    volume_access(rows, user, volume)
}
