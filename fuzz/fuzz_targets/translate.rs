//! Every translation pair on arbitrary client requests, upstream answers
//! and upstream error bodies: no panic, and what comes out is JSON.
#![no_main]

use http::StatusCode;
use libfuzzer_sys::fuzz_target;
use weir_wire::translate::Pair;

fuzz_target!(|input: (u8, u16, Vec<u8>)| {
    let (which, status, body) = input;
    let pair = Pair::ALL[usize::from(which) % Pair::ALL.len()];
    if let Ok(out) = pair.request(&body, "model") {
        serde_json::from_slice::<serde_json::Value>(&out.body).expect("a request is JSON");
    }
    if let Some(out) = pair.response(&body, "model", &Default::default()) {
        serde_json::from_slice::<serde_json::Value>(&out).expect("an answer is JSON");
    }
    let status = StatusCode::from_u16(status % 500 + 100).unwrap_or(StatusCode::BAD_GATEWAY);
    let out = pair.error(status, &body);
    serde_json::from_slice::<serde_json::Value>(&out).expect("an error is JSON");
});
