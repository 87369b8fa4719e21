//! One client's budget — tokens per minute, tokens and spend per day, per
//! week and per calendar month — reserved before a request and settled on
//! its actual usage.
//!
//! The API is three calls — [`Ledger::reserve`], [`Ledger::settle`],
//! [`Ledger::view`] — over plain amounts. A fleet of weirs keeps the same
//! rules in Redis (`cluster::budgets`, whose scripts must answer as this
//! does, Retry-After included); there this ledger only enforces an
//! instance's share while Redis is away.
//!
//! Windows are fixed and placed by `crate::calendar`: a minute starts at
//! :00, a day at midnight, a week on Monday, a month on its first day. A
//! request is admitted when, in every bounded window, what was
//! settled in the window so far, plus every reservation still in flight,
//! plus its own reservation, fits the limit; admitting it adds its
//! reservation to those in flight, under one lock, so concurrent requests
//! can never be admitted past the limit together. Settling takes the
//! reservation back out and charges what the request actually used to the
//! windows current at that moment. What is charged can exceed what was
//! reserved only when the reservation underestimated the request (see
//! `usage`): then the overrun is bounded by what was in flight.

use std::sync::Mutex;
use std::time::Duration;

use crate::config::Budget;
use crate::sync::Locked;

use crate::calendar::{Period, Zone};

/// An amount of budget: tokens, and spend in 10⁻¹² of the currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Amount {
    pub(crate) tokens: u64,
    pub(crate) spend: u64,
}

/// What [`Ledger::reserve`] took: hand it back to [`Ledger::settle`]
/// exactly once (it cannot be copied).
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    amount: Amount,
}

impl Reservation {
    pub(crate) fn amount(&self) -> Amount {
        self.amount
    }
}

/// Which bound refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    TokensPerMinute,
    TokensPerDay,
    SpendPerDay,
    TokensPerWeek,
    SpendPerWeek,
    TokensPerMonth,
    SpendPerMonth,
}

/// The starts of the day, the week and the month holding `now` (Unix
/// seconds), as the ledger's windows begin (in the budget time zone):
/// for reports of use.
pub(crate) fn window_starts(now: u64) -> [u64; 3] {
    let zone = crate::calendar::zone();
    [Period::Day, Period::Week, Period::Month].map(|p| p.start(now, &zone))
}

impl Bound {
    /// Every bound, in the order a ledger keeps their windows.
    pub(crate) const ALL: [Bound; 7] = [
        Bound::TokensPerMinute,
        Bound::TokensPerDay,
        Bound::SpendPerDay,
        Bound::TokensPerWeek,
        Bound::SpendPerWeek,
        Bound::TokensPerMonth,
        Bound::SpendPerMonth,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Bound::TokensPerMinute => "tokens_per_minute",
            Bound::TokensPerDay => "tokens_per_day",
            Bound::SpendPerDay => "spend_per_day",
            Bound::TokensPerWeek => "tokens_per_week",
            Bound::SpendPerWeek => "spend_per_week",
            Bound::TokensPerMonth => "tokens_per_month",
            Bound::SpendPerMonth => "spend_per_month",
        }
    }

    /// Whether it counts spend (else tokens).
    pub(crate) fn is_spend(self) -> bool {
        matches!(
            self,
            Bound::SpendPerDay | Bound::SpendPerWeek | Bound::SpendPerMonth
        )
    }

    fn period(self) -> Period {
        match self {
            Bound::TokensPerMinute => Period::Minute,
            Bound::TokensPerDay | Bound::SpendPerDay => Period::Day,
            Bound::TokensPerWeek | Bound::SpendPerWeek => Period::Week,
            Bound::TokensPerMonth | Bound::SpendPerMonth => Period::Month,
        }
    }

    /// Its limit in `budget`.
    pub(crate) fn limit(self, budget: &Budget) -> Option<u64> {
        match self {
            Bound::TokensPerMinute => budget.tokens_per_minute,
            Bound::TokensPerDay => budget.tokens_per_day,
            Bound::SpendPerDay => budget.spend_per_day,
            Bound::TokensPerWeek => budget.tokens_per_week,
            Bound::SpendPerWeek => budget.spend_per_week,
            Bound::TokensPerMonth => budget.tokens_per_month,
            Bound::SpendPerMonth => budget.spend_per_month,
        }
    }

    /// Its part of an amount.
    fn of(self, amount: Amount) -> u64 {
        if self.is_spend() {
            amount.spend
        } else {
            amount.tokens
        }
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) bound: Bound,
    /// When the request would fit; `None` when it never can (it asks for
    /// more than the whole bound).
    pub(crate) retry_after: Option<Duration>,
}

/// Wall-clock time as tokio measures it: a fixed Unix time and the tokio
/// instant it was read at, so tests can pause and advance time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    at: tokio::time::Instant,
    unix: Duration,
}

