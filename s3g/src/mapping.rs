//! The S3-to-rozone mapping, kept in one place: S3 buckets are buckets of one volume
//! (`s3g.volume`, `s3v` by default), objects are keys; ETags, Content-Type and user
//! metadata are the key's S3 metadata in the OM; rozone's refusals become AWS error codes.

use std::time::{Duration, SystemTime};

use rozone_client::ClientError;
use rozone_types::codes::{om_error, OmErrorCode};
use s3s::dto::{ETag, Metadata, Timestamp};
use s3s::{S3Error, S3ErrorCode};

/// Why a bucket name breaks S3's rules (3-63 characters of lower-case letters, digits,
/// '-' and '.', starting and ending with a letter or digit, no "..", not an IP address).
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid bucket name {name:?}: {why}"));
    if name.len() < 3 || name.len() > 63 {
        return bad("must be 3 to 63 characters long");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    {
        return bad("only lower-case letters, digits, '-' and '.' are allowed");
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge_ok(name.chars().next()) || !edge_ok(name.chars().last()) {
        return bad("must start and end with a letter or digit");
    }
    if ["..", ".-", "-."].iter().any(|p| name.contains(p)) {
        return bad("must not contain \"..\", \".-\" or \"-.\"");
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return bad("must not look like an IP address");
    }
    Ok(())
}

/// The S3 error for a bucket name S3 refuses.
pub fn bucket_name(name: &str) -> Result<(), S3Error> {
    check_bucket_name(name).map_err(|m| S3Error::with_message(S3ErrorCode::InvalidBucketName, m))
}

/// The AWS error for a failed rozone call. Definite refusals map to the matching S3 code;
/// an unreachable cluster is ServiceUnavailable (clients retry it); only what is left is
/// InternalError.
pub fn s3_error(e: ClientError) -> S3Error {
    use OmErrorCode as C;
    let msg = e.to_string();
    let code = match &e {
        ClientError::Status { status, .. } => match om_error(status) {
            Some(C::VolumeNotFound | C::BucketNotFound) => S3ErrorCode::NoSuchBucket,
            Some(C::KeyNotFound) => S3ErrorCode::NoSuchKey,
            Some(C::BucketAlreadyExists) => S3ErrorCode::BucketAlreadyOwnedByYou,
            Some(C::BucketNotEmpty) => S3ErrorCode::BucketNotEmpty,
            Some(C::PreconditionFailed) => S3ErrorCode::PreconditionFailed,
            Some(C::S3SecretNotFound) => S3ErrorCode::InvalidAccessKeyId,
            Some(C::NoSuchUpload) => S3ErrorCode::NoSuchUpload,
            Some(C::InvalidPart) => S3ErrorCode::InvalidPart,
            Some(C::EntityTooSmall) => S3ErrorCode::EntityTooSmall,
            Some(C::InvalidName) => S3ErrorCode::InvalidArgument,
            Some(C::InvalidArgument | C::InvalidBlockList) => S3ErrorCode::InvalidArgument,
            Some(C::RequestTooLarge) => S3ErrorCode::EntityTooLarge,
            Some(C::QuotaExceeded) => S3ErrorCode::Custom("QuotaExceeded".into()),
            Some(C::OpenKeyNotFound | C::WrongClientId) => S3ErrorCode::Custom("Conflict".into()),
            _ if rozone_rpc::is_retryable(status) => S3ErrorCode::ServiceUnavailable,
            _ if status.code() == tonic::Code::PermissionDenied => S3ErrorCode::AccessDenied,
            _ => S3ErrorCode::InternalError,
        },
        ClientError::Unavailable { .. } => S3ErrorCode::ServiceUnavailable,
        ClientError::Invalid(_) => S3ErrorCode::InvalidArgument,
        _ => S3ErrorCode::InternalError,
    };
    // Codes S3 does not define carry their status themselves.
    let status = match om_code(&e) {
        Some(C::QuotaExceeded) => Some(hyper::StatusCode::FORBIDDEN),
        Some(C::OpenKeyNotFound | C::WrongClientId) => Some(hyper::StatusCode::CONFLICT),
        _ => None,
    };
    let mut err = S3Error::with_message(code, msg);
    if let Some(s) = status {
        err.set_status_code(s);
    }
    err
}

/// The OM error code of a failed call, if it is a refusal with one.
pub fn om_code(e: &ClientError) -> Option<OmErrorCode> {
    match e {
        ClientError::Status { status, .. } => om_error(status),
        _ => None,
    }
}

/// A strong ETag as S3 writes it (the stored value has no quotes).
pub fn etag(v: &str) -> ETag {
    ETag::Strong(v.to_string())
}

/// A key's modification time as S3 shows it.
pub fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
}

