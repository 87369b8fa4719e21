//! `[[listener]]` tables and their `tls` (certificates from files; ACME is
//! in [`super::acme`]).

use std::collections::HashMap;

use super::keys::{certificate, listener, tls};
use super::*;

pub(super) fn listeners(
    top: &Section<'_, '_>,
    admin: Option<&AdminSettings>,
    routes: &[RouteConfig],
) -> Vec<ListenerConfig> {
    let sections = top.tables("listener");
    // http-01 is answered on a plain listener, so one must exist.
    let has_plain = sections.iter().any(|t| !t.raw_present(&listener::TLS));
    if !top.raw_present("listener") {
        top.problem(
            "listener",
            "no listener is configured",
            Some("add a `[[listener]]` table with `address = \"0.0.0.0:8080\"`".into()),
        );
    }
    let mut seen: HashMap<SocketAddr, String> = HashMap::new();
    if let Some(a) = admin {
        seen.insert(a.address, "admin.address".into());
    }
    let mut out = Vec::new();
    for t in sections {
        let address = required_socket_addr(&t, &listener::ADDRESS, "0.0.0.0:8080");
        // Port 0 asks the kernel for a fresh port, so it never collides.
        if let Some(a) = address.filter(|a| a.port() != 0) {
            if let Some(first) = seen.get(&a) {
                t.problem(
                    listener::ADDRESS.name,
                    format!("{a} is already used by {first}"),
                    Some("give every listener its own address".into()),
                );
            } else {
                seen.insert(a, t.key_path(listener::ADDRESS.name));
            }
        }
        let tls = t
            .table(&listener::TLS)
            .map(|tls| tls_settings(&tls, routes, has_plain));
        let redirect = t
            .bool(&listener::REDIRECT_HTTPS)
            .unwrap_or(listener::REDIRECT_HTTPS.flag());
        let https_port = t.uint(&listener::HTTPS_PORT).map(|p| p as u16);
        if redirect && tls.is_some() {
            t.problem(
                listener::REDIRECT_HTTPS.name,
                "a TLS listener cannot also redirect to HTTPS",
                Some("remove `redirect_https` or the `tls` table".into()),
            );
        }
        if https_port.is_some() && !redirect {
            t.problem(
                listener::HTTPS_PORT.name,
                "only used by redirecting listeners",
                Some("add `redirect_https = true` or remove `https_port`".into()),
            );
        }
        let name = t.string(&listener::NAME).map(|n| n.value);
        let proxy_protocol_from = ip_networks(&t, &listener::PROXY_PROTOCOL_FROM);
        let access = super::access::address_rules(&t, &listener::ACCESS);
        if let Some(address) = address {
            out.push(ListenerConfig {
                name: name.unwrap_or_else(|| address.to_string()),
                address,
                tls: tls.flatten(),
                redirect_https: redirect.then(|| RedirectSettings {
                    https_port: https_port.unwrap_or(listener::HTTPS_PORT.uint() as u16),
                }),
                proxy_protocol_from,
                access,
            });
        }
    }
    out
}

fn tls_settings(
    t: &Section<'_, '_>,
    routes: &[RouteConfig],
    has_plain: bool,
) -> Option<TlsSettings> {
    let sections = t.tables(&tls::CERTIFICATES);
    let acme_present = t.raw_present(&tls::ACME);
    let acme = t
        .table(&tls::ACME)
        .and_then(|a| acme::acme_settings(&a, routes, has_plain));
    if sections.is_empty() && !acme_present {
        t.problem(
            tls::CERTIFICATES.name,
            "a TLS listener needs at least one certificate",
            Some(
                "add `certificates = [{ cert = \"cert.pem\", key = \"key.pem\" }]`, or an `acme` table to obtain them"
                    .into(),
            ),
        );
        return None;
    }
    let mut certificates = Vec::new();
    let wanted = sections.len();
    for c in sections {
        let cert = required_path(&c, &certificate::CERT);
        let key = required_path(&c, &certificate::KEY);
        let (Some(cert), Some(key)) = (cert, key) else {
            continue;
        };
        secrets::warn_if_readable_by_others(c.doc(), &key.value);
        match crate::pki::load_certificate(&cert.value, &key.value) {
            Ok((certified, names)) => certificates.push(Certificate {
                cert_path: cert.value,
                key_path: key.value,
                names,
                key: certified,
            }),
            Err(e) => cert.problem(
                t.doc(),
                e.to_string(),
                Some(
                    "point `cert` at a PEM certificate chain and `key` at its PEM private key"
                        .into(),
                ),
            ),
        }
    }
    let complete = certificates.len() == wanted && (!acme_present || acme.is_some());
    complete.then_some(TlsSettings { certificates, acme })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};

    #[test]
    fn duplicate_addresses_are_rejected() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:80\"\n[[listener]]\naddress = \"127.0.0.1:80\"\n\
             [[route]]\nupstream = \"http://a\"\n",
        );
        assert!(
            p.iter()
                .any(|l| l.contains("listener[1].address") && l.contains("already used")),
            "{p:#?}"
        );
    }

    #[test]
    fn proxy_protocol_sources_are_networks_or_addresses() {
        let p = problems(&format!(
            "{MINIMAL}[[listener]]\naddress = \"127.0.0.1:1\"\n\
             proxy_protocol_from = [\"10.0.0.0/8\", \"192.0.2.7\", \"10.0.0.0/33\", \"lb.example\"]\n"
        ));
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(
            p[0].contains("listener[1].proxy_protocol_from[2]")
                && p[0].contains("`10.0.0.0/33` is not an IP address or CIDR block"),
            "{}",
            p[0]
        );
        assert!(
            p[1].contains("listener[1].proxy_protocol_from[3]"),
            "{}",
            p[1]
        );
    }

    #[test]
    fn missing_certificate_file_is_reported_at_its_key() {
        let p = problems(&format!(
            "{MINIMAL}[[listener]]\naddress = \"127.0.0.1:1\"\ntls = {{ certificates = [{{ cert = \"/nonexistent/c.pem\", key = \"/nonexistent/k.pem\" }}] }}\n"
        ));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("listener[1].tls.certificates[0].cert")
                && p[0].contains("/nonexistent/c.pem"),
            "{}",
            p[0]
        );
    }

    #[test]
    fn a_certificate_path_of_the_wrong_type_is_one_problem() {
        let p = problems(&format!(
            "{MINIMAL}[[listener]]\naddress = \"127.0.0.1:1\"\ntls = {{ certificates = [{{ cert = 5 }}] }}\n"
        ));
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(
            p[0].contains("listener[1].tls.certificates[0].key: missing"),
            "{}",
            p[0]
        );
        assert!(
            p[1].contains("listener[1].tls.certificates[0].cert: expected a string, found integer"),
            "{}",
            p[1]
        );
    }
}
