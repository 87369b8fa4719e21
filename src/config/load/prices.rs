//! A route's prices per model: `[[route.prices]]` (per million tokens),
//! and a price table imported from a file (`prices_file`, LiteLLM's
//! `model_prices_and_context_window.json`: costs per token), the route's
//! own entries winning.

use std::collections::HashMap;

use super::usage::{MAX_MONEY, per_token};
use super::*;

/// The largest price file read (LiteLLM's is about 1.5 MiB).
const MAX_PRICES_FILE: u64 = 32 * 1024 * 1024;
/// The most models a price file may price.
const MAX_PRICED_MODELS: usize = 100_000;

/// `[[route.prices]]`: per model id (as sent upstream; `"*"` for any
/// other), per million tokens.
pub(super) fn prices(t: &Section<'_, '_>) -> Option<HashMap<String, Price>> {
    let imported = t.string("prices_file").map(|f| imported(t, &f));
    let mut out: Vec<(String, Price)> = Vec::new();
    let mut ok = true;
    for p in t.tables("prices") {
        let model = p.string("model");
        let price = |key| p.number(key, MAX_MONEY).map(per_token);
        let (input, output, cache_read, cache_write) = (
            price("input"),
            price("output"),
            price("cache_read"),
            price("cache_write"),
        );
        let Some(model) = model else {
            p.problem(
                "model",
                "missing",
                Some(
                    "add `model = \"claude-sonnet-4-5\"`, or `\"*\"` for every other model".into(),
                ),
            );
            ok = false;
            continue;
        };
        if out.iter().any(|(m, _)| *m == model.value) {
            model.problem(
                p.doc(),
                format!("model `{}` is priced twice", model.value),
                Some("keep one `[[route.prices]]` entry per model".into()),
            );
            ok = false;
            continue;
        }
        let (Some(input), Some(output)) = (input, output) else {
            for (key, v) in [("input", input), ("output", output)] {
                if v.is_none() && !p.raw_present(key) {
                    p.problem(
                        key,
                        "missing",
                        Some(format!("add `{key} = 3.0` (per million tokens)")),
                    );
                }
            }
            ok = false;
            continue;
        };
        // A provider without prompt caching bills cached tokens as input.
        out.push((
            model.value,
            Price {
                input,
                output,
                cache_read: cache_read.unwrap_or(input),
                cache_write: cache_write.unwrap_or(input),
            },
        ));
    }
    // The route's own entries win over the file's.
    let mut all = match imported {
        Some(Some(file)) => file,
        Some(None) => return None,
        None => HashMap::new(),
    };
    all.extend(out);
    ok.then_some(all)
}

