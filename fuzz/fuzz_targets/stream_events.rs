//! Upstream stream events through every pair's stream translator and every
//! API's watcher (classes, usage, the in-band error): no panic, and every
//! event written is a whole SSE event with JSON data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_wire::translate::Pair;
use weir_wire::Api;
use weir_wire::sse::{Framer, fields};

fuzz_target!(|input: (u8, Vec<(Option<String>, String)>)| {
    let (which, events) = input;
    let pair = Pair::ALL[usize::from(which) % Pair::ALL.len()];
    let api = Api::ALL[usize::from(which) % Api::ALL.len()];
    let mut stream = pair.stream("model", Default::default());
    let mut watch = api.watch();
    let mut out = Vec::new();
    for (name, data) in &events {
        stream.event(name.as_deref(), data, &mut out);
        let _ = watch.observe(name.as_deref(), data);
    }
    out.push(watch.in_band_error("cut"));
    let mut framer = Framer::default();
    for bytes in &out {
        framer.push(bytes);
        while let Some(event) = framer.next_event() {
            let (_, data) = fields(&event);
            serde_json::from_str::<serde_json::Value>(&data).expect("event data is JSON");
        }
        assert_eq!(framer.pending(), 0, "only whole events are written");
    }
});