impl Clock {
    pub(crate) fn system() -> Self {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Clock::starting_at(unix)
    }

    /// A clock that reads `unix` now.
    pub(crate) fn starting_at(unix: Duration) -> Self {
        Clock {
            at: tokio::time::Instant::now(),
            unix,
        }
    }

    /// Now, as a duration since the Unix epoch.
    pub(crate) fn now(&self) -> Duration {
        self.unix + self.at.elapsed()
    }
}

/// What one window counts: settled use since `start` (Unix seconds).
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    start: u64,
    used: u64,
}

impl Window {
    /// Start a new window when `now` has passed this one.
    fn roll(&mut self, now: u64, period: Period, zone: &Zone) {
        let start = period.start(now, zone);
        if start != self.start {
            self.start = start;
            self.used = 0;
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// One per bound, in [`Bound::ALL`]'s order.
    windows: [Window; 7],
    /// For each bound, the start of the window its warning was last given
    /// in (a warning is logged once per window).
    warned: [u64; 7],
    /// Reservations in flight.
    reserved: Amount,
    in_flight: u64,
}

impl State {
    fn roll(&mut self, now: u64, zone: &Zone) {
        for (w, bound) in self.windows.iter_mut().zip(Bound::ALL) {
            w.roll(now, bound.period(), zone);
        }
    }

    /// Mark bound `i`'s window warned: whether it was not yet.
    fn first_warning(&mut self, i: usize) -> bool {
        let (Some(window), Some(warned)) = (self.windows.get(i), self.warned.get_mut(i)) else {
            return false;
        };
        let first = *warned != window.start;
        *warned = window.start;
        first
    }
}

/// One client token's budget state.
#[derive(Debug)]
pub(crate) struct Ledger {
    clock: Clock,
    state: Mutex<State>,
}

/// One bounded window as the admin view shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowView {
    pub(crate) bound: Bound,
    pub(crate) limit: Option<u64>,
    /// Settled in the current window.
    pub(crate) used: u64,
    /// Held by requests in flight.
    pub(crate) reserved: u64,
    /// Unix second the window ends at.
    pub(crate) resets_at: u64,
}

/// A ledger as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// One per bound, in [`Bound::ALL`]'s order.
    pub(crate) windows: [WindowView; 7],
    pub(crate) in_flight: u64,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new(Clock::system())
    }
}

impl Ledger {
    pub(crate) fn new(clock: Clock) -> Self {
        Ledger {
            clock,
            state: Mutex::new(State::default()),
        }
    }

    /// Now, and the zone windows are placed in now.
    fn now(&self) -> (u64, Duration, std::sync::Arc<Zone>) {
        let now = self.clock.now();
        (now.as_secs(), now, crate::calendar::zone())
    }

    /// Reserve `want` against `budget`: admitted only if it fits every
    /// bounded window with everything settled there and everything in
    /// flight.
    pub(crate) fn reserve(&self, want: Amount, budget: &Budget) -> Result<Reservation, Refused> {
        let (secs, now, zone) = self.now();
        let mut s = self.state.locked();
        s.roll(secs, &zone);
        let checks = Bound::ALL
            .into_iter()
            .zip(s.windows)
            .map(|(bound, window)| {
                (
                    bound,
                    bound.limit(budget),
                    window,
                    bound.period(),
                    bound.of(s.reserved),
                    bound.of(want),
                )
            });
        let mut refused: Option<Refused> = None;
        for (bound, limit, window, period, reserved, want) in checks {
            let Some(limit) = limit else { continue };
            if want > limit {
                return Err(Refused {
                    bound,
                    retry_after: None,
                });
            }
            if window.used.saturating_add(reserved).saturating_add(want) <= limit {
                continue;
            }
            // Settled use frees when the window ends; reservations alone
            // free as the requests holding them end (soon: try in 1 s).
            let ends = Duration::from_secs(period.end(window.start, &zone)).saturating_sub(now);
            let wait = if window.used.saturating_add(want) > limit {
                ends
            } else {
                ends.min(Duration::from_secs(1))
            };
            if refused.is_none_or(|r| r.retry_after.is_some_and(|w| wait > w)) {
                refused = Some(Refused {
                    bound,
                    retry_after: Some(wait),
                });
            }
        }
        if let Some(r) = refused {
            return Err(r);
        }
        s.reserved.tokens = s.reserved.tokens.saturating_add(want.tokens);
        s.reserved.spend = s.reserved.spend.saturating_add(want.spend);
        s.in_flight += 1;
        Ok(Reservation { amount: want })
    }

