//! A config that scales to a real site, through the real binary: `include`
//! of other files (every problem with the file and line it came from),
//! `${VAR}` environment values, and a reload — by the file watcher and by
//! SIGHUP — that picks up a changed included file.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::process::*;
use common::*;

/// `weir check --config <path>` with `env` added to its environment.
fn check_with(path: &str, env: &[(&str, &str)]) -> Output {
    Command::new(WEIR)
        .args(["check", "--config", path])
        .envs(env.iter().copied())
        .env_remove("WEIR_TEST_UNSET")
        .output()
        .expect("run")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn included_files_make_one_config_in_order_and_empty_globs_are_fine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = write(
        dir.path(),
        "weir.toml",
        "include = [\"conf.d/*.toml\", \"none.d/*.toml\", \"listeners.toml\"]\n\
         [[route]]\nname = \"root\"\nupstream = \"http://127.0.0.1:9\"\n",
    );
    write(
        dir.path(),
        "listeners.toml",
        "[[listener]]\naddress = \"127.0.0.1:0\"\n",
    );
    write(
        dir.path(),
        "conf.d/10-git.toml",
        "include = \"../deep/api.toml\"\n\
         [[route]]\nname = \"git\"\npath = \"/git\"\nupstream = \"http://127.0.0.1:9\"\n",
    );
    write(
        dir.path(),
        "deep/api.toml",
        "[[route]]\nname = \"api\"\npath = \"/api\"\nupstream = \"http://127.0.0.1:9\"\n",
    );
    // Hidden files (an editor's swap file) are not matched by `*`.
    write(dir.path(), "conf.d/.10-git.toml.swp", "not toml at all [[[");
    let out = check_with(&root, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The same route name in two files is one config's duplicate.
    write(
        dir.path(),
        "conf.d/20-dup.toml",
        "[[route]]\nname = \"api\"\npath = \"/api2\"\nupstream = \"http://127.0.0.1:9\"\n",
    );
    let out = check_with(&root, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("conf.d/20-dup.toml:2:8: route[3].name: route name `api` is already used"),
        "{err}"
    );
}

#[test]
fn every_problem_names_the_included_file_and_line_it_is_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = write(
        dir.path(),
        "weir.toml",
        "include = [\"sites/*.toml\", \"missing.toml\", 7]\n\
         [server]\nworkers = 1\n\
         [[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nupstream = \"http://127.0.0.1:9\"\nconect_timeout = \"1s\"\n",
    );
    let a = write(
        dir.path(),
        "sites/a.toml",
        "# site a\n[[route]]\npath = \"/a\"\nupstream = \"ftp://x\"\n",
    );
    let b = write(
        dir.path(),
        "sites/b.toml",
        "[server]\nworkers = 2\n\n[[route]]\npath = \"/b\"\nupstream = \"http://127.0.0.1:9\"\nupstraem = 1\n",
    );
    let out = check_with(&root, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("6 problems in the configuration:"), "{err}");
    let dir_shown = dir.path().display();
    for want in [
        format!("{root}:1:28: include: cannot include `{dir_shown}/missing.toml`: No such file"),
        format!("{root}:1:44: include: expected a file path or a list of them"),
        format!(
            "{root}:8:1: route[0].conect_timeout: unknown key (fix: did you mean `connect_timeout`?)"
        ),
        format!("{a}:4:12: route[1].upstream: `ftp://x` must start with http:// or https://"),
        format!("{b}:1:2: server: `server` is also defined at {root}:2"),
        format!("{b}:7:1: route[2].upstraem: unknown key (fix: did you mean `upstream`?)"),
    ] {
        assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    }
    // In the order of the files: the root's, then a's, then b's.
    let at = |s: &str| err.find(s).expect(s);
    assert!(
        at(&format!("{root}:8:1")) < at(&a) && at(&a) < at(&b),
        "{err}"
    );
}

