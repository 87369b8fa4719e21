//! weir's PROXY header reader on arbitrary first bytes of a connection:
//! framing and parsing never panic, a header never reaches past what
//! arrived or past the bounds (107 bytes for v1, 16 + 4 KiB for v2), and
//! the bytes arriving in pieces change nothing — every prefix either asks
//! for more, within the bound it names, or decides what the whole input
//! decides.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir::testing::listen::{
    Framing, Signature, V1_MAX, V2_FIXED, V2_MAX_PAYLOAD, frame, parse, signature,
};

fuzz_target!(|input: &[u8]| {
    let whole = frame(input);
    if let Framing::Header(len) = whole {
        assert!(len <= input.len());
        assert!(len <= V1_MAX.max(V2_FIXED + V2_MAX_PAYLOAD));
        if let Ok(Some(client)) = parse(&input[..len]) {
            assert!(client.ip().to_canonical() == client.ip());
        }
    }
    if signature(input) == Signature::Absent {
        assert_eq!(whole, Framing::NotProxy);
    }
    let bound = input.len().min(V2_FIXED + V2_MAX_PAYLOAD + 1);
    for k in 0..bound {
        match frame(&input[..k]) {
            Framing::NeedMore(most) => {
                assert!(most > k, "asks for more than it has: {most} at {k}");
                assert!(most <= V2_FIXED + V2_MAX_PAYLOAD);
            }
            decided => assert_eq!(decided, whole, "decided early at {k}"),
        }
    }
});
