//! Where a request's reservation is held until it settles: this
//! process's ledger, the fleet's budget in Redis, or this instance's share
//! of the fleet's while Redis is away.

use std::sync::Arc;

use super::Estimate;
use crate::cluster::{Cluster, SharedReservation};
use crate::llm::ledger::{Amount, Ledger, Reservation};

pub(super) struct Held {
    pub(super) holder: Holder,
    /// The payer's team's shared budget, reserved beside its own in this
    /// process's ledgers (the fleet's reservation holds both).
    pub(super) team: Option<Holder>,
    pub(super) estimate: Estimate,
}

impl Held {
    pub(super) fn settle(self, charged: Amount) {
        if let Some(team) = self.team {
            team.settle(charged);
        }
        self.holder.settle(charged);
    }
}

/// Where a request's reservation is held.
pub(super) enum Holder {
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
    pub(super) fn amount(&self) -> Amount {
        match self {
            Holder::Local(_, r) | Holder::LocalShare { reservation: r, .. } => r.amount(),
            Holder::Shared(r) => {
                let (tokens, spend) = r.amount();
                Amount { tokens, spend }
            }
        }
    }

    /// Give it back unused, charging nothing (not even to the fleet).
    pub(super) fn release(self) {
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

    pub(super) fn settle(self, charged: Amount) {
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
