//! The database's figures: whether it answers, and the usage rows it was
//! sent, written and not written.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Handles to the database's series, cloned by whoever counts in them.
#[derive(Clone, Default)]
pub(crate) struct DatabaseMetrics {
    pub(crate) up: Gauge,
    pub(crate) keys: Gauge,
    pub(crate) rows_written: Counter,
    pub(crate) batches_written: Counter,
    pub(crate) rows_dropped: Counter,
}

impl DatabaseMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = DatabaseMetrics::default();
        registry.register(
            "database_up",
            "1 when the last read of the database succeeded, else 0 (keys in memory keep serving)",
            m.up.clone(),
        );
        registry.register(
            "runtime_keys",
            "Runtime keys in memory (live: not revoked), as last read from the database",
            m.keys.clone(),
        );
        registry.register(
            "usage_rows_written",
            "Usage rows written to the database",
            m.rows_written.clone(),
        );
        registry.register(
            "usage_batches_written",
            "Transactions of usage rows written (rows written over this: the rows in a batch)",
            m.batches_written.clone(),
        );
        registry.register(
            "usage_rows_dropped",
            "Usage rows not written: the queue was full, or the database refused them after retries",
            m.rows_dropped.clone(),
        );
        m
    }
}