/// The models `prices_file` prices, or `None` after naming its problem.
/// Entries without both `input_cost_per_token` and
/// `output_cost_per_token` (images, embeddings, LiteLLM's `sample_spec`)
/// are skipped; a cost that is not a number from 0 to the largest price
/// is a problem naming the model.
fn imported(t: &Section<'_, '_>, file: &At<String>) -> Option<HashMap<String, Price>> {
    let path = t.doc().dir_at(file.span.start).join(&file.value);
    let fix = "give a JSON object of models, each with `input_cost_per_token` and `output_cost_per_token` (LiteLLM's model_prices_and_context_window.json)";
    let parsed = super::read_bounded(&path, MAX_PRICES_FILE).and_then(|bytes| {
        serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&bytes)
            .map_err(|e| format!("is not a JSON object of models: {e}"))
    });
    let models = match parsed {
        Ok(m) => m,
        Err(e) => {
            file.problem(
                t.doc(),
                format!("{}: {e}", path.display()),
                Some(fix.into()),
            );
            return None;
        }
    };
    if models.len() > MAX_PRICED_MODELS {
        file.problem(
            t.doc(),
            format!(
                "{}: prices {} models, more than {MAX_PRICED_MODELS}",
                path.display(),
                models.len()
            ),
            Some("keep the models this gateway serves".into()),
        );
        return None;
    }
    let mut out = HashMap::with_capacity(models.len());
    let mut bad = Vec::new();
    for (model, entry) in &models {
        // Per token in the file; per million tokens in weir's terms.
        let cost = |key: &str| {
            entry.get(key).map(|v| {
                v.as_f64()
                    .filter(|n| (0.0..=MAX_MONEY / 1e6).contains(n))
                    .map(|n| per_token(n * 1e6))
            })
        };
        let (Some(input), Some(output)) =
            (cost("input_cost_per_token"), cost("output_cost_per_token"))
        else {
            continue;
        };
        let read = cost("cache_read_input_token_cost");
        let write = cost("cache_creation_input_token_cost");
        match (input, output, read.unwrap_or(input), write.unwrap_or(input)) {
            (Some(input), Some(output), Some(cache_read), Some(cache_write)) => {
                out.insert(
                    model.clone(),
                    Price {
                        input,
                        output,
                        cache_read,
                        cache_write,
                    },
                );
            }
            _ => bad.push(model.as_str()),
        }
    }
    if !bad.is_empty() {
        let shown: Vec<&str> = bad.iter().take(5).copied().collect();
        file.problem(
            t.doc(),
            format!(
                "{}: {} model(s) with a cost that is not a number from 0 to {}: {}",
                path.display(),
                bad.len(),
                MAX_MONEY / 1e6,
                shown.join(", ")
            ),
            Some(fix.into()),
        );
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prices of an LLM route whose directory holds `file` as
    /// `prices.json`, with `tables` after the route; or every problem.
    fn priced(file: &str, tables: &str) -> Result<HashMap<String, Price>, Vec<String>> {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("prices.json"), file).expect("file");
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\nprices_file = \"prices.json\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n{tables}"
        );
        match parse(&dir.path().join("w.toml"), &text) {
            Ok(c) => match &c.routes[0].kind {
                RouteKind::Llm(llm) => Ok(llm.prices.clone()),
                _ => Err(vec!["not an LLM route".into()]),
            },
            Err(p) => Err(p.0.iter().map(|p| p.to_string()).collect()),
        }
    }

    #[test]
    fn litellms_price_file_is_imported_and_the_routes_own_entries_win() {
        let file = r#"{
            "sample_spec": {"max_tokens": "set to max_output_tokens", "input_cost_per_token": 0.0},
            "claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                "cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06,
                "litellm_provider": "anthropic", "mode": "chat"},
            "gpt-5": {"input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05},
            "dall-e-3": {"output_cost_per_image": 0.04},
            "text-embedding-3-small": {"input_cost_per_token": 2e-08}
        }"#;
        let prices = priced(
            file,
            "[[route.prices]]\nmodel = \"gpt-5\"\ninput = 1\noutput = 8\n",
        )
        .expect("valid");
        assert_eq!(
            prices.get("claude-sonnet-4-5"),
            Some(&Price {
                input: 3_000_000,
                output: 15_000_000,
                cache_read: 300_000,
                cache_write: 3_750_000
            })
        );
        // The route's own entry, not the file's.
        assert_eq!(prices.get("gpt-5").map(|p| p.input), Some(1_000_000));
        // Without both costs per token: not priced.
        assert_eq!(prices.len(), 2, "{prices:?}");
    }

    #[test]
    fn a_broken_price_file_is_named_with_its_path_and_what_is_wrong() {
        let broken = priced("{\"m\": {", "").expect_err("refused");
        assert!(
            broken[0].contains("prices.json: is not a JSON object of models"),
            "{broken:?}"
        );
        let negative = priced(
            r#"{"a": {"input_cost_per_token": -1, "output_cost_per_token": 1e-6}}"#,
            "",
        )
        .expect_err("refused");
        assert!(
            negative[0].contains("1 model(s) with a cost"),
            "{negative:?}"
        );
        assert!(negative[0].contains(": a"), "{negative:?}");
        let dir = tempfile::tempdir().expect("dir");
        let text = "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\nprices_file = \"missing.json\"\n\
             [[route.upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n";
        let missing = parse(&dir.path().join("w.toml"), text).expect_err("refused");
        assert!(
            missing.to_string().contains("missing.json: cannot be read"),
            "{missing}"
        );
    }
}
