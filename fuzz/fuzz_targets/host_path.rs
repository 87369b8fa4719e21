//! Host and path normalisation before routing on arbitrary text: never a
//! panic; a normalised path normalises to itself (borrowed, nothing left
//! to change), starts with `/`, and holds no `//` or dot segment; a host that passes passes again as
//! itself and holds no userinfo, path or upper case.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir::testing::route::{host, path};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let once = path(text);
    let twice = path(&once.path);
    assert_eq!(twice.path, once.path, "not idempotent: {text:?}");
    assert!(matches!(twice.path, std::borrow::Cow::Borrowed(_)));
    if text.starts_with('/') {
        assert!(once.path.starts_with('/'));
        assert!(!once.path.contains("//"), "{text:?}");
        assert!(!once.path.split('/').any(|s| s == "." || s == ".."), "{text:?}");
    }
    if let Some(h) = host(text) {
        assert_eq!(host(h.authority()).as_ref(), Some(&h), "{text:?}");
        assert!(!h.authority().contains(['@', '/', '\\', '%', ',', '\0']));
        assert_eq!(h.authority(), h.authority().to_ascii_lowercase());
        assert!(h.authority().starts_with(h.name()));
    }
});
