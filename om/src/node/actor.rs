//! Who a client call acts for (docs/security.md, "Owners"): a client certificate's user,
//! whose writes are replicated wrapped in `AsUser` (checked at apply) and whose key reads
//! are checked here; or a trusted caller (an admin, the S3 gateway, any caller of an
//! insecure cluster), whose calls go through as they are.

use rozone_raft::Rows;

use crate::error::OmError;
use crate::state::owner::{bucket_access, Access};
use crate::state::{OmRequest, Refusal};

/// The actor of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// No owner checks: admins, the S3 gateway (it authorizes S3 users itself), and every
    /// caller of an insecure cluster (there is no identity to check).
    Trusted,
    /// A user (`client-7`, from the certificate): touches only what it owns.
    User(String),
}

impl Actor {
    /// `req` as replicated for this actor.
    pub fn wrap(&self, req: OmRequest) -> OmRequest {
        match self {
            Actor::Trusted => req,
            Actor::User(user) => OmRequest::AsUser {
                user: user.clone(),
                request: Box::new(req),
            },
        }
    }

    /// The owner a new volume gets: the user itself; for a trusted caller `asked`, or
    /// "root" when it named none.
    pub fn volume_owner(&self, asked: String) -> String {
        match self {
            Actor::User(user) if asked.is_empty() => user.clone(),
            // A user naming someone else is refused at apply (the same on every member).
            Actor::User(_) => asked,
            Actor::Trusted if asked.is_empty() => "root".to_string(),
            Actor::Trusted => asked,
        }
    }

    /// Refuses unless this actor may touch bucket `volume/bucket` and its keys (a missing
    /// bucket is the caller's "not found" to meet, not a refusal). `action` is built only
    /// for a refusal.
    pub fn check_bucket<R: Rows>(
        &self,
        rows: &R,
        volume: &str,
        bucket: &str,
        action: impl FnOnce() -> String,
    ) -> Result<(), OmError> {
        let Actor::User(user) = self else {
            return Ok(());
        };
        match bucket_access(rows, user, volume, bucket)? {
            Access::Allowed => Ok(()),
            Access::Denied => Err(Refusal::PermissionDenied {
                user: user.clone(),
                action: action(),
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_owns_what_it_creates_and_its_writes_are_wrapped() {
        let u = Actor::User("client-7".into());
        assert_eq!(u.volume_owner(String::new()), "client-7");
        assert_eq!(u.volume_owner("alice".into()), "alice");
        assert_eq!(Actor::Trusted.volume_owner(String::new()), "root");
        assert_eq!(Actor::Trusted.volume_owner("alice".into()), "alice");
        let req = OmRequest::DeleteVolume { name: "v".into() };
        assert_eq!(Actor::Trusted.wrap(req.clone()), req);
        assert_eq!(
            u.wrap(req.clone()),
            OmRequest::AsUser {
                user: "client-7".into(),
                request: Box::new(req)
            }
        );
    }
}
