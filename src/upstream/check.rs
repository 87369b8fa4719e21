//! Active health checks: one task per group, however many workers serve
//! it, asking each server `GET <path>` every `interval`. `fall` failures
//! in a row take a server out (whatever the cap on the share out: the
//! check says it cannot serve), `rise` passes in a row bring it back.
//! Servers start in, so a restart does not refuse traffic until the first
//! checks pass. The task ends when its group is dropped (the route was
//! removed or changed by a reload). A group whose servers change with DNS
//! is checked as it is at each round; a server's streak follows its label.
//! A unix-socket server is checked on a connection of its own each round
//! (the client below dials TCP only).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, header};
use http_body_util::Empty;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

use super::balance::Group;
use super::dial::Dial;
use super::pool::H1Pool;
use super::server::Server;
use crate::config::HealthCheck;

type CheckClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Start checking `group`'s servers, if there is a runtime to run on.
pub(crate) fn spawn(
    group: &Arc<ArcSwap<Group<Server>>>,
    check: HealthCheck,
    route: Arc<str>,
    client: CheckClient,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(%route, "no runtime to run health checks on; servers are judged by their answers only");
        return;
    };
    runtime.spawn(run(Arc::downgrade(group), check, route, client));
}

async fn run(
    group: Weak<ArcSwap<Group<Server>>>,
    check: HealthCheck,
    route: Arc<str>,
    client: CheckClient,
) {
    let mut ticker = tokio::time::interval(check.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut streaks: HashMap<Arc<str>, (u32, u32)> = HashMap::new();
    loop {
        ticker.tick().await;
        let Some(group) = group.upgrade().map(|g| g.load_full()) else {
            return;
        };
        // Servers gone with DNS take their streaks with them.
        streaks.retain(|label, _| {
            (0..group.len()).any(|i| group.member(i).is_some_and(|m| m.target.label == *label))
        });
        let probes = (0..group.len()).filter_map(|i| {
            let server = &group.member(i)?.target;
            Some(probe(&client, server, &check))
        });
        let results = futures_util::future::join_all(probes).await;
        for (i, passed) in results.into_iter().enumerate() {
            let Some(label) = group.member(i).map(|m| m.target.label.clone()) else {
                continue;
            };
            let (passes, fails) = streaks.entry(label).or_default();
            let verdict = if passed {
                *passes = passes.saturating_add(1);
                *fails = 0;
                (*passes >= check.rise).then_some(true)
            } else {
                *fails = fails.saturating_add(1);
                *passes = 0;
                (*fails >= check.fall).then_some(false)
            };
            if let (Some(up), Some(member)) = (verdict, group.member(i)) {
                member.target.changed(&route, group.checked(i, up));
            }
        }
    }
}

/// Whether `server` answers the check in time with a passing status.
async fn probe(client: &CheckClient, server: &Server, check: &HealthCheck) -> bool {
    let uri = format!(
        "{}://{}{}{}",
        server.scheme, server.authority, server.base_path, check.path
    );
    let mut req = Request::get(uri).header(header::USER_AGENT, "weir-health-check");
    if let Some(host) = &server.host {
        req = req.header(header::HOST, host.as_str());
    }
    let Ok(req) = req.body(Empty::new()) else {
        return false;
    };
    let status = match &server.socket {
        None => tokio::time::timeout(check.timeout, client.request(req))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|resp| resp.status()),
        Some(path) => {
            // A pool that keeps nothing: the connection closes after the
            // check.
            let dial = Dial::Unix {
                path: path.clone(),
                connect_timeout: check.timeout,
            };
            let once = H1Pool::new(dial, req.uri().clone(), check.timeout, 0);
            tokio::time::timeout(check.timeout, once.request(req))
                .await
                .ok()
                .and_then(Result::ok)
                .map(|resp| resp.status())
        }
    };
    status.is_some_and(|s| check.passes(s.as_u16()))
}
