//! `model` found in a client's body and replaced in place: whatever the
//! body, no panic, and a replaced model reads back as the new name with
//! every other byte kept; and a model the scan finds in a body serde_json
//! can read is the model serde_json reads there.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use weir_wire::body::{model, splice};

fuzz_target!(|input: (Vec<u8>, String)| {
    let (body, name) = input;
    let body = Bytes::from(body);
    if let Ok(found) = model(&body) {
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(&body) {
            assert_eq!(map.get("model").and_then(|m| m.as_str()), Some(found.name.as_str()));
        }
        let out = splice(&body, &found.span, &name);
        let again = model(&out).expect("a spliced body still names a model");
        assert_eq!(again.name, name);
        assert_eq!(&out[..found.span.start], &body[..found.span.start]);
    }
});
