//! [`ByteSize`]: sizes written the way people write them (`"64MiB"`, `"5GB"`).

use std::fmt;
use std::str::FromStr;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// A number of bytes. Parses `"512"`, `"512B"`, `"64KiB"`, `"5GB"`,
/// `"1.5GiB"`: `KiB`/`MiB`/`GiB`/`TiB`/`PiB` are powers of 1024 and
/// `KB`/`MB`/`GB`/`TB`/`PB` powers of 1000, as their standards say (units are
/// case-insensitive; a fraction must come out to whole bytes). Displays in
/// the largest unit that states it exactly, so display and parse round-trip.
/// In config files it is a string, or a plain integer of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

const KIB: u64 = 1 << 10;
const KB: u64 = 1000;

/// Binary units first, so an exact power of two displays as `64MiB`, not
/// as a decimal unit that happens to divide it (`65536KB`).
const UNITS: [(&str, u64); 10] = [
    ("PiB", KIB * KIB * KIB * KIB * KIB),
    ("TiB", KIB * KIB * KIB * KIB),
    ("GiB", KIB * KIB * KIB),
    ("MiB", KIB * KIB),
    ("KiB", KIB),
    ("PB", KB * KB * KB * KB * KB),
    ("TB", KB * KB * KB * KB),
    ("GB", KB * KB * KB),
    ("MB", KB * KB),
    ("KB", KB),
];

impl ByteSize {
    /// `n` kibibytes.
    pub const fn kib(n: u64) -> Self {
        Self(n * KIB)
    }
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        Self(n * KIB * KIB)
    }
    /// `n` gibibytes.
    pub const fn gib(n: u64) -> Self {
        Self(n * KIB * KIB * KIB)
    }
    /// The number of bytes.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0;
        if bytes != 0 {
            for (name, unit) in UNITS {
                if bytes % unit == 0 {
                    return write!(f, "{}{name}", bytes / unit);
                }
            }
        }
        write!(f, "{bytes}B")
    }
}

/// Why a size did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {input:?}: {reason} (expected e.g. \"512B\", \"64MiB\", \"5GB\")")]
pub struct ParseByteSizeError {
    input: String,
    reason: &'static str,
}

impl FromStr for ByteSize {
    type Err = ParseByteSizeError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let fail = |reason| ParseByteSizeError {
            input: input.to_owned(),
            reason,
        };
        let s = input.trim();
        let split = s
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len());
        let (number, unit) = (s[..split].trim(), s[split..].trim());
        let multiplier = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => KB,
            "m" | "mb" => KB * KB,
            "g" | "gb" => KB * KB * KB,
            "t" | "tb" => KB * KB * KB * KB,
            "p" | "pb" => KB * KB * KB * KB * KB,
            "kib" => KIB,
            "mib" => KIB * KIB,
            "gib" => KIB * KIB * KIB,
            "tib" => KIB * KIB * KIB * KIB,
            "pib" => KIB * KIB * KIB * KIB * KIB,
            _ => return Err(fail("unknown unit")),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(fail("no number"));
        }
        let digits = |part: &str| -> Result<u128, ParseByteSizeError> {
            if part.is_empty() {
                Ok(0)
            } else {
                part.parse::<u128>().map_err(|_| fail("not a number"))
            }
        };
        // Exact integer arithmetic: 1.5GiB is 1610612736 bytes, not a float's guess.
        let scale = 10u128
            .checked_pow(u32::try_from(fraction.len()).map_err(|_| fail("too many digits"))?)
            .ok_or(fail("too many digits"))?;
        let frac = digits(fraction)?;
        let scaled = digits(whole)?
            .checked_mul(scale)
            .and_then(|w| w.checked_add(frac))
            .and_then(|n| n.checked_mul(u128::from(multiplier)))
            .ok_or(fail("too large"))?;
        if scaled % scale != 0 {
            return Err(fail("not a whole number of bytes"));
        }
        u64::try_from(scaled / scale)
            .map(ByteSize)
            .map_err(|_| fail("too large"))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"64MiB\" or \"5GB\", or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("invalid size {v}: must not be negative")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl crate::Documented for ByteSize {}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<u64, String> {
        s.parse::<ByteSize>()
            .map(|b| b.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn parses_binary_and_decimal_units() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("512"), Ok(512));
        assert_eq!(parse("512B"), Ok(512));
        assert_eq!(parse("64MiB"), Ok(64 << 20));
        assert_eq!(parse("64 mib"), Ok(64 << 20));
        assert_eq!(parse("5GB"), Ok(5_000_000_000));
        assert_eq!(parse("5G"), Ok(5_000_000_000));
        assert_eq!(parse("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse("0.5KB"), Ok(500));
        assert_eq!(parse("16EiB").map_err(|_| ()), Err(()));
        assert_eq!(parse("1PiB"), Ok(1 << 50));
    }

    #[test]
    fn rejects_nonsense_with_the_input_in_the_message() {
        let err = parse("12XB").unwrap_err();
        assert!(
            err.contains("\"12XB\"") && err.contains("unknown unit"),
            "{err}"
        );
        assert!(parse("").unwrap_err().contains("no number"));
        assert!(parse("MiB").unwrap_err().contains("no number"));
        assert!(parse("1.2.3MB").unwrap_err().contains("not a number"));
        assert!(parse("1.5B").unwrap_err().contains("whole number"));
        assert!(parse("-1MB").unwrap_err().contains("unknown unit"));
        assert!(parse("99999999999PiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn displays_in_the_largest_exact_unit_and_round_trips() {
        for (bytes, shown) in [
            (0, "0B"),
            (1, "1B"),
            (1000, "1KB"),
            (1024, "1KiB"),
            (64 << 20, "64MiB"),
            (5_000_000_000, "5GB"),
            (5 << 30, "5GiB"),
            (1536, "1536B"),
            (3000, "3KB"),
        ] {
            assert_eq!(ByteSize(bytes).to_string(), shown);
            assert_eq!(parse(shown), Ok(bytes));
        }
        for bytes in [u64::MAX, u64::MAX - 1, 3 << 40, 7_000_000] {
            assert_eq!(parse(&ByteSize(bytes).to_string()), Ok(bytes));
        }
    }

    #[test]
    fn serde_accepts_strings_and_integers() {
        #[derive(Deserialize, Serialize, PartialEq, Debug)]
        struct S {
            size: ByteSize,
        }
        let s: S = toml::from_str("size = \"64MiB\"").unwrap();
        assert_eq!(s.size, ByteSize::mib(64));
        let s: S = toml::from_str("size = 4096").unwrap();
        assert_eq!(s.size, ByteSize::kib(4));
        assert_eq!(toml::to_string(&s).unwrap().trim(), "size = \"4KiB\"");
        let err = toml::from_str::<S>("size = -1").unwrap_err().to_string();
        assert!(err.contains("must not be negative"), "{err}");
    }
}
