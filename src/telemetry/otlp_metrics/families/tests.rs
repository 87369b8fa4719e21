use super::*;

const TIMES: Times = Times { start: 5, now: 9 };

fn by_name<'m>(metrics: &'m [Metric], name: &str) -> &'m metric::Data {
    let m = metrics.iter().find(|m| m.name == name);
    m.and_then(|m| m.data.as_ref())
        .unwrap_or_else(|| panic!("no {name} in {metrics:#?}"))
}

fn text_attr(kv: &KeyValue) -> (&str, &str) {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => (kv.key.as_str(), s.as_str()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn counters_gauges_and_histograms_are_read_back_exactly() {
    let text = "# HELP weir_requests Requests.\n# TYPE weir_requests counter\n\
        weir_requests_total{route=\"a\\\"b\\\\c\\nd\",status=\"2xx\"} 3\n\
        # HELP weir_spend Spend, in USD.\n# TYPE weir_spend counter\n\
        weir_spend_total{key=\"k\"} 0.25\n\
        # TYPE weir_open gauge\nweir_open -2\n\
        # TYPE weir_empty counter\n\
        # TYPE weir_latency histogram\n\
        weir_latency_sum{route=\"a\"} 0.5\nweir_latency_count{route=\"a\"} 3\n\
        weir_latency_bucket{le=\"0.1\",route=\"a\"} 1\n\
        weir_latency_bucket{le=\"1.0\",route=\"a\"} 3\n\
        weir_latency_bucket{le=\"+Inf\",route=\"a\"} 3\n\
        weir_latency_sum{route=\"b\"} 9.0\nweir_latency_count{route=\"b\"} 1\n\
        weir_latency_bucket{le=\"0.1\",route=\"b\"} 0\n\
        weir_latency_bucket{le=\"1.0\",route=\"b\"} 0\n\
        weir_latency_bucket{le=\"+Inf\",route=\"b\"} 1\n# EOF\n";
    let (metrics, unread) = metrics(text, TIMES);
    assert_eq!(unread, 0);
    let names: Vec<_> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["weir_requests", "weir_spend", "weir_open", "weir_latency"],
        "a family with no series is left out"
    );
    assert_eq!(metrics[0].description, "Requests.");
    let metric::Data::Sum(sum) = by_name(&metrics, "weir_requests") else {
        panic!("a counter is a sum")
    };
    assert!(sum.is_monotonic);
    assert_eq!(
        sum.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    let p = &sum.data_points[0];
    assert_eq!(
        p.value,
        Some(number_data_point::Value::AsInt(3)),
        "an integer stays one"
    );
    assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (5, 9));
    let attrs: Vec<_> = p.attributes.iter().map(text_attr).collect();
    assert_eq!(attrs, [("route", "a\"b\\c\nd"), ("status", "2xx")]);
    let metric::Data::Sum(spend) = by_name(&metrics, "weir_spend") else {
        panic!("a sum")
    };
    assert_eq!(
        spend.data_points[0].value,
        Some(number_data_point::Value::AsDouble(0.25))
    );
    let metric::Data::Gauge(open) = by_name(&metrics, "weir_open") else {
        panic!("a gauge")
    };
    assert_eq!(
        open.data_points[0].value,
        Some(number_data_point::Value::AsInt(-2))
    );
    let metric::Data::Histogram(h) = by_name(&metrics, "weir_latency") else {
        panic!("a histogram")
    };
    assert_eq!(h.data_points.len(), 2);
    let a = &h.data_points[0];
    assert_eq!(
        a.attributes.iter().map(text_attr).collect::<Vec<_>>(),
        [("route", "a")]
    );
    assert_eq!((a.count, a.sum), (3, Some(0.5)));
    assert_eq!(a.explicit_bounds, [0.1, 1.0]);
    assert_eq!(a.bucket_counts, [1, 2, 0], "per bucket, not cumulative");
    let b = &h.data_points[1];
    assert_eq!((b.count, b.bucket_counts.as_slice()), (1, &[0, 0, 1][..]));
}

#[test]
fn what_is_not_understood_is_counted_not_guessed() {
    let text = "# TYPE weir_x counter\nweir_x_total 1\nweir_y_total 2\nweir_x_total{bad 3\n\
        # TYPE weir_h histogram\nweir_h_count 1\n\
        weir_h_sum 1.0\nweir_h_count 1\nweir_h_bucket{le=\"1.0\"} 2\nweir_h_bucket{le=\"+Inf\"} 1\n";
    let (metrics, unread) = metrics(text, TIMES);
    // Another family's sample, a broken label set, a count before its sum,
    // a bucket count going down.
    assert_eq!(unread, 4);
    assert_eq!(metrics.len(), 2);
}

#[test]
fn every_line_of_weirs_own_registry_is_understood() {
    let m = crate::telemetry::Metrics::new();
    m.config_reload(true, 2);
    m.trace_spans().dropped.inc();
    let text = m.encode();
    let (metrics, unread) = metrics(&text, TIMES);
    assert_eq!(unread, 0, "{text}");
    let reloads = metrics.iter().find(|m| m.name == "weir_config_reloads");
    assert!(reloads.is_some(), "{metrics:#?}");
}
