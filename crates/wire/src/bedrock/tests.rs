use super::eventstream::{Decoder, Frame, FrameError, MAX_FRAME};
use super::*;
use base64::Engine as _;

fn chunk(event: &Value) -> Frame {
    let bytes = base64::engine::general_purpose::STANDARD.encode(event.to_string());
    Frame {
        headers: vec![
            (":event-type".into(), "chunk".into()),
            (":content-type".into(), "application/json".into()),
            (":message-type".into(), "event".into()),
        ],
        payload: json!({"bytes": bytes, "p": "abcd"})
            .to_string()
            .into_bytes(),
    }
}

fn exception(name: &str, message: &str) -> Frame {
    Frame {
        headers: vec![
            (":exception-type".into(), name.into()),
            (":content-type".into(), "application/json".into()),
            (":message-type".into(), "exception".into()),
        ],
        payload: json!({"message": message}).to_string().into_bytes(),
    }
}

#[test]
fn paths_carry_the_model_in_one_encoded_segment() {
    assert_eq!(
        path("us.anthropic.claude-sonnet-4-5-20250929-v1:0", true),
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
    );
    assert_eq!(path("a/b?c", false), "/model/a%2Fb%3Fc/invoke");
}

#[test]
fn regions_come_from_the_host() {
    assert_eq!(
        region_of_host("bedrock-runtime.eu-west-3.amazonaws.com"),
        Some("eu-west-3")
    );
    assert_eq!(
        region_of_host("bedrock-runtime-fips.us-gov-west-1.amazonaws.com"),
        Some("us-gov-west-1")
    );
    assert_eq!(region_of_host("127.0.0.1"), None);
    assert_eq!(region_of_host("bedrock-runtime.US.amazonaws.com"), None);
    assert!(is_region("us-east-1") && !is_region("") && !is_region("1us"));
}

