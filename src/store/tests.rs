use super::*;
use crate::config::DatabaseUrl;

fn key(id: &str, hash: u8) -> KeyRow {
    KeyRow {
        id: id.to_string(),
        hash: vec![hash; 32],
        prefix: "wk-abcde".to_string(),
        name: id.to_string(),
        user: Some("alice".into()),
        team: Some("platform".into()),
        metadata: serde_json::json!({"laptop": "x1"}),
        routes: vec!["claude".into()],
        models: vec!["claude-*".into()],
        max_concurrent: Some(4),
        rate_limit_per_second: Some(5),
        rate_limit_burst: None,
        tokens_per_minute: None,
        tokens_per_day: Some(1000),
        spend_per_day: Some(5_000_000_000_000),
        tokens_per_week: None,
        spend_per_week: None,
        tokens_per_month: Some(100_000),
        spend_per_month: Some(50_000_000_000_000),
        warn_at: Some(80),
        expires_at: None,
        created_at: 1,
        updated_at: 1,
        revoked_at: None,
    }
}

#[tokio::test]
async fn keys_are_kept_changed_and_revoked_and_each_change_moves_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&DatabaseUrl::Sqlite(dir.path().join("weir.db")))
        .await
        .unwrap();
    let v0 = store.version().await.unwrap();
    store.insert_key(key("key_a", 1)).await.unwrap();
    let v1 = store.version().await.unwrap();
    assert!(v1 > v0);
    assert_eq!(store.keys().await.unwrap(), vec![key("key_a", 1)]);
    let change = KeyChange {
        team: Some(None),
        models: Some(vec!["gpt-5*".into()]),
        ..KeyChange::default()
    };
    let changed = store
        .change_key("key_a", change, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.team, None);
    assert_eq!(changed.models, vec!["gpt-5*".to_string()]);
    assert_eq!(changed.user.as_deref(), Some("alice"), "untouched");
    assert!(store.version().await.unwrap() > v1);
    assert!(store.revoke_key("key_a").await.unwrap());
    assert!(!store.revoke_key("key_a").await.unwrap(), "once");
    let revoked = store.key("key_a").await.unwrap().unwrap();
    assert!(revoked.revoked_at.is_some());
    let none = store
        .change_key("key_a", KeyChange::default(), None)
        .await
        .unwrap();
    assert_eq!(none, None, "a revoked key is not changed");
    // Reopened: the same keys, no step run twice.
    drop(store);
    let store = Store::open(&DatabaseUrl::Sqlite(dir.path().join("weir.db")))
        .await
        .unwrap();
    assert_eq!(store.keys().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_database_from_a_newer_weir_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = Store::open(&DatabaseUrl::Sqlite(path.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("newer than this weir"), "{err}");
    let missing = dir.path().join("no/such/dir/weir.db");
    let err = Store::open(&DatabaseUrl::Sqlite(missing))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not exist"), "{err}");
}

#[tokio::test]
async fn a_report_sums_a_period_by_its_groups() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&DatabaseUrl::Sqlite(dir.path().join("weir.db")))
        .await
        .unwrap();
    let row = |at_ms, team: &str, model: &str, spend, status| UsageRow {
        at_ms,
        team: Some(team.into()),
        route: "claude".into(),
        model: Some(model.into()),
        tokens: [10, 5, 0, 0],
        spend,
        status,
        outcome: "completed".into(),
        ..UsageRow::default()
    };
    store
        .insert_usage(vec![
            row(1_000, "platform", "sonnet", 30, 200),
            row(2_000, "platform", "sonnet", 30, 200),
            row(2_500, "platform", "haiku", 1, 429),
            row(3_000, "data", "sonnet", 7, 200),
            row(9_000, "data", "sonnet", 1000, 200),
        ])
        .await
        .unwrap();
    let lines = store
        .report(Report {
            groups: vec![Group::Team, Group::Model],
            from_ms: 1_000,
            to_ms: 9_000,
        })
        .await
        .unwrap();
    type Line = (Vec<Option<String>>, u64, u64, u64, u64);
    let got: Vec<Line> = lines
        .iter()
        .map(|l| {
            (
                l.group.iter().map(|(_, v)| v.clone()).collect(),
                l.requests,
                l.errors,
                l.input_tokens,
                l.spend,
            )
        })
        .collect();
    let s = |a: &str, b: &str| vec![Some(a.to_string()), Some(b.to_string())];
    assert_eq!(
        got,
        vec![
            (s("platform", "sonnet"), 2, 0, 20, 60),
            (s("data", "sonnet"), 1, 0, 10, 7),
            (s("platform", "haiku"), 1, 1, 10, 1),
        ]
    );
    assert_eq!(store.prune_usage(2_500).await.unwrap(), 2);
    let all = store
        .report(Report {
            groups: vec![],
            from_ms: 0,
            to_ms: i64::MAX,
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].requests, 3);
    assert_eq!(Group::named("person"), Some(Group::User));
    assert_eq!(Group::named("nope"), None);
}

