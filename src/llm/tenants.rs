//! Holds that belong to one client's credential.
//!
//! On an upstream without a key of weir's (each client sends its own
//! provider key or subscription token), a 429 or an overload with a retry
//! hint speaks of the credential that was sent, not of the member: the
//! provider limits each key (each organisation, each subscription) on its
//! own. Such a hold keeps that credential off the member until the time it
//! named; every other client is still sent there. A hold learnt against
//! weir's own key is the member's, as it always was (the group's holds).
//!
//! A credential is named by a [`Tenant`]: the first 16 bytes of a SHA-256
//! over the credential headers the upstream receives, the same on every
//! instance (the fleet shares tenant holds by it) and never the credential
//! itself. The holds are bounded ([`MAX_HOLDS`]): past it, expired ones
//! are dropped, and a new one is not kept (that client's next request is
//! sent and told again by the provider).

use std::collections::HashMap;
use std::sync::Mutex;

use http::HeaderMap;
use http::header::{AUTHORIZATION, HeaderName};
use tokio::time::Instant;

use crate::sync::Locked;
use crate::upstream::balance::Reason;

/// One client credential, hashed.
pub(crate) type Tenant = [u8; 16];

/// Tenant holds kept per upstream, at most.
pub(crate) const MAX_HOLDS: usize = 10_000;

/// The tenant a request's credential headers name: `x-api-key` and
/// `Authorization`, except those that carried weir's own client token
/// (`carried`: `[x-api-key, Authorization]`, as `outgoing::Carriers` holds
/// them; stripped, never sent).
pub(crate) fn tenant(headers: &HeaderMap, carried: [bool; 2]) -> Tenant {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    ctx.update(b"weir tenant hold\0");
    let api_key = HeaderName::from_static("x-api-key");
    let [api_key_carried, authorization_carried] = carried;
    for (name, carried) in [
        (&AUTHORIZATION, authorization_carried),
        (&api_key, api_key_carried),
    ] {
        if carried {
            continue;
        }
        for value in headers.get_all(name) {
            ctx.update(name.as_str().as_bytes());
            ctx.update(b"\0");
            ctx.update(value.as_bytes());
            ctx.update(b"\0");
        }
    }
    let digest = ctx.finish();
    let mut out = [0u8; 16];
    for (o, d) in out.iter_mut().zip(digest.as_ref()) {
        *o = *d;
    }
    out
}

/// A tenant in hex, as the fleet names it.
pub(crate) fn hex(tenant: &Tenant) -> String {
    tenant.iter().map(|b| format!("{b:02x}")).collect()
}

/// A tenant from its hex (what another instance announced).
pub(crate) fn from_hex(text: &str) -> Option<Tenant> {
    let bytes = text.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *o = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// One upstream's tenant holds: (member index, tenant) → until, why.
#[derive(Debug, Default)]
pub(crate) struct TenantHolds {
    holds: Mutex<HashMap<(usize, Tenant), (Instant, Reason)>>,
}

impl TenantHolds {
    /// Hold `tenant` off member `index` until `until` (unless held longer
    /// already). Whether it is now held longer than before.
    pub(crate) fn hold(
        &self,
        index: usize,
        tenant: Tenant,
        until: Instant,
        reason: Reason,
        now: Instant,
    ) -> bool {
        let mut holds = self.holds.locked();
        let key = (index, tenant);
        if holds.len() >= MAX_HOLDS && !holds.contains_key(&key) {
            holds.retain(|_, (u, _)| *u > now);
            if holds.len() >= MAX_HOLDS {
                return false;
            }
        }
        let entry = holds.entry(key).or_insert((now, reason));
        if entry.0 < until {
            *entry = (until, reason);
            return true;
        }
        false
    }

    /// Whether no credential is held off any member.
    pub(crate) fn is_empty(&self) -> bool {
        self.holds.locked().is_empty()
    }

    /// The members of a group of `members` that hold `tenant` off now:
    /// (index, until, why). Empty, without a look, when nothing is held.
    pub(crate) fn out_for(
        &self,
        tenant: &Tenant,
        members: usize,
        now: Instant,
    ) -> Vec<(usize, Instant, Reason)> {
        let holds = self.holds.locked();
        if holds.is_empty() {
            return Vec::new();
        }
        (0..members)
            .filter_map(|i| {
                let (until, why) = holds.get(&(i, *tenant))?;
                (*until > now).then_some((i, *until, *why))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;

    use super::*;

    #[test]
    fn a_tenant_is_its_credential_and_never_weirs_token() {
        let mut a = HeaderMap::new();
        a.insert("x-api-key", HeaderValue::from_static("sk-a"));
        let mut b = a.clone();
        b.insert("x-api-key", HeaderValue::from_static("sk-b"));
        assert_ne!(tenant(&a, [false, false]), tenant(&b, [false, false]));
        let mut a_with_token = a.clone();
        a_with_token.insert(AUTHORIZATION, HeaderValue::from_static("Bearer weir-tok"));
        assert_ne!(
            tenant(&a, [false, false]),
            tenant(&a_with_token, [false, false])
        );
        assert_eq!(
            tenant(&a, [false, false]),
            tenant(&a_with_token, [false, true])
        );
        let t = tenant(&a, [false, false]);
        assert_eq!(from_hex(&hex(&t)), Some(t));
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex(&"g".repeat(32)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_keeps_its_tenant_off_its_member_only_until_it_ends() {
        let holds = TenantHolds::default();
        let now = Instant::now();
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let until = now + Duration::from_secs(20);
        assert!(holds.hold(0, a, until, Reason::RateLimited, now));
        assert!(!holds.hold(0, a, now + Duration::from_secs(5), Reason::RateLimited, now));
        assert_eq!(
            holds.out_for(&a, 2, now),
            vec![(0, until, Reason::RateLimited)]
        );
        assert!(holds.out_for(&b, 2, now).is_empty(), "another tenant");
        assert!(holds.out_for(&a, 2, until).is_empty(), "over");
    }

    #[tokio::test(start_paused = true)]
    async fn tenant_holds_are_bounded() {
        let holds = TenantHolds::default();
        let now = Instant::now();
        let short = now + Duration::from_secs(1);
        let long = now + Duration::from_secs(60);
        for i in 0..MAX_HOLDS {
            let t = (i as u128).to_le_bytes();
            assert!(holds.hold(0, t, short, Reason::RateLimited, now));
        }
        let new = [0xff; 16];
        assert!(!holds.hold(0, new, long, Reason::RateLimited, now), "full");
        let later = short + Duration::from_millis(1);
        assert!(
            holds.hold(0, new, long, Reason::RateLimited, later),
            "expired dropped"
        );
        assert_eq!(holds.holds.locked().len(), 1);
    }
}
