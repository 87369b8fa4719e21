//! Where budget windows start and end: a minute at :00, a day at
//! midnight, a week on Monday at midnight, a month on its first day at
//! midnight. Both the local ledger (`llm::ledger`) and the fleet's
//! budgets in Redis (`cluster::budgets`, whose window keys are named by
//! these starts) place windows here, so the two always agree.

const MINUTE: u64 = 60;
pub(crate) const DAY: u64 = 86_400;
const WEEK: u64 = 7 * DAY;

/// The length of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Minute,
    Day,
    Week,
    Month,
}

impl Period {
    /// The start of the window holding `now` (Unix seconds).
    pub(crate) fn start(self, now: u64) -> u64 {
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

    /// The end of the window that starts at `start`.
    pub(crate) fn end(self, start: u64) -> u64 {
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

/// The day's, the week's and the month's window holding `now`: start and
/// end of each, as the fleet's budget scripts take them.
pub(crate) fn spans(now: u64) -> [u64; 6] {
    let [d, w, m] = [Period::Day, Period::Week, Period::Month].map(|p| {
        let start = p.start(now);
        (start, p.end(start))
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
        assert_eq!(Period::Week.start(START), 1_735_516_800);
        assert_eq!(Period::Week.end(1_735_516_800), 1_736_121_600);
        assert_eq!(Period::Month.start(START), 1_735_689_600, "2025-01-01");
        assert_eq!(
            Period::Month.end(1_735_689_600),
            1_738_368_000,
            "2025-02-01"
        );
        // A leap February ends on the 29th; December into January.
        let feb_2028 = days_from_civil(2028, 2, 1) * DAY;
        assert_eq!(
            Period::Month.end(feb_2028),
            days_from_civil(2028, 3, 1) * DAY
        );
        assert_eq!(Period::Month.end(feb_2028) - feb_2028, 29 * DAY);
        let dec = days_from_civil(2026, 12, 1) * DAY;
        assert_eq!(Period::Month.end(dec), days_from_civil(2027, 1, 1) * DAY);
        assert_eq!(civil(days_from_civil(2026, 12, 3)), (2026, 12, 3));
        assert_eq!(Period::Month.start(dec + 40 * 3600), dec);
    }

    #[test]
    fn spans_are_the_day_week_and_month_holding_now() {
        assert_eq!(
            spans(START),
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
}
