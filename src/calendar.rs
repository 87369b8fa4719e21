//! Where budget windows start and end: a minute at :00, a day at
//! midnight, a week on Monday at midnight, a month on its first day at
//! midnight — midnight in the configured time zone (`[server]
//! budget_time_zone`, UTC by default; docs/decisions/101). Both the local
//! ledger (`llm::ledger`) and the fleet's budgets in Redis
//! (`cluster::budgets`, whose window keys are named by these starts)
//! place windows here, so the two always agree.
//!
//! In a zone with daylight saving a day is 23 or 25 hours long on the
//! change, and a week or month holding it one hour shorter or longer:
//! each window runs from one local midnight to the next. The zone is the
//! process's (set at each config load, [`set_zone`]), read by each
//! window computation.

use std::sync::{Arc, LazyLock};

use arc_swap::ArcSwap;
use jiff::civil::Date;
use jiff::tz::TimeZone;

const MINUTE: u64 = 60;
pub(crate) const DAY: u64 = 86_400;
const WEEK: u64 = 7 * DAY;

/// A time zone budget windows are placed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Zone(Option<TimeZone>);

impl Zone {
    /// UTC: the arithmetic below, no zone lookup.
    pub(crate) const UTC: Zone = Zone(None);

    /// The IANA zone `name` (the system's `/usr/share/zoneinfo`, else the
    /// copy built into weir), or why it is unknown.
    pub(crate) fn named(name: &str) -> Result<Zone, String> {
        if name == "UTC" {
            return Ok(Zone::UTC);
        }
        TimeZone::get(name)
            .map(|tz| Zone(Some(tz)))
            .map_err(|e| e.to_string())
    }
}

static ZONE: LazyLock<ArcSwap<Zone>> = LazyLock::new(|| ArcSwap::from_pointee(Zone::UTC));

/// The zone windows are placed in from now on (a config's).
pub(crate) fn set_zone(zone: &Zone) {
    if **ZONE.load() != *zone {
        ZONE.store(Arc::new(zone.clone()));
    }
}

/// The zone windows are placed in.
pub(crate) fn zone() -> Arc<Zone> {
    ZONE.load_full()
}

/// The length of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Minute,
    Day,
    Week,
    Month,
}

impl Period {
    /// The start of the window holding `now` (Unix seconds) in `zone`.
    pub(crate) fn start(self, now: u64, zone: &Zone) -> u64 {
        match (self, &zone.0) {
            (Period::Minute, _) | (_, None) => self.utc_start(now),
            (_, Some(tz)) => self
                .zoned_start(now, tz)
                .unwrap_or_else(|| self.utc_start(now)),
        }
    }

    /// The end of the window that starts at `start` in `zone`.
    pub(crate) fn end(self, start: u64, zone: &Zone) -> u64 {
        match (self, &zone.0) {
            (Period::Minute, _) | (_, None) => self.utc_end(start),
            (_, Some(tz)) => self
                .zoned_end(start, tz)
                .unwrap_or_else(|| self.utc_end(start)),
        }
    }

    /// The local date of the window holding `now` begins on.
    fn first_day(self, now: u64, tz: &TimeZone) -> Option<Date> {
        let ts = jiff::Timestamp::from_second(i64::try_from(now).ok()?).ok()?;
        let date = ts.to_zoned_datetime(tz.clone()).date();
        match self {
            Period::Week => {
                let mut d = date;
                for _ in 0..date.weekday().to_monday_zero_offset() {
                    d = d.yesterday().ok()?;
                }
                Some(d)
            }
            Period::Month => Some(date.first_of_month()),
            _ => Some(date),
        }
    }

    fn zoned_start(self, now: u64, tz: &TimeZone) -> Option<u64> {
        midnight(self.first_day(now, tz)?, tz)
    }

