//! A bounded, seeded fuzz loop that runs on stable Rust with no extra dependency: inputs
//! are mutations of valid samples (golden log bytes, encoded protos, sample configs) plus
//! some random bytes; every input goes to a decoder inside `catch_unwind`. A panic fails
//! with the input in hex; a rejection must carry a message. The budget is per target,
//! `ROZONE_FUZZ_ITERS` (default [`DEFAULT_ITERS`]; e.g. 1000000 for a long run), and the
//! seed `ROZONE_FUZZ_SEED` (default 1) makes a failure replayable.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Inputs per target in the test command.
pub const DEFAULT_ITERS: u64 = 3000;

/// The budget and seed from the environment.
pub fn budget() -> (u64, u64) {
    let get = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        get("ROZONE_FUZZ_ITERS", DEFAULT_ITERS),
        get("ROZONE_FUZZ_SEED", 1),
    )
}

/// What a target did with its inputs.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub accepted: u64,
    pub rejected: u64,
}

/// Values that break parsers: boundaries of every integer width, varint edges.
const INTERESTING: &[&[u8]] = &[
    &[0],
    &[0xff],
    &[0x7f],
    &[0x80],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    &[
        0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
    ],
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
];

/// Mutates byte strings.
pub struct Mutator {
    rng: StdRng,
}

impl Mutator {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// One to four random edits of `seed`, or (one time in ten) fresh random bytes.
    pub fn bytes(&mut self, seed: &[u8]) -> Vec<u8> {
        let r = &mut self.rng;
        if r.random_range(0..10) == 0 {
            let n = r.random_range(0..64);
            return (0..n).map(|_| r.random()).collect();
        }
        let mut b = seed.to_vec();
        for _ in 0..r.random_range(1..=4) {
            let at = if b.is_empty() {
                0
            } else {
                r.random_range(0..=b.len())
            };
            match r.random_range(0..7) {
                0 if at < b.len() => b[at] ^= 1 << r.random_range(0..8),
                1 if at < b.len() => b[at] = r.random(),
                2 => {
                    let v = INTERESTING[r.random_range(0..INTERESTING.len())];
                    b.splice(at..at, v.iter().copied());
                }
                3 => b.truncate(at),
                4 if at < b.len() => {
                    let end = r.random_range(at..=b.len());
                    b.drain(at..end);
                }
                5 if at < b.len() => {
                    let end = r.random_range(at..=b.len().min(at + 16));
                    let dup: Vec<u8> = b[at..end].to_vec();
                    b.splice(at..at, dup);
                }
                _ => {
                    let x: u8 = r.random();
                    b.insert(at, x);
                }
            }
        }
        b
    }

    /// Edits of TOML text: a value replaced by a hostile one, a line dropped or doubled, a
    /// byte-level edit.
    pub fn text(&mut self, seed: &str) -> String {
        const VALUES: &[&str] = &[
            "0",
            "-1",
            "18446744073709551616",
            "9223372036854775807",
            "\"\"",
            "\"0s\"",
            "\"99999999999999999999s\"",
            "\"1ms\"",
            "\"-5s\"",
            "\"1 PiB\"",
            "\"0B\"",
            "\"999999999999 EiB\"",
            "true",
            "[]",
            "{}",
            "\"::\"",
            "\"host:99999\"",
            "\"127.0.0.1:0\"",
            "1e400",
            "nan",
            "\"\\u0000\"",
            "[[1]]",
        ];
        let mut lines: Vec<String> = seed.lines().map(String::from).collect();
        let edits = self.rng.random_range(1..=3);
        for _ in 0..edits {
            let r = &mut self.rng;
            if lines.is_empty() {
                lines.push(String::new());
            }
            let i = r.random_range(0..lines.len());
            match r.random_range(0..5) {
                0 | 1 => {
                    if let Some((k, _)) = lines[i].split_once('=') {
                        let v = VALUES[r.random_range(0..VALUES.len())];
                        lines[i] = format!("{k}= {v}");
                    }
                }
                2 => {
                    lines.remove(i);
                }
                3 => {
                    let l = lines[i].clone();
                    lines.insert(i, l);
                }
                _ => {
                    let b = self.bytes(lines[i].as_bytes());
                    lines[i] = String::from_utf8_lossy(&b).into_owned();
                }
            }
        }
        lines.join("\n")
    }
}

/// Feeds `iters` mutations of `seeds` to `decode`. A panic, or a rejection with an empty
/// message, fails with the input.
pub fn run_bytes<F>(
    name: &str,
    seeds: &[Vec<u8>],
    iters: u64,
    seed: u64,
    decode: F,
) -> Result<Stats, String>
where
    F: Fn(&[u8]) -> Result<(), String>,
{
    let mut m = Mutator::new(seed);
    let mut stats = Stats::default();
    let empty = [Vec::new()];
    let seeds = if seeds.is_empty() { &empty[..] } else { seeds };
    for i in 0..iters {
        let input = m.bytes(&seeds[(i as usize) % seeds.len()]);
        judge(name, &mut stats, || decode(&input), || hex(&input))?;
    }
    Ok(stats)
}

/// As [`run_bytes`] for text inputs.
pub fn run_text<F>(
    name: &str,
    seeds: &[String],
    iters: u64,
    seed: u64,
    decode: F,
) -> Result<Stats, String>
where
    F: Fn(&str) -> Result<(), String>,
{
    let mut m = Mutator::new(seed);
    let mut stats = Stats::default();
    for i in 0..iters {
        let input = m.text(&seeds[(i as usize) % seeds.len().max(1)]);
        judge(name, &mut stats, || decode(&input), || format!("{input:?}"))?;
    }
    Ok(stats)
}

fn judge(
    name: &str,
    stats: &mut Stats,
    f: impl FnOnce() -> Result<(), String>,
    show: impl Fn() -> String,
) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => stats.accepted += 1,
        Ok(Err(msg)) if msg.trim().is_empty() => {
            return Err(format!(
                "{name}: rejected with an empty message: {}",
                show()
            ))
        }
        Ok(Err(_)) => stats.rejected += 1,
        Err(p) => {
            let why = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(format!("{name}: PANIC ({why}) on input {}", show()));
        }
    }
    Ok(())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Decodes a golden fixture file ("name hex" lines, `#` comments) into its byte samples.
pub fn golden(text: &str) -> Vec<Vec<u8>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| {
            (0..h.len())
                .step_by(2)
                .map(|i| h.get(i..i + 2).and_then(|x| u8::from_str_radix(x, 16).ok()))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_decoder_is_caught_with_its_input() {
        let r = run_bytes("boom", &[vec![1, 2, 3]], 50, 1, |b| {
            if b.len() > 3 {
                panic!("too long");
            }
            Ok(())
        });
        let e = r.unwrap_err();
        assert!(e.contains("PANIC (too long)"), "{e}");
    }

    #[test]
    fn empty_rejections_fail_and_golden_lines_parse() {
        assert!(run_bytes("quiet", &[vec![1]], 5, 1, |_| Err(String::new())).is_err());
        let g = golden("# c\nblank 0103\nother ff\n");
        assert_eq!(g, vec![vec![1, 3], vec![0xff]]);
        let mut m = Mutator::new(3);
        assert_ne!(m.text("a = 1\nb = 2"), "a = 1\nb = 2");
    }
}
