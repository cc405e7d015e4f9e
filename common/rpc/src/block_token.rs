//! Block tokens: the OM's signed permission to read or write one block, checked by the
//! datanode that holds it (Apache Ozone's model). A token names the block (container id and
//! local id), the access modes it grants, when it expires and which secret key signed it;
//! an HMAC-SHA256 under that key (ring) seals those fields. The SCM owns the keys and hands
//! them to OMs (which sign) and datanodes (which verify); nothing else ever sees them.
//!
//! The token travels in gRPC metadata ([`HEADER`], binary) next to the request it
//! authorizes, so the request messages do not change. Its wire form is fixed-size and
//! versioned (see [`BlockToken::encode`]); anything of another length or version is
//! refused before a key is looked up. The MAC is compared in constant time
//! (`ring::hmac::verify`), and expiry allows [`CLOCK_SKEW_MS`] of clock difference between
//! the signing OM and the checking datanode.
//!
//! Light: `ring` only (already linked by rustls); no knowledge of where keys come from.

use std::collections::BTreeMap;
use std::fmt;

use ring::hmac;
use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

/// gRPC metadata key that carries the token (binary: `-bin` suffix, base64 on the wire).
pub const HEADER: &str = "x-rozone-block-token-bin";
/// Version byte of the wire form below.
pub const VERSION: u8 = 1;
/// Bytes of the signed fields: version, key id, container id, local id, modes, expiry.
const BODY_LEN: usize = 1 + 8 + 8 + 8 + 1 + 8;
/// Bytes of an HMAC-SHA256 tag.
const MAC_LEN: usize = 32;
/// Bytes of an encoded token: every token is exactly this long.
pub const TOKEN_LEN: usize = BODY_LEN + MAC_LEN;
/// How far the checker's clock may be behind the signer's before a fresh token looks
/// expired (and ahead before an expired one still passes).
pub const CLOCK_SKEW_MS: u64 = 30_000;
/// Shortest secret key accepted (HMAC-SHA256 wants at least its output size).
pub const MIN_SECRET_LEN: usize = 32;
/// Longest secret key accepted (a bound on what a hostile key list costs).
pub const MAX_SECRET_LEN: usize = 64;
/// Most keys a verifier holds (the SCM keeps two or three; a bound on hostile input).
pub const MAX_KEYS: usize = 64;

/// What a token lets its bearer do with the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AccessMode(u8);

impl AccessMode {
    /// Read the block (GetBlock, ReadChunk, GetCommittedBlockLength).
    pub const READ: AccessMode = AccessMode(1);
    /// Write the block (WriteChunk, PutBlock, StreamBlock).
    pub const WRITE: AccessMode = AccessMode(2);
    /// Both, as a key's writer gets.
    pub const READ_WRITE: AccessMode = AccessMode(3);

    /// Whether every mode of `other` is granted by `self`.
    pub fn allows(self, other: AccessMode) -> bool {
        self.0 & other.0 == other.0
    }

    fn from_bits(b: u8) -> Option<AccessMode> {
        (b != 0 && b & !3 == 0).then_some(AccessMode(b))
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            1 => "read",
            2 => "write",
            3 => "read+write",
            _ => "none",
        })
    }
}

/// One secret key of the SCM's: its id and bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey {
    /// Id, carried in every token it signs.
    pub id: u64,
    /// The HMAC key ([`MIN_SECRET_LEN`]..=[`MAX_SECRET_LEN`] bytes).
    pub secret: Vec<u8>,
}

impl fmt::Debug for SecretKey {
    // Never print the secret (keys reach logs through Debug of their containers).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey {{ id: {}, .. }}", self.id)
    }
}

impl SecretKey {
    /// Checks the key's size (keys arrive over the network).
    pub fn new(id: u64, secret: Vec<u8>) -> Result<SecretKey, TokenError> {
        if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&secret.len()) {
            return Err(TokenError::Malformed(format!(
                "secret key {id} has {} bytes, want {MIN_SECRET_LEN} to {MAX_SECRET_LEN}",
                secret.len()
            )));
        }
        Ok(SecretKey { id, secret })
    }

    fn hmac(&self) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, &self.secret)
    }
}

