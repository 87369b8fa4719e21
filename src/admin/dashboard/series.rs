//! The dashboard's short memory: the metrics read every `interval` into a
//! bounded ring, so the page can draw request rates, errors and spend
//! over the last half hour. One task does it, off the request path, at
//! the cost of one `/metrics` scrape per interval.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::scrape::Scrape;
use crate::sync::Locked;
use crate::telemetry::Metrics;

/// Samples kept: half an hour at the default interval of 5 s.
pub(crate) const POINTS: usize = 360;
/// Series kept per chart (the largest; the rest are summed as `other`):
/// bounds the ring's memory whatever the number of routes or clients.
pub(crate) const SERIES: usize = 12;

/// The cumulative counters one sample keeps, by chart then series name.
#[derive(Debug, Default, Clone)]
pub(crate) struct Point {
    /// Unix seconds.
    pub(crate) at: f64,
    pub(crate) charts: BTreeMap<&'static str, BTreeMap<String, f64>>,
}

/// What the sampler keeps: the ring and the last two readings (for rates
/// and the latest figures), plus the reading about a minute back (for
/// latency percentiles).
#[derive(Default)]
pub(crate) struct Memory {
    pub(crate) points: VecDeque<Point>,
    pub(crate) latest: Option<Arc<Scrape>>,
    pub(crate) previous: Option<(f64, Arc<Scrape>)>,
    /// Readings of the last minute, oldest first, for percentiles.
    pub(crate) minute: VecDeque<(f64, Arc<Scrape>)>,
}

/// The ring, shared between the sampler and the admin handlers.
#[derive(Default, Clone)]
pub(crate) struct Series(Arc<Mutex<Memory>>);

impl Series {
    /// Read the metrics every `interval` until the task is dropped.
    pub(crate) async fn sample(self, metrics: Arc<Metrics>, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let scrape = Arc::new(Scrape::parse(&metrics.encode()));
            self.push(unix_now(), scrape, interval);
        }
    }

    /// Keep one reading taken at `at`.
    pub(crate) fn push(&self, at: f64, scrape: Arc<Scrape>, interval: Duration) {
        let point = point(at, &scrape);
        let mut m = self.0.locked();
        if m.points.len() >= POINTS {
            m.points.pop_front();
        }
        m.points.push_back(point);
        let keep = (60.0 / interval.as_secs_f64().max(1.0)).ceil() as usize + 1;
        if m.minute.len() >= keep {
            m.minute.pop_front();
        }
        m.minute.push_back((at, scrape.clone()));
        m.previous = m.latest.take().map(|l| {
            let at_before = m.points.iter().rev().nth(1).map_or(at, |p| p.at);
            (at_before, l)
        });
        m.latest = Some(scrape);
    }

    /// What the handlers read, under the lock for as long as `f` runs.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Memory) -> R) -> R {
        f(&self.0.locked())
    }
}

pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The counters the charts draw, from one reading.
fn point(at: f64, s: &Scrape) -> Point {
    let mut charts = BTreeMap::new();
    charts.insert("requests", top(s.sum_by("weir_requests_total", "route")));
    let mut errors: HashMap<String, f64> = HashMap::new();
    for x in s.all("weir_requests_total") {
        if x.label("status").starts_with('5') {
            *errors.entry(x.label("route").to_string()).or_default() += x.value;
        }
    }
    charts.insert("errors", top(errors));
    charts.insert("shed", top(s.sum_by("weir_requests_shed_total", "reason")));
    charts.insert(
        "spend",
        top(s.sum_by("weir_llm_client_spend_total", "client")),
    );
    let tokens = s.sum_by("weir_llm_client_tokens_total", "model");
    charts.insert("tokens", top(tokens));
    Point { at, charts }
}

