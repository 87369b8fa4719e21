//! A fleet of real weir processes sharing one Redis (`[cluster]`), for
//! the cluster tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use super::process::{Proc, write_config};
use super::redis::Redis;

pub const TOKEN: &str = "tok-fleet";

/// One weir of the fleet.
pub struct Member {
    pub proc: Proc,
    pub web: SocketAddr,
    pub admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Member {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.web)
    }

    pub async fn metric(&self, name: &str) -> Option<u64> {
        super::metric_at(self.admin, name).await
    }

    /// Lines of its log containing `text`, seen so far.
    pub fn lines(&mut self, text: &str) -> usize {
        self.proc.all_lines(|l| l.contains(text)).len()
    }
}

/// `n` weirs from `config` (`{redis}` and `{dir}` filled in; each has a
/// client token file `{dir}/tokens`), once each counts `n` live instances.
pub async fn fleet(n: usize, redis: &Redis, config: &str) -> Vec<Member> {
    let mut members = Vec::new();
    for _ in 0..n {
        members.push(join(redis, config));
    }
    for m in &members {
        let counted = super::eventually_async(Duration::from_secs(10), || async {
            m.metric("weir_cluster_instances").await == Some(n as u64)
        })
        .await;
        assert!(counted, "an instance did not count {n} live instances");
    }
    members
}

/// One weir more from `config`, once it listens.
pub fn join(redis: &Redis, config: &str) -> Member {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tokens"), format!("{TOKEN}\n")).expect("tokens");
    let text = config
        .replace("{redis}", &redis.url())
        .replace("{dir}", &dir.path().display().to_string());
    let path = write_config(&dir, &text);
    let mut proc = Proc::run(&path);
    let web = proc.listening("web");
    let admin = proc.admin();
    Member {
        proc,
        web,
        admin,
        _dir: dir,
    }
}

/// An Anthropic route `llm` with the client token, over `up`.
pub fn llm_config(up: &str, route: &str, cluster: &str) -> String {
    format!(
        "[log]\nformat = \"json\"\naccess_log = false\n\
         [admin]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nname = \"llm\"\nkind = \"anthropic\"\n\
         client_tokens_file = \"{{dir}}/tokens\"\n{route}\n\
         [[route.upstreams]]\nname = \"up\"\nurl = \"{up}\"\n\
         [cluster]\nurl = \"{{redis}}\"\n{cluster}\n"
    )
}
