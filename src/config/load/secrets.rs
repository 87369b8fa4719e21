//! Secrets named in the config: read from a file or the environment, never
//! written in it (admin token, upstream API keys, ACME HMAC keys, client
//! tokens).

use super::*;

/// A problem with a secret has been reported.
pub(super) struct Reported;

/// A secret from the environment variable named by `env_key` or from the
/// file named by `file_key` (surrounding whitespace trimmed), never both;
/// `Ok(None)` when neither is set. With the secret comes where it was
/// named, for later problems with its value. `what` names the secret in
/// the fix ("the admin token").
pub(super) fn secret(
    t: &Section<'_, '_>,
    env_key: &'static str,
    file_key: &'static str,
    what: &str,
) -> Result<Option<(Secret, At<String>)>, Reported> {
    match (t.string(env_key), t.string(file_key)) {
        (Some(_), Some(f)) => {
            f.problem(
                t.doc(),
                format!("set `{env_key}` or `{file_key}`, not both"),
                None,
            );
            Err(Reported)
        }
        (Some(var), None) => match std::env::var(&var.value) {
            Ok(s) if !s.trim().is_empty() => Ok(Some((Secret(s.trim().to_string()), var))),
            _ => {
                var.problem(
                    t.doc(),
                    format!("environment variable `{}` is not set or empty", var.value),
                    Some(format!(
                        "export it before starting weir, or use `{file_key}`"
                    )),
                );
                Err(Reported)
            }
        },
        (None, Some(f)) => {
            let path = t.doc().base_dir().join(&f.value);
            match std::fs::read_to_string(&path) {
                Ok(s) if !s.trim().is_empty() => Ok(Some((Secret(s.trim().to_string()), f))),
                Ok(_) => {
                    f.problem(t.doc(), format!("{} is empty", path.display()), None);
                    Err(Reported)
                }
                Err(e) => {
                    f.problem(
                        t.doc(),
                        format!("cannot read {}: {e}", path.display()),
                        Some(format!(
                            "point `{file_key}` at a readable file holding {what}"
                        )),
                    );
                    Err(Reported)
                }
            }
        }
        (None, None) => Ok(None),
    }
}

/// Client tokens from a file (one per line, `#` comments) and/or an
/// environment variable (separated by commas or whitespace).
pub(super) fn client_tokens(t: &Section<'_, '_>) -> Option<Vec<Secret>> {
    let mut tokens = Vec::new();
    let mut ok = true;
    let file = t.string("client_tokens_file");
    let env = t.string("client_tokens_env");
    if let Some(f) = &file {
        let path = t.doc().base_dir().join(&f.value);
        match std::fs::read_to_string(&path) {
            Ok(text) => tokens.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(|l| Secret(l.to_string())),
            ),
            Err(e) => {
                f.problem(
                    t.doc(),
                    format!("cannot read {}: {e}", path.display()),
                    Some("point `client_tokens_file` at a file with one token per line".into()),
                );
                ok = false;
            }
        }
    }
    if let Some(var) = &env {
        match std::env::var(&var.value) {
            Ok(v) => tokens.extend(
                v.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|s| !s.is_empty())
                    .map(|s| Secret(s.to_string())),
            ),
            Err(_) => {
                var.problem(
                    t.doc(),
                    format!("environment variable `{}` is not set", var.value),
                    Some("export it before starting weir".into()),
                );
                ok = false;
            }
        }
    }
    let configured = file.is_some() || env.is_some();
    if ok && configured && tokens.is_empty() {
        t.problem(
            "client_tokens_file",
            "client tokens are configured but none were found: every request would get 401",
            Some("add at least one token".into()),
        );
        ok = false;
    }
    ok.then_some(tokens)
}
