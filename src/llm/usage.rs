//! Usage accounting for one request on an LLM route: who asked (the client
//! token's name), its budget reserved before any upstream is contacted,
//! and — once its response has ended — the budget settled on what it
//! used, its usage counted per client, and its usage record written.
//!
//! Usage is *taken* where an answer's usage is read (the relay's final
//! event, a whole body: `relay::Tally`), into the request's facts; it is
//! *accounted* here when the response ends ([`Account::ended`], called by
//! the request record exactly once), because that is the one point every
//! request passes — served, refused, failed or cancelled — so every
//! reservation is settled exactly once. A request dropped before its
//! response began (the client went away while weir waited for an
//! upstream) settles when its account is dropped.
//!
//! A reservation counts the input as `body bytes / 3` (see
//! [`INPUT_BYTES_PER_TOKEN`]) and the output as the request's own limit
//! (`max_tokens`, `max_output_tokens`, `max_completion_tokens`), or the
//! route's `default_max_tokens`. Settling charges what the upstream
//! reported when the answer completed with usage; when it did not (a stream
//! cut, a client gone mid-answer, an answer without usage), what is known
//! plus the reserved remainder: the input reported (else the estimate) and
//! the larger of the output reported and the output reserved — weir cannot
//! know what the provider generated and bills, and a client must not be
//! able to spend its budget freely by leaving before the final event.
//! Nothing is charged when no upstream answered successfully.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;

mod charge;
mod holder;
mod record;
mod view;
mod want;

use charge::{Usage, charge};
use holder::{Held, Holder};
use record::{Ended, outcome};
pub(crate) use view::{key_views, keyed_view, team_views, unix_now, view, windows};
use want::Budgeting;
pub(crate) use want::Want;

use super::facts::{Accountant, Accounting, LlmFacts, SharedLlmFacts};
use super::keyed::{KeyBook, TeamBook};
use super::ledger::{Amount, Bound, Ledger, Refused};
use crate::admit::Budgeted;
use crate::cluster::Cluster;
use crate::config::{Budget, LlmSettings, SPEND_UNIT};
use crate::keys::Key;
use crate::respond::Rescue;
use crate::store::UsageRows;
use crate::sync::Locked;
use crate::telemetry::{LlmRouteMetrics, RecordSink, UsageOf};

/// The bound a reservation puts on a request's input tokens: its body's
/// bytes over 3. Counting tokens exactly (the local counter behind
/// `count_tokens`) costs a JSON parse and a BPE pass over up to 1 MiB of
/// text per request — milliseconds on the serving path of every agent
/// turn — while this costs nothing. It over-reserves ordinary text (about
/// 4 bytes a token, plus the JSON around it) and images and documents
/// (base64, counted by the provider at a fixed rate) by far; settling
/// gives the difference back when the answer ends. Dense text can have
/// more tokens than this bound (some code, some scripts): the excess is
/// charged at settle, beyond the reservation.
pub(crate) const INPUT_BYTES_PER_TOKEN: u64 = 3;

/// A route's long-lived accounting parts: the ledger of each client token
/// (by index; kept across reloads by route and client name) and the sink
/// of usage records.
#[derive(Clone, Default)]
pub(crate) struct Books {
    pub(crate) ledgers: Arc<[Arc<Ledger>]>,
    pub(crate) records: RecordSink,
    /// The fleet's budgets, when the route shares its limits: the cluster
    /// and each client token's budget key (by index). The ledgers then
    /// only enforce this instance's share while Redis is away.
    pub(crate) fleet: Option<Fleet>,
    /// The runtime keys the route accepts (`runtime_keys = true`).
    pub(crate) keys: Option<Arc<crate::keys::Keys>>,
    /// The IdP whose tokens the route accepts (`idp_tokens = true`).
    pub(crate) idp: Option<Arc<crate::idp::Idp>>,
    /// Each key's and person's ledger and gate (process-wide).
    pub(crate) key_books: Arc<super::KeyBooks>,
    /// The budgets teams share (`[[teams]]`), with their ledgers.
    pub(crate) teams: Arc<super::TeamBooks>,
    /// Where usage rows go (with `[database]`).
    pub(crate) rows: UsageRows,
    /// The fleet, with `[cluster]`: keys', persons' and teams' budgets are
    /// then kept in Redis (on every route: they are no route's), their
    /// ledgers here only enforcing this instance's share while Redis is
    /// away.
    pub(crate) cluster: Option<Arc<Cluster>>,
}

/// Where a route's client budgets are kept by the fleet.
#[derive(Clone)]
pub(crate) struct Fleet {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) keys: Arc<[Arc<str>]>,
}

