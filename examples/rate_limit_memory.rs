//! How much memory a route's rate limiter holds for N distinct clients
//! (`cargo run --release --example rate_limit_memory -- 100000`): the
//! resident-set growth after N clients from 10.0.0.0/8 each sent two
//! requests, read from /proc/self/statm.

use std::net::{IpAddr, Ipv4Addr};

use weir::testing::rate::{Client, MAX_KEYS, RateLimit};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let limit = RateLimit::new(10, 20, MAX_KEYS);
    let before = rss_bytes();
    for i in 0..n {
        let ip = Client::ip(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)));
        let _ = limit.check(ip);
        let _ = limit.check(ip);
    }
    let after = rss_bytes();
    println!(
        "{n} clients: {} tracked, RSS grew {:.1} MiB ({:.0} bytes per tracked client)",
        limit.tracked(),
        (after - before) as f64 / (1 << 20) as f64,
        (after - before) as f64 / limit.tracked().max(1) as f64
    );
}
