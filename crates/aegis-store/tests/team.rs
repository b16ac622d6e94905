use aegis_store::{
    ExampleOrigin, HistoryFilter, MemberRole, NewExample, NewHeadVersion, QueuePolicy, Source,
    Store, StoreError,
};

use crate::common::{agree, record, temp_store};

fn head(applied_by: &str) -> NewHeadVersion {
    NewHeadVersion {
        validator: "toxic".into(),
        content: format!("{{\"by\":\"{applied_by}\"}}").into_bytes(),
        data_sha256: "abc".into(),
        metrics: "{}".into(),
        note: String::new(),
        applied_by: applied_by.into(),
    }
}

fn policy() -> QueuePolicy {
    QueuePolicy {
        overlap_percent: 10,
        claim_seconds: 600,
    }
}

fn forbidden(result: Result<impl std::fmt::Debug, StoreError>, says: &str) {
    match result {
        Err(e @ StoreError::Forbidden { .. }) => {
            assert!(e.to_string().contains(says), "{e}")
        }
        other => panic!("expected a refusal saying {says:?}, got {other:?}"),
    }
}

/// (actor, action, subject) of each entry, oldest first.
async fn log(s: &Store) -> Vec<(String, String, String)> {
    let mut entries = s.audit_log(None, None, 100).await.expect("audit log");
    entries.reverse();
    entries
        .into_iter()
        .map(|e| (e.actor, e.action, e.subject))
        .collect()
}

/// A team of rina (admin), budi (reviewer) and sari (author).
async fn three_roles(s: &Store) {
    s.set_member("rina", "rina", MemberRole::Admin)
        .await
        .expect("admin");
    s.set_member("rina", "budi", MemberRole::Reviewer)
        .await
        .expect("reviewer");
    s.set_member("rina", "sari", MemberRole::Author)
        .await
        .expect("author");
}

fn entry(actor: &str, action: &str, subject: &str) -> (String, String, String) {
    (actor.into(), action.into(), subject.into())
}

#[tokio::test]
async fn without_members_anyone_may_act_and_every_change_is_logged_by_name() {
    let t = temp_store().await;
    let s = &t.store;
    let id = record(s, "kamu bodoh", Source::Typed, None, &["toxic"]).await;
    let review = s.add_review(&agree(id, "rina")).await.expect("review");
    s.delete_review("rina", review).await.expect("undo");
    s.save_template_version("budi", "toxic", "h1", "text")
        .await
        .expect("template");
    s.save_head_version(&head("budi")).await.expect("head");
    s.set_queue_policy("sari", &policy()).await.expect("policy");
    s.delete("sari", id).await.expect("delete");
    assert_eq!(
        log(s).await,
        vec![
            entry("rina", "review", &format!("verdict {id}")),
            entry("rina", "review undone", &format!("verdict {id}")),
            entry("budi", "template saved", "template toxic"),
            entry("budi", "head applied", "validator toxic"),
            entry("sari", "queue changed", "review queue"),
            entry("sari", "history deleted", &format!("verdict {id}")),
        ]
    );
    let by_budi = s.audit_log(Some("budi"), None, 10).await.expect("by budi");
    assert_eq!(by_budi.len(), 2);
    let older = s
        .audit_log(None, Some(by_budi[0].id), 10)
        .await
        .expect("page");
    assert_eq!(older.len(), 3, "the entries before budi's head");
}

#[tokio::test]
async fn a_team_starts_with_an_admin_naming_themselves_and_keeps_one() {
    let t = temp_store().await;
    let s = &t.store;
    for (actor, name, role) in [
        ("rina", "budi", MemberRole::Admin),
        ("rina", "rina", MemberRole::Reviewer),
    ] {
        let refused = s.set_member(actor, name, role).await.unwrap_err();
        assert!(
            refused.to_string().contains("starts with an admin"),
            "{refused}"
        );
    }
    assert!(s.members().await.expect("members").is_empty());

    s.set_member("rina", "rina", MemberRole::Admin)
        .await
        .expect("first admin");
    s.set_member("rina", "budi", MemberRole::Reviewer)
        .await
        .expect("reviewer");
    for refused in [
        s.remove_member("rina", "rina").await.map(|_| ()),
        s.set_member("rina", "rina", MemberRole::Author)
            .await
            .map(|_| ()),
    ] {
        let refused = refused.unwrap_err();
        assert!(refused.to_string().contains("last admin"), "{refused}");
    }
    forbidden(
        s.set_member("budi", "budi", MemberRole::Admin).await,
        "budi is a reviewer and may not name members: that needs the admin role",
    );
    s.set_member("rina", "sari", MemberRole::Admin)
        .await
        .expect("second admin");
    assert!(s.remove_member("sari", "rina").await.expect("remove"));
    assert!(!s.remove_member("sari", "rina").await.expect("gone"));
    let members: Vec<(String, MemberRole)> = s
        .members()
        .await
        .expect("members")
        .into_iter()
        .map(|m| (m.name, m.role))
        .collect();
    assert_eq!(
        members,
        vec![
            ("sari".into(), MemberRole::Admin),
            ("budi".into(), MemberRole::Reviewer)
        ]
    );
    let subjects: Vec<String> = log(s).await.into_iter().map(|e| e.2).collect();
    assert_eq!(
        subjects,
        ["member rina", "member budi", "member sari", "member rina"]
    );
}

