//! The real `weir` binary as a child process: spawn it, read its log lines
//! as they come, find its listeners from them, signal it, wait for it to
//! exit. For the tests of what only a process shows (the command line,
//! signals, systemd, log files, upgrades); everything else runs weir
//! in-process through [`super::Weir`].

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The binary cargo built for these tests.
pub const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A running `weir` process whose stderr and stdout lines are collected;
/// killed on drop.
pub struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every line read so far, in order.
    pub seen: Vec<String>,
}

impl Proc {
    /// `weir` with `args`.
    pub fn spawn(args: &[&str]) -> Proc {
        let mut cmd = Command::new(WEIR);
        cmd.args(args);
        Proc::spawn_command(cmd)
    }

    /// `weir run --config <config>`.
    pub fn run(config: &str) -> Proc {
        Proc::spawn(&["run", "--config", config])
    }

    /// `cmd` (weir itself, or a shell that execs it).
    pub fn spawn_command(mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn weir");
        let (tx, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stderr.take().expect("stderr")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().expect("stdout")),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        Proc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The process id (what a fleet member's instance id holds).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A line matching `pred`: one already seen, or the next to arrive.
    pub fn wait_for(&mut self, pred: impl Fn(&str) -> bool) -> String {
        if let Some(line) = self.seen.iter().find(|l| pred(l)) {
            return line.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no matching line; saw:\n{}", self.seen.join("\n"));
    }

    /// Wait until `n` lines matching `pred` have been seen.
    pub fn wait_for_count(&mut self, n: usize, pred: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.seen.iter().filter(|l| pred(l)).count() < n {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| {
                    panic!("fewer than {n} matching lines:\n{}", self.seen.join("\n"))
                });
            if let Ok(line) = self.lines.recv_timeout(left) {
                self.seen.push(line);
            }
        }
    }

    /// After the process exited: read the lines still in the pipes (until
    /// none comes for 200 ms) and return every line seen matching `pred`.
    pub fn all_lines(&mut self, pred: impl Fn(&str) -> bool) -> Vec<String> {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(line);
        }
        self.seen.iter().filter(|l| pred(l)).cloned().collect()
    }

    /// The address of a listener from its JSON "listening" log line.
    pub fn listening(&mut self, name: &str) -> SocketAddr {
        let line = self.wait_for(|l| {
            l.contains("\"listening\"") && l.contains(&format!("\"listener\":\"{name}\""))
        });
        log_addr(&line)
    }

    /// The admin listener's address from its JSON log line.
    pub fn admin(&mut self) -> SocketAddr {
        let line = self.wait_for(|l| l.contains("\"admin listening\""));
        log_addr(&line)
    }

    /// Send `sig` (`-TERM`, `-HUP`...) to the process.
    pub fn signal(&self, sig: &str) {
        assert!(signal(self.child.id(), sig), "kill {sig} failed");
    }

    /// The exit code, waiting at most `within`.
    pub fn wait_exit(&mut self, within: Duration) -> i32 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "weir did not exit in {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Send `sig` to the process `pid` (one the test did not spawn itself,
/// like the new process of an upgrade); whether `kill` succeeded.
pub fn signal(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// The `addr` of a JSON log line.
pub fn log_addr(line: &str) -> SocketAddr {
    let v: serde_json::Value = serde_json::from_str(line).expect("json log line");
    v["addr"]
        .as_str()
        .expect("addr")
        .parse()
        .expect("socket addr")
}

/// The `pid` of a JSON log line (the upgrade's "the new process is ready").
pub fn log_pid(line: &str) -> u32 {
    let v: serde_json::Value = serde_json::from_str(line).expect("json log line");
    v["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .expect("pid")
}

/// Write `text` as `weir.toml` in `dir`; returns its path.
pub fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

/// Write the admin token file `admin-token` holding `secret` in `dir`.
pub fn token_file(dir: &tempfile::TempDir, secret: &str) -> PathBuf {
    let path = dir.path().join("admin-token");
    std::fs::write(&path, secret).expect("token");
    path
}

/// JSON logs, an admin listener without a token, a listener `web` and a
/// route `demo` to `upstream`.
pub fn run_config(upstream: SocketAddr) -> String {
    format!(
        "[log]\nformat = \"json\"\n[admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"demo\"\nupstream = \"http://{upstream}\"\n"
    )
}

/// A config for the reload and admin tests: JSON logs, an admin API with a
/// token, the demo upstream behind `main`, and a route whose path changes
/// with `variant` (so every reload changes something). `extra` goes in
/// [connections].
pub fn reload_config(upstream: SocketAddr, token: &Path, variant: u32, extra: &str) -> String {
    format!(
        "[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n\
         [connections]\n{extra}\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"main\"\nupstream = \"http://{upstream}\"\n\
         [[route]]\nname = \"v{variant}\"\npath = \"/v{variant}\"\nupstream = \"http://{upstream}/echo\"\n",
        token.display()
    )
}

/// An authenticated admin request: `method` on `path` with `token`.
pub async fn admin_call(
    admin: SocketAddr,
    method: http::Method,
    path: &str,
    token: &str,
) -> (http::StatusCode, String) {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://{admin}{path}"))
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let (status, _, body) =
        super::split(super::h1_client().request(req).await.expect("admin")).await;
    (status, body)
}

/// `POST` to the admin API with `token`.
pub async fn admin_post(admin: SocketAddr, path: &str, token: &str) -> (http::StatusCode, String) {
    admin_call(admin, http::Method::POST, path, token).await
}
