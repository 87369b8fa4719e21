//! One ACME order for one name: authorize it with the configured
//! challenge, finalize with a fresh key, and fetch the chain.

use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, CertificateIdentifier, ChallengeType, Identifier, NewOrder,
    OrderStatus, RetryPolicy,
};

use super::AcmeError;
use super::answers::{Challenges, Published, alpn_certificate};
use super::shared::{Answer, Fleet};
use crate::config::AcmeChallenge;

/// How long the CA may take to validate and then to issue.
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(120));

/// A new certificate: the chain as PEM, and its private key as PEM.
pub(crate) struct Issued {
    pub(crate) chain_pem: String,
    pub(crate) key_pem: String,
}

pub(crate) async fn order(
    account: &Account,
    name: &str,
    challenge: AcmeChallenge,
    challenges: &Challenges,
    replaces: Option<CertificateIdentifier<'static>>,
    fleet: Option<&Fleet>,
) -> Result<Issued, AcmeError> {
    let identifiers = [Identifier::Dns(name.to_string())];
    let mut new_order = NewOrder::new(&identifiers);
    if let Some(r) = replaces {
        new_order = new_order.replaces(r);
    }
    let mut order = account.new_order(&new_order).await?;

    // Answers stay published until the order is decided either way.
    let mut published: Vec<Published<'_>> = Vec::new();
    let kind = || match challenge {
        AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        AcmeChallenge::Http01 => ChallengeType::Http01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            other => {
                return Err(AcmeError::Order(format!(
                    "the authorization for {name} is {other:?}"
                )));
            }
        }
        let mut ch = authz.challenge(kind()).ok_or_else(|| {
            AcmeError::Order(format!(
                "the CA offers no {} challenge for {name}",
                challenge.name()
            ))
        })?;
        let key_authorization = ch.key_authorization();
        published.push(match challenge {
            AcmeChallenge::Http01 => {
                challenges.publish_http01(&ch.token, key_authorization.as_str())
            }
            AcmeChallenge::TlsAlpn01 => {
                let cert = alpn_certificate(name, key_authorization.digest().as_ref())?;
                challenges.publish_tls_alpn01(name, cert)
            }
        });
        // The CA may ask any instance behind the balancer.
        if let Some(fleet) = fleet {
            let answer = Answer {
                by: fleet.instance().to_string(),
                challenge: challenge.name().to_string(),
                token: ch.token.clone(),
                key_authorization: key_authorization.as_str().to_string(),
            };
            if let Err(e) = fleet.announce(name, &answer).await {
                tracing::warn!(name = %name, error = %e, "challenge answer not shared; only this instance can answer it");
            }
        }
        ch.set_ready().await?;
    }

    let status = order.poll_ready(&POLL).await?;
    if status != OrderStatus::Ready {
        return Err(AcmeError::Order(
            validation_problems(&mut order, name).await,
        ));
    }
    drop(published);

    let key = rcgen::KeyPair::generate().map_err(|e| AcmeError::Order(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .map_err(|e| AcmeError::Order(e.to_string()))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params
        .serialize_request(&key)
        .map_err(|e| AcmeError::Order(e.to_string()))?;
    order.finalize_csr(csr.der()).await?;
    let chain_pem = order.poll_certificate(&POLL).await?;
    Ok(Issued {
        chain_pem,
        key_pem: key.serialize_pem(),
    })
}

/// Why validation failed, in the CA's words: each challenge's problem
/// document.
async fn validation_problems(order: &mut instant_acme::Order, name: &str) -> String {
    let mut problems = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let Ok(mut authz) = authz else { continue };
        if let Ok(state) = authz.refresh().await {
            for c in &state.challenges {
                if let Some(p) = &c.error {
                    problems.push(format!("{:?} challenge: {p}", c.r#type));
                }
            }
        }
    }
    if problems.is_empty() {
        format!("validation of {name} failed and the CA gave no reason")
    } else {
        format!("validation of {name} failed: {}", problems.join("; "))
    }
}
