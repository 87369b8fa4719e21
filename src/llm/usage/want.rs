//! What a request would reserve, and in which books: its payer's budget
//! (a client token's, a key's or a person's) and its team's, kept by this
//! process's ledgers or by the fleet.

use std::sync::Arc;

use super::charge::{dearest, worst_input};
use super::{Account, Estimate, INPUT_BYTES_PER_TOKEN, Payer};
use crate::cluster::{BudgetAsk, BudgetBook, Cluster};
use crate::config::Budget;
use crate::llm::ledger::{Amount, Bound, Ledger};
use crate::sync::Locked;

/// A payer's budget, where it is kept and what it is called.
#[derive(Clone)]
pub(super) struct Budgeting {
    pub(super) budget: Budget,
    pub(super) ledger: Arc<Ledger>,
    /// Its key in the fleet's budgets, when the fleet keeps them.
    pub(super) fleet_key: Option<Arc<str>>,
    /// What a refusal names it.
    pub(super) label: String,
    /// Its place among the route's client series (a key has none).
    pub(super) series: Option<usize>,
}

/// What a request would reserve, before it is reserved: in its payer's
/// budget, and in its team's too.
pub(crate) struct Want {
    pub(super) budgeting: Budgeting,
    pub(super) team: Option<Budgeting>,
    pub(super) estimate: Estimate,
    pub(super) amount: Amount,
    /// The books the fleet keeps them in (payer first, then team); empty
    /// when this process's ledgers keep them.
    pub(super) books: Vec<BudgetBook>,
}

impl Want {
    /// Whether the fleet keeps these budgets (reserved in Redis).
    pub(crate) fn is_shared(&self) -> bool {
        !self.books.is_empty()
    }
}

impl Account {
    /// Whether this request's client token or key (or the key's team) has
    /// a budget the fleet keeps (its reserve is then decided with the
    /// shared limits: see [`Account::budget_ask`]).
    pub(crate) fn budget_is_shared(&self) -> bool {
        (self.budget().or_else(|| self.team_budget())).is_some_and(|b| b.fleet_key.is_some())
    }

    /// The payer's budget, when it has one.
    pub(super) fn budget(&self) -> Option<Budgeting> {
        match self.payer.locked().as_ref()? {
            Payer::Token(index) => {
                let client = self.settings.client_tokens.get(*index)?;
                if client.budget.is_unbounded() {
                    return None;
                }
                Some(Budgeting {
                    budget: client.budget,
                    ledger: self.books.ledgers.get(*index)?.clone(),
                    fleet_key: self
                        .books
                        .fleet
                        .as_ref()
                        .and_then(|f| f.keys.get(*index).cloned()),
                    label: format!("client token `{}`", client.name),
                    series: Some(*index),
                })
            }
            Payer::Key(key, book, _) => (!key.budget.is_unbounded()).then(|| Budgeting {
                budget: key.budget,
                ledger: book.ledger.clone(),
                fleet_key: self
                    .books
                    .cluster
                    .as_ref()
                    .map(|c| c.key_budget_key(&key.id)),
                label: format!("key `{}` ({})", key.name, key.id),
                series: None,
            }),
        }
    }

    /// The budget the payer's team shares, when it has one.
    pub(super) fn team_budget(&self) -> Option<Budgeting> {
        let payer = self.payer.locked();
        let Some(Payer::Key(_, _, Some(team))) = payer.as_ref() else {
            return None;
        };
        Some(Budgeting {
            budget: team.budget,
            ledger: team.ledger.clone(),
            fleet_key: self
                .books
                .cluster
                .as_ref()
                .map(|c| c.team_budget_key(&team.name)),
            label: format!("team `{}`", team.name),
            series: None,
        })
    }

    /// What the request reserves: its input bounded by `body_len`, its
    /// output by `max_output` (else the route's default), priced at the
    /// dearest of the `models` it may be sent as. `None`: no budget.
    pub(crate) fn want<'a>(
        &self,
        body_len: usize,
        max_output: Option<u64>,
        models: impl Iterator<Item = &'a str>,
    ) -> Option<Want> {
        let (budgeting, team) = match (self.budget(), self.team_budget()) {
            (Some(own), team) => (own, team),
            (None, team) => (team?, None),
        };
        let estimate = Estimate {
            input: (body_len as u64).div_ceil(INPUT_BYTES_PER_TOKEN),
            output: max_output.unwrap_or(self.settings.default_max_tokens),
        };
        let price = dearest(models.filter_map(|m| self.settings.price(m)));
        let amount = Amount {
            tokens: estimate.input.saturating_add(estimate.output),
            spend: price.map_or(0, |p| {
                estimate
                    .input
                    .saturating_mul(worst_input(p))
                    .saturating_add(estimate.output.saturating_mul(p.output))
            }),
        };
        // The fleet keeps them all, or (without a cluster, or a client
        // token on a route whose limits are its own) none.
        let books = std::iter::once(&budgeting)
            .chain(team.as_ref())
            .map(|b| {
                Some(BudgetBook {
                    key: b.fleet_key.clone()?,
                    limits: Bound::ALL.map(|bound| bound.limit(&b.budget)),
                })
            })
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        Some(Want {
            budgeting,
            team,
            estimate,
            amount,
            books,
        })
    }

    /// The fleet's budget question for `want`, for the limits' decision.
    pub(crate) fn budget_ask<'a>(
        &'a self,
        want: &'a Want,
    ) -> Option<(&'a Arc<Cluster>, BudgetAsk<'a>)> {
        if !want.is_shared() {
            return None;
        }
        Some((
            self.cluster()?,
            BudgetAsk {
                books: &want.books,
                tokens: want.amount.tokens,
                spend: want.amount.spend,
            },
        ))
    }

    /// The fleet keeping this route's shared budgets.
    pub(super) fn cluster(&self) -> Option<&Arc<Cluster>> {
        (self.books.fleet.as_ref().map(|f| &f.cluster)).or(self.books.cluster.as_ref())
    }
}
