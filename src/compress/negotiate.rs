//! Which coding a request accepts, from its `Accept-Encoding`, as RFC 9110
//! §12.5.3 reads it: a coding's own q-value, else the one of `*`, else
//! not acceptable; `q=0` refuses; among the best-rated, the server's
//! preference decides. Pure and allocation-free; the work is linear in
//! the header, which the connection's header limits bound.

use http::HeaderMap;
use http::header::ACCEPT_ENCODING;

use crate::config::Coding;

/// A q-value in thousandths (RFC 9110 §12.4.2: at most three decimals).
type Weight = u16;

const FULL: Weight = 1000;

/// The coding to answer with, or `None` for the response as it is. No
/// `Accept-Encoding` at all means identity, as every server reads it (the
/// RFC allows any coding, which no client that sends none expects). An
/// `identity` rated above every coding weir has keeps the response as it
/// is; one refused (`identity;q=0`) when nothing else is acceptable still
/// gets the response as it is, rather than a 406 from a proxy.
pub(crate) fn choose(headers: &HeaderMap, preference: &[Coding]) -> Option<Coding> {
    let mut rated = [None::<Weight>; Coding::ALL.len()];
    let mut star = None;
    let mut identity = None;
    let mut any_field = false;
    for field in headers.get_all(ACCEPT_ENCODING) {
        any_field = true;
        for element in field.as_bytes().split(|b| *b == b',') {
            let Some((name, weight)) = element_of(element) else {
                continue;
            };
            let slot = if name.eq_ignore_ascii_case(b"*") {
                &mut star
            } else if name.eq_ignore_ascii_case(b"identity") {
                &mut identity
            } else if name.eq_ignore_ascii_case(b"x-gzip") {
                // RFC 9110 §8.4.1.3: a recipient should treat it as gzip.
                &mut rated[index(Coding::Gzip)]
            } else {
                match std::str::from_utf8(name).ok().and_then(Coding::from_token) {
                    Some(coding) => &mut rated[index(coding)],
                    None => continue,
                }
            };
            // Named twice: the higher rating holds.
            *slot = Some(slot.map_or(weight, |w: Weight| w.max(weight)));
        }
    }
    if !any_field {
        return None;
    }
    let mut best: Option<(Coding, Weight)> = None;
    for &coding in preference {
        let weight = rated[index(coding)].or(star).unwrap_or(0);
        if weight > 0 && best.is_none_or(|(_, b)| weight > b) {
            best = Some((coding, weight));
        }
    }
    let (coding, weight) = best?;
    match identity {
        Some(i) if i > weight => None,
        _ => Some(coding),
    }
}

fn index(coding: Coding) -> usize {
    match coding {
        Coding::Brotli => 0,
        Coding::Zstd => 1,
        Coding::Gzip => 2,
    }
}

/// One element, `coding *( OWS ";" OWS parameter )`: its name and q-value.
/// An empty element is skipped (RFC 9110 §5.6.1), and so is one whose
/// q-value is not one, rather than guessing what it meant.
fn element_of(element: &[u8]) -> Option<(&[u8], Weight)> {
    let mut parts = element.split(|b| *b == b';');
    let name = parts.next()?.trim_ascii();
    if name.is_empty() {
        return None;
    }
    let mut weight = FULL;
    for param in parts {
        let Some((key, value)) = split_once(param.trim_ascii(), b'=') else {
            continue;
        };
        if key.trim_ascii().eq_ignore_ascii_case(b"q") {
            weight = qvalue(value.trim_ascii())?;
        }
    }
    Some((name, weight))
}

fn split_once(s: &[u8], at: u8) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|b| *b == at)?;
    Some((&s[..i], &s[i + 1..]))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`.
fn qvalue(s: &[u8]) -> Option<Weight> {
    let (whole, fraction) = match split_once(s, b'.') {
        Some((w, f)) => (w, f),
        None => (s, &b""[..]),
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths: Weight = 0;
    for i in 0..3 {
        let digit = fraction.get(i).map_or(0, |d| Weight::from(d - b'0'));
        thousandths = thousandths * 10 + digit;
    }
    match whole {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(FULL),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: [Coding; 3] = [Coding::Brotli, Coding::Zstd, Coding::Gzip];

    fn chosen(values: &[&str]) -> Option<&'static str> {
        chosen_with(values, &ORDER)
    }

    fn chosen_with(values: &[&str], order: &[Coding]) -> Option<&'static str> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(ACCEPT_ENCODING, v.parse().expect("value"));
        }
        choose(&h, order).map(Coding::token)
    }

    #[test]
    fn the_highest_q_wins_and_ties_go_to_the_server_order() {
        assert_eq!(chosen(&["gzip, deflate, br, zstd"]), Some("br"));
        assert_eq!(chosen(&["gzip, zstd"]), Some("zstd"));
        assert_eq!(chosen(&["br;q=0.5, gzip;q=0.8"]), Some("gzip"));
        assert_eq!(
            chosen(&["br;q=0.5", "gzip;q=0.9"]),
            Some("gzip"),
            "fields combine"
        );
        assert_eq!(chosen(&["GZIP;Q=1.0"]), Some("gzip"));
        assert_eq!(chosen(&["x-gzip"]), Some("gzip"));
        assert_eq!(
            chosen_with(&["br, gzip"], &[Coding::Gzip, Coding::Brotli]),
            Some("gzip"),
            "the configured order breaks ties"
        );
        assert_eq!(
            chosen_with(&["br"], &[Coding::Gzip]),
            None,
            "br not offered"
        );
    }

    #[test]
    fn star_rates_what_is_not_named_and_zero_refuses() {
        assert_eq!(chosen(&["*"]), Some("br"));
        assert_eq!(chosen(&["*;q=0.5, gzip"]), Some("gzip"));
        assert_eq!(chosen(&["br;q=0, *"]), Some("zstd"));
        assert_eq!(chosen(&["*;q=0"]), None);
        assert_eq!(chosen(&["gzip;q=0"]), None);
        assert_eq!(chosen(&["gzip;q=0.000"]), None);
    }

    #[test]
    fn identity_and_absent_or_empty_headers_keep_the_response_as_it_is() {
        assert_eq!(chosen(&[]), None, "no Accept-Encoding");
        assert_eq!(chosen(&[""]), None, "empty: identity only");
        assert_eq!(chosen(&["identity"]), None);
        assert_eq!(
            chosen(&["gzip;q=0.5, identity"]),
            None,
            "identity rated higher"
        );
        assert_eq!(chosen(&["gzip, identity;q=0"]), Some("gzip"));
        assert_eq!(chosen(&["identity;q=0"]), None, "nothing else: as it is");
        assert_eq!(chosen(&["deflate, compress"]), None);
    }

    #[test]
    fn malformed_elements_are_skipped_not_guessed() {
        assert_eq!(chosen(&["br;q=2, gzip"]), Some("gzip"));
        assert_eq!(chosen(&["br;q=0.1234, gzip;q=0.5"]), Some("gzip"));
        assert_eq!(chosen(&["br;q=abc, gzip;q=0.5"]), Some("gzip"));
        assert_eq!(chosen(&["br;q=1.001, gzip;q=0.5"]), Some("gzip"));
        assert_eq!(chosen(&[",, ;q=1, gzip ; q=0.7 ;foo=bar"]), Some("gzip"));
        assert_eq!(qvalue(b"0.5"), Some(500));
        assert_eq!(qvalue(b"1"), Some(1000));
        assert_eq!(qvalue(b"1.000"), Some(1000));
        assert_eq!(qvalue(b"0."), Some(0));
        assert_eq!(qvalue(b".5"), None);
    }
}
