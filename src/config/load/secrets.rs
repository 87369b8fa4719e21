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
    env_key: impl KeyName,
    file_key: impl KeyName,
    what: &str,
) -> Result<Option<(Secret, At<String>)>, Reported> {
    let (env_key, file_key) = (env_key.key_name(), file_key.key_name());
    match (t.string(env_key), t.string(file_key)) {
        (Some(_), Some(f)) => {
            f.problem(
                t.doc(),
                format!("set `{env_key}` or `{file_key}`, not both"),
                None,
            );
            Err(Reported)
        }
        (Some(var), None) => {
            let fix = format!("export it before starting weir, or use `{file_key}`");
            from_env(t.doc(), &var, fix).map(|s| Some((s, var)))
        }
        (None, Some(f)) => {
            let fix = format!("point `{file_key}` at a readable file holding {what}");
            from_file(t.doc(), &f, fix).map(|s| Some((s, f)))
        }
        (None, None) => Ok(None),
    }
}

/// The secret in the environment variable `var` names.
fn from_env(doc: &Doc<'_>, var: &At<String>, fix: String) -> Result<Secret, Reported> {
    match std::env::var(&var.value) {
        Ok(s) if !s.trim().is_empty() => Ok(Secret(s.trim().to_string())),
        _ => {
            var.problem(
                doc,
                format!("environment variable `{}` is not set or empty", var.value),
                Some(fix),
            );
            Err(Reported)
        }
    }
}

/// Warn when a file holding a secret (a key, a token) can be read by its
/// group or by everyone: OpenSSH refuses such a key; weir loads it, and
/// says so at start, at reload and in `weir check`.
pub(super) fn warn_if_readable_by_others(doc: &Doc<'_>, path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o044 != 0 {
        doc.warn(format!(
            "{}: holds a secret and is readable by {} (mode {mode:04o}); fix: chmod 600 {0}",
            path.display(),
            if mode & 0o004 != 0 {
                "everyone"
            } else {
                "its group"
            },
        ));
    }
}

/// The secret in the file `f` names (relative to the config's directory).
fn from_file(doc: &Doc<'_>, f: &At<String>, fix: String) -> Result<Secret, Reported> {
    let path = doc.dir_at(f.span.start).join(&f.value);
    warn_if_readable_by_others(doc, &path);
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(Secret(s.trim().to_string())),
        Ok(_) => {
            f.problem(doc, format!("{} is empty", path.display()), None);
            Err(Reported)
        }
        Err(e) => {
            f.problem(
                doc,
                format!("cannot read {}: {e}", path.display()),
                Some(fix),
            );
            Err(Reported)
        }
    }
}

/// An LLM upstream's `keys`: each `"env:NAME"` or `"file:PATH"`, read as
/// `api_key_env` and `api_key_file` are; none empty or listed twice (by
/// where it is read from, or by its value: the same key twice would be
/// counted as two and rate limited as one).
pub(super) fn key_list(
    t: &Section<'_, '_>,
    items: Vec<At<String>>,
) -> Result<Vec<ApiKey>, Reported> {
    let mut keys: Vec<ApiKey> = Vec::new();
    let mut ok = true;
    let fix = "write each key as \"env:VARIABLE\" or \"file:path/to/key\"";
    if items.is_empty() {
        t.problem(
            "keys",
            "an empty list of keys",
            Some(format!(
                "{fix}, or remove `keys` to pass the client's own key through"
            )),
        );
        return Err(Reported);
    }
    for item in items {
        let read = match item.value.split_once(':') {
            Some(("env", name)) if !name.trim().is_empty() => {
                let var = At {
                    value: name.trim().to_string(),
                    ..item.clone()
                };
                from_env(t.doc(), &var, "export it before starting weir".into())
            }
            Some(("file", path)) if !path.trim().is_empty() => {
                let f = At {
                    value: path.trim().to_string(),
                    ..item.clone()
                };
                from_file(
                    t.doc(),
                    &f,
                    "point it at a readable file holding the API key".into(),
                )
            }
            _ => {
                item.problem(
                    t.doc(),
                    format!("`{}` does not say where the key is", item.value),
                    Some(fix.into()),
                );
                Err(Reported)
            }
        };
        let Ok(secret) = read else {
            ok = false;
            continue;
        };
        let twice = keys
            .iter()
            .find(|k| k.source == item.value || k.credential == Credential::Key(secret.clone()));
        if let Some(earlier) = twice {
            item.problem(
                t.doc(),
                format!("the same key as `{}` earlier in the list", earlier.source),
                Some("list each key once".into()),
            );
            ok = false;
            continue;
        }
        keys.push(ApiKey {
            credential: Credential::Key(secret),
            source: item.value,
        });
    }
    if ok { Ok(keys) } else { Err(Reported) }
}

/// Client tokens from a file (one per line, `#` comments) and/or an
/// environment variable (separated by commas or whitespace).
pub(super) fn client_tokens(t: &Section<'_, '_>) -> Option<Vec<Secret>> {
    let mut tokens = Vec::new();
    let mut ok = true;
    let file = t.string("client_tokens_file");
    let env = t.string("client_tokens_env");
    if let Some(f) = &file {
        let path = t.doc().dir_at(f.span.start).join(&f.value);
        warn_if_readable_by_others(t.doc(), &path);
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

/// The one credential of an upstream whose token weir gets itself (Entra
/// ID, Google): `source` names it. An API key or `keys` beside it is a
/// problem, `refused` and `fix(key)` say why and what to do.
pub(super) fn token_only(
    u: &Section<'_, '_>,
    refused: &str,
    fix: impl Fn(&str) -> String,
    source: &'static str,
) -> Option<Vec<ApiKey>> {
    let mut ok = true;
    for key in ["api_key_env", "api_key_file", "keys"] {
        if u.raw_present(key) {
            u.problem(key, refused, Some(fix(key)));
            ok = false;
        }
    }
    ok.then(|| {
        vec![ApiKey {
            credential: Credential::Refreshed,
            source: source.into(),
        }]
    })
}
