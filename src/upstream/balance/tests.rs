use std::collections::HashMap;

use super::*;
use crate::config::RetryBudget;

fn group(weights: &[(u32, bool)], policy: Policy, ejection: Ejection) -> Arc<Group<usize>> {
    let members = weights
        .iter()
        .enumerate()
        .map(|(target, &(weight, backup))| Member {
            target,
            weight,
            backup,
        })
        .collect();
    Arc::new(Group::new(members, policy, ejection))
}

/// How many of `n` picks each server got, each answered at once.
fn shares(g: &Arc<Group<usize>>, n: usize, key: impl Fn(usize) -> Option<u64>) -> Vec<usize> {
    let mut counts = vec![0; g.len()];
    let now = Instant::now();
    for i in 0..n {
        let mut p = g.pick(key(i), &[], now).expect("a server");
        counts[*p.target()] += 1;
        p.finish(Outcome::Answered(Duration::from_millis(1)), now);
    }
    counts
}

#[tokio::test(start_paused = true)]
async fn round_robin_and_hash_spread_by_weight() {
    let rr = group(
        &[(1, false), (2, false), (3, false)],
        Policy::RoundRobin,
        Ejection::default(),
    );
    assert_eq!(shares(&rr, 600, |_| None), vec![100, 200, 300], "exact");

    let hash = group(
        &[(1, false), (2, false), (3, false)],
        Policy::Hash,
        Ejection::default(),
    );
    let counts = shares(&hash, 60_000, |i| Some(key(format!("user-{i}").as_bytes())));
    for (got, want) in counts.iter().zip([10_000, 20_000, 30_000]) {
        let off = (*got as f64 - want as f64).abs() / want as f64;
        assert!(
            off < 0.08,
            "{counts:?}: within a few percent of the weights"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn p2c_sends_less_to_a_slow_server_and_round_robin_does_not() {
    for (policy, falls) in [(Policy::P2cEwma, true), (Policy::RoundRobin, false)] {
        let g = group(&[(1, false); 3], policy, Ejection::default());
        let mut counts = [0usize; 3];
        for _ in 0..3_000 {
            let now = Instant::now();
            let mut p = g.pick(None, &[], now).expect("a server");
            let slow = *p.target() == 0;
            counts[*p.target()] += 1;
            let latency = Duration::from_millis(if slow { 50 } else { 1 });
            tokio::time::advance(Duration::from_millis(1)).await;
            p.finish(Outcome::Answered(latency), Instant::now());
        }
        let share = counts[0] as f64 / 3_000.0;
        if falls {
            assert!(share < 0.1, "{policy:?}: {counts:?}");
        } else {
            assert!((share - 1.0 / 3.0).abs() < 0.01, "{policy:?}: {counts:?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn least_in_flight_avoids_the_busy_server() {
    let g = group(&[(1, false); 3], Policy::LeastInFlight, Ejection::default());
    let now = Instant::now();
    let mut held: Vec<_> = (0..3)
        .map(|_| g.pick(None, &[], now).expect("pick"))
        .collect();
    let mut servers: Vec<usize> = held.iter().map(Pick::index).collect();
    servers.sort_unstable();
    assert_eq!(
        servers,
        [0, 1, 2],
        "one each while each is busier than the rest"
    );
    let busy = held.pop().expect("one");
    drop(held);
    for _ in 0..20 {
        assert_ne!(g.pick(None, &[], now).expect("pick").index(), busy.index());
    }
    assert_eq!(g.in_flight(busy.index()), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failing_server_is_out_for_a_back_off_that_doubles_then_back() {
    let rule = Ejection {
        after: 3,
        base: Duration::from_secs(10),
        max: Duration::from_secs(25),
        ..Ejection::default()
    };
    let g = group(&[(1, false); 2], Policy::RoundRobin, rule);
    let fail = |g: &Arc<Group<usize>>, server: usize| {
        let now = Instant::now();
        let mut p = g.pick(None, &[1 - server], now).expect("pick");
        assert_eq!(p.index(), server);
        p.finish(Outcome::Failed, now);
    };
    fail(&g, 0);
    fail(&g, 0);
    assert!(g.is_in(0, Instant::now()), "two failures are not three");
    let now = Instant::now();
    let mut third = g.pick(None, &[1], now).expect("pick");
    assert_eq!(
        third.finish(Outcome::Failed, now),
        Some(Change::Out {
            until: now + Duration::from_secs(10)
        })
    );
    assert_eq!(third.finish(Outcome::Failed, now), None, "counted once");
    drop(third);
    assert!(!g.is_in(0, Instant::now()), "out after three in a row");
    for _ in 0..4 {
        assert_eq!(g.pick(None, &[], Instant::now()).expect("pick").index(), 1);
    }
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(g.is_in(0, Instant::now()), "back after 10 s");
    // On probation: one failure takes it out again, for twice as long,
    // then the cap.
    fail(&g, 0);
    tokio::time::advance(Duration::from_secs(19)).await;
    assert!(!g.is_in(0, Instant::now()), "20 s the second time");
    tokio::time::advance(Duration::from_secs(1)).await;
    fail(&g, 0);
    tokio::time::advance(Duration::from_secs(25)).await;
    assert!(g.is_in(0, Instant::now()), "capped at 25 s");
    // A success ends probation: it takes three failures again.
    let now = Instant::now();
    let mut p = g.pick(None, &[1], now).expect("pick");
    assert_eq!(
        p.finish(Outcome::Answered(Duration::from_millis(1)), now),
        Some(Change::Back)
    );
    drop(p);
    fail(&g, 0);
    assert!(g.is_in(0, Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn never_more_than_the_share_out_and_never_a_lone_server() {
    let rule = Ejection {
        after: 1,
        max_share: 50,
        ..Ejection::default()
    };
    let g = group(&[(1, false); 4], Policy::RoundRobin, rule);
    for server in 0..4 {
        let now = Instant::now();
        let others: Vec<usize> = (0..4).filter(|&i| i != server).collect();
        if let Ok(mut p) = g.pick(None, &others, now) {
            p.finish(Outcome::Failed, now);
        }
    }
    let out = (0..4).filter(|&i| !g.is_in(i, Instant::now())).count();
    assert_eq!(out, 2, "half of four");

    let lone = group(&[(1, false)], Policy::RoundRobin, rule);
    for _ in 0..10 {
        let now = Instant::now();
        let mut p = lone.pick(None, &[], now).expect("pick");
        p.finish(Outcome::Failed, now);
    }
    assert!(
        lone.is_in(0, Instant::now()),
        "nginx: a group of one stays in"
    );
}

#[tokio::test(start_paused = true)]
async fn backups_serve_only_when_no_primary_is_in_and_all_out_says_until_when() {
    let rule = Ejection {
        after: 1,
        max_share: 100,
        base: Duration::from_secs(7),
        ..Ejection::default()
    };
    let g = group(&[(1, false), (1, true)], Policy::P2cEwma, rule);
    for _ in 0..20 {
        assert_eq!(g.pick(None, &[], Instant::now()).expect("pick").index(), 0);
    }
    let now = Instant::now();
    g.pick(None, &[], now)
        .expect("pick")
        .finish(Outcome::Failed, now);
    assert_eq!(
        g.pick(None, &[], now).expect("pick").index(),
        1,
        "the backup"
    );
    g.pick(None, &[], now)
        .expect("pick")
        .finish(Outcome::Failed, now);
    let all_out = g.pick(None, &[], now).expect_err("all out");
    assert_eq!(all_out.until, Some(now + Duration::from_secs(7)));
    assert_eq!(
        g.pick(None, &[0, 1], now).expect_err("excluded").until,
        None,
        "every server already tried"
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_stays_on_its_server_and_only_an_outs_keys_move() {
    let rule = Ejection {
        after: 1,
        ..Ejection::default()
    };
    let g = group(&[(1, false); 4], Policy::Hash, rule);
    let now = Instant::now();
    let keys: Vec<u64> = (0..4_000)
        .map(|i| key(format!("k{i}").as_bytes()))
        .collect();
    let before: Vec<usize> = keys
        .iter()
        .map(|k| g.pick(Some(*k), &[], now).expect("pick").index())
        .collect();
    let again: Vec<usize> = keys
        .iter()
        .map(|k| g.pick(Some(*k), &[], now).expect("pick").index())
        .collect();
    assert_eq!(before, again, "a key stays");
    g.pick(Some(keys[0]), &[], now)
        .expect("pick")
        .finish(Outcome::Failed, now);
    let gone = before[0];
    let after: Vec<usize> = keys
        .iter()
        .map(|k| g.pick(Some(*k), &[], now).expect("pick").index())
        .collect();
    let mut moved: HashMap<bool, usize> = HashMap::new();
    for (b, a) in before.iter().zip(&after) {
        assert!(*b == gone || a == b, "only the out server's keys move");
        *moved.entry(a != b).or_default() += 1;
    }
    let share = moved[&true] as f64 / keys.len() as f64;
    assert!((share - 0.25).abs() < 0.05, "about 1/N moved: {share}");
}

#[tokio::test(start_paused = true)]
async fn a_server_back_from_out_ramps_up_over_slow_start() {
    let rule = Ejection {
        after: 1,
        base: Duration::from_secs(10),
        slow_start: Duration::from_secs(100),
        ..Ejection::default()
    };
    let g = group(&[(1, false); 2], Policy::RoundRobin, rule);
    let now = Instant::now();
    g.pick(None, &[1], now)
        .expect("pick")
        .finish(Outcome::Failed, now);
    tokio::time::advance(Duration::from_secs(10)).await;
    let early = shares(&g, 1_100, |_| None)[0];
    assert!(early < 150, "a tenth of its share at first: {early}");
    tokio::time::advance(Duration::from_secs(100)).await;
    let later = shares(&g, 1_000, |_| None)[0];
    assert!(
        (480..=520).contains(&later),
        "all of it after the window: {later}"
    );
}

#[test]
fn hash_keys_are_stable_across_processes() {
    // A fleet's weirs must agree: the value is fixed, not seeded.
    assert_eq!(key(b"session-1"), KEY_OF_SESSION_1);
    assert_ne!(key(b"session-1"), key(b"session-2"));
}

const KEY_OF_SESSION_1: u64 = 10_348_509_449_063_778_181;

#[tokio::test(start_paused = true)]
async fn the_active_check_takes_a_server_out_past_the_cap_and_brings_it_back() {
    let rule = Ejection {
        max_share: 10,
        ..Ejection::default()
    };
    let g = group(&[(1, false); 2], Policy::RoundRobin, rule);
    assert_eq!(g.checked(0, false), Some(Change::Down));
    assert_eq!(g.checked(0, false), None, "no change");
    assert_eq!(
        g.checked(1, false),
        Some(Change::Down),
        "no cap on the check"
    );
    let now = Instant::now();
    assert_eq!(g.pick(None, &[], now).expect_err("all down").until, None);
    assert_eq!(g.checked(1, true), Some(Change::Back));
    for _ in 0..4 {
        assert_eq!(g.pick(None, &[], now).expect("pick").index(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_hold_takes_even_a_lone_server_out_until_its_time_and_an_answer_does_not_end_it() {
    let lone = group(&[(1, false)], Policy::LeastInFlight, Ejection::default());
    let now = Instant::now();
    let mut early = lone.pick(None, &[], now).expect("in");
    let until = now + Duration::from_secs(30);
    assert_eq!(
        lone.hold(0, until, Reason::RateLimited, now),
        Some(Change::Out { until })
    );
    assert_eq!(lone.held(0, now), Some((until, Reason::RateLimited)));
    assert_eq!(
        lone.pick(None, &[], now).expect_err("held").until,
        Some(until),
        "the provider said so: a group of one is out too"
    );
    // A request sent before the hold answers: the hold stands.
    assert_eq!(early.finish(Outcome::Answered(Duration::ZERO), now), None);
    assert!(lone.pick(None, &[], now).is_err());
    // A shorter hint never shortens it.
    lone.hold(0, now + Duration::from_secs(5), Reason::Overloaded, now);
    assert_eq!(lone.held(0, now), Some((until, Reason::RateLimited)));

    tokio::time::advance(Duration::from_secs(30)).await;
    let now = Instant::now();
    let mut p = lone.pick(None, &[], now).expect("back at its time");
    assert_eq!(
        p.finish(Outcome::Answered(Duration::ZERO), now),
        Some(Change::Back)
    );
}

#[tokio::test(start_paused = true)]
async fn holds_pass_the_cap_on_the_share_out() {
    let rule = Ejection {
        max_share: 50,
        ..Ejection::default()
    };
    let g = group(&[(1, false); 2], Policy::RoundRobin, rule);
    let now = Instant::now();
    for i in 0..2 {
        let until = now + Duration::from_secs(10 + i as u64);
        assert!(g.hold(i, until, Reason::RateLimited, now).is_some());
    }
    assert_eq!(
        g.pick(None, &[], now).expect_err("both held").until,
        Some(now + Duration::from_secs(10)),
        "the soonest back"
    );
}

#[tokio::test(start_paused = true)]
async fn refusals_hold_for_a_growing_back_off_and_an_answer_ends_it() {
    let lone = group(&[(1, false)], Policy::LeastInFlight, Ejection::default());
    let now = Instant::now();
    let secs =
        |r: Option<(Instant, Option<Change>)>| r.map(|(u, _)| u.duration_since(now).as_secs());
    assert_eq!(secs(lone.refused(0, now)), Some(1));
    assert_eq!(secs(lone.refused(0, now)), Some(2));
    assert_eq!(secs(lone.refused(0, now)), Some(4));
    for _ in 0..10 {
        lone.refused(0, now);
    }
    assert_eq!(secs(lone.refused(0, now)), Some(60), "at most a minute");
    assert_eq!(lone.held(0, now).map(|(_, r)| r), Some(Reason::Unreachable));
    assert!(lone.pick(None, &[], now).is_err());

    // Another request, sent before, answers: it is reachable again.
    let g = group(&[(1, false); 2], Policy::RoundRobin, Ejection::default());
    let mut before = g.pick(None, &[1], now).expect("pick");
    g.refused(0, now);
    assert!(!g.is_in(0, now));
    assert_eq!(
        before.finish(Outcome::Answered(Duration::ZERO), now),
        Some(Change::Back)
    );
    assert!(g.is_in(0, now));
    let (until, _) = g.refused(0, now).expect("server");
    assert_eq!(
        until,
        now + Duration::from_secs(1),
        "the back-off starts over"
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_server_moves_only_its_own_keys() {
    let g = group(&[(1, false); 4], Policy::Hash, Ejection::default());
    let now = Instant::now();
    let keys: Vec<u64> = (0..2_000)
        .map(|i| key(format!("conversation-{i}").as_bytes()))
        .collect();
    let place = |g: &Arc<Group<usize>>| -> Vec<usize> {
        keys.iter()
            .map(|k| g.pick(Some(*k), &[], Instant::now()).expect("pick").index())
            .collect()
    };
    let before = place(&g);
    g.hold(2, now + Duration::from_secs(9), Reason::RateLimited, now);
    let after = place(&g);
    for (b, a) in before.iter().zip(&after) {
        if *b != 2 {
            assert_eq!(a, b, "a key not on the held server stays");
        } else {
            assert_ne!(*a, 2);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_member_list_carries_state_over_and_newcomers_ramp_up() {
    let rule = Ejection {
        after: 1,
        base: Duration::from_secs(60),
        slow_start: Duration::from_secs(100),
        ..Ejection::default()
    };
    // Targets 0, 1, 2; then 1 and 2 stay, 0 leaves, 3 joins.
    let old = group(&[(1, false); 3], Policy::RoundRobin, rule);
    let now = Instant::now();
    let held = old.pick(None, &[0, 2], now).expect("pick");
    assert_eq!(*held.target(), 1);
    let mut gone = old.pick(None, &[1, 2], now).expect("pick");
    assert_eq!(*gone.target(), 0);
    old.pick(None, &[0, 1], now)
        .expect("pick")
        .finish(Outcome::Failed, now);
    assert!(!old.is_in(2, now), "2 is out");

    let members = [1, 2, 3]
        .into_iter()
        .map(|target| Member {
            target,
            weight: 1,
            backup: false,
        })
        .collect();
    let new = Arc::new(Group::carrying(&old, members, |a, b| a == b, |t| t, now));
    assert_eq!(new.len(), 3);
    assert_eq!(new.in_flight(0), 1, "1's request in flight carried over");
    assert!(!new.is_in(1, now), "2 still out");
    assert!(new.is_in(2, now), "3 joins in");
    drop(held);
    assert_eq!(
        new.in_flight(0),
        0,
        "a pick made before counts on the same server"
    );
    // A pick from the old group on a server that left still finishes.
    assert_eq!(gone.finish(Outcome::Failed, now), None);
    drop(gone);

    // The newcomer takes a tenth of its share at first, all after the window.
    let by_index = |n: usize| {
        let mut counts = vec![0usize; new.len()];
        for _ in 0..n {
            let now = Instant::now();
            let mut p = new.pick(None, &[], now).expect("a server");
            counts[p.index()] += 1;
            p.finish(Outcome::Answered(Duration::from_millis(1)), now);
        }
        counts
    };
    let early = by_index(1_100);
    assert_eq!(early[1], 0, "2 out: {early:?}");
    assert!(early[2] < 150, "3 ramps up: {early:?}");
    tokio::time::advance(Duration::from_secs(100)).await;
    let later = by_index(1_000);
    assert!(
        later[0].abs_diff(later[2]) <= 2,
        "3 has all of its share after the window: {later:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_is_a_share_of_requests_plus_a_floor_over_the_window() {
    let rule = RetryBudget {
        percent: 20,
        min_per_second: 1,
        window: Duration::from_secs(10),
    };
    let budget = Budget::new(rule, Instant::now());
    let spend = || {
        let mut n = 0;
        while budget.try_retry(Instant::now()) {
            n += 1;
            assert!(n < 10_000, "bounded");
        }
        n
    };
    assert_eq!(spend(), 10, "the floor: 1/s over 10 s");
    for _ in 0..100 {
        budget.request(Instant::now());
    }
    assert_eq!(spend(), 20, "a fifth of 100 requests more");
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(spend(), 0, "still spent half a window later");
    tokio::time::advance(Duration::from_secs(6)).await;
    assert_eq!(spend(), 10, "the window slid past: the floor again");
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(spend(), 10, "after a long idle, the floor");
}

#[tokio::test(start_paused = true)]
async fn a_view_says_why_a_server_is_out_and_until_when() {
    let g = group(
        &[(1, false), (2, true)],
        Policy::RoundRobin,
        Ejection::default(),
    );
    let now = Instant::now();
    let v = g.view(0, now).expect("a server");
    assert_eq!(
        (v.out, v.in_flight, v.weight, v.backup),
        (None, 0, 1, false)
    );
    let p = g.pick(None, &[], now).expect("a server");
    assert_eq!(
        g.view(0, now).map(|v| v.in_flight),
        Some(1),
        "counted in flight"
    );
    drop(p);
    g.checked(0, false);
    assert_eq!(
        g.view(0, now).and_then(|v| v.out),
        Some(("health_check", None))
    );
    g.checked(0, true);
    g.hold(1, now + Duration::from_secs(30), Reason::RateLimited, now);
    let later = now + Duration::from_secs(10);
    assert_eq!(
        g.view(1, later).and_then(|v| v.out),
        Some(("rate_limited", Some(Duration::from_secs(20))))
    );
    assert!(g.view(2, now).is_none());
}