/// The fields a token grants (what is signed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockToken {
    /// The signing key's id.
    pub key_id: u64,
    /// The block's container.
    pub container_id: u64,
    /// The block's id within the container.
    pub local_id: u64,
    /// What the bearer may do.
    pub mode: AccessMode,
    /// Milliseconds since the Unix epoch after which the token is refused.
    pub expires_ms: u64,
}

/// Why a token was refused. Every variant is a refusal of the caller (PERMISSION_DENIED).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The call carried no token.
    #[error("no block token (metadata x-rozone-block-token-bin): ask the OM for the key's blocks")]
    Missing,
    /// Not a token of this format (length, version, modes).
    #[error("malformed block token: {0}")]
    Malformed(String),
    /// Signed by a key this datanode does not know (never issued, or removed after expiry).
    #[error("block token signed by unknown key {0}")]
    UnknownKey(u64),
    /// The MAC does not match: forged or altered.
    #[error("block token signature does not verify")]
    BadSignature,
    /// Past its expiry (beyond the clock-skew allowance).
    #[error("block token expired at {expires_ms} ms (now {now_ms} ms)")]
    Expired { expires_ms: u64, now_ms: u64 },
    /// For another block.
    #[error("block token is for block {token}, not {wanted}")]
    WrongBlock { token: String, wanted: String },
    /// Does not grant the mode the call needs.
    #[error("block token grants {granted}, the call needs {needed}")]
    WrongMode {
        granted: AccessMode,
        needed: AccessMode,
    },
}

impl TokenError {
    /// The refusal a service returns for it (services add their own result code).
    pub fn status(&self) -> Status {
        Status::permission_denied(self.to_string())
    }
}

impl BlockToken {
    fn body(&self) -> [u8; BODY_LEN] {
        let mut b = [0u8; BODY_LEN];
        b[0] = VERSION;
        b[1..9].copy_from_slice(&self.key_id.to_be_bytes());
        b[9..17].copy_from_slice(&self.container_id.to_be_bytes());
        b[17..25].copy_from_slice(&self.local_id.to_be_bytes());
        b[25] = self.mode.0;
        b[26..34].copy_from_slice(&self.expires_ms.to_be_bytes());
        b
    }

    /// The signed wire form: version (1 byte), key id, container id, local id (8 bytes
    /// big-endian each), modes (1 byte: read 1, write 2), expiry in ms (8 bytes), then the
    /// HMAC-SHA256 of those 34 bytes under `key` (32 bytes). `key.id` is the key id written.
    pub fn sign(mut self, key: &SecretKey) -> Vec<u8> {
        self.key_id = key.id;
        let body = self.body();
        let tag = hmac::sign(&key.hmac(), &body);
        let mut out = Vec::with_capacity(TOKEN_LEN);
        out.extend_from_slice(&body);
        out.extend_from_slice(tag.as_ref());
        out
    }

    /// The fields of a token, unverified (only its shape is checked).
    pub fn parse(bytes: &[u8]) -> Result<BlockToken, TokenError> {
        if bytes.len() != TOKEN_LEN {
            return Err(TokenError::Malformed(format!(
                "{} bytes, want {TOKEN_LEN}",
                bytes.len()
            )));
        }
        if bytes[0] != VERSION {
            return Err(TokenError::Malformed(format!(
                "version {}, want {VERSION}",
                bytes[0]
            )));
        }
        let u = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[at..at + 8]);
            u64::from_be_bytes(a)
        };
        let mode = AccessMode::from_bits(bytes[25])
            .ok_or_else(|| TokenError::Malformed(format!("access modes {:#x}", bytes[25])))?;
        Ok(BlockToken {
            key_id: u(1),
            container_id: u(9),
            local_id: u(17),
            mode,
            expires_ms: u(26),
        })
    }
}

/// The keys a datanode verifies with, by id.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: BTreeMap<u64, SecretKey>,
}

