//! An IdP stand-in: its OpenID discovery document and its key set (JWKS)
//! over real HTTP, keys that can be published and withdrawn (a rotation),
//! and signers that make tokens as an IdP does — ES256 and EdDSA keys made
//! here, each published under its `kid`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::{Upstream, body, upstream_at};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key of the IdP's.
pub struct Signer {
    pub kid: String,
    alg: Algorithm,
    key: EncodingKey,
    pub jwk: Value,
    /// The public key's bytes (an HMAC-confusion attempt signs with them).
    pub public: Vec<u8>,
}

impl Signer {
    pub fn es256(kid: &str) -> Signer {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("p-256 key");
        let pair =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
                .expect("parse");
        let point = pair.public_key().as_ref().to_vec();
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        });
        Signer {
            kid: kid.into(),
            alg: Algorithm::ES256,
            key: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk,
            public: point,
        }
    }

    pub fn ed25519(kid: &str) -> Signer {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("ed25519 key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("parse");
        let public = pair.public_key().as_ref().to_vec();
        let jwk =
            json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig", "x": b64(&public)});
        Signer {
            kid: kid.into(),
            alg: Algorithm::EdDSA,
            key: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk,
            public,
        }
    }

    /// A token of `claims` signed by this key.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).expect("sign")
    }

    /// The `alg` confusion: an HS256 token under this key's `kid`, keyed
    /// by the public key's bytes.
    pub fn sign_hmac_with_public(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(&self.public))
            .expect("sign")
    }

    /// An unsigned token (`alg: none`) under this key's `kid`.
    pub fn unsigned(&self, claims: &Value) -> String {
        let header = json!({"alg": "none", "typ": "JWT", "kid": self.kid});
        format!(
            "{}.{}.",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        )
    }
}

/// The IdP: discovery and key set on a real socket.
pub struct Idp {
    pub server: Upstream,
    keys: Arc<Mutex<Vec<Value>>>,
    /// Key-set requests answered.
    pub fetches: Arc<AtomicUsize>,
}

impl Idp {
    pub async fn start() -> Idp {
        Idp::start_at("127.0.0.1:0".parse().expect("addr")).await
    }

    pub async fn start_at(addr: SocketAddr) -> Idp {
        let keys: Arc<Mutex<Vec<Value>>> = Arc::default();
        let fetches = Arc::new(AtomicUsize::new(0));
        let (k, f) = (keys.clone(), fetches.clone());
        let server = upstream_at(addr, move |req: http::Request<hyper::body::Incoming>| {
            let (keys, fetches) = (k.clone(), f.clone());
            async move {
                let host = req
                    .headers()
                    .get("host")
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let text = match req.uri().path() {
                    "/.well-known/openid-configuration" => json!({
                        "issuer": format!("http://{host}"),
                        "jwks_uri": format!("http://{host}/keys"),
                    })
                    .to_string(),
                    "/keys" => {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        json!({"keys": *keys.lock().expect("keys")}).to_string()
                    }
                    _ => return super::text(404, "not found"),
                };
                let mut r = http::Response::new(body(text));
                r.headers_mut()
                    .insert("content-type", "application/json".parse().expect("ct"));
                r
            }
        })
        .await;
        Idp {
            server,
            keys,
            fetches,
        }
    }

    pub fn issuer(&self) -> String {
        format!("http://{}", self.server.addr)
    }

    pub fn publish(&self, signer: &Signer) {
        self.keys.lock().expect("keys").push(signer.jwk.clone());
    }

    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    /// Claims as this IdP issues them, for `email` in `groups`, valid for
    /// an hour, for the audience `weir`.
    pub fn claims(&self, email: &str, groups: &[&str]) -> Value {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("now")
            .as_secs();
        json!({
            "iss": self.issuer(), "aud": "weir", "sub": format!("00u-{email}"),
            "email": email, "groups": groups, "iat": now, "exp": now + 3600,
        })
    }
}
