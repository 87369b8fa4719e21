//! `[connections]`.

use super::*;
const T: &str = "connections";

pub(crate) const MAX: Key = Key {
    table: T,
    name: "max",
    kind: Kind::Uint {
        max: MAX_SEMAPHORE_PERMITS,
    },
    default: Default::Uint(1024),
    meaning: "client connections, process-wide; 0: no cap",
};
pub(crate) const MAX_PER_IP: Key = Key {
    table: T,
    name: "max_per_ip",
    kind: Kind::Uint {
        max: MAX_SEMAPHORE_PERMITS,
    },
    default: Default::Uint(0),
    meaning: "connections per client address (IPv6 per /64); 0: off",
};
pub(crate) const TLS_HANDSHAKE_TIMEOUT: Key = Key {
    table: T,
    name: "tls_handshake_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(10)),
    meaning: "time to complete the TLS handshake",
};
pub(crate) const REQUEST_HEAD_TIMEOUT: Key = Key {
    table: T,
    name: "request_head_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(10)),
    meaning: "total time to receive a request head",
};
pub(crate) const KEEPALIVE_TIMEOUT: Key = Key {
    table: T,
    name: "keepalive_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(60)),
    meaning: "idle time between requests, or with no open stream",
};
pub(crate) const MAX_REQUESTS: Key = Key {
    table: T,
    name: "max_requests",
    kind: Kind::Uint { max: u64::MAX },
    default: Default::Uint(1000),
    meaning: "requests per connection; 0: no limit",
};
pub(crate) const MIN_BODY_RATE: Key = Key {
    table: T,
    name: "min_body_rate",
    // A minimum above 1 GiB/s would cut every client.
    kind: Kind::Size {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Size(KIB),
    meaning: "minimum request-body rate in bytes per second; 0: off",
};
pub(crate) const BODY_RATE_PERIOD: Key = Key {
    table: T,
    name: "body_rate_period",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(10)),
    meaning: "the window for min_body_rate",
};
pub(crate) const SEND_TIMEOUT: Key = Key {
    table: T,
    name: "send_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(30)),
    meaning: "how long a client may take nothing before it is disconnected",
};
pub(crate) const PRESSURE_THRESHOLD: Key = Key {
    table: T,
    name: "pressure_threshold",
    // 0 is refused by the loader, with its own message.
    kind: Kind::Uint { max: 100 },
    default: Default::Uint(80),
    meaning: "percent of max at which deadlines shrink to pressure_timeout",
};
pub(crate) const PRESSURE_TIMEOUT: Key = Key {
    table: T,
    name: "pressure_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(1)),
    meaning: "the shrunk deadline under pressure",
};
pub(crate) const TUNNEL_IDLE_TIMEOUT: Key = Key {
    table: T,
    name: "tunnel_idle_timeout",
    kind: Kind::Duration(TIMER),
    default: Default::Duration(secs(60)),
    meaning: "an upgraded tunnel (WebSocket) carrying no byte either way this long is closed",
};
pub(crate) const TUNNEL_MAX_LIFETIME: Key = Key {
    table: T,
    name: "tunnel_max_lifetime",
    kind: Kind::Duration(TIMER_OR_ZERO),
    default: Default::Duration(Duration::ZERO),
    meaning: "a tunnel is closed this long after it opened, busy or not; 0: no cap",
};
pub(crate) const MAX_TUNNELS_PER_IP: Key = Key {
    table: T,
    name: "max_tunnels_per_ip",
    kind: Kind::Uint {
        max: MAX_SEMAPHORE_PERMITS,
    },
    default: Default::Uint(256),
    meaning: "open tunnels per client address (IPv6 per /64); 0: off",
};
