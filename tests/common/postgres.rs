//! A real PostgreSQL (Debian's `postgresql-15`) for the database tests: a
//! cluster made with `initdb` in a temporary directory, the server on a
//! free port (password authentication, as a deployment has it), crashed
//! (SIGQUIT: PostgreSQL's immediate shutdown, every connection cut) and
//! started again on the same port and data; stopped on drop.
//!
//! PostgreSQL refuses to run as root: as root (CI), `initdb` and the
//! server run as `nobody` through `setpriv`, which execs (no process in
//! between to outlive a signal).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs the server's programs.
pub const BIN: &str = "/usr/lib/postgresql/15/bin";
/// The password of the cluster's superuser `weir`.
pub const PASSWORD: &str = "pg-s3cret";

/// Whether PostgreSQL is installed (else the test is skipped, or fails
/// under `WEIR_REQUIRE_POSTGRES`).
pub fn available() -> bool {
    super::can_run(
        Path::new(BIN).join("initdb").exists() && Path::new(BIN).join("postgres").exists(),
        "PostgreSQL 15 is not installed",
        "apt-get install postgresql",
        "WEIR_REQUIRE_POSTGRES",
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` from [`BIN`], as `nobody` when this is root.
fn command(program: &str) -> Command {
    let path = Path::new(BIN).join(program);
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(path);
        c
    } else {
        Command::new(path)
    }
}

pub struct Postgres {
    child: Option<Child>,
    pub port: u16,
    /// The cluster's directory (writable by the server's user).
    home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Postgres {
    /// A new cluster, its server started and accepting connections.
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("pg");
        std::fs::create_dir(&home).expect("mkdir");
        // The server's user (`nobody` under root) writes here.
        for d in [dir.path(), home.as_path()] {
            let mode = std::os::unix::fs::PermissionsExt::from_mode(0o777);
            std::fs::set_permissions(d, mode).expect("chmod");
        }
        let pwfile = home.join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("pwfile");
        let out = command("initdb")
            .arg("-D")
            .arg(home.join("data"))
            .args([
                "-U",
                "weir",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .expect("initdb");
        assert!(
            out.status.success(),
            "initdb: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut pg = Postgres {
            child: None,
            port,
            home,
            _dir: dir,
        };
        pg.restart();
        pg
    }

    /// [`Postgres::start`] where PostgreSQL is installed; `None` (the test
    /// is skipped) where it is not.
    pub fn start_if_available() -> Option<Postgres> {
        available().then(Postgres::start)
    }

    /// The URL weir is given.
    pub fn url(&self) -> String {
        format!(
            "postgres://weir:{PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// Start the server (again) on its port and data, once it accepts
    /// connections.
    pub fn restart(&mut self) {
        self.crash();
        let child = command("postgres")
            .arg("-D")
            .arg(self.home.join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.home)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=50",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn postgres");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.ready() {
            assert!(Instant::now() < deadline, "postgres did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn ready(&self) -> bool {
        Command::new(Path::new(BIN).join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// SIGQUIT, PostgreSQL's immediate shutdown (as a crash: no checkpoint,
    /// every connection cut), and wait until it is gone.
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = super::process::signal(child.id(), "-QUIT");
            let _ = child.wait();
        }
    }

    /// Serve TLS with `cert_pem` and `key_pem` (`ssl = on`), and when
    /// `only` refuse connections without it (`hostssl` for every TCP
    /// entry of pg_hba.conf); restarted. The key is the server's user's
    /// and mode 0600, as PostgreSQL demands.
    pub fn serve_tls(&mut self, cert_pem: &str, key_pem: &str, only: bool) {
        let (cert, key) = (self.home.join("server.crt"), self.home.join("server.key"));
        std::fs::write(&cert, cert_pem).expect("write cert");
        std::fs::write(&key, key_pem).expect("write key");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&key, mode).expect("chmod");
        if is_root() {
            let status = Command::new("chown")
                .args(["nobody:nogroup"])
                .arg(&key)
                .status()
                .expect("chown");
            assert!(status.success(), "chown the key");
        }
        let data = self.home.join("data");
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str(&format!(
            "\nssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
            cert.display(),
            key.display()
        ));
        std::fs::write(&conf, text).expect("postgresql.conf");
        if only {
            let hba = data.join("pg_hba.conf");
            let text = std::fs::read_to_string(&hba).expect("pg_hba.conf");
            let text: String = text
                .lines()
                .map(|l| match l.strip_prefix("host ") {
                    Some(rest) => format!("hostssl {rest}\n"),
                    None => format!("{l}\n"),
                })
                .collect();
            std::fs::write(&hba, text).expect("pg_hba.conf");
        }
        self.restart();
    }

    /// Ask TLS clients for a certificate issued by `ca_pem` whose common
    /// name is the user (`clientcert=verify-full` on every `hostssl`
    /// entry, beside the password); restarted. Call after [`Self::serve_tls`]
    /// with `only`.
    pub fn require_client_certs(&mut self, ca_pem: &str) {
        let ca = self.home.join("client-ca.crt");
        std::fs::write(&ca, ca_pem).expect("write client ca");
        let data = self.home.join("data");
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str(&format!("\nssl_ca_file = '{}'\n", ca.display()));
        std::fs::write(&conf, text).expect("postgresql.conf");
        let hba = data.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).expect("pg_hba.conf");
        let text: String = text
            .lines()
            .map(|l| match l.starts_with("hostssl ") {
                true => format!("{l} clientcert=verify-full\n"),
                false => format!("{l}\n"),
            })
            .collect();
        std::fs::write(&hba, text).expect("pg_hba.conf");
        self.restart();
    }

    /// A client connection for the test's own queries.
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to postgres");
        tokio::spawn(connection);
        client
    }

    /// One number a query answers (`SELECT COUNT(*) …`).
    pub async fn count(&self, sql: &str) -> i64 {
        self.client()
            .await
            .query_one(sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .get(0)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.crash();
    }
}
