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
mod view;

use charge::{Usage, charge, dearest, worst_input};
pub(crate) use view::{fleet_view, key_views, team_views, view, windows};

use super::facts::{Accountant, Accounting, LlmFacts, SharedLlmFacts};
use super::keyed::{KeyBook, TeamBook};
use super::ledger::{Amount, Bound, Ledger, Refused, Reservation};
use crate::admit::Budgeted;
use crate::cluster::{BudgetAsk, BudgetBook, Cluster, SharedReservation};
use crate::config::{Budget, LlmSettings, SPEND_UNIT};
use crate::keys::Key;
use crate::respond::Rescue;
use crate::store::{UsageRow, UsageRows};
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

struct Held {
    holder: Holder,
    /// The payer's team's shared budget, reserved beside its own in this
    /// process's ledgers (the fleet's reservation holds both).
    team: Option<Holder>,
    estimate: Estimate,
}

impl Held {
    fn settle(self, charged: Amount) {
        if let Some(team) = self.team {
            team.settle(charged);
        }
        self.holder.settle(charged);
    }
}

/// Where a request's reservation is held.
enum Holder {
    /// This process's ledger (no fleet).
    Local(Arc<Ledger>, Reservation),
    /// The fleet's budget in Redis.
    Shared(SharedReservation),
    /// This process's share of the fleet's budget, taken while Redis was
    /// away; its usage goes to the fleet's windows once Redis is back.
    LocalShare {
        ledger: Arc<Ledger>,
        reservation: Reservation,
        cluster: Arc<Cluster>,
        key: Arc<str>,
    },
}

impl Holder {
    fn amount(&self) -> Amount {
        match self {
            Holder::Local(_, r) | Holder::LocalShare { reservation: r, .. } => r.amount(),
            Holder::Shared(r) => {
                let (tokens, spend) = r.amount();
                Amount { tokens, spend }
            }
        }
    }

    /// Give it back unused, charging nothing (not even to the fleet).
    fn release(self) {
        match self {
            Holder::Local(ledger, r)
            | Holder::LocalShare {
                ledger,
                reservation: r,
                ..
            } => ledger.settle(r, Amount::default()),
            Holder::Shared(r) => r.settle(0, 0),
        }
    }

