use super::*;

async fn keys() -> (tempfile::TempDir, Arc<Keys>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&crate::config::DatabaseUrl::Sqlite(
        dir.path().join("weir.db"),
    ))
    .await
    .unwrap();
    let keys = Keys::open(store, DatabaseMetrics::default()).await.unwrap();
    (dir, keys)
}

fn spec(json: &str) -> KeySpec {
    KeySpec::parse(json.as_bytes()).unwrap()
}

#[tokio::test]
async fn a_key_is_found_by_its_secret_until_rotated_or_revoked() {
    let (_dir, keys) = keys().await;
    let (row, secret) = keys
        .create(spec(
            r#"{"user":"alice","team":"platform","models":["claude-*"],"spend_per_day":5}"#,
        ))
        .await
        .unwrap();
    assert!(
        secret.starts_with("wk-") && secret.len() == 3 + 43,
        "{secret}"
    );
    assert_eq!(row.name, "alice", "named after its person");
    assert!(secret.starts_with(&row.prefix));
    let Found::Live(k) = keys.find(&secret) else {
        panic!("live")
    };
    assert_eq!(k.team.as_deref(), Some("platform"));
    assert!(k.models.allows("claude-sonnet") && !k.models.allows("gpt-5"));
    assert_eq!(k.budget.spend_per_day, Some(5_000_000_000_000));
    assert!(matches!(keys.find("wk-nope"), Found::Unknown));
    assert!(matches!(keys.find("sk-ant-x"), Found::Unknown));

    let (_, rotated) = keys.rotate(&row.id).await.unwrap().unwrap();
    assert!(
        matches!(keys.find(&secret), Found::Unknown),
        "the old secret stops"
    );
    assert!(matches!(keys.find(&rotated), Found::Live(_)));
    assert!(keys.revoke(&row.id).await.unwrap());
    assert!(matches!(keys.find(&rotated), Found::Unknown));
    assert!(
        keys.rotate(&row.id).await.unwrap().is_none(),
        "revoked stays revoked"
    );
}

#[tokio::test]
async fn an_expired_key_is_told_from_an_unknown_one() {
    let (_dir, keys) = keys().await;
    let (_, secret) = keys
        .create(spec(r#"{"name":"ci","expires_at":"2020-01-01T00:00:00Z"}"#))
        .await
        .unwrap();
    assert!(matches!(keys.find(&secret), Found::Expired));
}

#[tokio::test]
async fn a_change_through_another_handle_is_served_after_a_refresh() {
    let (dir, keys) = keys().await;
    let other = Store::open(&crate::config::DatabaseUrl::Sqlite(
        dir.path().join("weir.db"),
    ))
    .await
    .unwrap();
    let other = Keys::open(other, DatabaseMetrics::default()).await.unwrap();
    let (row, secret) = other.create(spec(r#"{"name":"bob"}"#)).await.unwrap();
    assert!(matches!(keys.find(&secret), Found::Unknown), "not yet");
    keys.refresh().await.unwrap();
    assert!(matches!(keys.find(&secret), Found::Live(_)));
    other.revoke(&row.id).await.unwrap();
    keys.refresh().await.unwrap();
    assert!(matches!(keys.find(&secret), Found::Unknown));
}

#[test]
fn every_problem_of_a_spec_is_told_at_once() {
    let err = KeySpec::parse(
        br#"{"user":"","models":"claude","max_concurrent":-1,"spend_per_day":"lots","expires_in":"soon","colour":1}"#,
    )
    .unwrap_err();
    let text = err.0.join("\n");
    for needle in [
        "`user`",
        "`models`",
        "`max_concurrent`",
        "`spend_per_day`",
        "`expires_in`",
        "`colour`",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    assert_eq!(err.0.len(), 6, "{text}");
    assert!(KeySpec::parse(b"[1]").is_err());
    assert!(KeySpec::parse(b"{").is_err());
}
