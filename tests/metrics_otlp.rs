//! OTLP metrics end to end: the real binary with `[telemetry.metrics]`,
//! real requests through it, and the collector stand-in
//! (`common::otlp`), which decodes each export with opentelemetry-proto's
//! prost types: the numbers it gets are the ones `/metrics` serves, with
//! the right OTLP types, bounds and attributes; a collector that is down
//! or silent never slows serving, and its failures are counted and
//! logged once per outage.

mod common;

use std::time::{Duration, Instant};

use common::otlp::{Collector, Mode};
use common::process::*;
use common::*;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, Metric};

const WAIT: Duration = Duration::from_secs(10);

/// A weir process exporting metrics to `endpoint` every 100 ms, with
/// `extra` keys in `[telemetry.metrics]`; its `web` and admin addresses.
fn start(
    dir: &tempfile::TempDir,
    up: std::net::SocketAddr,
    endpoint: &str,
    extra: &str,
) -> (Proc, std::net::SocketAddr, std::net::SocketAddr) {
    let text = format!(
        "[telemetry.metrics]\nendpoint = \"{endpoint}\"\nexport_interval = \"100ms\"\n{extra}\n\
         [log]\nformat = \"json\"\naccess_log = false\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{up}\"\n"
    );
    let mut weir = Proc::run(&write_config(dir, &text));
    let web = weir.listening("web");
    let admin = weir.admin();
    (weir, web, admin)
}

fn metric<'e>(export: &'e ExportMetricsServiceRequest, name: &str) -> Option<&'e Metric> {
    export
        .resource_metrics
        .iter()
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .find(|m| m.name == name)
}

