//! ListObjectsV2 and ListObjects (v1) over [`crate::listing`]. Continuation tokens are the
//! hex of the last name returned (opaque to clients, checked when they come back).

use rozone_client::types::Key;
use rozone_client::ClientError;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Result};

use crate::core::Gateway;
use crate::listing::{self, Ask, Keys, MAX_KEYS};
use crate::mapping::{bucket_name, etag, hex, s3_error, timestamp};
use crate::objects::key_etag;

/// Longest prefix, delimiter or resume point (S3 keys are at most 1024 bytes).
const MAX_NAME: usize = 1024;

struct OmKeys<'a> {
    g: &'a Gateway,
    bucket: &'a str,
}

#[async_trait::async_trait]
impl Keys for OmKeys<'_> {
    async fn keys(&self, prefix: &str, after: &str, limit: usize) -> Result<Vec<Key>, ClientError> {
        self.g
            .client
            .om
            .list_keys(&self.g.volume, self.bucket, prefix, after, limit)
            .await
    }
}

fn token_decode(t: &str) -> S3Result<String> {
    let bad = || {
        s3_error!(
            InvalidArgument,
            "The continuation token provided is incorrect"
        )
    };
    if t.len() % 2 != 0 || t.len() > 2 * MAX_NAME {
        return Err(bad());
    }
    let bytes = (0..t.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(t.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect::<S3Result<Vec<u8>>>()?;
    String::from_utf8(bytes).map_err(|_| bad())
}

fn check_len(what: &str, v: &str) -> S3Result<()> {
    if v.len() > MAX_NAME {
        return Err(s3_error!(
            InvalidArgument,
            "{what} is longer than {MAX_NAME} bytes"
        ));
    }
    Ok(())
}

fn max_keys(m: Option<i32>) -> S3Result<usize> {
    match m {
        None => Ok(MAX_KEYS),
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "max-keys must not be negative")),
        Some(n) => Ok((n as usize).min(MAX_KEYS)),
    }
}

fn object(k: &Key) -> Object {
    Object {
        key: Some(k.name.clone()),
        size: i64::try_from(k.size).ok(),
        e_tag: Some(etag(&key_etag(k))),
        last_modified: Some(timestamp(k.modified_ms)),
        storage_class: Some(ObjectStorageClass::from_static(
            ObjectStorageClass::STANDARD,
        )),
        ..Default::default()
    }
}

fn prefixes(p: &[String]) -> Vec<CommonPrefix> {
    p.iter()
        .map(|p| CommonPrefix {
            prefix: Some(p.clone()),
        })
        .collect()
}

pub async fn list_objects_v2(
    g: &Gateway,
    req: S3Request<ListObjectsV2Input>,
) -> S3Result<ListObjectsV2Output> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let prefix = i.prefix.clone().unwrap_or_default();
    check_len("prefix", &prefix)?;
    check_len("delimiter", i.delimiter.as_deref().unwrap_or(""))?;
    let mut ask = Ask {
        prefix,
        delimiter: i.delimiter.clone().filter(|d| !d.is_empty()),
        after: String::new(),
        max_keys: max_keys(i.max_keys)?,
    };
    ask.after = match (&i.continuation_token, &i.start_after) {
        (Some(t), _) => ask.resume_after(&token_decode(t)?),
        (None, Some(s)) => {
            check_len("start-after", s)?;
            s.clone()
        }
        (None, None) => String::new(),
    };
    let src = OmKeys {
        g,
        bucket: &i.bucket,
    };
    let page = listing::list(&src, &ask).await.map_err(s3_error)?;
    let count = page.keys.len() + page.prefixes.len();
    Ok(ListObjectsV2Output {
        name: Some(i.bucket),
        prefix: Some(ask.prefix.clone()),
        delimiter: i.delimiter,
        max_keys: i32::try_from(ask.max_keys).ok(),
        key_count: i32::try_from(count).ok(),
        is_truncated: Some(page.truncated),
        continuation_token: i.continuation_token,
        next_continuation_token: page
            .truncated
            .then(|| page.last.as_deref().map(|l| hex(l.as_bytes())))
            .flatten(),
        start_after: i.start_after,
        contents: Some(page.keys.iter().map(object).collect()),
        common_prefixes: Some(prefixes(&page.prefixes)),
        encoding_type: None,
        ..Default::default()
    })
}

pub async fn list_objects(
    g: &Gateway,
    req: S3Request<ListObjectsInput>,
) -> S3Result<ListObjectsOutput> {
    let i = req.input;
    bucket_name(&i.bucket)?;
    let prefix = i.prefix.clone().unwrap_or_default();
    check_len("prefix", &prefix)?;
    check_len("delimiter", i.delimiter.as_deref().unwrap_or(""))?;
    let mut ask = Ask {
        prefix,
        delimiter: i.delimiter.clone().filter(|d| !d.is_empty()),
        after: String::new(),
        max_keys: max_keys(i.max_keys)?,
    };
    if let Some(m) = &i.marker {
        check_len("marker", m)?;
        ask.after = ask.resume_after(m);
    }
    let src = OmKeys {
        g,
        bucket: &i.bucket,
    };
    let page = listing::list(&src, &ask).await.map_err(s3_error)?;
    Ok(ListObjectsOutput {
        name: Some(i.bucket),
        prefix: Some(ask.prefix.clone()),
        delimiter: i.delimiter,
        marker: i.marker,
        max_keys: i32::try_from(ask.max_keys).ok(),
        is_truncated: Some(page.truncated),
        next_marker: page.truncated.then_some(page.last).flatten(),
        contents: Some(page.keys.iter().map(object).collect()),
        common_prefixes: Some(prefixes(&page.prefixes)),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_garbage_is_refused() {
        let t = hex("dir/é".as_bytes());
        assert_eq!(token_decode(&t).unwrap(), "dir/é");
        for bad in ["zz", "abc", "ff"] {
            assert!(token_decode(bad).is_err(), "{bad}");
        }
    }
}
