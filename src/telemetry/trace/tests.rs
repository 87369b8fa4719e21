use super::*;

fn value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).expect("header")
}

#[test]
fn traceparent_is_read_as_w3c_says() {
    let p = parse_traceparent(&value(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ))
    .expect("valid");
    assert_eq!(to_hex(&p.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(to_hex(&p.span_id), "b7ad6b7169203331");
    assert!(p.sampled);
    let unsampled = parse_traceparent(&value(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
    ));
    assert!(!unsampled.expect("valid").sampled);
    // A later version may add fields after a dash.
    assert!(
        parse_traceparent(&value(
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra"
        ))
        .is_some()
    );
    for bad in [
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
        "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
        "",
        "00-é-",
    ] {
        assert_eq!(parse_traceparent(&value(bad)), None, "{bad}");
    }
}

#[test]
fn the_ratio_decides_by_the_trace_id() {
    let tracer = |ratio: f64| Tracer {
        queue: export::Queue::closed(),
        threshold: (ratio * (1u64 << 63) as f64) as u64,
        sample_all: ratio >= 1.0,
        trust_client: false,
        content: None,
    };
    let ids: Vec<[u8; 16]> = (0..2000).map(|_| span::trace_id()).collect();
    let count = |t: &Tracer| ids.iter().filter(|id| t.sampled(id)).count();
    assert_eq!(count(&tracer(0.0)), 0);
    assert_eq!(count(&tracer(1.0)), 2000);
    let half = count(&tracer(0.5));
    assert!((800..1200).contains(&half), "{half}");
}