    fn settle(self, charged: Amount) {
        match self {
            Holder::Local(ledger, r) => ledger.settle(r, charged),
            Holder::Shared(r) => r.settle(charged.tokens, charged.spend),
            Holder::LocalShare {
                ledger,
                reservation,
                cluster,
                key,
            } => {
                ledger.settle(reservation, charged);
                cluster.charge_later(&key, charged.tokens, charged.spend);
            }
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

/// A payer's budget, where it is kept and what it is called.
#[derive(Clone)]
struct Budgeting {
    budget: Budget,
    ledger: Arc<Ledger>,
    /// Its key in the fleet's budgets, when the fleet keeps them.
    fleet_key: Option<Arc<str>>,
    /// What a refusal names it.
    label: String,
    /// Its place among the route's client series (a key has none).
    series: Option<usize>,
}

/// What a request would reserve, before it is reserved: in its payer's
/// budget, and in its team's too.
pub(crate) struct Want {
    budgeting: Budgeting,
    team: Option<Budgeting>,
    estimate: Estimate,
    amount: Amount,
    /// The books the fleet keeps them in (payer first, then team); empty
    /// when this process's ledgers keep them.
    books: Vec<BudgetBook>,
}

impl Want {
    /// Whether the fleet keeps these budgets (reserved in Redis).
    pub(crate) fn is_shared(&self) -> bool {
        !self.books.is_empty()
    }
}

/// One request's account.
pub(crate) struct Account {
    route: Arc<str>,
    settings: Arc<LlmSettings>,
    books: Books,
    metrics: Arc<LlmRouteMetrics>,
    payer: Mutex<Option<Payer>>,
    held: Mutex<Option<Held>>,
    /// The soft limit passed, for the answer's header.
    warning: Mutex<Option<String>>,
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

    /// Whether this request's client token or key (or the key's team) has
    /// a budget the fleet keeps (its reserve is then decided with the
    /// shared limits: see [`Account::budget_ask`]).
    pub(crate) fn budget_is_shared(&self) -> bool {
        (self.budget().or_else(|| self.team_budget())).is_some_and(|b| b.fleet_key.is_some())
    }

    /// The payer's budget, when it has one.
    fn budget(&self) -> Option<Budgeting> {
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
    fn team_budget(&self) -> Option<Budgeting> {
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
    fn cluster(&self) -> Option<&Arc<Cluster>> {
        (self.books.fleet.as_ref().map(|f| &f.cluster)).or(self.books.cluster.as_ref())
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
        self.warn(&want.budgeting);
        if let Some(team) = &want.team {
            self.warn(team);
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
        Ok(())
    }

    /// Past the soft limit: the answer's warning, and a log line once per
    /// window.
    fn warn(&self, budgeting: &Budgeting) {
        let Some((bound, percent, first)) = budgeting.ledger.warning(&budgeting.budget) else {
            return;
        };
        if first {
            tracing::warn!(
                route = %self.route,
                client = %budgeting.label,
                bound = bound.name(),
                percent,
                "budget: past its warning level"
            );
        }
        *self.warning.locked() = Some(format!("{}={percent}%", bound.name()));
    }

    /// The soft-limit warning for the answer's `x-weir-budget-warning`.
    pub(crate) fn warning(&self) -> Option<String> {
        self.warning.locked().clone()
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
        if self.books.records.is_on() {
            let start = std::time::SystemTime::now() - elapsed;
            let record = serde_json::json!({
                "time": humantime::format_rfc3339_millis(start).to_string(),
                "request_id": f.request_id,
                "route": &*self.route,
                "client": f.client.as_deref().unwrap_or("-"),
                "key": key.as_ref().map(|k| &*k.id),
                "user": key.as_ref().and_then(|k| k.user.as_deref()),
                "team": key.as_ref().and_then(|k| k.team.as_deref()),
                "model": f.model.as_deref().map(bounded),
                "model_served": f
                    .served_model
                    .as_deref()
                    .or(f.model.as_deref())
                    .filter(|_| f.upstream_index.is_some())
                    .map(bounded),
                "upstream": f.upstream.as_deref(),
                "status": status,
                "outcome": outcome,
                "stream": f.stream,
                "input_tokens": usage.input,
                "output_tokens": usage.output,
                "cache_read_tokens": usage.cache_read,
                "cache_write_tokens": usage.cache_write,
                "spend": spend.map(|s| s as f64 / SPEND_UNIT),
                "reserved_tokens": reserved.map(|r| r.tokens),
                "charged_tokens": reserved.map(|_| charged.tokens),
                "charged_spend": reserved.map(|_| charged.spend as f64 / SPEND_UNIT),
                "settled": settled.name(),
                "duration_ms": elapsed.as_millis() as u64,
                "first_token_ms": f.first_token_ms,
                "failovers": f.failovers,
                "trace_id": f.trace_id,
                "session": f.session,
                "agent": f.agent,
            });
            self.books.records.write(&record);
        }
        if self.books.rows.is_on() {
            let start = std::time::SystemTime::now() - elapsed;
            let at_ms = start
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let text = |s: Option<&str>| s.map(|s| bounded(s).to_string());
            self.books.rows.send(UsageRow {
                at_ms,
                request_id: f.request_id.as_ref().map(|r| r.to_string()),
                key_id: key.as_ref().map(|k| k.id.to_string()),
                client: text(f.client.as_deref()),
                user: key
                    .as_ref()
                    .and_then(|k| k.user.as_deref().map(String::from)),
                team: key
                    .as_ref()
                    .and_then(|k| k.team.as_deref().map(String::from)),
                route: self.route.to_string(),
                model: text(f.model.as_deref()),
                model_served: text(
                    f.served_model
                        .as_deref()
                        .or(f.model.as_deref())
                        .filter(|_| f.upstream_index.is_some()),
                ),
                upstream: text(f.upstream.as_deref()),
                tokens: [
                    usage.input,
                    usage.output,
                    usage.cache_read,
                    usage.cache_write,
                ],
                spend: spend.unwrap_or(0),
                duration_ms: elapsed.as_millis() as u64,
                status,
                outcome: outcome.to_string(),
                session: f.session.clone(),
                agent: f.agent.clone(),
            });
        }
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

/// The outcome a usage record and the per-client metrics give.
fn outcome(f: &LlmFacts, status: u16) -> &'static str {
    f.outcome.unwrap_or(if status < 400 {
        "completed"
    } else {
        "rejected"
    })
}

/// A client's text as a record field: at most [`MAX_FIELD`] bytes (a
/// model name is whatever the client sent; a record line stays small).
fn bounded(s: &str) -> &str {
    crate::respond::bounded(s, MAX_FIELD)
}

/// The longest client-chosen text a usage record carries.
const MAX_FIELD: usize = 256;

/// An amount of weir's spend unit as currency, for messages.
fn money(n: u64) -> String {
    format!("{:.6}", n as f64 / SPEND_UNIT)
}

#[cfg(test)]
mod tests;
