//! The real binary's commands that start nothing: `--version`, `check`
//! (every problem with its position and a fix) and `run` refusing an
//! invalid config, and the shipped example config checking clean.

mod common;

use std::process::{Command, Output};

use common::process::*;
use common::*;

/// `weir check --config <path>`.
fn check(path: &str) -> Output {
    Command::new(WEIR)
        .args(["check", "--config", path])
        .output()
        .expect("run")
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn version_is_printed() {
    let out = Command::new(WEIR).arg("--version").output().expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("weir {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn check_accepts_a_valid_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(
        &dir,
        "[[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://127.0.0.1:9\"\n",
    );
    let out = check(&path);
    assert_success(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "config ok\n");
}

#[test]
fn check_lists_every_problem_with_position_and_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(
        &dir,
        "[[listener]]\naddress = \"127.0.0.1:0\"\nadress = \"x\"\n\
         [[route]]\nupstream = \"127.0.0.1:9\"\nresponse_timeout = 5\n",
    );
    let out = check(&path);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("3 problems in the configuration:"), "{err}");
    assert!(
        err.contains(&format!(
            "{path}:3:1: listener[0].adress: unknown key (fix: did you mean `address`?)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{path}:5:12: route[0].upstream:")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{path}:6:20: route[0].response_timeout: expected a duration string, found integer"
        )),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn check_reports_an_unreadable_file() {
    let out = check("/nonexistent/weir.toml");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("/nonexistent/weir.toml: cannot read the file")
    );
}

#[test]
fn run_refuses_an_invalid_config_without_starting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_config(&dir, "[[listener]]\naddress = \"127.0.0.1:0\"\n");
    let out = Command::new(WEIR)
        .args(["run", "--config", &path])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no route is configured"));
}

#[test]
fn shipped_example_config_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    for stem in ["example.com", "git.example.com"] {
        write_cert(dir.path(), stem, &[stem]);
    }
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/weir.toml"))
            .expect("example");
    let text = example.replace("/etc/weir/certs", &dir.path().display().to_string());
    let path = write_config(&dir, &text);
    let out = check(&path);
    assert_success(&out);
}

#[test]
fn check_warns_of_secret_files_others_can_read_and_of_unkeyed_token_names() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret");
    std::fs::write(dir.path().join("tokens"), "tok-a\n").expect("tokens");
    std::fs::write(dir.path().join("id-key"), "a deployment key\n").expect("key");
    let chmod = |name: &str, mode: u32| {
        std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(mode))
            .expect("chmod")
    };
    chmod("admin-token", 0o644);
    chmod("tokens", 0o640);
    chmod("id-key", 0o600);
    let config = |server: &str| {
        format!(
            "[server]\n{server}\n[admin]\naddress = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n\
             [[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\nclient_tokens_file = \"tokens\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:9\"\n",
            token.display()
        )
    };
    let path = write_config(&dir, &config(""));
    let out = check(&path);
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("admin-token: holds a secret and is readable by everyone (mode 0644)")
            && err.contains("chmod 600"),
        "{err}"
    );
    assert!(
        err.contains("tokens: holds a secret and is readable by its group"),
        "{err}"
    );
    assert!(err.contains("server.token_id_key_file"), "{err}");

    // Fixed: no warning at all.
    chmod("admin-token", 0o600);
    chmod("tokens", 0o600);
    let path = write_config(&dir, &config("token_id_key_file = \"id-key\""));
    let out = check(&path);
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("warning"), "{err}");
}