/// What a reservation counted, to settle a request that reported less
/// than it needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Estimate {
    pub(crate) input: u64,
    pub(crate) output: u64,
}

/// How a request's charge was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The usage the upstream reported with a completed answer.
    Usage,
    /// The answer did not complete with usage: what was reported, plus the
    /// reserved remainder.
    Reservation,
    /// No upstream answered successfully: nothing.
    Nothing,
}

impl Settled {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Settled::Usage => "usage",
            Settled::Reservation => "reservation",
            Settled::Nothing => "none",
        }
    }
}

/// Who pays for a request: a client token of the route, or a runtime key
/// (or a person), with the budget its team shares.
#[derive(Clone)]
pub(crate) enum Payer {
    /// By its index in the route's client tokens.
    Token(usize),
    Key(Arc<Key>, KeyBook, Option<TeamBook>),
}

/// One request's account.
pub(crate) struct Account {
    route: Arc<str>,
    settings: Arc<LlmSettings>,
    books: Books,
    metrics: Arc<LlmRouteMetrics>,
    payer: Mutex<Option<Payer>>,
    held: Mutex<Option<Held>>,
    /// The soft limit passed (the fullest book's percent and bound), for
    /// the answer's header.
    warning: Mutex<Option<(u64, String)>>,
}

impl Account {
    /// Open the account of a request on `route`, kept with its facts.
    pub(crate) fn open(
        route: &Arc<str>,
        settings: &Arc<LlmSettings>,
        books: &Books,
        metrics: &Arc<LlmRouteMetrics>,
        facts: &SharedLlmFacts,
    ) -> Arc<Account> {
        let account = Arc::new(Account {
            route: route.clone(),
            settings: settings.clone(),
            books: books.clone(),
            metrics: metrics.clone(),
            payer: Mutex::new(None),
            held: Mutex::new(None),
            warning: Mutex::new(None),
        });
        facts.locked().accountant = Some(Accountant(account.clone()));
        account
    }

    /// The request presented client token `index`.
    pub(crate) fn identify(&self, index: usize, facts: &SharedLlmFacts) {
        *self.payer.locked() = Some(Payer::Token(index));
        if let Some(c) = self.settings.client_tokens.get(index) {
            facts.locked().client = Some(c.name.as_str().into());
        }
    }

    /// The request presented runtime key `key` (or is a person), whose
    /// team shares `team`'s budget when it has one.
    pub(crate) fn identify_key(
        &self,
        key: Arc<Key>,
        book: KeyBook,
        team: Option<TeamBook>,
        facts: &SharedLlmFacts,
    ) {
        facts.locked().client = Some(key.name.clone());
        *self.payer.locked() = Some(Payer::Key(key, book, team));
    }

    /// Reserve the request's budget in this process's ledger before any
    /// upstream is contacted. A client over its budget gets 429 with when
    /// it frees; a request larger than a whole bound gets 400.
    /// With a team budget, both must have room; the team refusing gives
    /// the payer's reservation back.
    pub(crate) fn reserve(&self, want: Want, facts: &SharedLlmFacts) -> Result<(), Rescue> {
        let ledger = want.budgeting.ledger.clone();
        let reservation = ledger
            .reserve(want.amount, &want.budgeting.budget)
            .map_err(|refused| self.refuse(&want.budgeting, want.amount, refused, facts))?;
        let team = match &want.team {
            None => None,
            Some(team) => match team.ledger.reserve(want.amount, &team.budget) {
                Ok(r) => Some(Holder::Local(team.ledger.clone(), r)),
                Err(refused) => {
                    ledger.settle(reservation, Amount::default());
                    return Err(self.refuse(team, want.amount, refused, facts));
                }
            },
        };
        *self.held.locked() = Some(Held {
            holder: Holder::Local(ledger, reservation),
            team,
            estimate: want.estimate,
        });
        for b in std::iter::once(&want.budgeting).chain(&want.team) {
            self.warn(b, &b.budget);
        }
        Ok(())
    }

