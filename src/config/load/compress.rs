//! `[route.compress]`: a proxy route's response compression. The table
//! present (even empty, `compress = {}`) turns it on with the defaults;
//! `enabled = false` keeps the settings and turns it off.

use std::sync::Arc;

use super::*;
use crate::config::compress_default as default;

/// The route's compression, if it has a `compress` table that is
/// enabled; `Err(())` when the table has a problem (reported).
pub(super) fn compress(t: &Section<'_, '_>) -> Result<Option<Arc<Compression>>, ()> {
    let Some(c) = t.table("compress") else {
        return Ok(None);
    };
    let enabled = c.bool("enabled").unwrap_or(true);
    let algorithms = algorithms(&c);
    let types = types(&c);
    let min_size = c.size_in("min_size", MAX_SIZE).unwrap_or(default::MIN_SIZE);
    let level = |key: &'static str, range: RangeInclusive<u64>, fallback: u32| {
        if !c.raw_present(key) {
            return Some(fallback);
        }
        let n = c.uint_in(key, *range.end())?;
        if n < *range.start() {
            c.problem(
                key,
                format!("{n} is below the lowest level"),
                Some(format!(
                    "use a level from {} to {}",
                    range.start(),
                    range.end()
                )),
            );
            return None;
        }
        u32::try_from(n).ok()
    };
    let gzip = level("gzip_level", default::GZIP_LEVELS, default::GZIP_LEVEL);
    let brotli = level(
        "brotli_level",
        default::BROTLI_LEVELS,
        default::BROTLI_LEVEL,
    );
    let zstd = level("zstd_level", default::ZSTD_LEVELS, default::ZSTD_LEVEL);
    let (Some(algorithms), Some(types), Some(gzip), Some(brotli), Some(zstd)) =
        (algorithms, types, gzip, brotli, zstd)
    else {
        return Err(());
    };
    Ok(enabled.then(|| {
        Arc::new(Compression {
            algorithms,
            types,
            min_size,
            levels: Levels { gzip, brotli, zstd },
        })
    }))
}

/// `algorithms`: codings in the server's order of preference, each once.
fn algorithms(c: &Section<'_, '_>) -> Option<Vec<Coding>> {
    let Some(list) = c.string_list("algorithms") else {
        return Some(
            default::ALGORITHMS
                .iter()
                .filter_map(|t| Coding::from_token(t))
                .collect(),
        );
    };
    let mut out = Vec::with_capacity(list.len());
    let mut ok = true;
    for a in &list {
        match Coding::from_token(&a.value) {
            Some(coding) if out.contains(&coding) => {
                a.problem(
                    c.doc(),
                    format!("`{}` is listed twice", a.value),
                    Some("list each algorithm once, most preferred first".into()),
                );
                ok = false;
            }
            Some(coding) => out.push(coding),
            None => {
                a.problem(
                    c.doc(),
                    format!("`{}` is not a compression algorithm weir has", a.value),
                    Some("use \"br\", \"zstd\" or \"gzip\"".into()),
                );
                ok = false;
            }
        }
    }
    if ok && out.is_empty() {
        c.problem(
            "algorithms",
            "no algorithm is listed",
            Some(
                "list at least one of \"br\", \"zstd\", \"gzip\", or set `enabled = false`".into(),
            ),
        );
        ok = false;
    }
    ok.then_some(out)
}

/// `types`: the media types compressed. An event stream is never
/// compressed (its events must reach the client as they come), so
/// naming it is a mistake worth saying.
fn types(c: &Section<'_, '_>) -> Option<Vec<TypePattern>> {
    let Some(list) = c.string_list("types") else {
        return Some(
            default::TYPES
                .iter()
                .filter_map(|t| TypePattern::parse(t))
                .collect(),
        );
    };
    let mut out = Vec::with_capacity(list.len());
    let mut ok = true;
    for t in &list {
        if t.value.trim().eq_ignore_ascii_case("text/event-stream") {
            t.problem(
                c.doc(),
                "event streams are never compressed: each event must reach the client when it is sent",
                Some("remove it; `text/*` already leaves event streams alone".into()),
            );
            ok = false;
            continue;
        }
        match TypePattern::parse(&t.value) {
            Some(p) => out.push(p),
            None => {
                t.problem(
                    c.doc(),
                    format!("`{}` is not a media type pattern", t.value),
                    Some(
                        "write \"type/subtype\", \"type/*\" or \"*/*+suffix\", like \"text/*\" or \"*/*+json\""
                            .into(),
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, problems};
    use super::*;

    #[test]
    fn an_empty_table_compresses_with_the_defaults_and_enabled_false_does_not() {
        let c = parse(Path::new("w.toml"), &format!("{MINIMAL}compress = {{}}\n")).expect("valid");
        let on = c.routes[0].compress.as_ref().expect("on");
        assert_eq!(on.algorithms, [Coding::Brotli, Coding::Zstd, Coding::Gzip]);
        assert_eq!(on.min_size, 256);
        assert_eq!(
            on.levels,
            Levels {
                gzip: 6,
                brotli: 4,
                zstd: 3
            }
        );
        assert!(on.types.iter().any(|t| t.matches("application/ld+json")));
        let off = parse(
            Path::new("w.toml"),
            &format!("{MINIMAL}compress = {{ enabled = false, gzip_level = 1 }}\n"),
        )
        .expect("valid");
        assert!(off.routes[0].compress.is_none());
        let none = parse(Path::new("w.toml"), MINIMAL).expect("valid");
        assert!(none.routes[0].compress.is_none());
    }

    #[test]
    fn every_problem_of_the_table_is_reported_at_once() {
        let p = problems(&format!(
            "{MINIMAL}[route.compress]\nalgorithms = [\"gzip\", \"deflate\", \"gzip\"]\n\
             types = [\"text/event-stream\", \"html\"]\ngzip_level = 0\nbrotli_level = 12\nlevel = 3\n"
        ));
        let joined = p.join("\n");
        for want in [
            "route[0].compress.algorithms[1]: `deflate` is not a compression algorithm weir has",
            "route[0].compress.algorithms[2]: `gzip` is listed twice",
            "route[0].compress.types[0]: event streams are never compressed",
            "route[0].compress.types[1]: `html` is not a media type pattern",
            "route[0].compress.gzip_level: 0 is below the lowest level (fix: use a level from 1 to 9)",
            "route[0].compress.brotli_level: 12 is out of range",
            "route[0].compress.level: unknown key",
        ] {
            assert!(joined.contains(want), "missing {want:?} in\n{joined}");
        }
        assert_eq!(p.len(), 7, "{joined}");
    }

    #[test]
    fn compress_is_a_proxy_route_key() {
        let p = problems(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\
             [[route]]\nkind = \"anthropic\"\ncompress = {}\n\
             [[route.upstreams]]\nname = \"one\"\nurl = \"http://127.0.0.1:1\"\n",
        );
        assert!(
            p.iter()
                .any(|l| l
                    .contains("route[0].compress: `compress` does not apply to anthropic routes")),
            "{p:#?}"
        );
    }
}