#[test]
fn a_cycle_and_a_depth_beyond_eight_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = write(
        dir.path(),
        "weir.toml",
        "include = \"a.toml\"\n[[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[route]]\nupstream = \"http://127.0.0.1:9\"\n",
    );
    let a = write(dir.path(), "a.toml", "include = [\"b.toml\"]\n");
    write(dir.path(), "b.toml", "include = [\"weir.toml\"]\n");
    let err = stderr(&check_with(&root, &[]));
    assert!(err.starts_with("1 problem in the configuration:"), "{err}");
    assert!(
        err.contains("include: the includes make a cycle: "),
        "{err}"
    );
    assert!(err.contains("weir.toml → ") && err.contains(&a), "{err}");

    // A chain: c6 is the eighth include down, so its own is one too deep.
    write(dir.path(), "b.toml", "include = [\"c1.toml\"]\n");
    for i in 1..=9 {
        write(
            dir.path(),
            &format!("c{i}.toml"),
            &format!("include = [\"c{}.toml\"]\n", i + 1),
        );
    }
    write(dir.path(), "c10.toml", "");
    let err = stderr(&check_with(&root, &[]));
    assert!(
        err.contains("c6.toml:1:12: include: includes nest deeper than 8 files at"),
        "{err}"
    );
}

#[test]
fn environment_values_are_expanded_in_strings_before_their_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = write(
        dir.path(),
        "weir.toml",
        "include = \"${WEIR_TEST_SITES}/*.toml\"\n\
         [[listener]]\naddress = \"127.0.0.1:${WEIR_TEST_PORT:-0}\"\n",
    );
    write(
        dir.path(),
        "sites/app.toml",
        "[[route]]\nupstream = \"http://${WEIR_TEST_HOST}:9\"\nserver_header = \"$${literal}\"\n",
    );
    let env = [
        ("WEIR_TEST_SITES", "sites"),
        ("WEIR_TEST_HOST", "127.0.0.1"),
    ];
    let out = check_with(&root, &env);
    assert!(out.status.success(), "{}", stderr(&out));

    // Expanded, the value is checked by its key's rules.
    let env = [("WEIR_TEST_SITES", "sites"), ("WEIR_TEST_HOST", "bad host")];
    let err = stderr(&check_with(&root, &env));
    assert!(
        err.contains("route[0].upstream: `http://bad host:9` is not a URL"),
        "{err}"
    );

    // A missing variable without a default is named, with file and line.
    let app = write(
        dir.path(),
        "sites/app.toml",
        "[[route]]\nupstream = \"http://${WEIR_TEST_UNSET}:9\"\n",
    );
    let err = stderr(&check_with(&root, &[("WEIR_TEST_SITES", "sites")]));
    assert!(
        err.contains(&format!(
            "{app}:2:12: route[0].upstream: the environment variable `WEIR_TEST_UNSET` is not set \
             (fix: set `WEIR_TEST_UNSET` in weir's environment, or give a default: `${{WEIR_TEST_UNSET:-value}}`)"
        )),
        "{err}"
    );
    // In an include, too (once).
    let err = stderr(&check_with(&root, &[]));
    assert!(
        err.contains(&format!(
            "{root}:1:11: include: the environment variable `WEIR_TEST_SITES` is not set"
        )),
        "{err}"
    );
    assert_eq!(
        err.matches("WEIR_TEST_SITES` is not set").count(),
        1,
        "{err}"
    );
}

/// The route the included file `routes/app.toml` holds, at `path`.
fn app_route(up: std::net::SocketAddr, path: &str) -> String {
    format!(
        "[[route]]\nname = \"app\"\npath = \"{path}\"\nstrip_prefix = true\nupstream = \"http://{up}\"\n"
    )
}

/// Replace a file the way editors do: a new file renamed over the old one.
fn replace_file(path: &str, text: &str) {
    let tmp = format!("{path}.new");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

async fn status(addr: std::net::SocketAddr, path: &str) -> u16 {
    get(&h1_client(), &format!("http://{addr}{path}"))
        .await
        .0
        .as_u16()
}

#[tokio::test]
async fn a_changed_included_file_is_reloaded_by_the_watcher_and_by_sighup() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = write(
        dir.path(),
        "weir.toml",
        "include = [\"routes/*.toml\"]\n[log]\nformat = \"json\"\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n",
    );
    let app = write(dir.path(), "routes/app.toml", &app_route(up, "/one"));
    let mut weir = Proc::run(&root);
    let addr = weir.listening("web");
    assert_eq!(status(addr, "/one/echo").await, 200);
    assert_eq!(status(addr, "/two/echo").await, 404);

    // The watcher: only the included file changes.
    replace_file(&app, &app_route(up, "/two"));
    weir.wait_for(|l| l.contains("config reloaded") && l.contains("\"watcher\""));
    assert_eq!(status(addr, "/two/echo").await, 200);
    assert_eq!(status(addr, "/one/echo").await, 404);

    // A file new in a watched glob's directory is seen too.
    write(
        dir.path(),
        "routes/other.toml",
        &format!(
            "[[route]]\nname = \"other\"\npath = \"/other\"\nstrip_prefix = true\nupstream = \"http://{up}\"\n"
        ),
    );
    weir.wait_for_count(2, |l| {
        l.contains("config reloaded") && l.contains("\"watcher\"")
    });
    assert_eq!(status(addr, "/other/echo").await, 200);
}

