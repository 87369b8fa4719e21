use super::*;

const DAY: Duration = Duration::from_secs(86_400);
const UP_TO_A_DAY: RangeInclusive<Duration> = Duration::ZERO..=DAY;

fn read<F: FnOnce(&Section<'_, '_>)>(text: &str, f: F) -> Vec<Problem> {
    let doc = Doc::new(Path::new("t.toml"), text);
    if let Some(t) = parse(&doc, text) {
        let s = Section::new(&doc, t.get_ref(), "", t.span());
        f(&s);
    }
    doc.into_problems()
}

#[test]
fn keys_not_asked_for_are_reported_with_position_and_suggestion() {
    let p = read("a = 1\nconect_timeout = \"1s\"\n", |s| {
        s.uint_in("a", 10);
        s.duration_in("connect_timeout", UP_TO_A_DAY);
    });
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].position, Some((2, 1)));
    assert_eq!(p[0].key, "conect_timeout");
    assert_eq!(p[0].message, "unknown key");
    assert_eq!(p[0].fix.as_deref(), Some("did you mean `connect_timeout`?"));
}

#[test]
fn a_misspelled_getter_does_not_accept_the_key_it_never_reads() {
    let p = read("connect_timeout = \"1s\"\n", |s| {
        assert_eq!(s.duration_in("conect_timeout", UP_TO_A_DAY), None);
    });
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].key, "connect_timeout");
    assert_eq!(p[0].fix.as_deref(), Some("did you mean `conect_timeout`?"));
}

#[test]
fn unknown_keys_of_nested_tables_are_reported_and_known_keys_listed() {
    let p = read("[t]\nx = 1\nzzz = 2\n", |s| {
        if let Some(t) = s.table("t") {
            t.uint_in("x", 10);
            t.uint_in("y", 10);
        }
    });
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].key, "t.zzz");
    assert_eq!(p[0].fix.as_deref(), Some("known keys here: x, y"));
}

#[test]
fn keys_read_are_recorded_per_table_without_indices() {
    let text = "[[r]]\na = 1\n[[r]]\nb = 2\n";
    let doc = Doc::new(Path::new("t.toml"), text);
    if let Some(t) = parse(&doc, text) {
        let s = Section::new(&doc, t.get_ref(), "", t.span());
        for (i, r) in s.tables("r").into_iter().enumerate() {
            r.uint_in(if i == 0 { "a" } else { "b" }, 10);
        }
    }
    let keys = doc.keys_read();
    assert_eq!(keys[""], BTreeSet::from(["r"]));
    assert_eq!(keys["r"], BTreeSet::from(["a", "b"]));
}

#[test]
fn keys_read_by_a_reader_are_learnt_on_an_empty_table() {
    let keys = Section::keys_read_by(|s| {
        s.string("x");
        s.problem("x", "missing", None);
        s.bool("y");
    });
    assert_eq!(keys, ["x", "y"]);
}

#[test]
fn all_problems_are_collected() {
    let p = read("d = \"ten\"\nn = \"x\"\nz = 3\n", |s| {
        assert!(s.duration_in("d", UP_TO_A_DAY).is_none());
        assert!(s.uint_in("n", 10).is_none());
    });
    assert_eq!(p.len(), 3, "{p:?}");
}

#[test]
fn durations_and_sizes_parse() {
    let p = read("d = \"1m 30s\"\ns = \"2MiB\"\nb = 512\n", |s| {
        assert_eq!(
            s.duration_in("d", UP_TO_A_DAY),
            Some(Duration::from_secs(90))
        );
        assert_eq!(s.size_in("s", u64::MAX), Some(2 * 1024 * 1024));
        assert_eq!(s.size_in("b", u64::MAX), Some(512));
    });
    assert!(p.is_empty(), "{p:?}");
}

#[test]
fn a_duration_outside_its_bounds_is_a_problem_that_names_them() {
    let p = read("d = \"25h\"\ne = \"24h\"\nz = \"0s\"\nm = \"1ms\"\n", |s| {
        let positive = Duration::from_secs(1)..=DAY;
        assert_eq!(s.duration_in("d", positive.clone()), None);
        assert_eq!(s.duration_in("e", positive.clone()), Some(DAY));
        assert_eq!(s.duration_in("z", positive.clone()), None);
        assert_eq!(s.duration_in("m", positive), None);
    });
    assert_eq!(p.len(), 3, "{p:?}");
    let fix = "(fix: use a duration from \"1s\" to \"1day\")";
    assert_eq!(
        p[0].to_string(),
        format!("t.toml:1:5: d: `25h` is longer than the longest allowed, 1day {fix}")
    );
    assert_eq!(
        p[1].to_string(),
        format!("t.toml:3:5: z: must be greater than zero {fix}")
    );
    assert_eq!(
        p[2].to_string(),
        format!("t.toml:4:5: m: `1ms` is shorter than the shortest allowed, 1s {fix}")
    );
}

#[test]
fn a_size_over_its_bound_is_a_problem_that_names_the_bound() {
    let p = read(
        "s = \"2MiB\"\nb = 2097153\nz = \"500000000000EiB\"\nn = -1\n",
        |s| {
            assert_eq!(s.size_in("s", 2 << 20), Some(2 << 20));
            assert_eq!(s.size_in("b", 2 << 20), None);
            assert_eq!(s.size_in("z", u64::MAX - 1), None);
            assert_eq!(s.size_in("n", 2 << 20), None);
        },
    );
    assert_eq!(p.len(), 3, "{p:?}");
    assert_eq!(
        p[0].to_string(),
        "t.toml:2:5: b: 2097153 is out of range (fix: use a size from 0 to \"2MiB\")"
    );
    assert!(
        p[1].to_string()
            .contains("\"500000000000EiB\" is out of range")
    );
    assert!(p[2].to_string().contains("-1 is out of range"));
}

#[test]
fn sizes_are_written_in_their_largest_exact_unit() {
    assert_eq!(size_text(16 << 20), "16MiB");
    assert_eq!(size_text(1 << 40), "1TiB");
    assert_eq!(size_text(1536), "1536");
    assert_eq!(size_text(0), "0");
}

#[test]
fn a_position_inside_a_character_does_not_panic() {
    let text = "a = \"é\"\n";
    let doc = Doc::new(Path::new("t.toml"), text);
    assert_eq!(doc.position(6), (1, 6));
    assert_eq!(doc.position(100), (2, 1));
}

#[test]
fn syntax_errors_have_positions() {
    let p = read("a = 1\nb = \n", |_| {});
    assert!(!p.is_empty());
    assert_eq!(p[0].position.map(|x| x.0), Some(2));
}

#[test]
fn out_of_range_integer() {
    let p = read("n = 70000\n", |s| {
        assert!(s.uint_in("n", 65535).is_none());
    });
    assert_eq!(p.len(), 1);
    assert!(
        p[0].to_string()
            .contains("t.toml:1:5: n: 70000 is out of range")
    );
}
