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

/// The variable a process starting its successor (a binary upgrade) puts
/// systemd's own notify socket in, since the successor's `NOTIFY_SOCKET`
/// is the old process's private one.
pub(crate) const SUCCESSOR_OF: &str = "WEIR_SYSTEMD_NOTIFY_SOCKET";

/// Every listener is bound and serving. A successor also tells systemd it
/// is the unit's main process now (needs `NotifyAccess=all`).
pub(crate) fn ready() {
    send(&[NotifyState::Ready]);
    if let Ok(path) = std::env::var(SUCCESSOR_OF) {
        let msg = format!("MAINPID={}\nREADY=1\n", std::process::id());
        if let Err(e) = send_to(&path, msg.as_bytes()) {
            tracing::warn!(error = %e, "cannot tell systemd the new main PID");
        }
    }
}

/// One datagram to a notify socket at `path` (`@name` = abstract).
fn send_to(path: &str, msg: &[u8]) -> std::io::Result<()> {
    use std::os::unix::net::UnixDatagram;
    let socket = UnixDatagram::unbound()?;
    match path.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(msg, &addr)?;
        }
        None => {
            socket.send_to(msg, path)?;
        }
    }
    Ok(())
}

/// A reload begins.
pub(crate) fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// The drain begins.
pub(crate) fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// How often to tell the watchdog weir is alive: half its timeout, when
/// the unit has one for this process.
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0;
    (sd_notify::watchdog_enabled(false, &mut usec) && usec > 0)
        .then(|| Duration::from_micros(usec / 2))
}

pub(crate) fn watchdog() {
    send(&[NotifyState::Watchdog]);
}