/// The `SERIES` largest of `all`, and the rest summed as `other`.
fn top(all: HashMap<String, f64>) -> BTreeMap<String, f64> {
    let mut all: Vec<(String, f64)> = all.into_iter().collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (i, (name, v)) in all.into_iter().enumerate() {
        let name = if i < SERIES { name } else { "other".into() };
        *out.entry(name).or_default() += v;
    }
    out
}

/// The ring as the page draws it: per chart and series, the change per
/// second between consecutive samples (a counter that went down — a
/// series that left the top — counts as no change); `spend` and `tokens`
/// as the amount per interval.
pub(crate) fn json(m: &Memory, interval: Duration) -> serde_json::Value {
    let points: Vec<&Point> = m.points.iter().collect();
    let at: Vec<f64> = points.iter().skip(1).map(|p| p.at.floor()).collect();
    let mut charts = serde_json::Map::new();
    for chart in ["requests", "errors", "shed", "spend", "tokens"] {
        let per_second = matches!(chart, "requests" | "errors" | "shed");
        let mut names: Vec<&String> = points
            .iter()
            .filter_map(|p| p.charts.get(chart))
            .flat_map(BTreeMap::keys)
            .collect();
        names.sort();
        names.dedup();
        let mut series = serde_json::Map::new();
        for name in names {
            let values: Vec<f64> = points
                .windows(2)
                .map(|w| {
                    let get = |p: &Point| p.charts.get(chart).and_then(|c| c.get(name)).copied();
                    let (Some(now), before) = (get(w[1]), get(w[0])) else {
                        return 0.0;
                    };
                    let delta = (now - before.unwrap_or(0.0)).max(0.0);
                    let seconds = (w[1].at - w[0].at).max(0.001);
                    if per_second { delta / seconds } else { delta }
                })
                .collect();
            series.insert(name.clone(), serde_json::json!(values));
        }
        charts.insert(chart.into(), serde_json::Value::Object(series));
    }
    serde_json::json!({
        "interval_seconds": interval.as_secs_f64(),
        "points": POINTS,
        "at": at,
        "charts": charts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(api: u64, errors: u64, spend: f64) -> Arc<Scrape> {
        Arc::new(Scrape::parse(&format!(
            "weir_requests_total{{route=\"api\",status=\"200\"}} {api}\n\
             weir_requests_total{{route=\"api\",status=\"503\"}} {errors}\n\
             weir_llm_client_spend_total{{client=\"alice\",model=\"m\"}} {spend}\n"
        )))
    }

    #[test]
    fn the_ring_is_bounded_and_gives_rates_between_samples() {
        let s = Series::default();
        let step = Duration::from_secs(5);
        for i in 0..(POINTS as u64 + 10) {
            s.push(
                1000.0 + 5.0 * i as f64,
                reading(10 * i, i, 0.5 * i as f64),
                step,
            );
        }
        s.with(|m| {
            assert_eq!(m.points.len(), POINTS, "bounded");
            assert!(m.minute.len() <= 13, "a minute of readings");
            let j = json(m, step);
            let rate = &j["charts"]["requests"]["api"];
            assert_eq!(rate.as_array().map(Vec::len), Some(POINTS - 1));
            // 11 requests (10 + 1 error) per 5 s.
            assert_eq!(rate[0].as_f64(), Some(11.0 / 5.0));
            assert_eq!(j["charts"]["errors"]["api"][0].as_f64(), Some(0.2));
            assert_eq!(j["charts"]["spend"]["alice"][3].as_f64(), Some(0.5));
        });
    }

    #[test]
    fn many_series_are_kept_as_the_largest_and_the_rest() {
        let all: HashMap<String, f64> = (0..40).map(|i| (format!("r{i}"), i as f64)).collect();
        let kept = top(all);
        assert_eq!(kept.len(), SERIES + 1);
        assert_eq!(kept.get("r39"), Some(&39.0));
        assert_eq!(
            kept.get("other"),
            Some(&(0..28).map(f64::from).sum::<f64>())
        );
    }
}
