use super::charge::{dearest, worst_input};
use super::record::{MAX_FIELD, bounded};
use super::*;
use crate::config::Price;

const SONNET: Price = Price {
    input: 3_000_000,
    output: 15_000_000,
    cache_read: 300_000,
    cache_write: 3_750_000,
};

fn facts(outcome: &'static str, reported: bool) -> LlmFacts {
    LlmFacts {
        upstream_index: Some(0),
        outcome: Some(outcome),
        usage_reported: reported,
        input_tokens: 100,
        output_tokens: 50,
        cache_read_tokens: 1000,
        cache_write_tokens: 200,
        ..LlmFacts::default()
    }
}

const ESTIMATE: Estimate = Estimate {
    input: 2000,
    output: 64,
};

#[test]
fn a_completed_answer_is_charged_its_usage_each_kind_at_its_price() {
    let (a, s) = charge(&facts("completed", true), 200, Some(ESTIMATE), Some(SONNET));
    assert_eq!(s, Settled::Usage);
    assert_eq!(a.tokens, 1350);
    // 100 × 3 + 50 × 15 + 1000 × 0.3 + 200 × 3.75, per million.
    assert_eq!(a.spend, 2_100_000_000);
    assert_eq!(money(a.spend), "0.002100");
}

#[test]
fn an_answer_cut_short_is_charged_what_was_reported_and_the_output_reserved() {
    let (a, s) = charge(
        &facts("upstream_error", true),
        200,
        Some(ESTIMATE),
        Some(SONNET),
    );
    assert_eq!(s, Settled::Reservation);
    assert_eq!(a.tokens, 100 + 64 + 1000 + 200);
    let (a, _) = charge(
        &facts("client_cancel", false),
        200,
        Some(ESTIMATE),
        Some(SONNET),
    );
    assert_eq!(a.tokens, 2000 + 64, "nothing reported: the estimate");
    assert_eq!(
        a.spend,
        2000 * 3_750_000 + 64 * 15_000_000,
        "estimated input at its dearest"
    );
}

#[test]
fn nothing_is_charged_when_no_upstream_served() {
    for (f, status) in [
        (facts("relayed_error", true), 529),
        (facts("completed", true), 401),
        (
            LlmFacts {
                upstream_index: None,
                ..facts("completed", true)
            },
            200,
        ),
        (
            LlmFacts {
                outcome: None,
                ..facts("completed", true)
            },
            200,
        ),
    ] {
        assert_eq!(
            charge(&f, status, Some(ESTIMATE), Some(SONNET)),
            (Amount::default(), Settled::Nothing)
        );
    }
}

#[test]
fn a_model_name_in_a_record_is_bounded_on_a_character() {
    assert_eq!(bounded("claude"), "claude");
    let long = "é".repeat(200);
    assert_eq!(bounded(&long).len(), 256);
    assert!(bounded(&"x".repeat(10_000)).len() <= MAX_FIELD);
}

#[test]
fn a_reservation_is_priced_at_the_dearest_model_it_may_be_sent_as() {
    let cheap = Price {
        input: 1,
        output: 9,
        cache_read: 1,
        cache_write: 1,
    };
    let p = dearest([SONNET, cheap].into_iter()).expect("priced");
    assert_eq!(p, SONNET);
    assert_eq!(worst_input(SONNET), 3_750_000);
    assert_eq!(dearest(std::iter::empty()), None);
}
