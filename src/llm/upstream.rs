//! An LLM upstream: its pooled client and its members — every endpoint
//! (`url`, or each of `servers`) with every key (`api_key_*`, or each of
//! `keys`) — balanced as one [`Group`]. A member that says it is rate
//! limited or overloaded (429/503/529 with a retry hint) is held out of
//! the group until then; one that refuses connections is held out for a
//! growing back-off (the group's holds, [`crate::upstream::balance::Reason`]). There
//! is no cooldown state beside the group's: failover asks the group.
//!
//! On a route that shares its limits with a fleet (`[cluster]`,
//! `limit_scope = "cluster"`), each member is registered with the cluster
//! under its fleet id: a hold a member names itself is told to the fleet
//! ([`LlmUpstream::hold`]), and the fleet's holds for it are applied to
//! its group ([`FleetSeat`]).
//!
//! On an upstream without a key of weir's, a hold a member names in
//! answer to a client's own credential is that credential's alone
//! ([`super::tenants`]): the member stays in for every other client, and
//! the fleet shares the hold under the member's id and the credential's
//! hash.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::Instant;

use super::entra::Entra;
use super::google::Google;
use super::refresh::Refreshed;
use super::tenants::{self, Tenant, TenantHolds};
use crate::cluster::{Cluster, Holdable};
use crate::config::{
    AwsKeys, Credential, LlmUpstreamConfig, Secret, UpstreamHttp, UpstreamSettings,
};
use crate::telemetry::{Metrics, ServerMetrics};
use crate::upstream::balance::{Change, Group, Member, Reason};
use crate::upstream::client::UpstreamClient;
use crate::upstream::{connector, h1_pool, pooled_client};
use crate::worker::PerWorker;

pub(crate) type LlmClient = UpstreamClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The distinct schemes and authorities of an upstream's servers: one
/// HTTP/1.1 pool each, whichever keys its members send.
fn endpoints(config: &LlmUpstreamConfig) -> Vec<http::Uri> {
    let mut out: Vec<http::Uri> = Vec::new();
    for server in &config.servers {
        let (Some(scheme), Some(authority)) = (server.target.scheme(), server.target.authority())
        else {
            continue;
        };
        let Ok(uri) = http::Uri::builder()
            .scheme(scheme.clone())
            .authority(authority.clone())
            .path_and_query("/")
            .build()
        else {
            continue;
        };
        if !out.iter().any(|u| u == &uri) {
            out.push(uri);
        }
    }
    out
}

/// The longest an upstream's own retry hint keeps a member out.
pub(crate) const MAX_HINT: Duration = Duration::from_secs(300);

/// One endpoint with one key.
#[derive(Debug)]
pub(crate) struct LlmMember {
    /// Base URL; the API path is appended to its path.
    pub(crate) url: http::Uri,
    pub(crate) credential: Credential,
    /// The upstream's name, then the endpoint and the key's source when
    /// the upstream has more than one of them (never the key itself).
    pub(crate) label: Arc<str>,
    pub(crate) metrics: ServerMetrics,
    /// Temporary AWS credentials, refreshed before they expire (a web
    /// identity's), shared by the members with the same key.
    pub(crate) aws: Option<Arc<Refreshed<AwsKeys>>>,
}

impl LlmMember {
    /// Log and count a member going out of its group or coming back.
    pub(crate) fn changed(
        &self,
        metrics: &Metrics,
        route: &Arc<str>,
        change: Option<Change>,
        why: &'static str,
    ) {
        match change {
            Some(Change::Out { until }) => {
                self.metrics.up.set(0);
                metrics.server_ejected(route, &self.label, why);
                let left = until.saturating_duration_since(Instant::now());
                let unix = std::time::SystemTime::now() + left;
                let secs = unix
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                metrics.llm_cooldown(route, &self.label, secs);
                tracing::warn!(
                    route = &**route,
                    member = &*self.label,
                    reason = why,
                    out_for_s = left.as_secs(),
                    "LLM upstream member taken out of its group"
                );
            }
            Some(Change::Back) => {
                self.metrics.up.set(1);
                tracing::info!(
                    route = &**route,
                    member = &*self.label,
                    "LLM upstream member back in its group"
                );
            }
            Some(Change::Down) | None => {}
        }
    }
}

pub(crate) struct LlmUpstream {
    pub(crate) config: LlmUpstreamConfig,
    /// One pool per worker, shared by the members (keyed by endpoint
    /// inside).
    pub(crate) client: PerWorker<LlmClient>,
    pub(crate) group: Arc<Group<LlmMember>>,
    /// Whether each client's own credential is sent (no key of weir's):
    /// then what a member says of a client's credential is held in
    /// `tenants`, not in the group.
    pub(crate) passthrough: bool,
    pub(crate) tenants: Arc<TenantHolds>,
    /// The fleet the members' holds are shared with, if the route shares.
    fleet: Option<Fleet>,
    /// The access token weir gets itself for this upstream (Vertex AI's,
    /// or Azure OpenAI's from Entra ID),
    /// kept fresh in the background; None for an upstream of keys.
    pub(crate) token: Option<Refreshed<str>>,
}

