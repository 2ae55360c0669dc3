//! Medians, 95th percentiles and ratios of interleaved samples, and how the report writes times
//! and counts.
//!
//! Every variant of a section is measured once per round, in the same order, so that what
//! drifts during a run (the CPU's clock, a page cache, another process) falls on all of them
//! alike; a variant's ratio to the section's baseline is the median of the per-round ratios
//! (pair by pair), not the ratio of two medians taken at different times.

use std::time::Duration;

/// The samples of one variant, one per round.
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    pub fn median(&self) -> Duration {
        percentile(&self.0, 50)
    }

    pub fn p95(&self) -> Duration {
        percentile(&self.0, 95)
    }

    /// The median of `self[i] / baseline[i]` over the rounds both have; NaN when there are none.
    pub fn ratio_to(&self, baseline: &Samples) -> f64 {
        let mut ratios: Vec<f64> = self
            .0
            .iter()
            .zip(&baseline.0)
            .filter(|(_, b)| !b.is_zero())
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN)
    }
}

/// The nearest-rank `pct`th percentile; zero for no samples.
fn percentile(samples: &[Duration], pct: usize) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (pct * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(Duration::ZERO)
}

/// A duration as milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// A count with a comma between thousands, as the report writes counts.
pub fn thousands(n: usize) -> String {
    match n {
        0..1000 => n.to_string(),
        _ => format!("{},{:03}", thousands(n / 1000), n % 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms_list(values: &[u64]) -> Samples {
        Samples(values.iter().map(|v| Duration::from_millis(*v)).collect())
    }

    #[test]
    fn the_median_and_p95_are_nearest_rank() {
        let s = ms_list(&[5, 1, 4, 2, 3]);
        assert_eq!(s.median(), Duration::from_millis(3));
        assert_eq!(s.p95(), Duration::from_millis(5));
        let many = ms_list(&(1..=100).collect::<Vec<_>>());
        assert_eq!(many.median(), Duration::from_millis(50));
        assert_eq!(many.p95(), Duration::from_millis(95));
        assert_eq!(Samples::default().median(), Duration::ZERO);
    }

    #[test]
    fn counts_have_a_comma_between_thousands() {
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_002_003), "1,002,003");
    }

    #[test]
    fn the_ratio_is_taken_round_by_round() {
        // A drift that doubles both in the second half leaves the pairwise ratio at 2.
        let baseline = ms_list(&[1, 1, 2, 2]);
        let variant = ms_list(&[2, 2, 4, 4]);
        assert!((variant.ratio_to(&baseline) - 2.0).abs() < 1e-9);
        assert!(variant.ratio_to(&Samples::default()).is_nan());
    }
}
