//! rozone's own implementation of the part of `base2histogram`'s API that openraft uses,
//! patched in for the real crate by the workspace's `[patch.crates-io]`.
//!
//! **Why.** `base2histogram` 0.2.3 builds, on the first `Histogram::new()`, the lookup tables
//! of all sixteen bucket widths at once (`static LOG_SCALES`), though openraft only ever uses
//! width 3: 26.7 MiB computed and resident in every process that starts a Raft group
//! (heaptrack of an idle SCM, 2026-12-07: the largest consumer, ~45% of its RSS). openraft
//! records replication batch sizes into such a histogram on every append, with or without
//! its `runtime-stats` feature, so the dependency cannot be turned off.
//!
//! **What.** The same shape as upstream's default width: four buckets per power of two
//! (252 in all for `u64`), computed with bit arithmetic instead of tables, counts allocated
//! on the first `record`. Percentiles interpolate linearly inside a bucket. rozone reads
//! none of openraft's histograms today; they exist so openraft builds and runs unchanged.
//! When openraft is upgraded, check whether upstream still needs this (the build fails if
//! openraft starts using API this crate lacks).

use std::fmt;
use std::marker::PhantomData;

/// Buckets per power of two: the top bit of a value and the next two.
const SUB: usize = 4;
/// Values below `SUB` get a bucket each; every power of two from 2^2 to 2^63 gets `SUB`.
pub const BUCKETS: usize = SUB + (64 - 2) * SUB;

/// The bucket a value falls in.
fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros() as usize; // >= 2
    let sub = ((v >> (exp - 2)) & 0b11) as usize;
    SUB + (exp - 2) * SUB + sub
}

/// The smallest value of a bucket and the number of values it spans.
fn bucket_span(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, 1);
    }
    let exp = (i - SUB) / SUB + 2;
    let sub = ((i - SUB) % SUB) as u64;
    let step = 1u64 << (exp - 2);
    ((SUB as u64 + sub) << (exp - 2), step)
}

/// Percentile statistics of a histogram (the fields openraft prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PercentileStats {
    /// Number of samples recorded.
    pub samples: u64,
    pub p0_1: u64,
    pub p1: u64,
    pub p5: u64,
    pub p10: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
}

impl fmt::Display for PercentileStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={} p0.1={} p1={} p5={} p10={} p50={} p90={} p99={} p99.9={}",
            self.samples,
            self.p0_1,
            self.p1,
            self.p5,
            self.p10,
            self.p50,
            self.p90,
            self.p99,
            self.p99_9
        )
    }
}

/// A histogram of `u64` samples in logarithmic buckets (relative error under 25%).
///
/// `T` mirrors upstream's per-period metadata parameter; this histogram keeps one period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram<T = ()> {
    /// Empty until the first sample, then `BUCKETS` long.
    counts: Vec<u64>,
    total: u64,
    _data: PhantomData<T>,
}

impl<T> Default for Histogram<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Histogram<T> {
    /// An empty histogram; allocates nothing until the first sample.
    pub fn new() -> Self {
        Self {
            counts: Vec::new(),
            total: 0,
            _data: PhantomData,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `count` samples of one value (saturating: a counter never wraps).
    pub fn record_n(&mut self, value: u64, count: u64) {
        if count == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        let c = &mut self.counts[bucket_of(value)];
        *c = c.saturating_add(count);
        self.total = self.total.saturating_add(count);
    }

    /// Number of samples recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        self.counts.clear();
        self.total = 0;
    }

    /// Adds another histogram's samples to this one.
    pub fn merge(&mut self, other: &Histogram<T>) {
        for (i, &c) in other.counts.iter().enumerate() {
            if c > 0 {
                let (low, _) = bucket_span(i);
                self.record_n(low, c);
            }
        }
    }

    /// The estimated value at fraction `p` (0.0..=1.0) of the samples; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total as f64 * p).ceil() as u64).clamp(1, self.total);
        let mut before = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 && before + c >= rank {
                let (low, span) = bucket_span(i);
                // Linear inside the bucket: the k-th of c samples sits at (k - 1/2) / c.
                let frac = ((rank - before) as f64 - 0.5) / c as f64;
                return low.saturating_add((span as f64 * frac) as u64);
            }
            before += c;
        }
        0
    }

    /// Samples and the percentiles openraft reports.
    pub fn percentile_stats(&self) -> PercentileStats {
        PercentileStats {
            samples: self.total,
            p0_1: self.percentile(0.001),
            p1: self.percentile(0.01),
            p5: self.percentile(0.05),
            p10: self.percentile(0.10),
            p50: self.percentile(0.50),
            p90: self.percentile(0.90),
            p99: self.percentile(0.99),
            p99_9: self.percentile(0.999),
        }
    }

    /// Non-empty buckets as (smallest value, values spanned, count).
    fn nonempty(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| {
                let (low, span) = bucket_span(i);
                (low, span, c)
            })
    }
}