    /// Take the fleet's answer for the budget: hold its reservation, or
    /// refuse as [`Account::reserve`] does; while Redis is away
    /// (`fail_open`), reserve 1/N of the budget in this process's ledger.
    pub(crate) fn take(
        &self,
        budgeted: Budgeted,
        want: Want,
        facts: &SharedLlmFacts,
    ) -> Result<(), Rescue> {
        match budgeted {
            Budgeted::NotAsked => Ok(()),
            Budgeted::Reserved(r) => {
                // The fleet's figures at the reserve, book by book (the
                // payer's, then its team's: `want`'s order).
                let books = std::iter::once(&want.budgeting).chain(&want.team);
                for (i, budgeting) in books.enumerate() {
                    self.warn_fleet(budgeting, r.fill(i));
                }
                self.hold(Holder::Shared(r), want.estimate);
                Ok(())
            }
            Budgeted::Over(over) => {
                let bound = Bound::ALL
                    .get(over.bound)
                    .copied()
                    .unwrap_or(Bound::TokensPerMinute);
                let book = match (over.book, &want.team) {
                    (1, Some(team)) => team,
                    _ => &want.budgeting,
                };
                Err(self.refuse(
                    book,
                    want.amount,
                    Refused {
                        bound,
                        retry_after: over.wait,
                    },
                    facts,
                ))
            }
            Budgeted::LocalShare { instances } => self.take_share(want, instances, facts),
        }
    }

    /// Redis is away (`fail_open`): reserve 1/`instances` of each budget
    /// in this process's ledgers (the payer's, then its team's; the team
    /// refusing gives the payer's back), their usage charged to the
    /// fleet's windows once Redis answers again.
    fn take_share(&self, want: Want, instances: u32, facts: &SharedLlmFacts) -> Result<(), Rescue> {
        let Some(cluster) = self.cluster() else {
            return Ok(());
        };
        let share_of = |b: &Budgeting| -> Result<Option<Holder>, Refused> {
            let Some(key) = b.fleet_key.as_ref() else {
                return Ok(None);
            };
            let reservation = b
                .ledger
                .reserve(want.amount, &share(&b.budget, instances))?;
            Ok(Some(Holder::LocalShare {
                ledger: b.ledger.clone(),
                reservation,
                cluster: cluster.clone(),
                key: key.clone(),
            }))
        };
        let own = share_of(&want.budgeting)
            .map_err(|r| self.refuse(&want.budgeting, want.amount, r, facts))?;
        let team = match &want.team {
            None => None,
            Some(team) => match share_of(team) {
                Ok(held) => held,
                Err(refused) => {
                    if let Some(own) = own {
                        own.release();
                    }
                    return Err(self.refuse(team, want.amount, refused, facts));
                }
            },
        };
        if let Some(holder) = own {
            *self.held.locked() = Some(Held {
                holder,
                team,
                estimate: want.estimate,
            });
        }
        // Against the share, as it is enforced: what this instance holds
        // and settled while Redis was away.
        for b in std::iter::once(&want.budgeting).chain(&want.team) {
            self.warn(b, &share(&b.budget, instances));
        }
        Ok(())
    }

    /// Past the soft limit of `budget` in the book's local ledger: the
    /// answer's warning, and a log line once per window.
    fn warn(&self, budgeting: &Budgeting, budget: &Budget) {
        if let Some((bound, percent, first)) = budgeting.ledger.warning(budget) {
            self.warned(budgeting, bound, percent, first);
        }
    }

    /// Past the soft limit in the fleet's figures (`fill`, as the decide
    /// script found them with this request): the answer's warning, and a
    /// log line once per window by this instance (the local ledger's
    /// marks: see [`Ledger::first_warning`]).
    fn warn_fleet(&self, budgeting: &Budgeting, fill: Option<crate::cluster::Fill>) {
        let Some(at) = budgeting.budget.warn_at else {
            return;
        };
        let Some(fill) = fill.filter(|f| f.percent >= u64::from(at)) else {
            return;
        };
        let Some(bound) = Bound::ALL.get(fill.bound).copied() else {
            return;
        };
        let first = budgeting.ledger.first_warning(bound);
        self.warned(budgeting, bound, fill.percent, first);
    }

    /// A book past its soft limit: logged when `first` in its window; the
    /// answer's header names the fullest of the request's books.
    fn warned(&self, budgeting: &Budgeting, bound: Bound, percent: u64, first: bool) {
        if first {
            tracing::warn!(
                route = %self.route,
                client = %budgeting.label,
                bound = bound.name(),
                percent,
                "budget: past its warning level"
            );
        }
        let mut warning = self.warning.locked();
        if warning.as_ref().is_none_or(|(p, _)| percent >= *p) {
            *warning = Some((percent, format!("{}={percent}%", bound.name())));
        }
    }

    /// The soft-limit warning for the answer's `x-weir-budget-warning`.
    pub(crate) fn warning(&self) -> Option<String> {
        self.warning.locked().as_ref().map(|(_, w)| w.clone())
    }

    fn hold(&self, holder: Holder, estimate: Estimate) {
        *self.held.locked() = Some(Held {
            holder,
            team: None,
            estimate,
        });
    }

