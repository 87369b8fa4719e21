//! `weir reload` against the real binary: it asks the running weir (its
//! admin API, found from the config or `--admin`), waits, and prints the
//! new generation (exit 0) or every problem of the refused config (exit 1).

mod common;

use std::process::{Command, Output};

use common::process::*;
use common::*;

fn weir_reload(args: &[&str]) -> Output {
    Command::new(WEIR)
        .arg("reload")
        .args(args)
        .output()
        .expect("run weir reload")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// A port nothing listens on now (for an admin address the config names).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[tokio::test]
async fn reload_reports_the_new_generation_or_every_problem() {
    let up = demo_upstream().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret\n");
    let port = free_port();
    let config = |variant: u32| {
        reload_config(up, &token, variant, "[server]\nwatch_config = false").replace(
            "address = \"127.0.0.1:0\"\ntoken_file",
            &format!("address = \"127.0.0.1:{port}\"\ntoken_file"),
        )
    };
    let path = write_config(&dir, &config(0));
    let mut weir = Proc::run(&path);
    let addr = weir.listening("web");
    weir.admin();

    // The admin address and token come from the config.
    std::fs::write(&path, config(1)).expect("write");
    let out = weir_reload(&["--config", &path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "reloaded: generation 2\n");
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v1")).await;
    assert_eq!(
        status, 200,
        "the new route is served once the command returns"
    );

    // A refused config: exit 1, every problem with its place, and the
    // running config stays. The command's own reading of the config
    // fails as well, so the admin API is named by the flags.
    std::fs::write(
        &path,
        format!("{}colour = 1\n[[route]]\nupstream = 7\n", config(2)),
    )
    .expect("write");
    let admin = format!("127.0.0.1:{port}");
    let token_path = token.display().to_string();
    let out = weir_reload(&[
        "--config",
        &path,
        "--admin",
        &admin,
        "--token-file",
        &token_path,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("reload refused; the running config stays:"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{path}:")) && err.contains("colour: unknown key"),
        "{err}"
    );
    assert!(err.contains("upstream: expected a string"), "{err}");
    assert!(out.stdout.is_empty());
    let (status, _, _) = get(&h1_client(), &format!("http://{addr}/v1")).await;
    assert_eq!(status, 200);

    // Without the flags the command cannot read the broken config itself.
    let err = text(&weir_reload(&["--config", &path]).stderr);
    assert!(err.contains("pass --admin and --token-file"), "{err}");

    // A wrong token is named as such.
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "nope").expect("write");
    let out = weir_reload(&[
        "--config",
        &path,
        "--admin",
        &admin,
        "--token-file",
        &wrong.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("refused the token"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn reload_without_a_running_weir_says_it_could_not_ask() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(&dir, "s3cret\n");
    let port = free_port();
    let path = write_config(
        &dir,
        &format!(
            "[admin]\naddress = \"127.0.0.1:{port}\"\ntoken_file = \"{}\"\n\
             [[listener]]\naddress = \"127.0.0.1:0\"\n[[route]]\nupstream = \"http://127.0.0.1:9\"\n",
            token.display()
        ),
    );
    let out = weir_reload(&["--config", &path]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("weir reload: the admin API at 127.0.0.1:{port}:")),
        "{err}"
    );
}
