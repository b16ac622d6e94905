use aegis_guard::{Role, Turn, TurnReport};
use aegis_store::{NewVerdict, Source};

use crate::common::{record, temp_store, templates, verdict};

#[tokio::test]
async fn a_turn_keeps_its_role_position_and_context_and_a_lone_message_reads_as_turn_zero() {
    let t = temp_store().await;
    let mut checked = verdict(&["harassment"]);
    checked.turn = TurnReport {
        index: 3,
        role: Role::User,
        context: vec![
            Turn::user("kamu tinggal di mana?"),
            Turn::assistant("Maaf, saya tidak bisa membagikan itu."),
        ]
        .into(),
        context_cut: 1,
    };
    checked.results[2].context_score = Some(0.91);
    checked.results[2].caught_in_context = true;
    checked.results[3].mention_score = Some(0.04);
    checked.results[3].read_as_mention = true;
    let id = t
        .store
        .record(&NewVerdict {
            text: "aku tahu sekolahmu",
            source: Source::Import,
            user_id: None,
            import: None,
            verdict: &checked,
            templates: &templates(),
        })
        .await
        .expect("record");
    let detail = t.store.get(id).await.expect("read").expect("kept");
    assert_eq!(detail.row.role, Role::User);
    assert_eq!(detail.row.turn_index, 3);
    assert_eq!(checked.turn.context, detail.row.context);
    assert_eq!(detail.row.context_cut, 1);
    let harassment = &detail.row.results[2];
    assert!(harassment.caught_in_context);
    assert_eq!(
        harassment.context_score.map(|s| (s * 100.0).round()),
        Some(91.0)
    );
    let quoted = &detail.row.results[3];
    assert!(quoted.read_as_mention && !harassment.read_as_mention);
    assert_eq!(quoted.mention_score.map(|s| (s * 100.0).round()), Some(4.0));

    let lone = record(&t.store, "halo", Source::Typed, None, &[]).await;
    let lone = t.store.get(lone).await.expect("read").expect("kept");
    assert_eq!((lone.row.role, lone.row.turn_index), (Role::User, 0));
    assert!(lone.row.context.is_empty() && !lone.row.results[0].caught_in_context);
    assert!(lone.row.results[0].mention_score.is_none() && !lone.row.results[0].read_as_mention);
}