    /// The answer to a request its client's budget has no room for.
    fn refuse(
        &self,
        budgeting: &Budgeting,
        want: Amount,
        refused: Refused,
        facts: &SharedLlmFacts,
    ) -> Rescue {
        let budget = budgeting.budget;
        let label = &budgeting.label;
        self.metrics
            .budget_refused(budgeting.series.unwrap_or(usize::MAX), refused.bound.name());
        {
            let mut f = facts.locked();
            f.outcome = Some("over_budget");
            f.refused_by = Some((refused.bound.name(), budgeting.label.clone()));
        }
        let limit = refused.bound.limit(&budget).unwrap_or(0);
        let (limit, asked) = if refused.bound.is_spend() {
            (money(limit), money(want.spend))
        } else {
            (limit.to_string(), want.tokens.to_string())
        };
        let bound = refused.bound.name();
        match refused.retry_after {
            Some(wait) => {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Rescue::status(StatusCode::TOO_MANY_REQUESTS)
                    .retry_after_long(secs)
                    .saying(format!(
                        "{label} is over its {bound} budget ({limit}); this request reserves {asked}; retry in {} s",
                        secs.max(1)
                    ))
            }
            None => Rescue::status(StatusCode::BAD_REQUEST).saying(format!(
                "this request reserves {asked} (its input bounded by its size, plus its output limit), more than the whole {bound} budget of {label}, {limit}; lower max_tokens or send less"
            )),
        }
    }

    /// The record, metrics and settlement of an ended request.
    fn account(&self, f: &LlmFacts, status: u16, elapsed: Duration) -> Option<f64> {
        let held = self.held.locked().take();
        let price = f
            .served_model
            .as_deref()
            .or(f.model.as_deref())
            .and_then(|m| self.settings.price(m));
        let usage = Usage::of(f);
        let spend = price.map(|p| usage.cost(p));
        let estimate = held.as_ref().map(|h| h.estimate);
        let (charged, settled) = charge(f, status, estimate, price);
        let reserved = held.as_ref().map(|h| h.holder.amount());
        if let Some(h) = held {
            h.settle(charged);
        }
        let outcome = outcome(f, status);
        let payer = self.payer.locked().clone();
        let key = match &payer {
            Some(Payer::Key(k, _, _)) => Some(k.clone()),
            _ => None,
        };
        self.metrics.client_usage(
            UsageOf {
                client: match payer {
                    Some(Payer::Token(i)) => Some(i),
                    _ => None,
                },
                model: f.model_index,
                upstream: f.upstream_index,
            },
            outcome,
            [
                usage.input,
                usage.output,
                usage.cache_read,
                usage.cache_write,
            ],
            spend.map(|s| s as f64 / SPEND_UNIT),
        );
        let ended = Ended {
            f,
            status,
            elapsed,
            outcome,
            key: key.as_deref(),
            usage: &usage,
            spend,
            reserved,
            charged,
            settled,
        };
        record::write(&self.books, &self.route, &ended);
        spend.map(|s| s as f64 / SPEND_UNIT)
    }
}

impl Accounting for Account {
    fn ended(&self, facts: &LlmFacts, status: u16, elapsed: Duration) -> Option<f64> {
        self.account(facts, status, elapsed)
    }
}

impl Drop for Account {
    /// A request dropped before its response began (the client went away
    /// while weir waited on an upstream): its reservation is charged in
    /// full — an upstream may have been generating — and so given back
    /// only by the window's end.
    fn drop(&mut self) {
        if let Some(h) = self.held.get_mut().ok().and_then(Option::take) {
            let amount = h.holder.amount();
            h.settle(amount);
        }
    }
}

/// This instance's share of `budget` in a fleet of `instances` (rounded
/// up), enforced while Redis is away.
fn share(budget: &Budget, instances: u32) -> Budget {
    let n = u64::from(instances.max(1));
    let part = |l: Option<u64>| l.map(|l| l.div_ceil(n));
    Budget {
        tokens_per_minute: part(budget.tokens_per_minute),
        tokens_per_day: part(budget.tokens_per_day),
        spend_per_day: part(budget.spend_per_day),
        tokens_per_week: part(budget.tokens_per_week),
        spend_per_week: part(budget.spend_per_week),
        tokens_per_month: part(budget.tokens_per_month),
        spend_per_month: part(budget.spend_per_month),
        warn_at: budget.warn_at,
    }
}

/// An amount of weir's spend unit as currency, for messages.
fn money(n: u64) -> String {
    format!("{:.6}", n as f64 / SPEND_UNIT)
}

#[cfg(test)]
mod tests;