#[test]
fn the_body_loses_model_and_stream_and_gains_version_and_betas() {
    let body = br#"{"model":"claude","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"anthropic_beta":["a"]}"#;
    let out = request_body(body, &["b".into(), "a".into()]).expect("body");
    assert!(out.stream);
    let v: Value = serde_json::from_slice(&out.body).expect("json");
    assert!(v.get("model").is_none() && v.get("stream").is_none());
    assert_eq!(v["anthropic_version"], ANTHROPIC_VERSION);
    assert_eq!(v["anthropic_beta"], json!(["a", "b"]));
    assert_eq!(v["messages"][0]["content"], "hi");
    let plain = request_body(br#"{"max_tokens":5,"messages":[]}"#, &[]).expect("body");
    assert!(!plain.stream);
    let v: Value = serde_json::from_slice(&plain.body).expect("json");
    assert!(v.get("anthropic_beta").is_none());
    assert!(request_body(b"[1]", &[]).is_err());
    assert!(request_body(br#"{"stream":"yes"}"#, &[]).is_err());
}

#[test]
fn betas_are_read_from_every_header_line() {
    let mut h = HeaderMap::new();
    h.append("anthropic-beta", "x, y".parse().expect("v"));
    h.append("anthropic-beta", "z".parse().expect("v"));
    assert_eq!(betas(&h), ["x", "y", "z"]);
}

#[test]
fn frames_decode_across_any_split_and_become_events() {
    let start = json!({"type": "message_start", "message": {"id": "m"}});
    let delta = json!({"type": "content_block_delta", "delta": {"text": "hé"}});
    let mut bytes = chunk(&start).encode();
    bytes.extend(chunk(&delta).encode());
    for split in 0..bytes.len() {
        let mut d = SseDecoder::default();
        let mut out = d.push(&bytes[..split]).expect("first half");
        out.extend(d.push(&bytes[split..]).expect("second half"));
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(
            text,
            format!(
                "event: message_start\ndata: {start}\n\nevent: content_block_delta\ndata: {delta}\n\n"
            ),
        );
        assert_eq!(d.pending(), 0);
    }
}

#[test]
fn exceptions_become_error_events_in_the_messages_envelope() {
    let mut d = SseDecoder::default();
    let out = d
        .push(&exception("throttlingException", "slow down").encode())
        .expect("decoded");
    let text = String::from_utf8(out).expect("utf8");
    assert!(text.starts_with("event: error\ndata: "), "{text}");
    assert!(text.contains(r#""type":"rate_limit_error""#), "{text}");
    assert!(text.contains("slow down"), "{text}");
    let out = d
        .push(&exception("modelStreamErrorException", "broke").encode())
        .expect("decoded");
    assert!(String::from_utf8(out).expect("utf8").contains("api_error"));
}

#[test]
fn a_broken_frame_is_an_error_not_a_guess() {
    let good = chunk(&json!({"type": "ping"})).encode();
    let mut prelude = good.clone();
    prelude[2] ^= 1;
    let mut d = Decoder::default();
    d.push(&prelude);
    assert_eq!(d.next_frame(), Err(FrameError::PreludeCrc));
    let mut message = good.clone();
    let last = message.len() - 6;
    message[last] ^= 0x20;
    let mut d = Decoder::default();
    d.push(&message);
    assert_eq!(d.next_frame(), Err(FrameError::MessageCrc));
    // A prelude that says "past the bound", with a correct CRC.
    let mut huge = ((MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
    huge.extend(0u32.to_be_bytes());
    huge.extend(crc32fast::hash(&huge).to_be_bytes());
    let mut d = Decoder::default();
    d.push(&huge);
    assert_eq!(d.next_frame(), Err(FrameError::Length));
    // A chunk whose payload is not base64 JSON.
    let bad = Frame {
        payload: br#"{"bytes":"!!"}"#.to_vec(),
        ..chunk(&json!({}))
    };
    assert_eq!(
        SseDecoder::default().push(&bad.encode()),
        Err(EventError::Chunk)
    );
}

#[test]
fn error_answers_take_the_status_failover_reads() {
    let throttled = error_answer(
        StatusCode::TOO_MANY_REQUESTS,
        Some("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        br#"{"message":"Too many requests"}"#,
    );
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(throttled.retry_after, Some(THROTTLED_RETRY_AFTER));
    assert!(throttled.body.contains("rate_limit_error") && throttled.body.contains("Too many"));
    let not_ready = error_answer(
        StatusCode::TOO_MANY_REQUESTS,
        Some("ModelNotReadyException"),
        b"{}",
    );
    assert_eq!(not_ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(not_ready.retry_after, None);
    let invalid = error_answer(
        StatusCode::BAD_REQUEST,
        Some("ValidationException"),
        br#"{"Message":"bad"}"#,
    );
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST);
    assert!(invalid.body.contains("invalid_request_error") && invalid.body.contains("bad"));
    let denied = error_answer(StatusCode::FORBIDDEN, Some("AccessDeniedException"), b"");
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    let unknown = error_answer(StatusCode::BAD_GATEWAY, None, b"<html>");
    assert_eq!(unknown.status, StatusCode::BAD_GATEWAY);
}

proptest::proptest! {
    /// Any bytes, split anywhere, decode to events or an error: never a
    /// panic, and nothing held past the frame bound.
    #[test]
    fn no_bytes_make_the_decoder_panic(
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096),
        split in 0usize..4096,
    ) {
        let mut d = SseDecoder::default();
        let at = split.min(data.len());
        if d.push(&data[..at]).is_ok() {
            let _ = d.push(&data[at..]);
        }
        proptest::prop_assert!(d.pending() <= data.len());
    }

    /// A valid frame with a byte flipped anywhere is refused, never
    /// decoded into something else.
    #[test]
    fn a_flipped_byte_is_caught_by_a_crc(at in 0usize..200, bit in 0u8..8) {
        let good = chunk(&json!({"type": "ping"})).encode();
        let at = at % good.len();
        let mut bad = good.clone();
        bad[at] ^= 1 << bit;
        let mut d = Decoder::default();
        d.push(&bad);
        proptest::prop_assert!(!matches!(d.next_frame(), Ok(Some(_))));
    }
}

#[test]
fn an_invoke_path_names_the_model_and_the_stream() {
    use super::client::Invocation;
    let call = Invocation::of("/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke");
    assert_eq!(
        call,
        Some(Invocation {
            model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0".into(),
            stream: false
        })
    );
    let raw = Invocation::of("/model/claude-x-v1:0/invoke-with-response-stream");
    assert!(raw.is_some_and(|c| c.stream && c.model == "claude-x-v1:0"));
    for bad in [
        "/model//invoke",
        "/model/a%2Fb/invoke",
        "/model/a/b/invoke",
        "/model/a/converse",
        "/model/a%zz/invoke",
        "/v1/messages",
    ] {
        assert_eq!(Invocation::of(bad), None, "{bad}");
    }
    let long = format!("/model/{}/invoke", "m".repeat(513));
    assert_eq!(Invocation::of(&long), None);
}

#[test]
fn an_invoke_body_becomes_a_messages_body() {
    use super::client::{Invocation, messages_body};
    let call = Invocation {
        model: "m:0".into(),
        stream: true,
    };
    let body = br#"{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["b1"],"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
    let made = messages_body(body, &call).expect("a body");
    let v: Value = serde_json::from_slice(&made.body).expect("json");
    assert_eq!(v["model"], "m:0");
    assert_eq!(v["stream"], true);
    assert_eq!(v["max_tokens"], 5);
    assert!(v.get("anthropic_version").is_none() && v.get("anthropic_beta").is_none());
    assert_eq!(made.betas, ["b1"]);
    assert!(messages_body(br#"{"model":"x"}"#, &call).is_err());
    assert!(messages_body(br#"{"stream":true}"#, &call).is_err());
    assert!(messages_body(br#"{"anthropic_beta":"b"}"#, &call).is_err());
    assert!(messages_body(b"[1]", &call).is_err());
}

#[test]
fn a_messages_stream_is_encoded_in_frames_that_decode_back() {
    use super::client::FrameEncoder;
    let sse = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n: comment\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n";
    let mut enc = FrameEncoder::default();
    // Split mid-event: frames come only for whole events.
    let (a, b) = sse.as_bytes().split_at(20);
    let mut bytes = enc.push(a);
    assert!(bytes.is_empty());
    bytes.extend(enc.push(b));
    assert_eq!(enc.pending(), 0);
    let mut dec = Decoder::default();
    dec.push(&bytes);
    let mut frames = Vec::new();
    while let Some(f) = dec.next_frame().expect("CRCs match") {
        frames.push(f);
    }
    assert_eq!(frames.len(), 3, "the comment is no frame");
    let sse_back = event_to_sse(&frames[0]).expect("chunk").expect("event");
    assert_eq!(
        String::from_utf8(sse_back).expect("utf8"),
        "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
    );
    assert_eq!(frames[2].header(":message-type"), Some("exception"));
    assert_eq!(
        frames[2].header(":exception-type"),
        Some("serviceUnavailableException")
    );
    assert_eq!(frames[2].payload, br#"{"message":"busy"}"#);
}
