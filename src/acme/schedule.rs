//! When to renew, and how long to wait after a failure. Pure functions of
//! the certificate's validity and a seed, so they are tested without a
//! clock.

use std::time::{Duration, SystemTime};

/// Renewal at two thirds of the lifetime, moved by up to ±1/30 of it (three
/// days each way for a 90-day certificate), so certificates issued together
/// do not all renew in the same minute. The seed comes from the
/// certificate, so the time is the same every time it is computed.
pub(crate) fn renew_at(not_before: SystemTime, not_after: SystemTime, seed: u64) -> SystemTime {
    let lifetime = not_after
        .duration_since(not_before)
        .unwrap_or(Duration::ZERO);
    let base = not_before + lifetime * 2 / 3;
    let spread = lifetime / 30;
    let mut rng = fastrand::Rng::with_seed(seed);
    let offset = spread.mul_f64(rng.f64());
    // The spread never reaches the expiry: 2/3 + 1/30 < 1.
    if rng.bool() {
        base + offset
    } else {
        base.checked_sub(offset).unwrap_or(base)
    }
}

/// A time inside the CA's suggested renewal window (RFC 9773 §4.2: a
/// uniformly random point in it), or now if the window has passed.
pub(crate) fn in_window(
    start: SystemTime,
    end: SystemTime,
    now: SystemTime,
    seed: u64,
) -> SystemTime {
    if end <= now {
        return now;
    }
    let start = start.max(now);
    let width = end.duration_since(start).unwrap_or(Duration::ZERO);
    start + width.mul_f64(fastrand::Rng::with_seed(seed).f64())
}

/// The longest wait between attempts after failures.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(6 * 3600);

/// The wait after the `failures`-th failure in a row: `base`, doubling,
/// at most [`MAX_BACKOFF`].
pub(crate) fn backoff(base: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << doublings).min(MAX_BACKOFF)
}

/// How often the CA's renewal information is asked again when it gave no
/// hint, and the bounds on its hint (RFC 9773 §4.3.2 asks clients to
/// check at least daily).
pub(crate) const ARI_RECHECK: Duration = Duration::from_secs(6 * 3600);
pub(crate) const ARI_RECHECK_MIN: Duration = Duration::from_secs(3600);
pub(crate) const ARI_RECHECK_MAX: Duration = Duration::from_secs(24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn renewal_is_near_two_thirds_and_stable() {
        let nb = SystemTime::UNIX_EPOCH + DAY * 20_000;
        let na = nb + DAY * 90;
        let mut earliest = na;
        let mut latest = nb;
        for seed in 0..500 {
            let at = renew_at(nb, na, seed);
            assert_eq!(at, renew_at(nb, na, seed), "same seed, same time");
            assert!(at >= nb + DAY * 57 && at <= nb + DAY * 63, "seed {seed}");
            earliest = earliest.min(at);
            latest = latest.max(at);
        }
        assert!(
            latest.duration_since(earliest).expect("ordered") > DAY,
            "the jitter spreads renewals"
        );
    }

    #[test]
    fn a_short_lifetime_renews_before_expiry() {
        let nb = SystemTime::UNIX_EPOCH + DAY * 20_000;
        let na = nb + Duration::from_secs(30);
        for seed in 0..100 {
            let at = renew_at(nb, na, seed);
            assert!(at > nb + Duration::from_secs(18) && at < na, "seed {seed}");
        }
    }

    #[test]
    fn window_picks_inside_it_or_now() {
        let now = SystemTime::UNIX_EPOCH + DAY * 20_000;
        for seed in 0..100 {
            let at = in_window(now + DAY, now + DAY * 2, now, seed);
            assert!(at >= now + DAY && at <= now + DAY * 2);
            let open = in_window(now - DAY, now + DAY, now, seed);
            assert!(open >= now && open <= now + DAY, "the past part is skipped");
        }
        assert_eq!(in_window(now - DAY * 2, now - DAY, now, 7), now);
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let base = Duration::from_secs(60);
        assert_eq!(backoff(base, 1), base);
        assert_eq!(backoff(base, 2), base * 2);
        assert_eq!(backoff(base, 4), base * 8);
        assert_eq!(backoff(base, 100), MAX_BACKOFF);
    }
}