/// Named histograms drawn as text bars, one row per non-empty bucket.
#[derive(Debug, Clone)]
pub struct AsciiChart<T = ()> {
    series: Vec<(String, Histogram<T>)>,
}

impl<T> Default for AsciiChart<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> AsciiChart<T> {
    pub fn new() -> Self {
        Self { series: Vec::new() }
    }

    /// Adds a named histogram.
    pub fn add(mut self, name: &str, hist: Histogram<T>) -> Self {
        self.series.push((name.to_string(), hist));
        self
    }

    /// The chart with a bar per non-empty bucket.
    pub fn detailed(&self) -> &Self {
        self
    }
}

impl<T> fmt::Display for AsciiChart<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const BAR: u64 = 40;
        for (name, h) in &self.series {
            writeln!(f, "{name}: {}", h.percentile_stats())?;
            let most = h.nonempty().map(|(_, _, c)| c).max().unwrap_or(0);
            for (low, span, c) in h.nonempty() {
                let len = (c.saturating_mul(BAR) / most.max(1)).max(1) as usize;
                let high = low.saturating_add(span - 1);
                writeln!(f, "  {low:>20}..={high:<20} {c:>10} {}", "#".repeat(len))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_u64_in_order_without_gaps() {
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (low, span) = bucket_span(i);
            assert_eq!(low, next, "bucket {i}");
            assert_eq!(bucket_of(low), i);
            assert_eq!(bucket_of(low + (span - 1)), i);
            next = low.wrapping_add(span);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn percentiles_land_in_the_right_bucket() {
        let mut h = Histogram::<()>::new();
        assert_eq!(h.percentile_stats(), PercentileStats::default());
        for v in 1..=1000 {
            h.record(v);
        }
        let s = h.percentile_stats();
        assert_eq!(s.samples, 1000);
        // Within a quarter of the true value: the bucket width at that magnitude.
        for (got, want) in [(s.p1, 10), (s.p50, 500), (s.p90, 900), (s.p99, 990)] {
            assert!(got.abs_diff(want) <= want / 4, "got {got}, want ~{want}");
        }
        assert!(s.p0_1 <= s.p1 && s.p1 <= s.p5 && s.p5 <= s.p10 && s.p10 <= s.p50);
        assert!(s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.p99_9);
    }

    #[test]
    fn merge_clear_and_extremes() {
        let mut a = Histogram::<()>::new();
        let mut b = Histogram::<()>::new();
        a.record(u64::MAX);
        b.record_n(7, 3);
        a.merge(&b);
        assert_eq!(a.total(), 4);
        assert_eq!(a.percentile(0.5), 7);
        assert!(a.percentile(1.0) >= 3 << 62);
        a.clear();
        assert_eq!((a.total(), a.percentile(0.5)), (0, 0));
    }

    #[test]
    fn chart_draws_one_row_per_nonempty_bucket() {
        let mut h = Histogram::<()>::new();
        h.record_n(1, 4);
        h.record(100);
        let text = AsciiChart::new().add("batch", h).detailed().to_string();
        assert!(text.starts_with("batch: n=5"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }
}