#[tokio::test]
async fn each_role_may_do_its_own_work_and_a_refusal_changes_nothing() {
    let t = temp_store().await;
    let s = &t.store;
    three_roles(s).await;
    let id = record(s, "kamu bodoh", Source::Typed, None, &["toxic"]).await;
    let other = record(s, "dasar tolol", Source::Typed, None, &["toxic"]).await;
    let logged = log(s).await.len();

    // A stranger, or a console that gave no name, may do nothing.
    forbidden(
        s.claim_reviews("eve", 0.15, 10).await,
        "eve is not a member of this team and may not claim verdicts",
    );
    forbidden(
        s.add_review(&agree(id, "eve")).await,
        "eve is not a member of this team and may not decide verdicts",
    );
    forbidden(
        s.save_template_version(" ", "toxic", "h1", "text").await,
        "a console with no name is not a member",
    );

    // A reviewer decides, and undoes only their own decisions.
    let budis = s
        .add_review(&agree(id, "budi"))
        .await
        .expect("budi decides");
    forbidden(
        s.save_template_version("budi", "toxic", "h1", "text").await,
        "budi is a reviewer and may not save templates: that needs the author role",
    );
    forbidden(
        s.save_head_version(&head("budi")).await,
        "may not apply heads",
    );
    forbidden(
        s.set_queue_policy("budi", &policy()).await,
        "may not change the review queue",
    );
    forbidden(s.delete("budi", id).await, "may not delete history");
    forbidden(
        s.delete_matching("budi", &HistoryFilter::default()).await,
        "may not delete history",
    );
    forbidden(
        s.set_retention_days("budi", Some(1)).await,
        "may not change how long history is kept",
    );
    let saris = s.add_review(&agree(other, "sari")).await.expect("sari");
    forbidden(
        s.delete_review("budi", saris).await,
        "budi is a reviewer and may not undo another reviewer's decision",
    );

    // An author saves templates and applies heads, and may not change the team's settings.
    s.save_template_version("sari", "toxic", "h1", "text")
        .await
        .expect("author saves");
    s.save_head_version(&head("sari"))
        .await
        .expect("author applies");
    forbidden(
        s.set_queue_policy("sari", &policy()).await,
        "sari is an author and may not change the review queue",
    );

    // An admin does all of it, undoing others' decisions too.
    assert!(s.delete_review("rina", budis).await.expect("admin undoes"));
    s.set_queue_policy("rina", &policy()).await.expect("policy");
    assert!(s.delete("rina", other).await.expect("admin deletes"));

    // Nothing refused reached the history or the log.
    assert_eq!(s.queue_policy().await.expect("policy"), policy());
    assert_eq!(s.template_saves("toxic", 10).await.expect("saves").len(), 1);
    assert_eq!(s.head_versions("toxic").await.expect("heads").len(), 1);
    let actors: Vec<String> = log(s).await[logged..]
        .iter()
        .map(|e| format!("{} {}", e.0, e.1))
        .collect();
    assert_eq!(
        actors,
        [
            "budi review",
            "sari review",
            "sari template saved",
            "sari head applied",
            "rina review undone",
            "rina queue changed",
            "rina history deleted",
        ]
    );
}

#[tokio::test]
async fn the_audit_log_refuses_to_be_changed_and_names_the_database_login() {
    let t = temp_store().await;
    let s = &t.store;
    s.set_member("rina", "rina", MemberRole::Admin)
        .await
        .expect("admin");
    let entry = &s.audit_log(None, None, 1).await.expect("log")[0];
    let on_postgres = t.url().starts_with("postgres");
    assert_eq!(
        entry.login.is_empty(),
        !on_postgres,
        "a login on PostgreSQL, none on a SQLite file: {entry:?}"
    );

    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut raw = sqlx::AnyConnection::connect(&t.url())
        .await
        .expect("connect");
    let mut changes = vec![
        "UPDATE audit_log SET actor = 'eve'",
        "DELETE FROM audit_log",
    ];
    if on_postgres {
        changes.push("TRUNCATE audit_log");
    }
    for change in changes {
        let refused = sqlx::query(change).execute(&mut raw).await.unwrap_err();
        assert!(
            refused.to_string().contains("append-only"),
            "{change}: {refused}"
        );
    }
    raw.close().await.expect("close");
    assert_eq!(s.audit_log(None, None, 10).await.expect("log").len(), 1);
}