/// User metadata as stored: names lower-case, sorted.
pub fn metadata_in(m: Option<Metadata>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = m
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    v.sort();
    v
}

/// User metadata as S3 returns it (None when there is none).
pub fn metadata_out(v: &[(String, String)]) -> Option<Metadata> {
    (!v.is_empty()).then(|| v.iter().cloned().collect())
}

/// The MD5 of `Content-MD5` (base64), to compare with what was received.
pub fn content_md5(b64: &str) -> Result<[u8; 16], S3Error> {
    let bad = || {
        S3Error::with_message(
            S3ErrorCode::InvalidDigest,
            "Content-MD5 is not the base64 of 16 bytes",
        )
    };
    let raw = decode_base64(b64.trim()).ok_or_else(bad)?;
    raw.try_into().map_err(|_| bad())
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 || s.len() > 64 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= val(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_s3_rules() {
        for ok in ["abc", "my-bucket.1", "a23"] {
            assert!(check_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            "192.168.1.1",
            &"a".repeat(64),
        ] {
            assert!(check_bucket_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_md5_decodes_base64_and_refuses_garbage() {
        // MD5("") = d41d8cd98f00b204e9800998ecf8427e
        let d = content_md5("1B2M2Y8AsgTpgAmY7PhCfg==").unwrap();
        assert_eq!(hex(&d), "d41d8cd98f00b204e9800998ecf8427e");
        assert!(content_md5("!!!").is_err());
        assert!(content_md5("AAAA").is_err());
    }

    #[test]
    fn refusals_become_aws_codes() {
        use tonic::Code;
        let refused = |c: OmErrorCode, code: Code| {
            let s = rozone_types::codes::with_om_error(tonic::Status::new(code, "x"), c);
            s3_error(ClientError::status("OM", s)).code().clone()
        };
        let cases = [
            (
                OmErrorCode::BucketNotFound,
                Code::NotFound,
                S3ErrorCode::NoSuchBucket,
            ),
            (
                OmErrorCode::VolumeNotFound,
                Code::NotFound,
                S3ErrorCode::NoSuchBucket,
            ),
            (
                OmErrorCode::KeyNotFound,
                Code::NotFound,
                S3ErrorCode::NoSuchKey,
            ),
            (
                OmErrorCode::PreconditionFailed,
                Code::FailedPrecondition,
                S3ErrorCode::PreconditionFailed,
            ),
            (
                OmErrorCode::BucketNotEmpty,
                Code::FailedPrecondition,
                S3ErrorCode::BucketNotEmpty,
            ),
            (
                OmErrorCode::BucketAlreadyExists,
                Code::AlreadyExists,
                S3ErrorCode::BucketAlreadyOwnedByYou,
            ),
        ];
        for (om, code, s3) in cases {
            assert_eq!(refused(om, code), s3, "{om:?}");
        }
        let down = ClientError::Unavailable {
            service: "OM".into(),
            detail: "x".into(),
        };
        assert_eq!(*s3_error(down).code(), S3ErrorCode::ServiceUnavailable);
    }
}
