//! SigV4 credentials: s3s verifies every signature (header, presigned query, chunked
//! payload) with the secret this returns for the request's access key id, looked up on the
//! OM leader and reused for `s3g.secret_cache_ttl`. An unknown access key is
//! InvalidAccessKeyId; a known one with the wrong secret fails s3s's check as
//! SignatureDoesNotMatch. Anonymous requests never get here: s3s's default access check
//! refuses them (AccessDenied).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rozone_client::om::OmClient;
use rozone_types::codes::OmErrorCode;
use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};

use crate::mapping::{om_code, s3_error};

/// Cached secrets at most; the cache is emptied when full (a flood of random access key
/// ids must not grow memory).
const MAX_CACHED: usize = 10_000;

pub struct OmAuth {
    om: OmClient,
    ttl: Duration,
    cache: Mutex<HashMap<String, (String, Instant)>>,
}

impl OmAuth {
    pub fn new(om: OmClient, ttl: Duration) -> Self {
        Self {
            om,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, access_key: &str) -> Option<String> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(access_key)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(s, _)| s.clone())
    }
}

#[async_trait::async_trait]
impl S3Auth for OmAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if let Some(s) = self.cached(access_key) {
            return Ok(SecretKey::from(s));
        }
        match self.om.lookup_s3_secret(access_key).await {
            Ok(s) => {
                if !self.ttl.is_zero() {
                    let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                    if cache.len() >= MAX_CACHED {
                        cache.clear();
                    }
                    cache.insert(access_key.to_string(), (s.secret.clone(), Instant::now()));
                }
                Ok(SecretKey::from(s.secret))
            }
            Err(e) => match om_code(&e) {
                Some(OmErrorCode::S3SecretNotFound | OmErrorCode::InvalidName) => Err(s3_error!(
                    InvalidAccessKeyId,
                    "The AWS access key Id you provided does not exist in our records."
                )),
                _ => Err(s3_error(e)),
            },
        }
    }
}
