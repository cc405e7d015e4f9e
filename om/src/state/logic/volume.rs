//! Volumes: create one, delete an empty one.

use rozone_raft::Txn;

use super::shared::{get_volume, put, refuse, Applied};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::Volume;
use crate::state::{buckets_prefix, CF_BUCKETS, CF_VOLUMES};

/// `CreateVolume`: refused when the name is taken.
pub(super) fn create(
    txn: &mut Txn<'_>,
    name: String,
    owner: String,
    quota_bytes: Option<u64>,
    now_ms: u64,
) -> Applied {
    if get_volume(txn, &name)?.is_some() {
        return refuse(Refusal::VolumeExists { volume: name });
    }
    let v = Volume {
        name: name.clone(),
        owner,
        quota_bytes,
        used_bytes: 0,
        bucket_count: 0,
        created_ms: now_ms,
        modified_ms: now_ms,
    };
    put(txn, CF_VOLUMES, name.into_bytes(), &v)?;
    Ok(OmResponse::VolumeCreated(v))
}

/// `DeleteVolume`: refused while the volume has buckets.
pub(super) fn delete(txn: &mut Txn<'_>, name: String) -> Applied {
    let Some(v) = get_volume(txn, &name)? else {
        return refuse(Refusal::VolumeNotFound { volume: name });
    };
    // Count rows, not the counter: the rows are the truth a delete must respect.
    let any = txn.scan_prefix(CF_BUCKETS, &buckets_prefix(&name), None, 1)?;
    if !any.is_empty() {
        return refuse(Refusal::VolumeNotEmpty {
            volume: name,
            buckets: v.bucket_count.max(1),
        });
    }
    txn.delete(CF_VOLUMES, name.into_bytes());
    Ok(OmResponse::VolumeDeleted)
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::state::read;
    use crate::state::request::{OmRequest, OmResponse, Refusal};
    use crate::state::types::Volume;

    #[test]
    fn create_volume_stores_an_empty_volume_and_refuses_a_taken_name() {
        let mut f = Fixture::new();
        let want = Volume {
            name: "v".into(),
            owner: "alice".into(),
            quota_bytes: Some(100),
            used_bytes: 0,
            bucket_count: 0,
            created_ms: NOW,
            modified_ms: NOW,
        };
        let create = |owner: &str| OmRequest::CreateVolume {
            name: "v".into(),
            owner: owner.into(),
            quota_bytes: Some(100),
            now_ms: NOW,
        };
        assert_eq!(
            f.apply(create("alice")),
            OmResponse::VolumeCreated(want.clone())
        );
        assert_eq!(
            f.refused(create("bob")),
            Refusal::VolumeExists { volume: "v".into() }
        );
        assert_eq!(read::volume(&f.db, "v").unwrap(), Some(want));
    }

    #[test]
    fn delete_volume_refuses_a_missing_or_non_empty_volume() {
        let mut f = Fixture::new();
        let delete = || OmRequest::DeleteVolume { name: "v".into() };
        assert_eq!(
            f.refused(delete()),
            Refusal::VolumeNotFound { volume: "v".into() }
        );
        f.volume("v");
        f.bucket("v", "b");
        assert_eq!(
            f.refused(delete()),
            Refusal::VolumeNotEmpty {
                volume: "v".into(),
                buckets: 1
            }
        );
        assert!(read::volume(&f.db, "v").unwrap().is_some());
        f.apply(OmRequest::DeleteBucket {
            volume: "v".into(),
            name: "b".into(),
        });
        assert_eq!(f.apply(delete()), OmResponse::VolumeDeleted);
        assert_eq!(read::volume(&f.db, "v").unwrap(), None);
    }
}