    /// End a reservation: it leaves what is in flight, and `actual` is
    /// charged to the windows current now (nothing, to release it).
    pub(crate) fn settle(&self, reservation: Reservation, actual: Amount) {
        let (secs, _, zone) = self.now();
        let mut guard = self.state.locked();
        let s = &mut *guard;
        s.roll(secs, &zone);
        let held = reservation.amount;
        s.reserved.tokens = s.reserved.tokens.saturating_sub(held.tokens);
        s.reserved.spend = s.reserved.spend.saturating_sub(held.spend);
        s.in_flight = s.in_flight.saturating_sub(1);
        for (w, bound) in s.windows.iter_mut().zip(Bound::ALL) {
            w.used = w.used.saturating_add(bound.of(actual));
        }
    }

    /// The bound nearest its limit, when its use (settled and in flight)
    /// is at least `budget.warn_at` percent of it: the bound, the percent,
    /// and whether this is the first time in the window it is told.
    pub(crate) fn warning(&self, budget: &Budget) -> Option<(Bound, u64, bool)> {
        let at = u64::from(budget.warn_at?);
        let (secs, _, zone) = self.now();
        let mut s = self.state.locked();
        s.roll(secs, &zone);
        let reserved = s.reserved;
        let (i, bound, percent) = Bound::ALL
            .into_iter()
            .enumerate()
            .filter_map(|(i, bound)| {
                let limit = bound.limit(budget).filter(|l| *l > 0)?;
                let used = s.windows[i].used.saturating_add(bound.of(reserved));
                Some((i, bound, used.saturating_mul(100) / limit))
            })
            .max_by_key(|(_, _, p)| *p)?;
        if percent < at {
            return None;
        }
        Some((bound, percent, s.first_warning(i)))
    }

    /// Mark `bound`'s current window warned: whether it was not yet. For a
    /// warning found in the fleet's figures (`[cluster]`), logged once per
    /// window by each instance, by the same marks as this ledger's own.
    pub(crate) fn first_warning(&self, bound: Bound) -> bool {
        let Some(i) = Bound::ALL.iter().position(|b| *b == bound) else {
            return false;
        };
        let (secs, _, zone) = self.now();
        let mut s = self.state.locked();
        s.roll(secs, &zone);
        s.first_warning(i)
    }