    fn zoned_end(self, start: u64, tz: &TimeZone) -> Option<u64> {
        let first = self.first_day(start, tz)?;
        let next = match self {
            Period::Week => {
                let mut d = first;
                for _ in 0..7 {
                    d = d.tomorrow().ok()?;
                }
                d
            }
            Period::Month => first.last_of_month().tomorrow().ok()?,
            _ => first.tomorrow().ok()?,
        };
        midnight(next, tz)
    }

    fn utc_start(self, now: u64) -> u64 {
        match self {
            Period::Minute => now - now % MINUTE,
            Period::Day => now - now % DAY,
            // 1970-01-01 was a Thursday: Mondays are 4 days later.
            Period::Week => now - (now + 3 * DAY) % WEEK,
            Period::Month => {
                let (y, m, _) = civil(now / DAY);
                days_from_civil(y, m, 1) * DAY
            }
        }
    }

    fn utc_end(self, start: u64) -> u64 {
        match self {
            Period::Minute => start + MINUTE,
            Period::Day => start + DAY,
            Period::Week => start + WEEK,
            Period::Month => {
                let (y, m, _) = civil(start / DAY);
                let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                days_from_civil(y, m, 1) * DAY
            }
        }
    }
}

/// The first instant of `date` in `tz`: its midnight, or when a change
/// to daylight saving skips midnight, the first time the day has.
fn midnight(date: Date, tz: &TimeZone) -> Option<u64> {
    let zoned = date.to_zoned_datetime(tz.clone()).ok()?;
    u64::try_from(zoned.timestamp().as_second()).ok()
}

/// The day's, the week's and the month's window holding `now` in
/// `zone`: start and end of each, as the fleet's budget scripts take
/// them.
pub(crate) fn spans(now: u64, zone: &Zone) -> [u64; 6] {
    let [d, w, m] = [Period::Day, Period::Week, Period::Month].map(|p| {
        let start = p.start(now, zone);
        (start, p.end(start, zone))
    });
    [d.0, d.1, w.0, w.1, m.0, m.1]
}

