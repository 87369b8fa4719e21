use super::*;

fn authority(raw: &str) -> Option<(String, String)> {
    host(raw).map(|h| (h.name().to_string(), h.authority().to_string()))
}

fn pair(name: &str, authority: &str) -> Option<(String, String)> {
    Some((name.to_string(), authority.to_string()))
}

#[test]
fn names_and_literals_pass_lower_cased_with_their_port() {
    assert_eq!(authority("app.example"), pair("app.example", "app.example"));
    assert_eq!(
        authority("App.Example:8443"),
        pair("app.example", "app.example:8443")
    );
    assert_eq!(
        authority("app.example.:443"),
        pair("app.example", "app.example:443")
    );
    assert_eq!(authority("10.0.0.1:80"), pair("10.0.0.1", "10.0.0.1:80"));
    assert_eq!(authority("[::1]:8080"), pair("[::1]", "[::1]:8080"));
    assert_eq!(authority("[::A]"), pair("[::a]", "[::a]"));
    assert_eq!(
        authority("under_score.internal"),
        pair("under_score.internal", "under_score.internal")
    );
}

#[test]
fn a_clean_host_is_borrowed() {
    let h = host("app.example:443").expect("valid");
    assert!(matches!(h.authority, Cow::Borrowed(_)));
    assert_eq!(h.name(), "app.example");
}

#[test]
fn anything_but_a_name_or_literal_and_a_port_is_refused() {
    for bad in [
        "app.example:443@evil.example",
        "user@app.example",
        "evil.example/../x",
        "evil.example/",
        "evil\\example",
        "evil.example\0",
        "a..example",
        ".example",
        ".",
        "",
        "app.example:",
        "app.example:x",
        "app.example:65536",
        "app.example:123456",
        "app.example:80:80",
        "app.example:80 ",
        "app example",
        "a,b.example",
        "a;b.example",
        "%61pp.example",
        "app.example\r\nx: y",
        "[::1",
        "[::1]x",
        "[::1]:",
        "[v1.x]",
        "[fe80::1%25eth0]",
        "[1.2.3.4]",
        "::1",
    ] {
        assert_eq!(host(bad), None, "{bad:?}");
    }
    assert_eq!(host(&"a".repeat(254)), None, "longer than DNS allows");
    assert!(host(&"a".repeat(253)).is_some());
}

fn normal(raw: &str) -> (String, Option<Refused>) {
    let p = path(raw);
    (p.path.into_owned(), p.refused)
}

#[test]
fn dot_segments_are_removed_with_encoded_dots_decoded() {
    for (raw, want) in [
        ("/x/../private/1k.txt", "/private/1k.txt"),
        ("/x/%2e%2e/private/1k.txt", "/private/1k.txt"),
        ("/x/%2E%2E/private/1k.txt", "/private/1k.txt"),
        ("/x/.%2e/private", "/private"),
        ("/./a/./b", "/a/b"),
        ("/a/b/..", "/a/"),
        ("/a/b/.", "/a/b/"),
        ("/../../a", "/a"),
        ("/..", "/"),
        ("/a//b///c", "/a/b/c"),
        ("//a", "/a"),
        ("/a//", "/a/"),
        ("/a//../b", "/b"),
        ("/%61dmin", "/admin"),
        ("/a%7eb%2Dc", "/a~b-c"),
        ("/a%20b", "/a%20b"),
        ("/a%3fb%c3%a9", "/a%3Fb%C3%A9"),
        ("/a.b/..c/c..", "/a.b/..c/c.."),
    ] {
        assert_eq!(normal(raw), (want.to_string(), None), "{raw}");
    }
}

#[test]
fn encoded_separators_and_bad_escapes_are_reported() {
    for raw in [
        "/a%2fb", "/a%2Fb", "/a%5cb", "/a%5Cb", "/a%00b", "/a\\b", "/..%2f..",
    ] {
        assert_eq!(path(raw).refused, Some(Refused::EncodedSeparator), "{raw}");
    }
    for raw in ["/a%", "/a%2", "/a%zz", "/%g0"] {
        assert_eq!(path(raw).refused, Some(Refused::BadEscape), "{raw}");
    }
    // A broken escape is escaped itself: what follows cannot complete it
    // on a second pass.
    assert_eq!(
        normal("/%a%41"),
        ("/%25aA".to_string(), Some(Refused::BadEscape))
    );
    assert_eq!(normal("/%25aA"), ("/%25aA".to_string(), None));
    assert_eq!(
        normal("/a/../b%2fc"),
        ("/b%2Fc".to_string(), Some(Refused::EncodedSeparator))
    );
}

#[test]
fn clean_paths_and_asterisk_are_borrowed() {
    for raw in ["/", "/a/b/", "/1k.txt", "/a.b/c..d", "*", "/a%20b"] {
        assert!(matches!(path(raw).path, Cow::Borrowed(_)), "{raw}");
    }
}
