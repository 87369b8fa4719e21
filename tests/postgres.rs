//! Runtime keys and usage rows kept in a real PostgreSQL shared by real
//! weir processes (the fleet's store): a key made through one instance
//! served by another, revoked on both within a second (notified, not
//! polled); PostgreSQL crashed under load while known keys go on and no
//! usage row is lost; migrations run by instances starting together and
//! by `weir db migrate`; the usage report from PostgreSQL; TLS to it
//! (`sslmode=verify-full`, `require`), refused with the wrong CA or name;
//! a team made through one instance applied by another within a second.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::keys::{Addresses, admin, ask, ask_with, config, create, dir, usage_lines};
use common::postgres::Postgres;
use common::process::{Proc, WEIR, write_config};
use common::provider::{Options, Provider, ProviderApi};
use serde_json::{Value, json};

/// The step a `weir db migrate` output says the schema is at.
fn out_step(out: &str) -> i64 {
    out.split("schema at step")
        .nth(1)
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .find(|w| !w.is_empty())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

/// A weir process on `pg`, over `up`.
struct Member {
    proc: Proc,
    at: Addresses,
    _dir: tempfile::TempDir,
}

fn member(up: &Provider, pg: &Postgres) -> Member {
    member_at(up, &pg.url())
}

/// A weir process on the database at `url`, over `up`.
fn member_at(up: &Provider, url: &str) -> Member {
    let dir = dir();
    let text = config(up, "", url)
        .replace("[log]\n", "[log]\nformat = \"json\"\n")
        .replace("{dir}", &dir.path().display().to_string());
    let mut proc = Proc::run(&write_config(&dir, &text));
    let web = proc.listening("web");
    let admin = proc.admin();
    Member {
        proc,
        at: Addresses { web, admin },
        _dir: dir,
    }
}

impl Member {
    async fn metric_becomes(&self, name: &str, want: u64, within: Duration) -> bool {
        common::eventually_metric_at(self.at.admin, name, want, within).await
    }
}

#[tokio::test]
async fn a_key_made_on_one_instance_works_on_the_other_within_a_second_and_stops_on_both_when_revoked()
 {
    let Some(pg) = Postgres::start_if_available() else {
        return;
    };
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let one = member(&up, &pg);
    let two = member(&up, &pg);

    let spec = json!({"user": "alice", "team": "platform", "rate_limit_per_second": 50,
                      "rate_limit_burst": 60});
    let (id, secret) = create(&one.at, spec).await;
    let started = Instant::now();
    // Awaited on the other instance's gauge: asking with a key it does not
    // know yet would count as a failed authentication from this address.
    assert!(
        two.metric_becomes("weir_runtime_keys", 1, Duration::from_secs(5))
            .await
    );
    let reached = started.elapsed();
    assert_eq!(ask(&two.at, &secret, "claude-sonnet").await.0, 200);
    eprintln!("a new key reached the other instance in {reached:?}");
    // PostgreSQL's fallback poll is every 2 s: within a second is the
    // notification's doing.
    assert!(reached < Duration::from_secs(1), "{reached:?}");
    // Schema step 5's columns, kept by PostgreSQL.
    let (_, v) = admin(
        &two.at,
        http::Method::GET,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(
        (
            v["rate_limit_per_second"].as_u64(),
            v["rate_limit_burst"].as_u64()
        ),
        (Some(50), Some(60)),
        "{v}"
    );

    let (status, v) = admin(
        &one.at,
        http::Method::DELETE,
        &format!("/admin/keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let started = Instant::now();
    for m in [&one, &two] {
        assert!(
            m.metric_becomes("weir_runtime_keys", 0, Duration::from_secs(5))
                .await
        );
    }
    let stopped = started.elapsed();
    eprintln!("the revocation reached both instances in {stopped:?}");
    assert!(stopped < Duration::from_secs(1), "{stopped:?}");
    assert_eq!(ask(&two.at, &secret, "claude-sonnet").await.0, 401);
    assert_eq!(ask(&one.at, &secret, "claude-sonnet").await.0, 401);
}

#[tokio::test]
async fn a_team_made_on_one_instance_applies_on_the_other_within_a_second() {
    let Some(pg) = Postgres::start_if_available() else {
        return;
    };
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let one = member(&up, &pg);
    let two = member(&up, &pg);
    let (_, secret) = create(&one.at, json!({"user": "alice", "team": "platform"})).await;
    assert!(
        two.metric_becomes("weir_runtime_keys", 1, Duration::from_secs(5))
            .await
    );
    assert_eq!(ask(&two.at, &secret, "claude-sonnet").await.0, 200);

    // A team budget smaller than one request: refused by the team's name
    // once the other instance holds the team.
    let (status, v) = admin(
        &one.at,
        http::Method::POST,
        "/admin/teams",
        json!({"name": "platform", "tokens_per_day": 1}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let started = Instant::now();
    let last = std::sync::Mutex::new(String::new());
    common::eventually_async(Duration::from_secs(5), || async {
        let (status, body) = ask(&two.at, &secret, "claude-sonnet").await;
        *last.lock().expect("body") = body;
        status != 200
    })
    .await;
    let reached = started.elapsed();
    let body = last.into_inner().expect("body");
    eprintln!("a new team reached the other instance in {reached:?}");
    assert!(body.contains("team `platform`"), "{body}");
    // The fallback poll is every 2 s: within a second is the notification's.
    assert!(reached < Duration::from_secs(1), "{reached:?}");
    assert_eq!(pg.count("SELECT COUNT(*) FROM teams").await, 1);
}

#[tokio::test]
async fn postgres_crashed_under_load_known_keys_go_on_and_every_usage_row_lands_after_it_returns() {
    let Some(mut pg) = Postgres::start_if_available() else {
        return;
    };
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let mut one = member(&up, &pg);
    let (_, alice) = create(&one.at, json!({"user": "alice", "team": "platform"})).await;
    let (_, bob) = create(&one.at, json!({"user": "bob", "team": "data"})).await;

    // Load from two clients the whole time, before, during and after.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut load = Vec::new();
    for secret in [alice.clone(), bob.clone()] {
        let stop = stop.clone();
        let served = served.clone();
        let at = Addresses {
            web: one.at.web,
            admin: one.at.admin,
        };
        load.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                statuses.push(ask(&at, &secret, "claude-sonnet").await.0);
                served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Pacing, not waiting: a steady load across the crash.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            statuses
        }));
    }
    assert!(
        common::eventually_async(Duration::from_secs(10), || async {
            pg.count("SELECT COUNT(*) FROM usage").await >= 10
        })
        .await,
        "rows written before the crash"
    );

    pg.crash();
    assert!(
        one.metric_becomes("weir_database_up", 0, Duration::from_secs(5))
            .await,
        "the outage is seen"
    );
    let during = common::metric_at(one.at.admin, "weir_usage_rows_written").await;
    // A new key waits for the database: refused, not made up.
    let (status, v) = admin(
        &one.at,
        http::Method::POST,
        "/admin/keys",
        json!({"user": "carol"}),
    )
    .await;
    assert!(status >= 500, "{status} {v}");
    // Requests go on through the outage (checked at the end: all 200):
    // enough of them answered while it is down.
    let answered = || served.load(std::sync::atomic::Ordering::Relaxed);
    let at_crash = answered();
    assert!(
        common::eventually(Duration::from_secs(10), || answered() >= at_crash + 40).await,
        "load goes on while the database is down"
    );
    assert_eq!(
        common::metric_at(one.at.admin, "weir_usage_rows_written").await,
        during,
        "nothing written while it is down"
    );

    pg.restart();
    assert!(
        one.metric_becomes("weir_database_up", 1, Duration::from_secs(10))
            .await,
        "reconnected"
    );
    let at_return = answered();
    assert!(
        common::eventually(Duration::from_secs(10), || answered() >= at_return + 20).await,
        "load goes on after the database returns"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut sent = 0i64;
    for task in load {
        let statuses = task.await.expect("load");
        assert!(
            statuses.iter().all(|s| *s == 200),
            "every request with a known key answered: {statuses:?}"
        );
        sent += statuses.len() as i64;
    }
    // Every row queued during the outage lands: none lost.
    assert!(
        common::eventually_async(Duration::from_secs(15), || async {
            pg.count("SELECT COUNT(*) FROM usage").await == sent
        })
        .await,
        "{} rows for {sent} requests",
        pg.count("SELECT COUNT(*) FROM usage").await
    );
    assert_eq!(
        common::metric_at(one.at.admin, "weir_usage_rows_dropped").await,
        Some(0)
    );
    // The gap is logged once, and its end.
    let down = one.lines("database: unreachable");
    assert_eq!(down, 1, "one line per outage");
    assert_eq!(one.lines("database: reachable again"), 1);
    // A new key is made again.
    create(&one.at, json!({"user": "carol"})).await;

    // The report from PostgreSQL: by person and model, by team and day.
    let lines = usage_lines(&one.at, "group_by=person,model", sent as u64).await;
    let alice_line = lines.iter().find(|l| l["user"] == "alice").expect("alice");
    assert_eq!(alice_line["model"], "claude-sonnet");
    assert!(
        alice_line["input_tokens"].as_u64() > Some(0),
        "{alice_line}"
    );
    assert!(alice_line["spend"].as_f64() > Some(0.0), "{alice_line}");
    let total: u64 = lines.iter().filter_map(|l| l["requests"].as_u64()).sum();
    assert_eq!(total, sent as u64, "{lines:?}");
    let lines = usage_lines(&one.at, "group_by=team,day", sent as u64).await;
    let today = humantime::format_rfc3339(std::time::SystemTime::now()).to_string();
    assert!(
        lines
            .iter()
            .any(|l| l["team"] == "data" && l["day"] == today[..10]),
        "{lines:?}"
    );
    // A coding agent's session and subagent, as PostgreSQL reports them.
    let hints: [&[(&str, &str)]; 2] = [
        &[("x-claude-code-session-id", "s-pg")],
        &[
            ("x-claude-code-session-id", "s-pg"),
            ("x-claude-code-agent-id", "sub-pg"),
        ],
    ];
    for hint in hints {
        let asked = ask_with(&one.at, &alice, "claude-sonnet", hint).await;
        assert_eq!(asked.0, 200);
    }
    let lines = usage_lines(&one.at, "group_by=session,agent", sent as u64 + 2).await;
    let line = |agent: Value| {
        lines
            .iter()
            .find(|l| l["session"] == "s-pg" && l["agent"] == agent)
            .unwrap_or_else(|| panic!("{agent} in {lines:?}"))
    };
    let (main, sub) = (line(Value::Null), line(json!("sub-pg")));
    for field in ["requests", "input_tokens", "output_tokens", "spend"] {
        assert_eq!(main[field], sub[field], "{field}: {main} {sub}");
    }
    assert_eq!(main["requests"], 1);
    assert!(main["spend"].as_f64() > Some(0.0), "{main}");
    let unnamed = lines.iter().find(|l| l["session"].is_null());
    assert_eq!(
        unnamed.map(|l| &l["requests"]),
        Some(&json!(sent)),
        "{lines:?}"
    );
}

impl Member {
    fn lines(&mut self, text: &str) -> usize {
        self.proc.all_lines(|l| l.contains(text)).len()
    }
}

/// What a config needs beside `[database]`.
const LISTENER: &str = "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
    [[route]]\nname = \"demo\"\nupstream = \"http://127.0.0.1:9\"\n";

/// `weir db migrate` on `url`: its exit code and output.
fn migrate(url: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, &format!("[database]\nurl = \"{url}\"\n{LISTENER}"));
    let out = Command::new(WEIR)
        .args(["db", "migrate", "--config", &path])
        .output()
        .expect("weir db migrate");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn migrations_run_once_from_instances_starting_together_and_by_weir_db_migrate() {
    let Some(pg) = Postgres::start_if_available() else {
        return;
    };
    // Four at once on an empty database: the advisory lock makes them take
    // turns; without it they race to create the same tables.
    let url = pg.url();
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || migrate(&url))
        })
        .collect();
    for r in runs {
        let (code, out) = r.join().expect("thread");
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("schema at step"), "{out}");
    }
    // The binary's last schema step (src/store/schema.rs STEPS).
    let steps = out_step(&migrate(&url).1);
    assert_eq!(pg.count("SELECT step FROM weir_schema").await, steps);
    assert_eq!(pg.count("SELECT COUNT(*) FROM weir_schema").await, 1);
    assert_eq!(pg.count("SELECT version FROM changes").await, 0);
    // Two instances starting together on it, and serving.
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let one = member(&up, &pg);
    let two = member(&up, &pg);
    let (_, secret) = create(&two.at, json!({"name": "ci"})).await;
    assert_eq!(ask(&two.at, &secret, "claude-sonnet").await.0, 200);
    drop(one);

    // A database a newer weir made is refused, saying what to do.
    pg.client()
        .await
        .execute("UPDATE weir_schema SET step = 99", &[])
        .await
        .expect("update");
    let (code, out) = migrate(&url);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("newer than this weir"), "{out}");
    // Nothing answering: an error, not a hang.
    drop(pg);
    let (code, out) = migrate(&url);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn a_postgres_url_is_checked_when_the_config_is() {
    let parse = |url: &str| {
        let text = format!("[database]\nurl = \"{url}\"\n{LISTENER}");
        weir::testing::config::Config::parse(std::path::Path::new("/tmp/weir.toml"), &text)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert!(parse("postgres://weir:pw@db.internal:5432/weir").is_ok());
    assert!(parse("postgresql://weir@db.internal/weir?connect_timeout=3").is_ok());
    assert!(parse("postgres://weir@db.internal/weir?sslmode=require").is_ok());
    assert!(parse("postgres://weir@db.internal/weir?sslmode=verify-full").is_ok());
    // verify-ca trusts sslrootcert's CAs only: without one it is refused.
    let err = parse("postgres://weir@db.internal/weir?sslmode=verify-ca").expect_err("refused");
    assert!(err.contains("needs `sslrootcert`"), "{err}");
    let err = parse("postgres://weir@db.internal/weir?sslmode=require&sslrootcert=/etc/ca.pem")
        .expect_err("refused");
    assert!(err.contains("sslrootcert` has no effect"), "{err}");
    let err =
        parse("postgres://weir@db.internal/weir?sslmode=verify-full&sslrootcert=/nonexistent.pem")
            .expect_err("refused");
    assert!(
        err.contains("sslrootcert") && err.contains("nonexistent"),
        "{err}"
    );
    // A client certificate needs its key, and TLS; its files are read.
    let err = parse("postgres://weir@db.internal/weir?sslmode=require&sslcert=/etc/c.pem")
        .expect_err("refused");
    assert!(err.contains("go together"), "{err}");
    let err = parse("postgres://weir@db.internal/weir?sslcert=/etc/c.pem&sslkey=/etc/c.key")
        .expect_err("refused");
    assert!(err.contains("no effect without TLS"), "{err}");
    let err = parse(
        "postgres://weir@db.internal/weir?sslmode=require&sslcert=/no/c.pem&sslkey=/no/c.key",
    )
    .expect_err("refused");
    assert!(
        err.contains("sslcert") && err.contains("/no/c.pem"),
        "{err}"
    );
    // Channel binding binds the password to TLS: refused without it.
    let err =
        parse("postgres://weir@db.internal/weir?channel_binding=require").expect_err("refused");
    assert!(err.contains("needs TLS"), "{err}");
    assert!(
        parse("postgres://weir@db.internal/weir?sslmode=require&channel_binding=require").is_ok()
    );
    let err = parse("postgres://weir@db.internal/weir?colour=red").expect_err("refused");
    assert!(err.contains("not valid"), "{err}");
}

/// A CA, and a certificate for `names` it issued (PEM, with its key);
/// the CA's PEM written to `dir/file`.
fn issue(dir: &std::path::Path, file: &str, names: &[&str]) -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(
        DnType::CommonName,
        format!("weir test PostgreSQL CA {file}"),
    );
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("ca key"))
        .expect("ca certificate");
    let key = KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = CertificateParams::new(names)
        .expect("params")
        .signed_by(&key, &ca)
        .expect("certificate");
    std::fs::write(dir.join(file), ca.pem()).expect("write ca");
    (cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn tls_to_postgres_verified_against_sslrootcert_or_required_and_refused_with_the_wrong_ca_or_without_tls()
 {
    let Some(mut pg) = Postgres::start_if_available() else {
        return;
    };
    let certs = tempfile::tempdir().expect("tempdir");
    // The server's certificate names its address only (the URL's host).
    let (cert, key) = issue(certs.path(), "ca.pem", &["127.0.0.1"]);
    issue(certs.path(), "other-ca.pem", &["127.0.0.1"]);
    pg.serve_tls(&cert, &key, false);
    let url = pg.url();
    let at = |query: &str| format!("{url}?{query}");
    let ca = certs.path().join("ca.pem").display().to_string();
    let other = certs.path().join("other-ca.pem").display().to_string();

    // verify-full with the CA: weir serves a runtime key, and its
    // connection to PostgreSQL is TLS.
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let one = member_at(&up, &at(&format!("sslmode=verify-full&sslrootcert={ca}")));
    let (_, secret) = create(&one.at, json!({"user": "alice", "team": "platform"})).await;
    assert_eq!(ask(&one.at, &secret, "claude-sonnet").await.0, 200);
    let tls = "SELECT COUNT(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
               WHERE application_name = 'weir' AND ssl";
    assert_eq!(pg.count(tls).await, 1);
    drop(one);

    // Another CA, or a name the certificate does not hold: refused at
    // start, saying why.
    let (code, out) = migrate(&at(&format!("sslmode=verify-full&sslrootcert={other}")));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("invalid peer certificate: UnknownIssuer"),
        "{out}"
    );
    let by_name =
        at(&format!("sslmode=verify-full&sslrootcert={ca}")).replace("127.0.0.1", "localhost");
    let (code, out) = migrate(&by_name);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("certificate not valid for name \"localhost\""),
        "{out}"
    );
    // Without a CA the web PKI roots do not know the test CA either.
    let (code, out) = migrate(&at("sslmode=verify-full"));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("UnknownIssuer"), "{out}");

    // require: TLS, the certificate not checked (as libpq).
    let (code, out) = migrate(&at("sslmode=require"));
    assert_eq!(code, 0, "{out}");

    // A server taking TLS only refuses `disable` (the default): the
    // connections above were TLS indeed.
    pg.serve_tls(&cert, &key, true);
    let (code, out) = migrate(&url);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no encryption"), "{out}");
    let (code, out) = migrate(&at("sslmode=require"));
    assert_eq!(code, 0, "{out}");
}

