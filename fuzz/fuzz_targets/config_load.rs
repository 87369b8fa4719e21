//! The config loader on arbitrary text: problems reported, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = weir::testing::config::Config::parse(std::path::Path::new("fuzz.toml"), text);
});