impl KeySet {
    /// The set of `keys` (the last [`MAX_KEYS`] by id if there are more).
    pub fn new(keys: impl IntoIterator<Item = SecretKey>) -> KeySet {
        let mut map: BTreeMap<u64, SecretKey> = keys.into_iter().map(|k| (k.id, k)).collect();
        while map.len() > MAX_KEYS {
            map.pop_first();
        }
        KeySet { keys: map }
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether key `id` is known.
    pub fn contains(&self, id: u64) -> bool {
        self.keys.contains_key(&id)
    }

    /// The highest key id known.
    pub fn newest_id(&self) -> Option<u64> {
        self.keys.keys().next_back().copied()
    }

    /// Checks `bytes` as a token for block (`container_id`, `local_id`) granting `needed`,
    /// at `now_ms`. The signature is checked before any field is trusted.
    pub fn verify(
        &self,
        bytes: &[u8],
        container_id: u64,
        local_id: u64,
        needed: AccessMode,
        now_ms: u64,
    ) -> Result<BlockToken, TokenError> {
        let t = BlockToken::parse(bytes)?;
        let key = self
            .keys
            .get(&t.key_id)
            .ok_or(TokenError::UnknownKey(t.key_id))?;
        hmac::verify(&key.hmac(), &bytes[..BODY_LEN], &bytes[BODY_LEN..])
            .map_err(|_| TokenError::BadSignature)?;
        if now_ms > t.expires_ms.saturating_add(CLOCK_SKEW_MS) {
            return Err(TokenError::Expired {
                expires_ms: t.expires_ms,
                now_ms,
            });
        }
        if (t.container_id, t.local_id) != (container_id, local_id) {
            return Err(TokenError::WrongBlock {
                token: format!("{}/{}", t.container_id, t.local_id),
                wanted: format!("{container_id}/{local_id}"),
            });
        }
        if !t.mode.allows(needed) {
            return Err(TokenError::WrongMode {
                granted: t.mode,
                needed,
            });
        }
        Ok(t)
    }
}

/// The token `req` carries, if any (an oversized value is refused by its length later).
pub fn from_request<T>(req: &Request<T>) -> Result<Vec<u8>, TokenError> {
    let v = req.metadata().get_bin(HEADER).ok_or(TokenError::Missing)?;
    // Checked before decoding: a hostile header must not cost more than a token's size.
    if v.as_encoded_bytes().len() > TOKEN_LEN * 2 {
        return Err(TokenError::Malformed("oversized token header".into()));
    }
    v.to_bytes()
        .map(|b| b.to_vec())
        .map_err(|_| TokenError::Malformed("token header is not base64".into()))
}

/// Attaches `token` to `req` (no-op for an empty token: an insecure cluster issues none).
pub fn with_token<T>(mut req: Request<T>, token: &[u8]) -> Request<T> {
    if !token.is_empty() {
        req.metadata_mut()
            .insert_bin(HEADER, MetadataValue::from_bytes(token));
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn key(id: u64, fill: u8) -> SecretKey {
        SecretKey::new(id, vec![fill; 32]).unwrap()
    }

    fn token(mode: AccessMode, expires_ms: u64) -> BlockToken {
        BlockToken {
            key_id: 0,
            container_id: 5,
            local_id: 9,
            mode,
            expires_ms,
        }
    }

    fn set() -> KeySet {
        KeySet::new([key(1, 0xaa), key(2, 0xbb)])
    }

    #[test]
    fn a_valid_token_verifies_for_its_block_and_modes() {
        let t = token(AccessMode::READ_WRITE, NOW + 60_000).sign(&key(2, 0xbb));
        assert_eq!(t.len(), TOKEN_LEN);
        let got = set().verify(&t, 5, 9, AccessMode::WRITE, NOW).unwrap();
        assert_eq!(got.key_id, 2);
        set().verify(&t, 5, 9, AccessMode::READ, NOW).unwrap();
        // Within the skew allowance after expiry.
        set()
            .verify(&t, 5, 9, AccessMode::READ, NOW + 60_000 + CLOCK_SKEW_MS)
            .unwrap();
    }

    #[test]
    fn an_expired_token_is_refused() {
        let t = token(AccessMode::READ, NOW - CLOCK_SKEW_MS - 1).sign(&key(1, 0xaa));
        let e = set().verify(&t, 5, 9, AccessMode::READ, NOW).unwrap_err();
        assert!(matches!(e, TokenError::Expired { .. }), "{e}");
    }

    #[test]
    fn a_token_of_another_key_is_refused() {
        // Same id as a real key, other bytes: a forgery.
        let t = token(AccessMode::READ, NOW + 1000).sign(&key(1, 0x11));
        assert_eq!(
            set().verify(&t, 5, 9, AccessMode::READ, NOW),
            Err(TokenError::BadSignature)
        );
        let t = token(AccessMode::READ, NOW + 1000).sign(&key(7, 0xaa));
        assert_eq!(
            set().verify(&t, 5, 9, AccessMode::READ, NOW),
            Err(TokenError::UnknownKey(7))
        );
    }

    #[test]
    fn a_token_for_another_block_is_refused() {
        let t = token(AccessMode::READ_WRITE, NOW + 1000).sign(&key(1, 0xaa));
        for (c, l) in [(5, 10), (6, 9)] {
            let e = set().verify(&t, c, l, AccessMode::READ, NOW).unwrap_err();
            assert!(matches!(e, TokenError::WrongBlock { .. }), "{e}");
        }
    }

    #[test]
    fn a_read_token_does_not_write() {
        let t = token(AccessMode::READ, NOW + 1000).sign(&key(1, 0xaa));
        let e = set().verify(&t, 5, 9, AccessMode::WRITE, NOW).unwrap_err();
        assert_eq!(
            e,
            TokenError::WrongMode {
                granted: AccessMode::READ,
                needed: AccessMode::WRITE
            }
        );
        let w = token(AccessMode::WRITE, NOW + 1000).sign(&key(1, 0xaa));
        assert!(set().verify(&w, 5, 9, AccessMode::READ, NOW).is_err());
    }

    #[test]
    fn a_tampered_token_is_refused() {
        let t = token(AccessMode::READ, NOW + 1000).sign(&key(1, 0xaa));
        // Every signed field and the tag: flipping any byte breaks the signature (or, for
        // the version and modes, the format).
        for i in 0..TOKEN_LEN {
            let mut bad = t.clone();
            bad[i] ^= 0x02;
            let e = set().verify(&bad, 5, 9, AccessMode::READ, NOW).unwrap_err();
            assert!(
                matches!(
                    e,
                    TokenError::BadSignature | TokenError::Malformed(_) | TokenError::UnknownKey(_)
                ),
                "byte {i}: {e}"
            );
        }
        // Raising the expiry or the modes without the key.
        let mut longer = t.clone();
        longer[33] = longer[33].wrapping_add(1);
        assert_eq!(
            set().verify(&longer, 5, 9, AccessMode::READ, NOW),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn garbage_is_refused_without_a_panic() {
        for junk in [
            &[][..],
            &[1u8][..],
            &[0u8; TOKEN_LEN][..],
            &[0xffu8; TOKEN_LEN][..],
            &[1u8; TOKEN_LEN + 1][..],
            &[1u8; 4096][..],
        ] {
            let e = set().verify(junk, 5, 9, AccessMode::READ, NOW).unwrap_err();
            assert!(
                matches!(
                    e,
                    TokenError::Malformed(_) | TokenError::UnknownKey(_) | TokenError::BadSignature
                ),
                "{e}"
            );
        }
        assert!(SecretKey::new(1, vec![0; 8]).is_err());
        assert!(SecretKey::new(1, vec![0; 65]).is_err());
    }

    #[test]
    fn tokens_ride_in_binary_metadata() {
        let t = token(AccessMode::READ, NOW).sign(&key(1, 0xaa));
        let req = with_token(Request::new(()), &t);
        assert_eq!(from_request(&req).unwrap(), t);
        assert_eq!(from_request(&Request::new(())), Err(TokenError::Missing));
        // An empty token (insecure cluster) adds nothing.
        let req = with_token(Request::new(()), &[]);
        assert_eq!(from_request(&req), Err(TokenError::Missing));
        let mut req = Request::new(());
        req.metadata_mut()
            .insert_bin(HEADER, MetadataValue::from_bytes(&[7u8; 1000][..]));
        assert!(matches!(from_request(&req), Err(TokenError::Malformed(_))));
    }

    #[test]
    fn key_sets_keep_the_newest_keys() {
        let s = KeySet::new((1..=(MAX_KEYS as u64 + 3)).map(|i| key(i, 1)));
        assert_eq!(s.len(), MAX_KEYS);
        assert!(!s.contains(3));
        assert_eq!(s.newest_id(), Some(MAX_KEYS as u64 + 3));
        assert!(format!("{:?}", key(1, 0xaa)).find("170").is_none());
    }
}
