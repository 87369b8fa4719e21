//! The connection registry's cost per operation as the number of
//! connections grows (issue 13: admission, reclaim and the deadline sweep
//! must stay flat per operation at 100,000 and 1,000,000 connections,
//! more than this machine's 20,000 descriptors allow end to end).
//!
//! `cargo run --release --example registry_scale [N ...]` fills a registry
//! capped at N with connections sending their request head (all
//! reclaimable), then measures: an admission at the cap (which evicts one),
//! a connection leaving, and one deadline sweep over all N (per connection
//! and whole, with deadlines that do not fire). Prints one row per N.
//! `ROUNDS` (default 10,000) sets how many admissions and leavings are
//! timed.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use weir::testing::config::ConnectionSettings;
use weir::testing::conn::Phase;
use weir::testing::conn::Registry;
use weir::testing::conn::{Deadlines, sweep_once};

fn ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))
}

fn main() {
    let sizes: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 100_000, 1_000_000]
    } else {
        sizes
    };
    let listener: Arc<str> = "bench".into();
    let deadlines = Deadlines::new(&ConnectionSettings::default());
    println!(
        "| connections | admit at the cap (evicts one) ns | leave ns | sweep ns per connection | whole sweep ms |"
    );
    println!("|---|---|---|---|---|");
    for n in sizes {
        let registry = Registry::new(n as usize, 0);
        let mut slots = Vec::with_capacity(n as usize + 10_000);
        for i in 0..n {
            let (s, _) = registry
                .admit(
                    ip(i),
                    listener.clone(),
                    Phase::ReadingHead,
                    Gauge::default(),
                )
                .expect("room");
            slots.push(s);
        }
        // Admissions at the cap, each evicting the oldest head it finds.
        let rounds: u32 = std::env::var("ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(10_000);
        let started = Instant::now();
        for i in 0..rounds {
            let (s, evicted) = registry
                .admit(
                    ip(n + i),
                    listener.clone(),
                    Phase::ReadingHead,
                    Gauge::default(),
                )
                .expect("evicts");
            assert!(evicted.is_some());
            slots.push(s);
        }
        let admit_ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
        // Leaving: the newest slots (still registered) are dropped.
        let leaving: Vec<_> = slots.drain(slots.len() - rounds as usize..).collect();
        let started = Instant::now();
        drop(leaving);
        let leave_ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
        // A sweep over everything registered.
        let mut overdue = Vec::new();
        let open = registry.open();
        let started = Instant::now();
        sweep_once(&registry, &deadlines, &mut overdue);
        let sweep = started.elapsed();
        println!(
            "| {n} | {admit_ns:.0} | {leave_ns:.0} | {:.1} | {:.2} |",
            sweep.as_nanos() as f64 / open.max(1) as f64,
            sweep.as_secs_f64() * 1e3
        );
    }
}