/// Two instances on one SQLite file: one writing usage rows while the
/// other changes a key (a read, then a write, in one transaction). Begun
/// deferred, the change failed at once with `SQLITE_BUSY` whenever the
/// other wrote between its read and its write; begun immediate, it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_file_write_at_once_without_a_busy_error() {
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::Sqlite(dir.path().join("weir.db"));
    let one = Store::open(&url).await.unwrap();
    let two = Store::open(&url).await.unwrap();
    one.insert_key(key("key_a", 1)).await.unwrap();
    let writer = tokio::spawn(async move {
        for i in 0..300 {
            let row = UsageRow {
                at_ms: i,
                route: "claude".into(),
                outcome: "completed".into(),
                ..UsageRow::default()
            };
            two.insert_usage(vec![row]).await.unwrap();
        }
    });
    for i in 0..300 {
        let change = KeyChange {
            name: Some(format!("n{i}")),
            ..KeyChange::default()
        };
        let changed = one.change_key("key_a", change, None).await;
        assert!(matches!(changed, Ok(Some(_))), "change {i}: {changed:?}");
    }
    writer.await.unwrap();
}

#[tokio::test]
async fn teams_are_created_once_changed_bound_by_bound_and_deleted_each_moving_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&DatabaseUrl::Sqlite(dir.path().join("weir.db")))
        .await
        .unwrap();
    let v0 = store.version().await.unwrap();
    let mut row = TeamRow {
        name: "platform".into(),
        models: vec!["claude-*".into()],
        routes: Vec::new(),
        max_concurrent: Some(4),
        rate_limit_per_second: Some(10),
        rate_limit_burst: Some(20),
        budget: crate::config::Budget {
            spend_per_month: Some(500_000_000_000_000),
            warn_at: Some(80),
            ..Default::default()
        },
        per_person: crate::config::Budget {
            tokens_per_day: Some(1000),
            ..Default::default()
        },
        created_at: 1,
        updated_at: 1,
    };
    assert_eq!(
        store.insert_team(row.clone()).await.unwrap(),
        Some(row.clone())
    );
    assert_eq!(store.insert_team(row.clone()).await.unwrap(), None, "once");
    let v1 = store.version().await.unwrap();
    assert!(v1 > v0);
    let mut bounds = BudgetChange::default();
    bounds.0[1] = Some(Some(2000)); // tokens_per_day
    bounds.0[7] = Some(None); // warn_at cleared
    let change = TeamChange {
        budget: bounds,
        ..TeamChange::default()
    };
    let changed = store
        .change_team("platform", change)
        .await
        .unwrap()
        .unwrap();
    row.budget.tokens_per_day = Some(2000);
    row.budget.warn_at = None;
    assert_eq!(changed.budget, row.budget, "the month's bound kept");
    assert_eq!(changed.per_person, row.per_person);
    assert_eq!(store.teams().await.unwrap(), vec![changed]);
    assert!(store.version().await.unwrap() > v1);
    assert!(store.delete_team("platform").await.unwrap());
    assert!(!store.delete_team("platform").await.unwrap());
    assert!(store.teams().await.unwrap().is_empty());
    assert_eq!(
        store
            .change_team("platform", TeamChange::default())
            .await
            .unwrap(),
        None
    );
}
