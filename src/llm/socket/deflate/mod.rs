//! permessage-deflate (RFC 7692) on the Responses WebSocket: the offer in
//! the upgrade's `Sec-WebSocket-Extensions` read and answered here, the
//! messages compressed and inflated by [`stream::Deflating`], a layer
//! between the upgraded connection and tungstenite (which has no
//! extensions in any release on crates.io: docs/decisions/098).
//!
//! What is accepted, per the RFC's rules for a server:
//! - `server_no_context_takeover` and `client_no_context_takeover` are
//!   echoed when offered (each side then starts every message afresh);
//! - `server_max_window_bits` only at 15: flate2's pure-Rust backend
//!   compresses with a 32 KiB window and cannot promise a smaller one, so
//!   an offer asking for less is declined (the next offer is tried);
//! - `client_max_window_bits` is left out of the answer: the client then
//!   compresses with a window of at most 32 KiB, which the inflater reads
//!   whatever window it used;
//! - an offer with any other parameter, a repeated one or a bad value is
//!   declined. Declining every offer answers without the extension.

mod codec;
pub(crate) mod stream;

use http::HeaderMap;
use http::header::HeaderValue;

pub(crate) use stream::Deflating;

const NAME: &str = "permessage-deflate";

/// The parameters agreed on for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Agreed {
    /// weir starts each message it sends with an empty window.
    pub(crate) server_no_context_takeover: bool,
    /// The client starts each message it sends with an empty window.
    pub(crate) client_no_context_takeover: bool,
    /// The offer named `server_max_window_bits` (=15): echoed.
    server_max_window_bits: bool,
}

impl Agreed {
    /// The `Sec-WebSocket-Extensions` value of the 101.
    pub(crate) fn header(&self) -> HeaderValue {
        let mut value = String::from(NAME);
        if self.server_no_context_takeover {
            value.push_str("; server_no_context_takeover");
        }
        if self.client_no_context_takeover {
            value.push_str("; client_no_context_takeover");
        }
        if self.server_max_window_bits {
            value.push_str("; server_max_window_bits=15");
        }
        HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static(NAME))
    }
}

/// The first `permessage-deflate` offer in `headers` that weir can honour.
pub(crate) fn negotiate(headers: &HeaderMap) -> Option<Agreed> {
    headers
        .get_all("sec-websocket-extensions")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(accept)
}

/// One offer (`name; param; param=value`) accepted, or `None`.
fn accept(offer: &str) -> Option<Agreed> {
    let mut parts = offer.split(';').map(str::trim);
    if !parts.next()?.eq_ignore_ascii_case(NAME) {
        return None;
    }
    let mut agreed = Agreed {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        server_max_window_bits: false,
    };
    let mut client_bits = false;
    for param in parts {
        let (name, value) = match param.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (param, None),
        };
        let seen = match (name.to_ascii_lowercase().as_str(), value) {
            ("server_no_context_takeover", None) => {
                std::mem::replace(&mut agreed.server_no_context_takeover, true)
            }
            ("client_no_context_takeover", None) => {
                std::mem::replace(&mut agreed.client_no_context_takeover, true)
            }
            ("server_max_window_bits", Some(v)) if window_bits(v)? == 15 => {
                std::mem::replace(&mut agreed.server_max_window_bits, true)
            }
            ("client_max_window_bits", v) => {
                if let Some(v) = v {
                    window_bits(v)?;
                }
                std::mem::replace(&mut client_bits, true)
            }
            _ => return None,
        };
        if seen {
            return None;
        }
    }
    Some(agreed)
}

/// A window-bits value: 8 to 15, digits only, no leading zero.
fn window_bits(value: &str) -> Option<u8> {
    let valid =
        !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) && !value.starts_with('0');
    let bits: u8 = value.parse().ok().filter(|_| valid)?;
    (8..=15).contains(&bits).then_some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(values: &[&str]) -> Option<Agreed> {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(
                "sec-websocket-extensions",
                HeaderValue::from_str(v).unwrap(),
            );
        }
        negotiate(&headers)
    }

    fn answer(values: &[&str]) -> Option<String> {
        offered(values).map(|a| a.header().to_str().unwrap().to_string())
    }

    #[test]
    fn the_plain_offer_and_codexs_are_accepted_without_window_bits() {
        assert_eq!(
            answer(&["permessage-deflate"]).unwrap(),
            "permessage-deflate"
        );
        assert_eq!(
            answer(&["permessage-deflate; client_max_window_bits"]).unwrap(),
            "permessage-deflate"
        );
    }

    #[test]
    fn context_takeover_parameters_are_echoed() {
        assert_eq!(
            answer(&["permessage-deflate; client_no_context_takeover; server_no_context_takeover"])
                .unwrap(),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        );
    }

    #[test]
    fn a_smaller_server_window_is_declined_and_the_next_offer_taken() {
        assert_eq!(
            answer(&["permessage-deflate; server_max_window_bits=10"]),
            None
        );
        assert_eq!(
            answer(&["permessage-deflate; server_max_window_bits=10, permessage-deflate"]).unwrap(),
            "permessage-deflate"
        );
        assert_eq!(
            answer(&["permessage-deflate; server_max_window_bits=\"15\""]).unwrap(),
            "permessage-deflate; server_max_window_bits=15"
        );
    }

    #[test]
    fn unknown_repeated_or_bad_parameters_decline_the_offer() {
        for bad in [
            "permessage-deflate; foo",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; client_max_window_bits=7",
            "permessage-deflate; client_max_window_bits=015",
            "permessage-deflate; server_max_window_bits",
            "permessage-deflate; server_no_context_takeover=1",
            "x-webkit-deflate-frame",
        ] {
            assert_eq!(offered(&[bad]), None, "{bad}");
        }
    }
}