#[tokio::test]
async fn sighup_rereads_the_included_files_and_a_broken_one_says_where() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // No watcher: only the signal can reload.
    let root = write(
        dir.path(),
        "weir.toml",
        "include = [\"routes/*.toml\"]\n[log]\nformat = \"json\"\n\
         [server]\nwatch_config = false\n\
         [[listener]]\nname = \"web\"\naddress = \"127.0.0.1:0\"\n",
    );
    let app = write(dir.path(), "routes/app.toml", &app_route(up, "/one"));
    let mut weir = Proc::run(&root);
    let addr = weir.listening("web");
    assert_eq!(status(addr, "/one/echo").await, 200);
    std::fs::write(&app, app_route(up, "/three")).expect("write");
    weir.signal("-HUP");
    weir.wait_for(|l| l.contains("config reloaded") && l.contains("\"signal\""));
    assert_eq!(status(addr, "/three/echo").await, 200);
    assert_eq!(status(addr, "/one/echo").await, 404);

    // A broken included file keeps the running config and says where.
    std::fs::write(&app, "[[route]]\nname = \"app\"\nupstream = 5\n").expect("write");
    weir.signal("-HUP");
    let line = weir.wait_for(|l| l.contains("config reload failed"));
    assert!(
        line.contains("routes/app.toml:3:12: route[0].upstream"),
        "{line}"
    );
    assert_eq!(status(addr, "/three/echo").await, 200);
}

#[test]
fn an_unknown_key_from_nginx_or_caddy_points_at_weirs_name_and_lists_only_its_kinds_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = write(
        dir.path(),
        "weir.toml",
        "worker_processes = 4\n\
         [[listener]]\naddress = \"127.0.0.1:0\"\nserver_name = \"example.com\"\n\
         [[route]]\nupstream = \"http://127.0.0.1:9\"\ngzip = true\nproxy_pass = \"http://x\"\ncolour = 1\n\
         [[route]]\npath = \"/v1\"\nkind = \"anthropic\"\ncolour = 1\n\
         [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:9\"\n",
    );
    let err = stderr(&check_with(&root, &[]));
    for want in [
        format!(
            "{root}:1:1: worker_processes: unknown key (fix: `worker_processes` is nginx's or Caddy's; weir's equivalent is `[server] workers`)"
        ),
        format!(
            "{root}:4:1: listener[0].server_name: unknown key (fix: `server_name` is nginx's or Caddy's; weir's equivalent is a route's `host = "
        ),
        format!(
            "{root}:7:1: route[0].gzip: unknown key (fix: `gzip` is nginx's or Caddy's; weir's equivalent is a route's `[route.compress]` table)"
        ),
        format!(
            "{root}:8:1: route[0].proxy_pass: unknown key (fix: `proxy_pass` is nginx's or Caddy's; weir's equivalent is a proxy route's `upstream"
        ),
    ] {
        assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    }
    // The keys listed are those of the route's kind only.
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(".colour: unknown key"))
        .collect();
    assert_eq!(lines.len(), 2, "{err}");
    let (proxy, llm) = (lines[0], lines[1]);
    assert!(
        proxy.contains("route[0].colour") && proxy.contains(" preserve_host,"),
        "{proxy}"
    );
    for llm_only in ["models", "failover_on", "sse_keepalive"] {
        assert!(
            !proxy.contains(&format!(" {llm_only},")),
            "{llm_only} listed for a proxy route: {proxy}"
        );
        assert!(
            llm.contains(&format!(" {llm_only}")),
            "{llm_only} not listed for an LLM route: {llm}"
        );
    }
    for proxy_only in ["preserve_host", "upstream,", "raw_path"] {
        assert!(
            !llm.contains(&format!(" {proxy_only}")),
            "{proxy_only} listed for an LLM route: {llm}"
        );
    }
}
