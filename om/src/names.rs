//! Name rules for volumes, buckets and keys, checked at the service edge before anything
//! is proposed. Volumes and buckets follow the S3 bucket-naming rules (as Ozone's
//! `verifyResourceName` does for both); key names are any UTF-8 up to 1024 bytes without
//! NUL (NUL separates the open-key row's client id).

/// Longest key name, in bytes (S3's limit).
pub const MAX_KEY_NAME: usize = 1024;

/// Why a volume or bucket name is refused, or `Ok`.
pub fn check_resource_name(kind: &str, name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid {kind} name {name:?}: {why}"));
    if name.len() < 3 || name.len() > 63 {
        return bad("must be 3 to 63 characters long");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return bad(&format!(
            "{c:?} is not allowed (only lower-case letters, digits, '-' and '.')"
        ));
    }
    let first_last_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_last_ok(name.chars().next()) || !first_last_ok(name.chars().last()) {
        return bad("must start and end with a letter or digit");
    }
    for pair in ["..", ".-", "-."] {
        if name.contains(pair) {
            return bad(&format!("must not contain {pair:?}"));
        }
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return bad("must not look like an IP address");
    }
    Ok(())
}

/// Why a key name is refused, or `Ok`.
pub fn check_key_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("invalid key name: empty".to_string());
    }
    if name.len() > MAX_KEY_NAME {
        return Err(format!(
            "invalid key name: {} bytes, at most {MAX_KEY_NAME}",
            name.len()
        ));
    }
    if name.contains('\0') {
        return Err(format!("invalid key name {name:?}: contains NUL"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_rules() {
        for ok in ["abc", "my-bucket.v2", "a1b", &"x".repeat(63), "1volume"] {
            assert!(check_resource_name("bucket", ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("ab", "3 to 63"),
            (&"x".repeat(64), "3 to 63"),
            ("Abc", "'A' is not allowed"),
            ("a_b", "'_' is not allowed"),
            ("a/b", "'/' is not allowed"),
            ("-ab", "start and end"),
            ("ab.", "start and end"),
            ("a..b", "\"..\""),
            ("a.-b", "\".-\""),
            ("a-.b", "\"-.\""),
            ("192.168.1.1", "IP address"),
        ] {
            let e = check_resource_name("bucket", bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.starts_with("invalid bucket name"), "{e}");
        }
    }

    #[test]
    fn key_rules() {
        assert!(check_key_name("dir/sub/file.txt").is_ok());
        assert!(check_key_name("ünïcode key").is_ok());
        assert!(check_key_name("").is_err());
        assert!(check_key_name("a\0b").is_err());
        assert!(check_key_name(&"k".repeat(1024)).is_ok());
        assert!(check_key_name(&"k".repeat(1025))
            .unwrap_err()
            .contains("at most 1024"));
    }
}
