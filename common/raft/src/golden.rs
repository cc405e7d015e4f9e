//! Golden fixtures of replicated formats, for tests: the bytes a version of rozone wrote for
//! each sample value, committed next to the crate and decoded by every later build.
//!
//! A fixture file has one `name hex` line per sample (`#` starts a comment). A test passes
//! each sample with its name; a sample whose encoding differs from its line, a line that no
//! longer decodes to its sample, and a line without a sample (a variant removed or renamed)
//! all fail. A sample without a line fails too, unless `ROZONE_BLESS=1`, which appends the
//! missing lines (never rewrites one): run it once when adding a variant and commit the file.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{self, Write};
use std::path::Path;

/// Checks `samples` against the fixture file at `path`; panics with what to do on a
/// mismatch (this is a test helper).
pub fn check<T: PartialEq + Debug>(
    path: &Path,
    samples: &[(&str, T)],
    encode: impl Fn(&T) -> io::Result<Vec<u8>>,
    decode: impl Fn(&[u8]) -> io::Result<T>,
) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let mut fixtures = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, hex) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("{}: bad line {line:?}", path.display()));
        fixtures.insert(name.to_string(), hex.trim().to_string());
    }
    let bless = std::env::var("ROZONE_BLESS").is_ok_and(|v| v == "1");
    let mut missing = Vec::new();
    for (name, value) in samples {
        let bytes = encode(value).unwrap_or_else(|e| panic!("encode {name}: {e}"));
        let Some(hex) = fixtures.remove(*name) else {
            missing.push(format!("{name} {}", to_hex(&bytes)));
            continue;
        };
        assert_eq!(
            to_hex(&bytes),
            hex,
            "{}: the encoding of {name} changed. Replicated formats are append-only: keep \
             the old shape and add a new variant (see rozone_raft::envelope)",
            path.display()
        );
        let old = from_hex(&hex).unwrap_or_else(|| panic!("{name}: fixture is not hex"));
        let decoded =
            decode(&old).unwrap_or_else(|e| panic!("{name}: fixture no longer decodes: {e}"));
        assert_eq!(&decoded, value, "{name}: fixture decodes to another value");
    }
    let orphans: Vec<String> = fixtures.into_keys().collect();
    assert!(
        orphans.is_empty(),
        "{}: fixtures without a sample (a variant removed or renamed?): {orphans:?}",
        path.display()
    );
    if missing.is_empty() {
        return;
    }
    if !bless {
        panic!(
            "{}: no fixture for {missing:?}; run the test once with ROZONE_BLESS=1 and \
             commit the file",
            path.display()
        );
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in missing {
        writeln!(f, "{line}").unwrap();
    }
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
