//! A real `redis-server` for the cluster tests: started on a free port
//! (plain, or TLS only) with nothing saved to disk, stopped (SIGSTOP:
//! alive but silent), killed and started again on the same port; killed
//! on drop.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server the tests run, as Debian installs it.
pub const REDIS_SERVER: &str = "redis-server";

/// Whether `redis-server` is installed (else the test is skipped, or fails
/// under `WEIR_REQUIRE_REDIS`).
pub fn available() -> bool {
    let found = Command::new(REDIS_SERVER)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    super::can_run(
        found,
        "redis-server is not installed",
        "apt-get install redis-server",
        "WEIR_REQUIRE_REDIS",
    )
}

/// A TLS-only server's certificate (for `localhost`) and key, and the CA
/// file Redis insists on (clients are not asked for certificates).
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    tls: Option<Tls>,
}

impl Redis {
    /// A Redis on a free port, answering PING.
    pub fn start() -> Redis {
        Redis::launch(None)
    }

    /// [`Redis::start`] where `redis-server` is installed; `None` (the
    /// test is skipped) where it is not.
    pub fn start_if_available() -> Option<Redis> {
        available().then(Redis::start)
    }

    /// A Redis on a free port that speaks TLS only, with `tls`'s
    /// certificate; reached as `rediss://localhost:<port>`.
    pub fn start_tls(tls: Tls) -> Redis {
        Redis::launch(Some(tls))
    }

    fn launch(tls: Option<Tls>) -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut r = Redis {
            child: None,
            port,
            dir: tempfile::tempdir().expect("tempdir"),
            tls,
        };
        r.restart();
        r
    }

    pub fn url(&self) -> String {
        match self.tls {
            None => format!("redis://127.0.0.1:{}", self.port),
            Some(_) => format!("rediss://localhost:{}", self.port),
        }
    }

    /// Start it (again) on its port, empty.
    pub fn restart(&mut self) {
        self.kill();
        let port = self.port.to_string();
        let mut command = Command::new(REDIS_SERVER);
        match &self.tls {
            None => command.args(["--port", &port]),
            Some(tls) => command
                .args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port,
                    "--tls-auth-clients",
                    "no",
                ])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca),
        };
        let child = command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.listening() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Answering PING; over TLS (which [`Redis::command`] does not
    /// speak), accepting connections.
    fn listening(&self) -> bool {
        match self.tls {
            None => self.command("PING").as_deref() == Some("+PONG"),
            Some(_) => TcpStream::connect(("127.0.0.1", self.port)).is_ok(),
        }
    }

    /// weir's own cluster API on this Redis (keys under `t:`, `fail_open`,
    /// a 500 ms wait), once it has connected.
    pub async fn cluster(
        &self,
        lease_ttl: Duration,
    ) -> (
        std::sync::Arc<weir::testing::cluster::Cluster>,
        weir::testing::telemetry::Metrics,
    ) {
        let settings = weir::testing::config::ClusterSettings {
            url: self.url(),
            password: None,
            key_prefix: "t:".into(),
            timeout: Duration::from_millis(500),
            on_failure: weir::testing::config::FailureMode::Open,
            lease_ttl,
            ca_file: None,
        };
        let metrics = weir::testing::telemetry::Metrics::new();
        let cluster = weir::testing::cluster::Cluster::start(&settings, metrics.cluster());
        cluster.settled(Duration::from_secs(5)).await;
        assert!(cluster.is_up(), "the cluster API connected to Redis");
        (cluster, metrics)
    }

    /// SIGKILL: gone, connections reset.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: connections stay open and nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`Redis::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        assert!(super::process::signal(pid, sig), "kill {sig}");
    }

    /// One inline command, its first reply line (`None`: no server; a
    /// plain server only).
    pub fn command(&self, command: &str) -> Option<String> {
        self.exchange(command).ok()
    }

    /// [`Redis::command`] with what went wrong when nothing came back.
    fn exchange(&self, command: &str) -> std::io::Result<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        // Generous: two cores running Pebble and several instances can keep
        // a test's own command waiting.
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(format!("{command}\r\n").as_bytes())?;
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf)?;
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        Ok(text.lines().next().unwrap_or("").to_string())
    }

    /// The value of `key` (a string), `None` when it is not set.
    pub fn get(&self, key: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        // Generous: two cores running Pebble and several instances can keep
        // a test's own command waiting.
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        s.write_all(format!("GET {key}\r\n").as_bytes()).ok()?;
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        let mut lines = text.lines();
        lines.next().filter(|l| l.starts_with('$') && *l != "$-1")?;
        lines.next().map(str::to_string)
    }

    /// An integer reply (`ZCARD key`, `EXISTS key`).
    ///
    /// A server that is running answers: a connection refused or a reply
    /// that does not come (a loaded machine; CI saw one once) is tried
    /// again for 30 s before the test fails with what went wrong (a `DEL`
    /// whose first reply was lost then answers `0`, and says so).
    pub fn int(&self, command: &str) -> i64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let reply = loop {
            match self.exchange(command) {
                Ok(reply) => break reply,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("redis {command}: {e}; trying again");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("redis does not answer {command}: {e}"),
            }
        };
        reply
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{command}: {reply}"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A paused server must be woken to die promptly.
            let _ = super::process::signal(child.id(), "-CONT");
        }
        self.kill();
    }
}
