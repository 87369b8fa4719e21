//! systemd's notify protocol, for `Type=notify` units: `READY=1` once every
//! listener is bound, `RELOADING=1` (with `MONOTONIC_USEC`, which systemd
//! 253+ requires) then `READY=1` around each reload, `STOPPING=1` when the
//! drain begins, and `WATCHDOG=1` at half the unit's `WatchdogSec`. Without
//! `NOTIFY_SOCKET` in the environment every call does nothing. A leaf:
//! callers decide when; this module only speaks the protocol (through the
//! `sd-notify` crate).

use std::time::Duration;

use sd_notify::NotifyState;

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!(error = %e, "systemd notify failed");
    }
}

/// Every listener is bound and serving.
pub fn ready() {
    send(&[NotifyState::Ready]);
}

/// A reload begins.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// The drain begins.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// How often to tell the watchdog weir is alive: half its timeout, when
/// the unit has one for this process.
pub fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0;
    (sd_notify::watchdog_enabled(false, &mut usec) && usec > 0)
        .then(|| Duration::from_micros(usec / 2))
}

pub fn watchdog() {
    send(&[NotifyState::Watchdog]);
}
