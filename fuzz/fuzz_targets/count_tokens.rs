//! Local token counting on arbitrary bodies: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_wire::translate::tokens::count;

fuzz_target!(|body: &[u8]| {
    let _ = count(body);
});