/// An upstream's members as the fleet knows them.
struct Fleet {
    cluster: Arc<Cluster>,
    /// Each member's fleet id, by index in the group.
    ids: Vec<Arc<str>>,
    /// What the cluster holds (weakly) to apply the fleet's holds.
    _seats: Vec<Arc<dyn Holdable>>,
}

/// One member's place in its group, for the fleet's holds.
struct FleetSeat {
    group: std::sync::Weak<Group<LlmMember>>,
    tenants: std::sync::Weak<TenantHolds>,
    index: usize,
    route: Arc<str>,
}

impl Holdable for FleetSeat {
    fn hold_from_fleet(&self, until: Instant, reason: Reason) {
        let Some(group) = self.group.upgrade() else {
            return;
        };
        let now = Instant::now();
        if let (Some(Change::Out { .. }), Some(member)) = (
            group.hold(self.index, until, reason, now),
            group.member(self.index),
        ) {
            member.target.metrics.up.set(0);
            tracing::info!(
                route = &*self.route,
                member = &*member.target.label,
                reason = reason.name(),
                out_for_s = until.saturating_duration_since(now).as_secs(),
                "LLM upstream member taken out of its group by a hold the fleet shares"
            );
        }
    }

    fn hold_tenant_from_fleet(&self, tenant: &str, until: Instant, reason: Reason) {
        let (Some(tenants), Some(tenant)) = (self.tenants.upgrade(), tenants::from_hex(tenant))
        else {
            return;
        };
        tenants.hold(self.index, tenant, until, reason, Instant::now());
    }
}

/// Per key of `config`, the refreshed credentials it stands for (a web
/// identity's), made once for every member that sends it and kept fresh
/// by the same refresher as Vertex's tokens ([`Refreshed`]).
fn refreshed_credentials(
    route: &Arc<str>,
    config: &LlmUpstreamConfig,
    tls: &rustls::ClientConfig,
) -> Vec<Option<Arc<Refreshed<AwsKeys>>>> {
    let region = config
        .bedrock
        .as_ref()
        .map_or("us-east-1", |b| b.region.as_str());
    (config.keys.iter())
        .map(|key| match &key.credential {
            Credential::AwsWebIdentity(w) => {
                let source = super::aws::WebIdentitySource::new(w, region, tls)?;
                let label = format!("{route}/{} {}", config.name, w.role_arn).into();
                Refreshed::spawn(label, source).map(Arc::new)
            }
            _ => None,
        })
        .collect()
}

/// The access token weir gets itself for `config` (Vertex AI's from
/// Google, Azure OpenAI's from Entra ID), kept fresh in the background;
/// None for an upstream of keys.
fn refreshed_token(
    route: &Arc<str>,
    config: &LlmUpstreamConfig,
    tls: &rustls::ClientConfig,
) -> Option<Refreshed<str>> {
    let label = |source: String| -> Arc<str> { format!("{route}/{} {source}", config.name).into() };
    if let Some(v) = &config.vertex {
        let label = label(Google::label(&v.credentials));
        return Refreshed::spawn(label, Google::new(&v.credentials, tls));
    }
    let e = config.entra.as_ref()?;
    Refreshed::spawn(label(Entra::label(e)), Entra::new(e, tls))
}

impl LlmUpstream {
    pub(crate) fn new(
        route: &Arc<str>,
        config: &LlmUpstreamConfig,
        settings: &UpstreamSettings,
        tls: &rustls::ClientConfig,
        workers: usize,
        metrics: &Metrics,
        cluster: Option<&Arc<Cluster>>,
    ) -> Self {
        let mut ids = Vec::new();
        let mut members = Vec::new();
        let refreshed = refreshed_credentials(route, config, tls);
        for server in &config.servers {
            for (k, key) in config.keys.iter().enumerate() {
                let mut label = config.name.clone();
                if config.servers.len() > 1 {
                    label = format!("{label} {}", server.target);
                }
                if config.keys.len() > 1 {
                    label = format!("{label} {}", key.source);
                }
                let label: Arc<str> = label.into();
                let key_digest = match &key.credential {
                    Credential::Key(secret) => secret.digest_hex(8),
                    Credential::Passthrough => "passthrough".into(),
                    Credential::Aws(keys) => keys.secret_access_key.digest_hex(8),
                    Credential::AwsWebIdentity(w) => Secret(w.role_arn.clone()).digest_hex(8),
                    Credential::Refreshed => "refreshed".into(),
                };
                ids.push(Cluster::member_id(
                    route,
                    &config.name,
                    &server.target,
                    &key_digest,
                ));
                members.push(Member {
                    target: LlmMember {
                        url: server.target.clone(),
                        credential: key.credential.clone(),
                        aws: refreshed.get(k).cloned().flatten(),
                        metrics: metrics.server_metrics(route, &label),
                        label,
                    },
                    weight: server.weight,
                    backup: server.backup,
                });
            }
        }
        let group = Arc::new(Group::new(members, config.policy, config.ejection));
        let tenants = Arc::new(TenantHolds::default());
        let fleet = cluster.map(|cluster| {
            let seats = ids
                .iter()
                .enumerate()
                .map(|(index, id)| {
                    let seat: Arc<dyn Holdable> = Arc::new(FleetSeat {
                        group: Arc::downgrade(&group),
                        tenants: Arc::downgrade(&tenants),
                        index,
                        route: route.clone(),
                    });
                    cluster.share_holds(id.clone(), &seat);
                    seat
                })
                .collect();
            Fleet {
                cluster: cluster.clone(),
                ids,
                _seats: seats,
            }
        });
        LlmUpstream {
            config: config.clone(),
            client: PerWorker::new(workers, || match config.http {
                UpstreamHttp::Http1 => UpstreamClient::Http1(
                    endpoints(config)
                        .into_iter()
                        .map(|e| h1_pool(config.connect_timeout, tls, settings, e))
                        .collect(),
                ),
                UpstreamHttp::Auto | UpstreamHttp::Http2 => {
                    UpstreamClient::Hyper(Box::new(pooled_client(
                        connector(config.connect_timeout, tls, config.http),
                        settings,
                        config.http,
                    )))
                }
            }),
            group,
            passthrough: config
                .keys
                .iter()
                .all(|k| k.credential == Credential::Passthrough),
            tenants,
            fleet,
            token: refreshed_token(route, config, tls),
        }
    }

