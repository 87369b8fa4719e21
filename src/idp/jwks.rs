//! The issuer's signing keys: found through its OpenID configuration (or
//! configured), fetched over HTTPS with a bound on time and size, and
//! kept by `kid` with the one algorithm each key may verify — never the
//! algorithm a token's header asks for, so an HMAC token cannot be
//! checked against a public key (the `alg` confusion), and `none` never.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};

/// The most a discovery document or a key set may be.
const MAX_BODY: usize = 1 << 20;
/// How long one fetch may take.
const FETCH_WITHIN: Duration = Duration::from_secs(5);

pub(super) type Https = Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// An HTTPS (and HTTP, for an IdP on the same host) client.
pub(super) fn client(ca_file: Option<&std::path::Path>) -> Result<Https, String> {
    let tls = crate::pki::client_config(ca_file).map_err(|e| e.to_string())?;
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(FETCH_WITHIN));
    connector.enforce_http(false);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

/// A key that may verify tokens, with its algorithm.
pub(super) struct Signing {
    pub(super) key: DecodingKey,
    pub(super) alg: Algorithm,
}

/// GET `url`'s JSON, bounded.
async fn get_json(http: &Https, url: &str) -> Result<serde_json::Value, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    let fetch = async {
        let resp = http.get(uri).await.map_err(|e| format!("{url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("{url} answered {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    };
    tokio::time::timeout(FETCH_WITHIN, fetch)
        .await
        .map_err(|_| format!("{url}: no answer within {FETCH_WITHIN:?}"))?
}

/// Where the keys are: configured, else the issuer's discovery document's
/// `jwks_uri`.
pub(super) async fn locate(
    http: &Https,
    issuer: &str,
    configured: Option<&str>,
) -> Result<String, String> {
    if let Some(url) = configured {
        return Ok(url.to_string());
    }
    let discovery = format!("{issuer}/.well-known/openid-configuration");
    let doc = get_json(http, &discovery).await?;
    doc["jwks_uri"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{discovery} names no `jwks_uri`"))
}

/// Fetch the key set at `url`: each usable key by its `kid`.
pub(super) async fn fetch(http: &Https, url: &str) -> Result<HashMap<String, Signing>, String> {
    let set: JwkSet = serde_json::from_value(get_json(http, url).await?)
        .map_err(|e| format!("{url}: not a JWK set: {e}"))?;
    let mut out = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else {
            continue;
        };
        let Some(alg) = algorithm(jwk) else {
            continue;
        };
        if let Ok(key) = DecodingKey::from_jwk(jwk) {
            out.insert(kid, Signing { key, alg });
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{url} holds no signing key weir can use (RS*, PS*, ES256, ES384, EdDSA, each with a `kid`)"
        ));
    }
    Ok(out)
}

/// The one algorithm a key verifies: its `alg` when it names one that
/// fits its type, else its type's usual one. Symmetric keys: none.
fn algorithm(jwk: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
    let named = jwk
        .common
        .key_algorithm
        .and_then(|a| Algorithm::from_str(&a.to_string()).ok());
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(_) => Algorithm::EdDSA,
        AlgorithmParameters::OctetKey(_) => return None,
    };
    let fits = |a: Algorithm| match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => matches!(
            a,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ),
        _ => a == by_type,
    };
    match named {
        Some(a) if fits(a) => Some(a),
        Some(_) => None,
        None => Some(by_type),
    }
}