/// A client certificate for the user `weir`, issued by a CA of its own:
/// (the CA's PEM, the certificate's, its key's).
fn issue_client() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "weir test client CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("ca key"))
        .expect("ca certificate");
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, "weir");
    let cert = params.signed_by(&key, &ca).expect("certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn tls_to_postgres_verify_ca_without_the_name_a_client_certificate_and_channel_binding() {
    let Some(mut pg) = Postgres::start_if_available() else {
        return;
    };
    let certs = tempfile::tempdir().expect("tempdir");
    let (cert, key) = issue(certs.path(), "ca.pem", &["127.0.0.1"]);
    issue(certs.path(), "other-ca.pem", &["127.0.0.1"]);
    pg.serve_tls(&cert, &key, true);
    let url = pg.url();
    let at = |query: &str| format!("{url}?{query}");
    let ca = certs.path().join("ca.pem").display().to_string();
    let other = certs.path().join("other-ca.pem").display().to_string();

    // verify-ca: the chain checked, the name not — `localhost` is not in
    // the certificate, which verify-full refuses (the test above).
    let by_name = |query: &str| at(query).replace("127.0.0.1", "localhost");
    let (code, out) = migrate(&by_name(&format!("sslmode=verify-ca&sslrootcert={ca}")));
    assert_eq!(code, 0, "{out}");
    let (code, out) = migrate(&by_name(&format!("sslmode=verify-ca&sslrootcert={other}")));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("UnknownIssuer"), "{out}");

    // Channel binding: SCRAM-SHA-256-PLUS over TLS, bound to the server's
    // certificate; the driver refuses to go on without it when asked to.
    let (code, out) = migrate(&at("sslmode=require&channel_binding=require"));
    assert_eq!(code, 0, "{out}");

    // A server that asks for a client certificate: refused without one,
    // served with the certificate its CA issued for the user.
    let (client_ca, client_cert, client_key) = issue_client();
    pg.require_client_certs(&client_ca);
    let (code, out) = migrate(&at("sslmode=require"));
    assert_eq!(code, 1, "{out}");
    std::fs::write(certs.path().join("client.crt"), client_cert).expect("write");
    std::fs::write(certs.path().join("client.key"), client_key).expect("write");
    let with_cert = format!(
        "sslmode=verify-full&sslrootcert={ca}&sslcert={}&sslkey={}",
        certs.path().join("client.crt").display(),
        certs.path().join("client.key").display()
    );
    let (code, out) = migrate(&at(&with_cert));
    assert_eq!(code, 0, "{out}");
    let up = Provider::spawn(ProviderApi::Anthropic, Options::default()).await;
    let one = member_at(&up, &at(&with_cert));
    let (_, secret) = create(&one.at, json!({"user": "alice"})).await;
    assert_eq!(ask(&one.at, &secret, "claude-sonnet").await.0, 200);
}