    /// The ledger against `budget`, now.
    pub(crate) fn view(&self, budget: &Budget) -> View {
        let (secs, _, zone) = self.now();
        let mut s = self.state.locked();
        s.roll(secs, &zone);
        let reserved = s.reserved;
        View {
            windows: std::array::from_fn(|i| {
                let bound = Bound::ALL[i];
                let window = s.windows[i];
                WindowView {
                    bound,
                    limit: bound.limit(budget),
                    used: window.used,
                    reserved: bound.of(reserved),
                    resets_at: bound.period().end(window.start, &zone),
                }
            }),
            in_flight: s.in_flight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::DAY;

    /// 2025-01-01 23:59:30 UTC: half a minute before a minute and a day end.
    const START: u64 = 1_735_775_970;

    fn ledger() -> Ledger {
        Ledger::new(Clock::starting_at(Duration::from_secs(START)))
    }

    fn tokens(n: u64) -> Amount {
        Amount {
            tokens: n,
            spend: 0,
        }
    }

    fn per_minute(n: u64) -> Budget {
        Budget {
            tokens_per_minute: Some(n),
            ..Budget::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_minute_refuses_past_its_limit_until_it_ends() {
        let l = ledger();
        let b = per_minute(100);
        let first = l.reserve(tokens(60), &b).expect("fits");
        l.settle(first, tokens(60));
        let second = l.reserve(tokens(40), &b).expect("fits exactly");
        l.settle(second, tokens(40));
        assert_eq!(
            l.reserve(tokens(1), &b),
            Err(Refused {
                bound: Bound::TokensPerMinute,
                retry_after: Some(Duration::from_secs(30)),
            }),
            "the minute ends at :00, 30 s from now"
        );
        tokio::time::advance(Duration::from_secs(29)).await;
        assert_eq!(
            l.reserve(tokens(1), &b).map_err(|r| r.retry_after),
            Err(Some(Duration::from_secs(1)))
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let r = l.reserve(tokens(100), &b).expect("a new minute");
        l.settle(r, Amount::default());
    }

    #[tokio::test(start_paused = true)]
    async fn settling_gives_back_what_was_not_used() {
        let l = ledger();
        let b = per_minute(100);
        let r = l.reserve(tokens(90), &b).expect("fits");
        assert!(l.reserve(tokens(20), &b).is_err(), "90 are held");
        l.settle(r, tokens(30));
        let v = l.view(&b);
        assert_eq!((v.windows[0].used, v.windows[0].reserved), (30, 0));
        let r = l.reserve(tokens(70), &b).expect("the unused 60 came back");
        l.settle(r, tokens(70));
    }

    #[tokio::test(start_paused = true)]
    async fn reservations_in_flight_count_and_say_retry_soon() {
        let l = ledger();
        let b = per_minute(100);
        let held = l.reserve(tokens(80), &b).expect("fits");
        assert_eq!(
            l.reserve(tokens(30), &b).map_err(|r| r.retry_after),
            Err(Some(Duration::from_secs(1))),
            "nothing is settled: the request holding 80 will end soon"
        );
        assert_eq!(l.view(&b).in_flight, 1);
        l.settle(held, tokens(10));
        let r = l.reserve(tokens(30), &b).expect("fits now");
        l.settle(r, tokens(0));
        assert_eq!(l.view(&b).in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_larger_than_the_bound_never_fits() {
        let l = ledger();
        assert_eq!(
            l.reserve(tokens(101), &per_minute(100)),
            Err(Refused {
                bound: Bound::TokensPerMinute,
                retry_after: None
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn days_and_spend_end_at_midnight_utc() {
        let l = ledger();
        let b = Budget {
            tokens_per_day: Some(1_000),
            spend_per_day: Some(5),
            ..Budget::default()
        };
        let r = l
            .reserve(
                Amount {
                    tokens: 10,
                    spend: 5,
                },
                &b,
            )
            .expect("fits");
        l.settle(
            r,
            Amount {
                tokens: 10,
                spend: 5,
            },
        );
        let refused = l.reserve(
            Amount {
                tokens: 10,
                spend: 1,
            },
            &b,
        );
        assert_eq!(
            refused,
            Err(Refused {
                bound: Bound::SpendPerDay,
                retry_after: Some(Duration::from_secs(30)),
            })
        );
        let v = l.view(&b);
        assert_eq!(v.windows[2].resets_at, START + 30);
        tokio::time::advance(Duration::from_secs(30)).await;
        let r = l
            .reserve(
                Amount {
                    tokens: 1_000,
                    spend: 5,
                },
                &b,
            )
            .expect("a new day");
        l.settle(r, Amount::default());
    }

    #[tokio::test(start_paused = true)]
    async fn the_longest_wait_of_the_refusing_bounds_is_given() {
        let l = ledger();
        let b = Budget {
            tokens_per_minute: Some(100),
            tokens_per_day: Some(150),
            ..Budget::default()
        };
        // The day ends with this minute: move 40 minutes from midnight.
        tokio::time::advance(Duration::from_secs(30 + 40 * 60)).await;
        let r = l.reserve(tokens(100), &b).expect("fits");
        l.settle(r, tokens(100));
        tokio::time::advance(Duration::from_secs(60)).await;
        let r = l.reserve(tokens(50), &b).expect("a new minute, day has 50");
        l.settle(r, tokens(50));
        let refused = l.reserve(tokens(51), &b).expect_err("both are full");
        assert_eq!(refused.bound, Bound::TokensPerDay);
        assert_eq!(
            refused.retry_after,
            Some(Duration::from_secs(DAY - 41 * 60)),
            "the day frees later than the minute"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_that_ends_while_a_request_runs_charges_the_new_one() {
        let l = ledger();
        let b = per_minute(100);
        let r = l.reserve(tokens(100), &b).expect("fits");
        tokio::time::advance(Duration::from_secs(45)).await;
        l.settle(r, tokens(70));
        let v = l.view(&b);
        assert_eq!((v.windows[0].used, v.windows[0].reserved), (70, 0));
        assert!(l.reserve(tokens(31), &b).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_month_refuses_until_the_next_month_and_warns_once_past_the_soft_limit() {
        let l = ledger();
        let b = Budget {
            spend_per_month: Some(100),
            warn_at: Some(80),
            ..Budget::default()
        };
        let spend = |n| Amount {
            tokens: 0,
            spend: n,
        };
        let r = l.reserve(spend(70), &b).expect("fits");
        l.settle(r, spend(70));
        assert_eq!(l.warning(&b), None, "70 % is under the soft limit");
        let r = l.reserve(spend(15), &b).expect("fits");
        assert_eq!(l.warning(&b), Some((Bound::SpendPerMonth, 85, true)));
        assert_eq!(
            l.warning(&b),
            Some((Bound::SpendPerMonth, 85, false)),
            "logged once"
        );
        l.settle(r, spend(15));
        let refused = l.reserve(spend(20), &b).expect_err("over");
        assert_eq!(refused.bound, Bound::SpendPerMonth);
        // From 2025-01-01 23:59:30 to February: 30 days and 30 s.
        assert_eq!(
            refused.retry_after,
            Some(Duration::from_secs(30 * DAY + 30))
        );
        tokio::time::advance(Duration::from_secs(31 * DAY)).await;
        assert!(l.reserve(spend(20), &b).is_ok(), "a new month");
    }
}
