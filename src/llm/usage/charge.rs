//! What a request is charged when it ends: its usage priced, or what it
//! reserved when its usage is not known.

use super::{Estimate, Settled};
use crate::config::Price;
use crate::llm::facts::LlmFacts;
use crate::llm::ledger::Amount;

/// One request's tokens, in the one convention of `wire::Usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Usage {
    pub(super) input: u64,
    pub(super) output: u64,
    pub(super) cache_read: u64,
    pub(super) cache_write: u64,
}

impl Usage {
    pub(super) fn of(f: &LlmFacts) -> Self {
        Usage {
            input: f.input_tokens,
            output: f.output_tokens,
            cache_read: f.cache_read_tokens,
            cache_write: f.cache_write_tokens,
        }
    }

    pub(super) fn tokens(self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// Each kind at its own price: `input` is never the cached input.
    pub(super) fn cost(self, p: Price) -> u64 {
        self.input
            .saturating_mul(p.input)
            .saturating_add(self.output.saturating_mul(p.output))
            .saturating_add(self.cache_read.saturating_mul(p.cache_read))
            .saturating_add(self.cache_write.saturating_mul(p.cache_write))
    }
}

/// The dearest price of each kind among `prices`.
pub(super) fn dearest(prices: impl Iterator<Item = Price>) -> Option<Price> {
    prices.reduce(|a, b| Price {
        input: a.input.max(b.input),
        output: a.output.max(b.output),
        cache_read: a.cache_read.max(b.cache_read),
        cache_write: a.cache_write.max(b.cache_write),
    })
}

/// The dearest way input can be billed (written to the cache costs more
/// than plain input): what an estimated input is reserved at.
pub(super) fn worst_input(p: Price) -> u64 {
    p.input.max(p.cache_read).max(p.cache_write)
}

/// What an ended request is charged against its budget (see the module
/// comment), and how that was found.
pub(super) fn charge(
    f: &LlmFacts,
    status: u16,
    estimate: Option<Estimate>,
    price: Option<Price>,
) -> (Amount, Settled) {
    let served = f.upstream_index.is_some()
        && (200..300).contains(&status)
        && f.outcome.is_some_and(|o| o != "relayed_error");
    if !served {
        return (Amount::default(), Settled::Nothing);
    }
    let usage = Usage::of(f);
    let cost = |u: Usage, p: Price| u.cost(p);
    if f.outcome == Some("completed") && f.usage_reported {
        return (
            Amount {
                tokens: usage.tokens(),
                spend: price.map_or(0, |p| cost(usage, p)),
            },
            Settled::Usage,
        );
    }
    let estimate = estimate.unwrap_or_default();
    let charged = Usage {
        output: usage.output.max(estimate.output),
        ..if f.usage_reported {
            usage
        } else {
            Usage {
                input: estimate.input,
                ..Usage::default()
            }
        }
    };
    let price = price.map(|p| {
        if f.usage_reported {
            p
        } else {
            Price {
                input: worst_input(p),
                ..p
            }
        }
    });
    (
        Amount {
            tokens: charged.tokens(),
            spend: price.map_or(0, |p| cost(charged, p)),
        },
        Settled::Reservation,
    )
}