fn attrs(a: &[KeyValue]) -> Vec<(String, String)> {
    a.iter()
        .map(
            |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => (kv.key.clone(), s.clone()),
                other => panic!("{}: {other:?}", kv.key),
            },
        )
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `weir_requests` count for route `main`, status 200, in an export.
fn requests_ok(export: &ExportMetricsServiceRequest) -> Option<i64> {
    let Some(Data::Sum(sum)) = metric(export, "weir_requests")?.data.as_ref() else {
        return None;
    };
    let p = sum
        .data_points
        .iter()
        .find(|p| attrs(&p.attributes) == pairs(&[("route", "main"), ("status", "200")]))?;
    match p.value {
        Some(Number::AsInt(n)) => Some(n),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_collector_gets_the_numbers_metrics_serves_typed_and_labelled() {
    let collector = Collector::start().await;
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = format!("http://{}", collector.addr);
    let (_weir, web, admin) = start(&dir, up, &endpoint, "service_name = \"edge-1\"");
    let client = h1_client();
    for _ in 0..3 {
        assert_eq!(get(&client, &format!("http://{web}/")).await.0, 200);
    }
    let c = collector.clone();
    let got = eventually(WAIT, move || {
        c.metric_exports().iter().any(|e| requests_ok(e) == Some(3))
    })
    .await;
    assert!(got, "{:#?}", collector.metric_exports().last());
    collector.assert_all_taken();
    let exports = collector.metric_exports();
    let export = exports
        .iter()
        .find(|e| requests_ok(e) == Some(3))
        .expect("an export with the three requests");
    // The same number /metrics serves.
    let text = get(&client, &format!("http://{admin}/metrics")).await.2;
    assert_eq!(
        metric_in(&text, "weir_requests_total{route=\"main\",status=\"200\"}"),
        Some(3),
        "{text}"
    );
    let resource = export.resource_metrics[0]
        .resource
        .as_ref()
        .expect("resource");
    let resource = attrs(&resource.attributes);
    assert_eq!(resource[0], ("service.name".into(), "edge-1".into()));
    assert_eq!(resource[1].0, "service.version");
    let scope = export.resource_metrics[0].scope_metrics[0].scope.as_ref();
    assert_eq!(scope.map(|s| s.name.as_str()), Some("weir"));
    // A counter: a monotonic cumulative sum, named as /metrics's family.
    let requests = metric(export, "weir_requests").expect("weir_requests");
    let Some(Data::Sum(sum)) = &requests.data else {
        panic!("a counter is a sum: {requests:?}")
    };
    assert!(sum.is_monotonic);
    assert_eq!(
        sum.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    assert!(requests.description.starts_with("Requests"), "{requests:?}");
    // A histogram: weir's latency buckets, 1 ms doubling to ~65 s.
    let latency = metric(export, "weir_request_duration_seconds").expect("latency");
    let Some(Data::Histogram(h)) = &latency.data else {
        panic!("a histogram: {latency:?}")
    };
    assert_eq!(
        h.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    let point = h
        .data_points
        .iter()
        .find(|p| attrs(&p.attributes) == pairs(&[("route", "main")]))
        .expect("route main's latency");
    let bounds: Vec<f64> = (0..17).map(|i| 0.001 * f64::from(1u32 << i)).collect();
    assert_eq!(point.explicit_bounds, bounds);
    assert_eq!(point.count, 3);
    assert_eq!(point.bucket_counts.iter().sum::<u64>(), 3);
    assert!(point.sum.is_some_and(|s| s > 0.0 && s < 3.0), "{point:?}");
    // A gauge: the running config's generation.
    let generation = metric(export, "weir_config_generation").expect("generation");
    let Some(Data::Gauge(g)) = &generation.data else {
        panic!("a gauge: {generation:?}")
    };
    assert_eq!(g.data_points[0].value, Some(Number::AsInt(1)));
    assert!(g.data_points[0].attributes.is_empty());
    // Cumulative: every export counts from the same start.
    let starts: Vec<u64> = exports
        .iter()
        .filter_map(|e| match &metric(e, "weir_requests")?.data {
            Some(Data::Sum(s)) => Some(s.data_points[0].start_time_unix_nano),
            _ => None,
        })
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
    // The exporter counts its own exports.
    assert!(
        eventually_async(WAIT, || async {
            metric_at(admin, "weir_metrics_exports_total").await >= Some(2)
        })
        .await,
        "exports counted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn over_grpc_the_same_export_is_a_metrics_service_call() {
    let collector = Collector::start().await;
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = format!("http://{}", collector.addr);
    let (_weir, web, _) = start(&dir, up, &endpoint, "protocol = \"grpc\"");
    assert_eq!(get(&h1_client(), &format!("http://{web}/")).await.0, 200);
    let c = collector.clone();
    let got = eventually(WAIT, move || {
        c.metric_exports().iter().any(|e| requests_ok(e) == Some(1))
    })
    .await;
    assert!(got, "{:#?}", collector.metric_exports().last());
    collector.assert_all_taken();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_collector_slows_nothing_and_its_outage_is_counted_and_logged_once() {
    let collector = Collector::start().await;
    collector.set_mode(Mode::Blackhole);
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = format!("http://{}", collector.addr);
    let (mut weir, web, admin) = start(&dir, up, &endpoint, "export_timeout = \"50ms\"");
    let client = h1_client();
    // Requests while exports hang: answered as ever.
    let began = Instant::now();
    for _ in 0..20 {
        assert_eq!(get(&client, &format!("http://{web}/")).await.0, 200);
    }
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    let failed = eventually_async(WAIT, || async {
        metric_at(admin, "weir_metrics_exports_failed_total").await >= Some(3)
    })
    .await;
    assert!(failed, "failures counted");
    assert_eq!(
        metric_at(admin, "weir_metrics_exports_total").await,
        Some(0)
    );
    // The collector is back: exports go again, and that is said once.
    collector.set_mode(Mode::Take);
    assert!(
        eventually_async(WAIT, || async {
            metric_at(admin, "weir_metrics_exports_total").await >= Some(1)
        })
        .await
    );
    weir.wait_for(|l| l.contains("the collector takes them again"));
    let warnings = weir
        .seen
        .iter()
        .filter(|l| l.contains("metrics export failed"))
        .count();
    assert_eq!(
        warnings,
        1,
        "one line per outage:\n{}",
        weir.seen.join("\n")
    );
    // A refusing collector is an outage too.
    collector.set_mode(Mode::Refuse);
    let before = metric_at(admin, "weir_metrics_exports_failed_total").await;
    assert!(
        eventually_async(WAIT, || async {
            metric_at(admin, "weir_metrics_exports_failed_total").await > before
        })
        .await
    );
    weir.wait_for_count(2, |l| l.contains("metrics export failed"));
    assert!(weir.seen.iter().any(|l| l.contains("503")), "why is logged");
}
