//! The real `weir` binary as a child process: its log lines collected,
//! signals sent to it, its exit awaited.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A running `weir` process whose stderr (or stdout) lines are collected.
pub struct Proc {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Proc {
    pub fn spawn(args: &[&str]) -> Proc {
        let mut cmd = Command::new(WEIR);
        cmd.args(args);
        Proc::spawn_command(cmd)
    }

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

    /// The address of a listener from its JSON "listening" log line.
    pub fn listening(&mut self, name: &str) -> SocketAddr {
        let line = self.wait_for(|l| {
            l.contains("\"listening\"") && l.contains(&format!("\"listener\":\"{name}\""))
        });
        Self::addr_of(&line)
    }

    /// The admin listener's address from its JSON log line.
    pub fn admin(&mut self) -> SocketAddr {
        let line = self.wait_for(|l| l.contains("\"admin listening\""));
        Self::addr_of(&line)
    }

    pub fn addr_of(line: &str) -> SocketAddr {
        let v: serde_json::Value = serde_json::from_str(line).expect("json log line");
        v["addr"]
            .as_str()
            .expect("addr")
            .parse()
            .expect("socket addr")
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok);
    }

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

pub fn write_config(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}