#[tokio::test]
async fn expired_history_is_logged_as_the_retention_policy() {
    let t = temp_store().await;
    let s = &t.store;
    record(s, "lama", Source::Typed, None, &[]).await;
    // Backdate it past the policy.
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut raw = sqlx::AnyConnection::connect(&t.url())
        .await
        .expect("connect");
    sqlx::query("UPDATE verdicts SET created_at = 0")
        .execute(&mut raw)
        .await
        .expect("backdate");
    raw.close().await.expect("close");
    assert_eq!(
        s.set_retention_days("rina", Some(30))
            .await
            .expect("retention"),
        1
    );
    let actions: Vec<(String, String)> = log(s)
        .await
        .into_iter()
        .map(|(actor, action, _)| (actor, action))
        .collect();
    assert_eq!(
        actions,
        [
            ("rina".to_string(), "retention changed".to_string()),
            ("retention policy".into(), "history expired".into())
        ]
    );
}

fn example(text: &str, origin: ExampleOrigin) -> NewExample {
    NewExample {
        validator: "toxic".into(),
        text: text.into(),
        violates: true,
        language: "id".into(),
        origin,
        verdict_id: None,
        submitted_by: None,
    }
}

/// Whether the example is trained on (accepted), by id.
async fn trained(s: &Store, id: i64) -> bool {
    let all = s.examples(Some("toxic")).await.expect("examples");
    !all.iter()
        .find(|e| e.id == id)
        .expect("the example")
        .pending
}

/// Examples teach the heads, so in a team a reviewer's are proposed and only an author accepts,
/// relabels or removes one; a client's feedback is proposed whoever the team is.
#[tokio::test]
async fn a_reviewers_examples_are_proposed_and_an_author_decides_what_is_trained_on() {
    let t = temp_store().await;
    let s = &t.store;
    three_roles(s).await;
    let logged = log(s).await.len();

    forbidden(
        s.add_example("eve", &example("kamu bodoh", ExampleOrigin::Mark))
            .await,
        "eve is not a member of this team and may not add examples",
    );
    assert!(!s.may_teach("budi").await.expect("budi"));
    assert!(s.may_teach("sari").await.expect("sari"));
    let marked = s
        .add_example("budi", &example("kamu bodoh", ExampleOrigin::Mark))
        .await
        .expect("a reviewer's mark")
        .id();
    assert!(!trained(s, marked).await, "a reviewer's example waits");
    let typed = s
        .add_example("sari", &example("dasar tolol", ExampleOrigin::Manual))
        .await
        .expect("an author's example")
        .id();
    assert!(trained(s, typed).await, "an author's is trained on at once");
    let sent = s
        .add_example(
            "",
            &NewExample {
                submitted_by: Some("127.0.0.1".into()),
                ..example("otak udang", ExampleOrigin::Feedback)
            },
        )
        .await
        .expect("a client's feedback")
        .id();
    assert!(!trained(s, sent).await);

    for refused in [
        s.accept_example("budi", marked).await.map(|_| ()),
        s.relabel_example("budi", typed, false).await.map(|_| ()),
        s.remove_example("budi", typed).await.map(|_| ()),
    ] {
        forbidden(refused, "budi is a reviewer and may not");
    }
    assert!(!trained(s, marked).await, "a refusal changes nothing");
    assert_eq!(s.examples(Some("toxic")).await.expect("all").len(), 3);

    // A reviewer may withdraw a proposal of their own (undoing a label), and nobody else's.
    let undone = s
        .add_example("budi", &example("kamu goblok", ExampleOrigin::Mark))
        .await
        .expect("a second mark")
        .id();
    let examples = s.examples(Some("toxic")).await.expect("all");
    let proposal = examples.iter().find(|e| e.id == undone).expect("kept");
    assert_eq!(
        proposal.submitted_by.as_deref(),
        Some("budi"),
        "it names its reviewer"
    );
    forbidden(
        s.remove_example("budi", sent).await.map(|_| ()),
        "budi is a reviewer and may not remove examples",
    );
    assert!(s.remove_example("budi", undone).await.expect("withdrawn"));
    assert_eq!(s.examples(Some("toxic")).await.expect("all").len(), 3);

    assert!(s.accept_example("sari", marked).await.expect("accept"));
    assert!(trained(s, marked).await);
    s.relabel_example("sari", sent, false)
        .await
        .expect("relabel");
    assert!(s.remove_example("sari", typed).await.expect("remove"));
    let entries = log(s).await.split_off(logged);
    assert_eq!(
        entries,
        [
            entry("budi", "example proposed", "toxic"),
            entry("sari", "example added", "toxic"),
            entry("budi", "example proposed", "toxic"),
            entry("budi", "example withdrawn", "toxic"),
            entry("sari", "example accepted", "toxic"),
            entry("sari", "example relabelled", "toxic"),
            entry("sari", "example removed", "toxic"),
        ]
    );
}
