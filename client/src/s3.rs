//! S3 credentials on the OM (`OmS3`): get-or-create a user's secret, look one up by access
//! key id (what the gateway verifies signatures with), revoke one.

use rozone_proto::om as pb;
use rozone_proto::om::om_s3_client::OmS3Client;

use crate::error::Result;
use crate::om::OmClient;

/// An S3 access key id and its secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct S3Secret {
    pub access_id: String,
    pub secret: String,
    pub user: String,
    pub created_ms: u64,
}

impl From<pb::S3SecretReply> for S3Secret {
    fn from(r: pb::S3SecretReply) -> Self {
        Self {
            access_id: r.access_id,
            secret: r.secret,
            user: r.user,
            created_ms: r.created_ms,
        }
    }
}

impl OmClient {
    /// The user's S3 secret, created on the first call (admin certificates only).
    pub async fn get_s3_secret(&self, user: &str) -> Result<S3Secret> {
        let req = pb::GetS3SecretRequest { user: user.into() };
        let r = self
            .ring()
            .call("get s3 secret", |ch| {
                let req = req.clone();
                async move { OmS3Client::new(ch).get_s3_secret(req).await }
            })
            .await?;
        Ok(r.into())
    }

    /// The secret of an access key id, from the OM leader (s3g or admin certificates).
    pub async fn lookup_s3_secret(&self, access_id: &str) -> Result<S3Secret> {
        let req = pb::LookupS3SecretRequest {
            access_id: access_id.into(),
        };
        let r = self
            .ring()
            .call("lookup s3 secret", |ch| {
                let req = req.clone();
                async move { OmS3Client::new(ch).lookup_s3_secret(req).await }
            })
            .await?;
        Ok(r.into())
    }

    /// Removes an access key id (admin certificates only).
    pub async fn revoke_s3_secret(&self, access_id: &str) -> Result<()> {
        let req = pb::RevokeS3SecretRequest {
            access_id: access_id.into(),
        };
        self.ring()
            .call("revoke s3 secret", |ch| {
                let req = req.clone();
                async move { OmS3Client::new(ch).revoke_s3_secret(req).await }
            })
            .await?;
        Ok(())
    }
}
