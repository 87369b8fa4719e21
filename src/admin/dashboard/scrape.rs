//! The process's own Prometheus exposition, read back as samples: the
//! dashboard shows what `/metrics` shows, from the same counters, so
//! nothing is counted twice and nothing is added to the request path.

use std::collections::HashMap;

/// One line of the exposition: a series and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) value: f64,
}

impl Sample {
    /// The value of label `name` ("" when the series has none).
    pub(crate) fn label(&self, name: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Every sample of one exposition, by metric name (as written, with its
/// `_total`, `_bucket`, `_sum` or `_count` suffix).
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    by_name: HashMap<String, Vec<Sample>>,
}

impl Scrape {
    /// Parse the text exposition; lines that do not read as a sample
    /// (comments, `# EOF`, anything malformed) are skipped.
    pub(crate) fn parse(text: &str) -> Scrape {
        let mut by_name: HashMap<String, Vec<Sample>> = HashMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if let Some((name, sample)) = sample(line) {
                by_name.entry(name).or_default().push(sample);
            }
        }
        Scrape { by_name }
    }

    /// The samples of metric `name` (none when absent).
    pub(crate) fn all(&self, name: &str) -> &[Sample] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The sum of metric `name` over the series whose labels match all of
    /// `with`.
    pub(crate) fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.all(name)
            .iter()
            .filter(|s| with.iter().all(|(k, v)| s.label(k) == *v))
            .map(|s| s.value)
            .sum::<f64>()
            + 0.0 // an empty sum is -0.0
    }

    /// The sums of metric `name` by the value of label `by`.
    pub(crate) fn sum_by(&self, name: &str, by: &str) -> HashMap<String, f64> {
        let mut out: HashMap<String, f64> = HashMap::new();
        for s in self.all(name) {
            *out.entry(s.label(by).to_string()).or_default() += s.value;
        }
        out
    }

    /// A histogram's cumulative buckets for the series whose labels match
    /// `with`, as (upper bound, count), in the order of the exposition
    /// (ascending; the last is `+Inf`).
    pub(crate) fn buckets(&self, name: &str, with: &[(&str, &str)]) -> Vec<(f64, f64)> {
        self.all(&format!("{name}_bucket"))
            .iter()
            .filter(|s| with.iter().all(|(k, v)| s.label(k) == *v))
            .filter_map(|s| Some((le(s.label("le"))?, s.value)))
            .collect()
    }
}

fn le(text: &str) -> Option<f64> {
    match text {
        "+Inf" => Some(f64::INFINITY),
        t => t.parse().ok(),
    }
}

/// A sample line's name and sample (the line read by
/// `telemetry::exposition`).
fn sample(text: &str) -> Option<(String, Sample)> {
    let line = crate::telemetry::exposition::line(text)?;
    let value = match line.value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let sample = Sample {
        labels: line.labels,
        value,
    };
    Some((line.name.to_string(), sample))
}

/// The `q` quantile (0..1) of the observations a histogram gained
/// between two readings of its cumulative buckets, interpolated within
/// the bucket it falls in, in the buckets' unit; `None` with no
/// observations.
pub(crate) fn quantile(now: &[(f64, f64)], before: &[(f64, f64)], q: f64) -> Option<f64> {
    let delta: Vec<(f64, f64)> = now
        .iter()
        .map(|&(le, n)| {
            let was = before
                .iter()
                .find(|(b, _)| *b == le)
                .map_or(0.0, |(_, c)| *c);
            (le, (n - was).max(0.0))
        })
        .collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in &delta {
        if count >= rank {
            if le.is_infinite() {
                // Past the last finite bound: say that bound.
                return Some(lower.0);
            }
            let within = count - lower.1;
            let share = if within > 0.0 {
                (rank - lower.1) / within
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * share);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP weir_requests Requests answered, by route and status.\n\
# TYPE weir_requests counter\n\
weir_requests_total{route=\"api\",status=\"200\"} 7\n\
weir_requests_total{route=\"api\",status=\"502\"} 3\n\
weir_requests_total{route=\"we\\\"ird, {x}\",status=\"200\"} 1\n\
weir_requests_in_flight 2\n\
weir_request_duration_seconds_bucket{le=\"0.001\",route=\"api\"} 0\n\
weir_request_duration_seconds_bucket{le=\"0.002\",route=\"api\"} 5\n\
weir_request_duration_seconds_bucket{le=\"+Inf\",route=\"api\"} 10\n\
garbage line\n\
# EOF\n";

    #[test]
    fn samples_are_read_with_escaped_labels_and_bad_lines_skipped() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.sum("weir_requests_total", &[("route", "api")]), 10.0);
        assert_eq!(
            s.sum("weir_requests_total", &[("route", "we\"ird, {x}")]),
            1.0
        );
        assert_eq!(s.sum("weir_requests_in_flight", &[]), 2.0);
        let by = s.sum_by("weir_requests_total", "status");
        assert_eq!(by.get("502"), Some(&3.0));
        let b = s.buckets("weir_request_duration_seconds", &[("route", "api")]);
        assert_eq!(b, vec![(0.001, 0.0), (0.002, 5.0), (f64::INFINITY, 10.0)]);
        assert!(s.all("garbage").is_empty());
    }

    #[test]
    fn quantiles_are_of_what_was_observed_between_two_readings() {
        let before = [(0.001, 0.0), (0.002, 4.0), (f64::INFINITY, 4.0)];
        let now = [
            (0.001, 0.0),
            (0.002, 4.0),
            (0.004, 0.0),
            (f64::INFINITY, 4.0),
        ];
        assert_eq!(quantile(&now, &before, 0.5), None, "nothing new");
        let now = [(0.001, 2.0), (0.002, 6.0), (f64::INFINITY, 8.0)];
        // Since `before`: 2 under 1 ms, 0 more under 2 ms, 2 past it.
        assert_eq!(quantile(&now, &before, 0.5), Some(0.001));
        assert_eq!(quantile(&now, &before, 0.99), Some(0.002));
        let fresh = [(0.001, 0.0), (0.002, 10.0), (f64::INFINITY, 10.0)];
        let p50 = quantile(&fresh, &[], 0.5).expect("observed");
        assert!((p50 - 0.0015).abs() < 1e-9, "{p50}");
    }
}
