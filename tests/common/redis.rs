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
    /// plain server only). Sent once, never again.
    pub fn command(&self, command: &str) -> Option<String> {
        self.exchange(command).ok()
    }

    /// [`Redis::command`] with what went wrong when nothing came back.
    fn exchange(&self, command: &str) -> Result<String, Lost> {
        let text = self.reply(command, 512)?;
        Ok(text.lines().next().unwrap_or("").to_string())
    }

    /// Send `command` once on a fresh connection and read its reply (up to
    /// `size` bytes). A read interrupted by a signal (EINTR) is read again
    /// on the same connection: the command is never written twice.
    fn reply(&self, command: &str, size: usize) -> Result<String, Lost> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(Lost::NotSent)?;
        // Generous: two cores running Pebble and several instances can keep
        // a test's own command waiting.
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(Lost::NotSent)?;
        // From the first byte on, Redis may have run the command.
        s.write_all(format!("{command}\r\n").as_bytes())
            .map_err(Lost::MaybeRun)?;
        let mut buf = vec![0u8; size];
        let n = loop {
            match s.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.map_err(Lost::MaybeRun)?,
            }
        };
        Ok(String::from_utf8_lossy(&buf[..n]).to_string())
    }

    /// The value of `key` (a string), `None` when it is not set.
    pub fn get(&self, key: &str) -> Option<String> {
        let text = self.reply(&format!("GET {key}"), 4096).ok()?;
        let mut lines = text.lines();
        lines.next().filter(|l| l.starts_with('$') && *l != "$-1")?;
        lines.next().map(str::to_string)
    }

    /// An integer reply (`ZCARD key`, `EXISTS key`, `DEL key`).
    ///
    /// A server that is running answers: a connection refused (nothing
    /// sent) is tried again for 30 s, and so is a lost reply to a command
    /// that only reads ([`reads_only`]). A command that may change data is
    /// never sent twice: a `DEL` whose reply was lost and sent again would
    /// count 0 (the CI failure of commit 1c85bac); the test fails instead,
    /// saying so.
    pub fn int(&self, command: &str) -> i64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let reply = loop {
            match self.exchange(command) {
                Ok(reply) => break reply,
                Err(Lost::MaybeRun(e)) if !reads_only(command) => {
                    panic!("redis {command}: sent, its reply lost ({e}); not sent again")
                }
                Err(Lost::NotSent(e) | Lost::MaybeRun(e)) if Instant::now() < deadline => {
                    eprintln!("redis {command}: {e}; trying again");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(Lost::NotSent(e) | Lost::MaybeRun(e)) => {
                    panic!("redis does not answer {command}: {e}")
                }
            }
        };
        reply
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{command}: {reply}"))
    }
}

/// Why a command has no reply: whether Redis may have run it.
#[derive(Debug)]
enum Lost {
    /// Nothing was written: sending it (again) is safe.
    NotSent(std::io::Error),
    /// Written, at least in part: Redis may have run it.
    MaybeRun(std::io::Error),
}

/// Whether `command` only reads, so sending it twice answers the same.
/// `EVAL` is not: a script may write (the read-only ones can say `EVAL_RO`).
pub fn reads_only(command: &str) -> bool {
    let verb = command.split_whitespace().next().unwrap_or("");
    [
        "EXISTS", "GET", "TTL", "PTTL", "ZCARD", "ZSCORE", "HGET", "HLEN", "HSTRLEN", "STRLEN",
        "SCARD", "LLEN", "DBSIZE", "PING", "EVAL_RO",
    ]
    .iter()
    .any(|v| v.eq_ignore_ascii_case(verb))
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