    /// Hold the client credential `tenant` off member `index` until
    /// `until` because the member said so in answer to it, and tell the
    /// fleet when the route shares (without waiting). The member stays in
    /// for everyone else. Whether this held it longer than before.
    pub(crate) fn hold_tenant(
        &self,
        index: usize,
        tenant: Tenant,
        until: Instant,
        reason: Reason,
        now: Instant,
    ) -> bool {
        let longer = self.tenants.hold(index, tenant, until, reason, now);
        if longer
            && let Some(fleet) = &self.fleet
            && let Some(id) = fleet.ids.get(index)
        {
            let id: Arc<str> = Cluster::tenant_id(id, &tenants::hex(&tenant)).into();
            fleet.cluster.hold_learnt(&id, until, reason);
        }
        longer
    }

    /// Hold member `index` out until `until` because it said so (429/503/
    /// 529 with a retry hint), and tell the fleet when the route shares
    /// (without waiting). Says when this took it out.
    pub(crate) fn hold(
        &self,
        index: usize,
        until: Instant,
        reason: Reason,
        now: Instant,
    ) -> Option<Change> {
        let change = self.group.hold(index, until, reason, now);
        if let Some(fleet) = &self.fleet
            && let Some(id) = fleet.ids.get(index)
        {
            fleet.cluster.hold_learnt(id, until, reason);
        }
        change
    }

    /// Until when every member is out and whether all of them are rate
    /// limited (so the client is told 429, not 503), when none is in.
    /// `held` are the members holding this request's credential off
    /// ([`TenantHolds::out_for`]): they count as out, with their times.
    pub(crate) fn all_out(
        &self,
        until: Option<Instant>,
        held: &[(usize, Instant, Reason)],
        now: Instant,
    ) -> Option<(Instant, bool)> {
        let until = until.into_iter().chain(held.iter().map(|h| h.1)).min()?;
        let limited = (0..self.group.len()).all(|i| {
            let tenant = held.iter().find(|h| h.0 == i).map(|h| h.2);
            let why = tenant.or_else(|| self.group.held(i, now).map(|h| h.1));
            why == Some(Reason::RateLimited)
        });
        Some((until, limited))
    }
}

/// The retry hint in an upstream's response: `retry-after-ms`, then
/// Azure's `x-ms-retry-after-ms`, then `retry-after` in seconds (the
/// order the official SDKs read them in; Azure's SDKs read its own).
pub(crate) fn retry_hint(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    // `try_`: an absurd hint (1e300 s) must not panic; it is capped later.
    if let Some(ms) = number("retry-after-ms").or_else(|| number("x-ms-retry-after-ms")) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    number("retry-after").and_then(|s| Duration::try_from_secs_f64(s).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_read_like_the_sdks() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().expect("v"));
        assert_eq!(retry_hint(&h), Some(Duration::from_secs(3)));
        h.insert("x-ms-retry-after-ms", "2500".parse().expect("v"));
        assert_eq!(retry_hint(&h), Some(Duration::from_millis(2500)));
        h.insert("retry-after-ms", "1500".parse().expect("v"));
        assert_eq!(retry_hint(&h), Some(Duration::from_millis(1500)));
        h.clear();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("v"),
        );
        assert_eq!(retry_hint(&h), None);
        h.insert("retry-after", "1e300".parse().expect("v"));
        assert_eq!(retry_hint(&h), None, "no panic on an absurd hint");
    }
}
