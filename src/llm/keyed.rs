//! Each runtime key's budget ledger and concurrency gate, process-wide
//! and by key id: a key's budget is the key's on every route it opens,
//! and survives reloads and changes to the key (a new limit applies to
//! the same ledger).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::ledger::{Clock, Ledger};
use crate::admit::TokenGate;
use crate::keys::Key;
use crate::sync::Locked;

/// Books kept at most; past it, those of keys no request holds are
/// dropped (a revoked key's go then).
const MAX_BOOKS: usize = 100_000;

/// One key's ledger and gate.
#[derive(Clone)]
pub(crate) struct KeyBook {
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) gate: Arc<TokenGate>,
    /// The concurrency the gate was made for.
    limit: usize,
}

/// Every key's book.
#[derive(Default)]
pub(crate) struct KeyBooks {
    by_id: Mutex<HashMap<Arc<str>, KeyBook>>,
}

impl KeyBooks {
    /// The book of `key`, made the first time; its gate made again when
    /// the key's concurrency changed.
    pub(crate) fn of(&self, key: &Key) -> KeyBook {
        let mut books = self.by_id.locked();
        if books.len() >= MAX_BOOKS && !books.contains_key(&key.id) {
            books.retain(|_, b| Arc::strong_count(&b.ledger) > 1);
        }
        let book = books.entry(key.id.clone()).or_insert_with(|| KeyBook {
            ledger: Arc::new(Ledger::new(Clock::system())),
            gate: Arc::new(TokenGate::new(key.max_concurrent, None)),
            limit: key.max_concurrent,
        });
        if book.limit != key.max_concurrent {
            book.gate = Arc::new(TokenGate::new(key.max_concurrent, None));
            book.limit = key.max_concurrent;
        }
        book.clone()
    }
}
