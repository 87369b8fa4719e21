//! ACME-managed certificates: issuance attempts and failures, and the
//! time each certificate has left.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Metrics;
use crate::sync::Locked;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: String,
}

/// The expiry gauge counts down, so it is computed from each
/// certificate's notAfter when metrics are read.
pub(super) struct CertificateFamilies {
    expiry: Family<NameLabels, Gauge>,
    not_after: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    attempts: Family<NameLabels, Counter>,
    failures: Family<NameLabels, Counter>,
}

impl CertificateFamilies {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let certificates = CertificateFamilies {
            expiry: Family::default(),
            not_after: Default::default(),
            attempts: Family::default(),
            failures: Family::default(),
        };
        registry.register(
            "certificate_expiry_seconds",
            "Seconds until an ACME-managed certificate expires, by name (negative: expired)",
            certificates.expiry.clone(),
        );
        registry.register(
            "certificate_issuance_attempts",
            "ACME orders started, by name (first issuance and renewals)",
            certificates.attempts.clone(),
        );
        registry.register(
            "certificate_issuance_failures",
            "ACME orders that ended without a certificate, by name",
            certificates.failures.clone(),
        );
        certificates
    }

    /// Set each expiry gauge from its notAfter and the time now.
    pub(super) fn refresh_expiry(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        for (name, not_after) in self.not_after.locked().iter() {
            self.expiry
                .get_or_create(&NameLabels { name: name.clone() })
                .set(not_after - now);
        }
    }
}

impl Metrics {
    /// An ACME order for `name` started.
    pub(crate) fn certificate_attempt(&self, name: &str) {
        self.certificates
            .attempts
            .get_or_create(&NameLabels { name: name.into() })
            .inc();
    }

    /// An ACME order for `name` ended without a certificate.
    pub(crate) fn certificate_failure(&self, name: &str) {
        self.certificates
            .failures
            .get_or_create(&NameLabels { name: name.into() })
            .inc();
    }

    /// The certificate now served for `name` expires at `not_after_unix`.
    pub(crate) fn certificate_installed(&self, name: &str, not_after_unix: i64) {
        self.certificates
            .not_after
            .locked()
            .insert(name.to_string(), not_after_unix);
    }
}
