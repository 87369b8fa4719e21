//! The text exposition `/metrics` serves, read back as OTLP metrics, a
//! family at a time: the same registry, the same numbers, one source of
//! truth (prometheus-client offers no other walk of a registry;
//! docs/decisions/095).
//!
//! What prometheus-client writes: `# HELP`, `# TYPE` (and `# UNIT`) before
//! each family's samples; a counter's sample is `<name>_total`, a gauge's
//! `<name>`, a histogram's series `<name>_sum`, `<name>_count`, then its
//! cumulative `<name>_bucket{le="…"}` up to `+Inf`. Label values are
//! quoted with `\\`, `\"` and `\n` escaped.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};

use crate::telemetry::exposition::Line;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint, Sum,
    metric, number_data_point,
};

/// The times every point of one export carries: counting began at
/// `start` (cumulative temporality), the values are as of `now`.
#[derive(Clone, Copy)]
pub(super) struct Times {
    pub(super) start: u64,
    pub(super) now: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Counter,
    Gauge,
    Histogram,
    /// A type weir does not register (info, stateset…): its samples are
    /// skipped.
    Other,
}

struct Family {
    name: String,
    kind: Type,
    help: String,
    unit: String,
    numbers: Vec<NumberDataPoint>,
    histograms: Vec<HistogramDataPoint>,
}

/// The metrics in `text`, and how many sample lines were not understood
/// (none, as long as the text is prometheus-client's).
pub(super) fn metrics(text: &str, times: Times) -> (Vec<Metric>, usize) {
    let mut out = Vec::new();
    let mut unread = 0usize;
    let mut help: Option<(&str, String)> = None;
    let mut family: Option<Family> = None;
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let (word, rest) = comment.split_once(' ').unwrap_or((comment, ""));
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            match word {
                "HELP" => help = Some((name, unescape_help(text))),
                "TYPE" => {
                    out.extend(family.take().and_then(finish));
                    family = Some(Family {
                        name: name.to_string(),
                        kind: kind(text),
                        help: help
                            .take()
                            .filter(|(n, _)| *n == name)
                            .map(|(_, h)| h)
                            .unwrap_or_default(),
                        unit: String::new(),
                        numbers: Vec::new(),
                        histograms: Vec::new(),
                    });
                }
                "UNIT" => {
                    if let Some(f) = family.as_mut().filter(|f| f.name == name) {
                        f.unit = text.to_string();
                    }
                }
                _ => {}
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let taken = match (crate::telemetry::exposition::line(line), family.as_mut()) {
            (Some(s), Some(f)) => f.take(s, times).is_some(),
            _ => false,
        };
        if !taken {
            unread = unread.saturating_add(1);
        }
    }
    out.extend(family.and_then(finish));
    (out, unread)
}

fn kind(text: &str) -> Type {
    match text {
        "counter" => Type::Counter,
        "gauge" => Type::Gauge,
        "histogram" => Type::Histogram,
        _ => Type::Other,
    }
}

/// HELP text escapes `\\` and `\n`.
fn unescape_help(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\\\", "\\")
}

impl Family {
    /// Take one sample of this family; `None` when it is not one.
    fn take(&mut self, s: Line<'_>, times: Times) -> Option<()> {
        let suffix = s.name.strip_prefix(self.name.as_str())?;
        match (self.kind, suffix) {
            (Type::Counter, "_total") | (Type::Gauge, "") => {
                self.numbers.push(NumberDataPoint {
                    attributes: attributes(&s.labels),
                    start_time_unix_nano: times.start,
                    time_unix_nano: times.now,
                    value: Some(number(s.value)?),
                    ..Default::default()
                });
                Some(())
            }
            (Type::Histogram, "_sum") => {
                self.histograms.push(HistogramDataPoint {
                    attributes: attributes(&s.labels),
                    start_time_unix_nano: times.start,
                    time_unix_nano: times.now,
                    sum: Some(float(s.value)?),
                    ..Default::default()
                });
                Some(())
            }
            (Type::Histogram, "_count") => {
                let point = self.series(&s.labels)?;
                point.count = s.value.parse().ok()?;
                Some(())
            }
            (Type::Histogram, "_bucket") => {
                let le = s.labels.iter().find(|(k, _)| k == "le")?.1.clone();
                let point = self.series(&s.labels)?;
                let cumulative: u64 = s.value.parse().ok()?;
                let so_far = point
                    .bucket_counts
                    .iter()
                    .try_fold(0u64, |a, n| a.checked_add(*n))?;
                point.bucket_counts.push(cumulative.checked_sub(so_far)?);
                if le != "+Inf" {
                    point.explicit_bounds.push(float(&le)?);
                }
                Some(())
            }
            _ => None,
        }
    }

    /// The histogram series a `_count` or `_bucket` line belongs to: the
    /// one its `_sum` began, with the same labels but `le`.
    fn series(&mut self, labels: &[(String, String)]) -> Option<&mut HistogramDataPoint> {
        let want = attributes(labels);
        self.histograms.last_mut().filter(|p| p.attributes == want)
    }
}

/// A family's metric; `None` for one with no series (or of a type weir
/// does not export).
fn finish(f: Family) -> Option<Metric> {
    let cumulative = AggregationTemporality::Cumulative as i32;
    let data = match f.kind {
        Type::Counter if !f.numbers.is_empty() => metric::Data::Sum(Sum {
            data_points: f.numbers,
            aggregation_temporality: cumulative,
            is_monotonic: true,
        }),
        Type::Gauge if !f.numbers.is_empty() => metric::Data::Gauge(Gauge {
            data_points: f.numbers,
        }),
        Type::Histogram if !f.histograms.is_empty() => metric::Data::Histogram(Histogram {
            data_points: f.histograms,
            aggregation_temporality: cumulative,
        }),
        _ => return None,
    };
    Some(Metric {
        name: f.name,
        description: f.help,
        unit: f.unit,
        data: Some(data),
        ..Default::default()
    })
}

/// The labels as attributes (`le` is a histogram's bucket, not one).
fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .filter(|(k, _)| k != "le")
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            }),
            ..Default::default()
        })
        .collect()
}

/// An integer as written stays one; anything else is a double.
fn number(v: &str) -> Option<number_data_point::Value> {
    // i64's parse takes only digits with a sign: `1.0` is a double.
    if let Ok(n) = v.parse::<i64>() {
        return Some(number_data_point::Value::AsInt(n));
    }
    float(v).map(number_data_point::Value::AsDouble)
}

/// A float as written (`+Inf`, `NaN` included).
fn float(v: &str) -> Option<f64> {
    v.parse().ok()
}

#[cfg(test)]
mod tests;