/// The (year, month, day) of a day since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days after the epoch).
pub(crate) fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// The day since 1970-01-01 of a (year, month, day) after it.
pub(crate) fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).saturating_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2025-01-01 23:59:30 UTC.
    const START: u64 = 1_735_775_970;

    #[test]
    fn weeks_start_on_monday_and_months_on_their_first_day() {
        // 2025-01-01 was a Wednesday; the week began Monday 2024-12-30.
        assert_eq!(Period::Week.start(START, &Zone::UTC), 1_735_516_800);
        assert_eq!(Period::Week.end(1_735_516_800, &Zone::UTC), 1_736_121_600);
        assert_eq!(
            Period::Month.start(START, &Zone::UTC),
            1_735_689_600,
            "2025-01-01"
        );
        assert_eq!(
            Period::Month.end(1_735_689_600, &Zone::UTC),
            1_738_368_000,
            "2025-02-01"
        );
        // A leap February ends on the 29th; December into January.
        let feb_2028 = days_from_civil(2028, 2, 1) * DAY;
        assert_eq!(
            Period::Month.end(feb_2028, &Zone::UTC),
            days_from_civil(2028, 3, 1) * DAY
        );
        assert_eq!(Period::Month.end(feb_2028, &Zone::UTC) - feb_2028, 29 * DAY);
        let dec = days_from_civil(2026, 12, 1) * DAY;
        assert_eq!(
            Period::Month.end(dec, &Zone::UTC),
            days_from_civil(2027, 1, 1) * DAY
        );
        assert_eq!(civil(days_from_civil(2026, 12, 3)), (2026, 12, 3));
        assert_eq!(Period::Month.start(dec + 40 * 3600, &Zone::UTC), dec);
    }

    #[test]
    fn spans_are_the_day_week_and_month_holding_now() {
        assert_eq!(
            spans(START, &Zone::UTC),
            [
                1_735_689_600,
                1_735_776_000,
                1_735_516_800,
                1_736_121_600,
                1_735_689_600,
                1_738_368_000
            ]
        );
    }

    fn at(iso: &str) -> u64 {
        let ts: jiff::Timestamp = iso.parse().expect("timestamp");
        u64::try_from(ts.as_second()).expect("after 1970")
    }

    fn berlin() -> Zone {
        Zone::named("Europe/Berlin").expect("a known zone")
    }

    #[test]
    fn days_start_at_local_midnight_and_last_23_or_25_hours_across_dst() {
        let z = berlin();
        // Summer time begins on Sunday 2026-03-29: a 23-hour day.
        let start = Period::Day.start(at("2026-03-29T12:00:00Z"), &z);
        assert_eq!(start, at("2026-03-28T23:00:00Z"), "midnight CET");
        assert_eq!(Period::Day.end(start, &z), at("2026-03-29T22:00:00Z"));
        assert_eq!(Period::Day.end(start, &z) - start, 23 * 3600);
        // It ends on Sunday 2026-10-25: a 25-hour day.
        let start = Period::Day.start(at("2026-10-25T12:00:00Z"), &z);
        assert_eq!(start, at("2026-10-24T22:00:00Z"), "midnight CEST");
        assert_eq!(Period::Day.end(start, &z) - start, 25 * 3600);
        // Just after local midnight is the new day, not UTC's old one.
        assert_eq!(
            Period::Day.start(at("2026-07-01T22:30:00Z"), &z),
            at("2026-07-01T22:00:00Z")
        );
        // The minute is the same everywhere.
        assert_eq!(Period::Minute.start(START, &z), START - START % 60);
    }

    #[test]
    fn weeks_and_months_start_at_local_midnight_across_dst_and_year_ends() {
        let z = berlin();
        // The week holding the change: Monday 2026-03-23 to Monday 30th,
        // one hour short.
        let start = Period::Week.start(at("2026-03-29T12:00:00Z"), &z);
        assert_eq!(start, at("2026-03-22T23:00:00Z"));
        assert_eq!(Period::Week.end(start, &z), at("2026-03-29T22:00:00Z"));
        // March in Berlin, and 00:30 on 1 April there is April already.
        let march = Period::Month.start(at("2026-03-15T00:00:00Z"), &z);
        assert_eq!(march, at("2026-02-28T23:00:00Z"));
        assert_eq!(Period::Month.end(march, &z), at("2026-03-31T22:00:00Z"));
        assert_eq!(
            Period::Month.start(at("2026-03-31T22:30:00Z"), &z),
            at("2026-03-31T22:00:00Z")
        );
        // December into January, and a leap February.
        let december = Period::Month.start(at("2026-12-31T22:59:59Z"), &z);
        assert_eq!(december, at("2026-11-30T23:00:00Z"));
        assert_eq!(Period::Month.end(december, &z), at("2026-12-31T23:00:00Z"));
        let february = Period::Month.start(at("2028-02-29T12:00:00Z"), &z);
        assert_eq!(Period::Month.end(february, &z) - february, 29 * DAY);
        // The spans the fleet's scripts are given are these.
        let [ds, de, ws, we, ms, me] = spans(at("2026-03-29T12:00:00Z"), &z);
        assert_eq!(
            (ds, de),
            (at("2026-03-28T23:00:00Z"), at("2026-03-29T22:00:00Z"))
        );
        assert_eq!(
            (ws, we),
            (at("2026-03-22T23:00:00Z"), at("2026-03-29T22:00:00Z"))
        );
        assert_eq!((ms, me), (march, at("2026-03-31T22:00:00Z")));
    }

    #[test]
    fn an_unknown_zone_is_refused_and_utc_needs_no_lookup() {
        assert!(Zone::named("Europe/Atlantis").is_err());
        assert_eq!(Zone::named("UTC"), Ok(Zone::UTC));
        assert!(Zone::named("America/New_York").is_ok());
    }
}
