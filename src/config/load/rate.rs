//! A route's per-client rate: `rate_limit = "10/s"`, `"100/min"`,
//! `"1000/h"` (nginx's `"10r/m"` too), or a whole number per second —
//! beside `rate_limit_per_second`, which it replaces — and its burst.
//!
//! A rate is kept as the interval one request's budget takes to refill
//! (`10/min`: 6 s), so a rate below one a second is exact; a whole number
//! per second gives the interval it always had (see `admit::rate`).

use std::time::Duration;

use super::Section;
use crate::config::RateQuota;

/// The units a rate may be written per, with the time each stands for.
const UNITS: [(&str, u64); 9] = [
    ("s", 1),
    ("sec", 1),
    ("second", 1),
    ("m", 60),
    ("min", 60),
    ("minute", 60),
    ("h", 3600),
    ("hour", 3600),
    ("d", 86_400),
];

/// The route's rate and burst; `None` without a rate (or with a problem,
/// reported).
pub(super) fn rate_limit(t: &Section<'_, '_>) -> Option<RateQuota> {
    let written = rate(t);
    let per_second = t.uint_in("rate_limit_per_second", u64::from(u32::MAX));
    let burst = t.uint_in("rate_limit_burst", u64::from(u32::MAX));
    let (count, per) = match (written, per_second) {
        (Some(_), Some(_)) => {
            t.problem(
                "rate_limit_per_second",
                "set either `rate_limit` or `rate_limit_per_second`, not both",
                Some("keep `rate_limit = \"10/s\"` and remove this key".into()),
            );
            return None;
        }
        (Some(r), None) => r?,
        (None, Some(0)) => {
            t.problem(
                "rate_limit_per_second",
                "must be at least 1",
                Some("remove the key for no limit".into()),
            );
            return None;
        }
        (None, Some(n)) => (n as u32, Duration::from_secs(1)),
        (None, None) => {
            if burst.is_some() {
                t.problem(
                    "rate_limit_burst",
                    "a burst needs a rate",
                    Some("add `rate_limit = \"10/s\"`".into()),
                );
            }
            return None;
        }
    };
    Some(RateQuota {
        interval: per / count.max(1),
        // By default one unit's worth at once, as the integer form always had.
        burst: burst.map_or(count, |b| b as u32).max(1),
    })
}

/// `rate_limit`: `Some(None)` when written but wrong (reported).
fn rate(t: &Section<'_, '_>) -> Option<Option<(u32, Duration)>> {
    if !t.raw_present("rate_limit") {
        return None;
    }
    let fix = || {
        Some("write a count per unit: \"10/s\", \"100/min\", \"1000/h\", or a whole number per second".to_string())
    };
    if t.holds_string("rate_limit")
        && let Some(s) = t.string("rate_limit")
    {
        return Some(match parse(&s.value) {
            Ok(rate) => Some(rate),
            Err(why) => {
                s.problem(
                    t.doc(),
                    format!("`{}` is not a rate: {why}", s.value),
                    fix(),
                );
                None
            }
        });
    }
    // Not a string: a whole number per second, or the wrong type.
    t.uint_in("rate_limit", u64::from(u32::MAX))
        .and_then(|n| u32::try_from(n).ok())
        .map(|n| match n {
            0 => {
                t.problem(
                    "rate_limit",
                    "must be at least 1",
                    Some("remove the key for no limit".into()),
                );
                None
            }
            n => Some((n, Duration::from_secs(1))),
        })
        .or(Some(None))
}

/// `"10/s"`, `"100/min"`, `"10r/m"`, `"5 / hour"` → (count, per).
fn parse(text: &str) -> Result<(u32, Duration), String> {
    let (count, unit) = text
        .split_once('/')
        .ok_or_else(|| "no `/unit`".to_string())?;
    let count = count.trim();
    // nginx writes `10r/s`.
    let count = count.strip_suffix('r').unwrap_or(count);
    let count: u32 = count
        .parse()
        .map_err(|_| format!("`{count}` is not a whole number of requests"))?;
    if count == 0 {
        return Err("the count must be at least 1".into());
    }
    let unit = unit.trim();
    let secs = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, secs)| *secs)
        .ok_or_else(|| format!("`{unit}` is not a unit (s, min or h)"))?;
    Ok((count, Duration::from_secs(secs)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;
    use std::path::Path;

    fn quota(keys: &str) -> Option<RateQuota> {
        let c = crate::config::Config::parse(Path::new("w.toml"), &format!("{MINIMAL}{keys}"))
            .expect("valid");
        c.routes[0].rate_limit
    }

    #[test]
    fn a_rate_is_a_count_per_unit_or_per_second() {
        let q = |interval: Duration, burst| Some(RateQuota { interval, burst });
        assert_eq!(
            quota("rate_limit = \"10/min\"\nrate_limit_burst = 1\n"),
            q(Duration::from_secs(6), 1)
        );
        assert_eq!(
            quota("rate_limit = \"10r/m\"\n"),
            q(Duration::from_secs(6), 10)
        );
        assert_eq!(
            quota("rate_limit = \"1000/h\"\n"),
            q(Duration::from_millis(3600), 1000)
        );
        assert_eq!(
            quota("rate_limit = \"4 / s\"\n"),
            q(Duration::from_millis(250), 4)
        );
        assert_eq!(quota("rate_limit = 4\n"), q(Duration::from_millis(250), 4));
        // Today's key gives what it always did.
        assert_eq!(
            quota("rate_limit_per_second = 4\n"),
            q(Duration::from_millis(250), 4)
        );
        assert_eq!(quota(""), None);
    }

    #[test]
    fn a_rate_written_wrong_is_named_with_the_forms_that_work() {
        let p = problems(&format!(
            "{MINIMAL}rate_limit = \"10/fortnight\"\n[[route]]\npath = \"/b\"\nupstream = \"http://b\"\n\
             rate_limit = \"10/s\"\nrate_limit_per_second = 10\n[[route]]\npath = \"/c\"\nupstream = \"http://c\"\n\
             rate_limit = \"0/s\"\n[[route]]\npath = \"/d\"\nupstream = \"http://d\"\nrate_limit_burst = 2\n"
        ));
        assert_eq!(p.len(), 4, "{p:#?}");
        assert!(p[0].contains("route[0].rate_limit: `10/fortnight` is not a rate: `fortnight` is not a unit (s, min or h) (fix: write a count per unit: \"10/s\""), "{}", p[0]);
        assert!(p[1].contains("route[1].rate_limit_per_second: set either `rate_limit` or `rate_limit_per_second`, not both"), "{}", p[1]);
        assert!(
            p[2].contains("route[2].rate_limit: `0/s` is not a rate: the count must be at least 1"),
            "{}",
            p[2]
        );
        assert!(
            p[3].contains("route[3].rate_limit_burst: a burst needs a rate"),
            "{}",
            p[3]
        );
    }
}
