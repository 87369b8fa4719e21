//! The SSE framer on upstream bytes split at arbitrary points: events come
//! out whole, nothing is lost or invented, and reading their fields never
//! panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_wire::sse::{Framer, fields};

fuzz_target!(|input: (Vec<u8>, Vec<u8>)| {
    let (a, b) = input;
    let mut framer = Framer::default();
    let mut out = Vec::new();
    for part in [&a, &b] {
        framer.push(part);
        while let Some(event) = framer.next_event() {
            assert!(event.ends_with(b"\n\n") || event.ends_with(b"\n\r\n"));
            let _ = fields(&event);
            out.extend_from_slice(&event);
        }
    }
    assert_eq!(out.len() + framer.pending(), a.len() + b.len());
});
