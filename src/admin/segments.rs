//! The segments of an admin path, each percent-decoded: the CLI encodes
//! what it puts in a path (a key id's `_`, a team's name), so
//! `/admin/keys/key%5F3f2a` names `key_3f2a`.

/// The non-empty segments of `rest` (a path after its prefix), decoded.
pub(super) fn decoded(rest: &str) -> Vec<String> {
    rest.split('/')
        .filter(|p| !p.is_empty())
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}
