//! The team's queue: claimed batches, overlap for agreement, claims that expire, and many
//! consoles at once on one database.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aegis_store::{
    Database, Decision, ImportRow, NewReview, NewVerdict, QueuePolicy, Source, Store, StoreError,
};

use crate::common::{agree, record, temp_store, templates, verdict};

fn ids(queue: &aegis_store::ReviewQueue) -> Vec<i64> {
    queue.items.iter().map(|r| r.verdict_id).collect()
}

#[tokio::test]
async fn two_reviewers_claim_different_verdicts_and_neither_decides_the_others() {
    let t = temp_store().await;
    let s = &t.store;
    let mut flagged = Vec::new();
    for i in 0..6 {
        flagged.push(record(s, &format!("spam {i}"), Source::Typed, None, &["spam"]).await);
    }
    let rina = s.claim_reviews("rina", 0.15, 4).await.expect("claim");
    let budi = s.claim_reviews("budi", 0.15, 4).await.expect("claim");
    assert_eq!(rina.items.len(), 4);
    assert_eq!(budi.items.len(), 2, "only what rina left");
    let rinas: BTreeSet<i64> = ids(&rina).into_iter().collect();
    assert!(ids(&budi).iter().all(|id| !rinas.contains(id)));
    assert!(rina.claimed_until > aegis_store::now_millis());

    let mine = ids(&rina)[0];
    let refused = s.add_review(&agree(mine, "budi")).await.unwrap_err();
    assert!(
        matches!(&refused, StoreError::Taken { verdict_id, detail } if *verdict_id == mine && detail.starts_with("claimed by rina")),
        "{refused}"
    );
    s.add_review(&agree(mine, "rina")).await.expect("her own");
    let refused = s.add_review(&agree(mine, "budi")).await.unwrap_err();
    assert!(
        refused.to_string().contains("already decided by rina"),
        "{refused}"
    );
    s.add_review(&agree(mine, "rina"))
        .await
        .expect("deciding again replaces her own decision");

    // Claiming again renews what she holds and takes nothing of budi's.
    let again = s.claim_reviews("rina", 0.15, 10).await.expect("claim");
    assert_eq!(again.items.len(), 3);
    assert_eq!(again.remaining, 3, "what budi holds is not hers to count");
    assert_eq!(s.release_claims("budi").await.expect("release"), 2);
    let after = s.claim_reviews("rina", 0.15, 10).await.expect("claim");
    assert_eq!(after.items.len(), 5, "budi's batch came back");
    let unclaimed = s.claim_reviews("sari", 0.15, 10).await.expect("claim");
    assert!(unclaimed.items.is_empty());
    assert_eq!(unclaimed.remaining, 0);
}

/// Consoles claiming at the same moment get batches that share no verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consoles_claiming_at_once_get_disjoint_batches() {
    let t = temp_store().await;
    for i in 0..200 {
        record(
            &t.store,
            &format!("promo {i}"),
            Source::Typed,
            None,
            &["spam"],
        )
        .await;
    }
    // Every console connected and waiting, so that the claims really meet.
    let start = Arc::new(tokio::sync::Barrier::new(8));
    let mut claims = Vec::new();
    for reviewer in 0..8 {
        let store = Store::connect(&t.scratch.database).await.expect("console");
        let start = start.clone();
        claims.push(tokio::spawn(async move {
            start.wait().await;
            let batch = store
                .claim_reviews(&format!("r{reviewer}"), 0.15, 20)
                .await
                .expect("claim");
            store.close().await;
            ids(&batch)
        }));
    }
    let mut seen = BTreeSet::new();
    for claim in claims {
        for id in claim.await.expect("claimer") {
            assert!(seen.insert(id), "verdict {id} was handed to two consoles");
        }
    }
    // A console whose candidates another claimed between its snapshot and its lock gets fewer.
    assert!((20..=160).contains(&seen.len()), "{} claimed", seen.len());
}

#[tokio::test]
async fn the_overlap_share_goes_to_two_reviewers_and_their_agreement_is_measured() {
    let t = temp_store().await;
    let s = &t.store;
    s.set_queue_policy(
        "admin",
        &QueuePolicy {
            overlap_percent: 100,
            claim_seconds: 600,
        },
    )
    .await
    .expect("policy");
    assert_eq!(s.queue_policy().await.expect("policy").overlap_percent, 100);
    let mut flagged = Vec::new();
    for i in 0..4 {
        flagged.push(record(s, &format!("kasar {i}"), Source::Typed, None, &["toxic"]).await);
    }
    for reviewer in ["ana", "budi"] {
        let batch = s.claim_reviews(reviewer, 0.15, 10).await.expect("claim");
        assert_eq!(
            batch.items.len(),
            4,
            "{reviewer} sees every overlapped verdict"
        );
    }
    assert!(s
        .claim_reviews("cici", 0.15, 10)
        .await
        .expect("claim")
        .items
        .is_empty());
    // ana agrees with every toxic flag; budi overturns the last two.
    for (i, id) in flagged.iter().enumerate() {
        s.add_review(&agree(*id, "ana")).await.expect("ana");
        let mut budi = agree(*id, "budi");
        if i >= 2 {
            budi.decision = Decision::Overturn;
        }
        s.add_review(&budi).await.expect("budi");
        let third = s.add_review(&agree(*id, "cici")).await.unwrap_err();
        assert!(
            third.to_string().contains("decided by ana and budi"),
            "{third}"
        );
    }
    let agreement = s.reviewer_agreement().await.expect("agreement");
    assert_eq!(agreement.messages, 4);
    let toxic = agreement
        .validators
        .iter()
        .find(|v| v.validator == "toxic")
        .expect("toxic compared");
    // ana: violation ×4; budi: violation ×2, clean ×2. Chance 0.5, observed 0.5: kappa 0.
    assert_eq!((toxic.agreement.compared, toxic.agreement.agreed), (4, 2));
    assert_eq!(toxic.agreement.kappa, Some(0.0));
    assert_eq!(agreement.pairs.len(), 1);
    assert_eq!(
        (
            agreement.pairs[0].first.as_str(),
            agreement.pairs[0].second.as_str()
        ),
        ("ana", "budi")
    );
    // Four validators on four messages: the three passing ones agreed everywhere but spam,
    // harassment and financial advice were never flagged, so only the agreement counts grow.
    assert_eq!(agreement.pairs[0].agreement.compared, 16);
}

#[tokio::test]
async fn a_claim_that_expires_goes_back_to_the_team() {
    let t = temp_store().await;
    let s = &t.store;
    s.set_queue_policy(
        "admin",
        &QueuePolicy {
            overlap_percent: 0,
            claim_seconds: 1,
        },
    )
    .await
    .expect("policy");
    let id = record(s, "promo", Source::Typed, None, &["spam"]).await;
    assert_eq!(
        ids(&s.claim_reviews("rina", 0.15, 5).await.expect("claim")),
        vec![id]
    );
    assert!(s
        .claim_reviews("budi", 0.15, 5)
        .await
        .expect("claim")
        .items
        .is_empty());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        ids(&s.claim_reviews("budi", 0.15, 5).await.expect("claim")),
        vec![id]
    );
    let late = s.add_review(&agree(id, "rina")).await.unwrap_err();
    assert!(late.to_string().contains("claimed by budi"), "{late}");

    // An undo gives the verdict back to the reviewer who took the review back.
    let review = s.add_review(&agree(id, "budi")).await.expect("budi");
    assert!(s.delete_review("budi", review).await.expect("undo"));
    assert_eq!(
        ids(&s.claim_reviews("budi", 0.15, 5).await.expect("claim")),
        vec![id]
    );
}

#[tokio::test]
async fn bad_queue_settings_and_names_are_refused() {
    let t = temp_store().await;
    let s = &t.store;
    let bad = s
        .set_queue_policy(
            "admin",
            &QueuePolicy {
                overlap_percent: 150,
                claim_seconds: 60,
            },
        )
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("0 to 100"), "{bad}");
    assert_eq!(
        s.queue_policy().await.expect("policy"),
        QueuePolicy::default()
    );
    assert!(s.claim_reviews("  ", 0.15, 5).await.is_err());
}

/// Two reviewers of the overlap share who disagree on a validator give it no label (it is not
/// training data, whoever decided last), until one of them changes their decision.
#[tokio::test]
async fn a_disagreement_is_no_label_until_the_reviewers_agree() {
    let t = temp_store().await;
    let s = &t.store;
    let everyone_twice = QueuePolicy {
        overlap_percent: 100,
        claim_seconds: 600,
    };
    s.set_queue_policy("admin", &everyone_twice)
        .await
        .expect("policy");
    let id = record(s, "dasar kamu ya", Source::Typed, None, &["toxic"]).await;
    let overturn_toxic = |reviewer: &str| NewReview {
        decision: Decision::Overturn,
        validators: [("toxic".to_string(), Decision::Overturn)].into(),
        ..agree(id, reviewer)
    };
    s.add_review(&agree(id, "rina")).await.expect("rina agrees");
    s.add_review(&overturn_toxic("budi"))
        .await
        .expect("budi overturns");
    let labels = |examples: Vec<aegis_store::ReviewedExample>| {
        examples.into_iter().next().expect("reviewed").labels
    };
    let disagreed = labels(
        s.reviewed_examples(&Default::default())
            .await
            .expect("examples"),
    );
    assert_eq!(disagreed["toxic"], None, "rina says toxic, budi says not");
    assert_eq!(disagreed["spam"], Some(false), "both say it is not spam");

    s.add_review(&overturn_toxic("rina"))
        .await
        .expect("rina changes her mind");
    let agreed = labels(
        s.reviewed_examples(&Default::default())
            .await
            .expect("examples"),
    );
    assert_eq!(agreed["toxic"], Some(false));
}

/// Messages the load test imports, split among its importers.
const LOAD_MESSAGES: i64 = 10_000;
const IMPORTERS: i64 = 4;
const REVIEWERS: usize = 8;

/// Set in the console process the load test starts and kills: the database it works on.
const KILLED_CONSOLE_ENV: &str = "AEGIS_TEST_KILLED_CONSOLE";
/// The reviewer whose console is killed.
const KILLED_REVIEWER: &str = "reviewer-0";

/// The console the load test kills: claims batches and decides them slowly, saying so line by
/// line, until the load test kills its process.
#[tokio::test]
#[ignore = "not a test alone: the load test runs it as a process of its own and kills it"]
async fn the_console_the_load_test_kills() {
    let database: Database = std::env::var(KILLED_CONSOLE_ENV)
        .expect("started by the load test")
        .parse()
        .expect("a database");
    let store = Store::connect(&database).await.expect("console");
    let started = std::time::Instant::now();
    loop {
        let batch = store
            .claim_reviews(KILLED_REVIEWER, 0.15, 25)
            .await
            .expect("claim");
        if batch.items.is_empty() {
            // The others decided everything before this console held a batch of ten: say so
            // rather than wait for a kill that will not come.
            assert!(
                batch.remaining > 0 || started.elapsed() < Duration::from_secs(120),
                "the queue ran dry before the console could be killed mid-batch"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        println!("claimed {}", batch.items.len());
        for item in &batch.items {
            match store
                .add_review(&agree(item.verdict_id, KILLED_REVIEWER))
                .await
            {
                Ok(_) => println!("decided {}", item.verdict_id),
                Err(StoreError::Taken { .. }) => {}
                Err(e) => panic!("the console decides a verdict it holds: {e}"),
            }
            // Slow enough that the kill lands between decisions, holding the rest of the batch.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Starts [`the_console_the_load_test_kills`] as a process of its own on `database` and kills
/// it (SIGKILL: no release, no goodbye, its connections cut) five decisions into the first
/// batch of ten or more it claims, while it holds five or more undecided claims. Sets
/// `holds_a_batch` when it claims that batch. The decisions it reported.
fn kill_a_console_mid_batch(database: &str, holds_a_batch: &AtomicBool) -> u64 {
    let mut console = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "review_queue::the_console_the_load_test_kills",
            "--ignored",
            "--nocapture",
        ])
        .env(KILLED_CONSOLE_ENV, database)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the console process starts");
    let said = std::io::BufReader::new(console.stdout.take().expect("its output"));
    let (mut decided, mut batch_size, mut into_batch) = (0_u64, 0, 0);
    for line in said.lines() {
        let line = line.expect("a line");
        if let Some(size) = line.strip_prefix("claimed ") {
            batch_size = size.parse::<usize>().expect("a batch size");
            into_batch = 0;
            if batch_size >= 10 {
                holds_a_batch.store(true, Ordering::SeqCst);
            }
        } else if line.starts_with("decided ") {
            decided += 1;
            into_batch += 1;
            // Early batches may be small (the importers have just begun): kill in one that
            // leaves claims held.
            if into_batch == 5 && batch_size >= 10 {
                console.kill().expect("SIGKILL");
                console.wait().expect("reaped");
                eprintln!(
                    "killed console process {} after {decided} decisions, holding {} claims",
                    console.id(),
                    batch_size - into_batch
                );
                return decided;
            }
        }
    }
    let ended = console.wait_with_output().expect("its end");
    panic!(
        "the console process ended before it could be killed: {}",
        String::from_utf8_lossy(&ended.stderr)
    );
}

/// Eight reviewers and four importers on one database, each a console of its own (its own
/// connections; one is a process of its own), while that one is killed mid-batch: its claims
/// lapse and the others take them. Every imported message is kept and decided by exactly as
/// many reviewers as it wants (two for the 10% overlap share), never more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_reviewers_and_four_importers_decide_every_message_once_though_one_console_dies() {
    let t = temp_store().await;
    let policy = QueuePolicy {
        overlap_percent: 10,
        claim_seconds: 5,
    };
    t.store
        .set_queue_policy("admin", &policy)
        .await
        .expect("policy");
    let importing_done = Arc::new(AtomicBool::new(false));
    let started = std::time::Instant::now();

    let mut importers = Vec::new();
    for importer in 0..IMPORTERS {
        let store = Store::connect(&t.scratch.database).await.expect("console");
        importers.push(tokio::spawn(async move {
            let rows = LOAD_MESSAGES / IMPORTERS;
            let batch = store
                .begin_import(
                    &format!("part-{importer}.txt"),
                    &format!("sha-{importer}"),
                    rows,
                )
                .await
                .expect("batch");
            let flagged = verdict(&["spam"]);
            let templates = templates();
            for row in 1..=rows {
                let text = format!("pesan {importer}-{row}");
                store
                    .record(&NewVerdict {
                        text: &text,
                        source: Source::Import,
                        user_id: None,
                        import: Some(ImportRow {
                            batch_id: batch.id,
                            row,
                        }),
                        verdict: &flagged,
                        templates: &templates,
                    })
                    .await
                    .expect("record");
            }
            store.close().await;
        }));
    }

    let database = t.scratch.arg();
    // The killed console's claims are nobody's to decide until they lapse, and `remaining` does
    // not count what others hold: a reviewer that stopped at "nothing remaining" before then
    // left them undecided whenever the import finished within a claim's life of the kill.
    let dead_claims_lapsed = Arc::new(AtomicBool::new(false));
    // The other reviewers start once the doomed console holds a batch worth killing in. Started
    // together, on a CPU where they outpace the importers every batch the console claimed was
    // a few rows, and the queue ran dry before it held one (an Intel Xeon's CI run).
    let console_holds_a_batch = Arc::new(AtomicBool::new(false));
    let killed = {
        let lapsed = dead_claims_lapsed.clone();
        let holds_a_batch = console_holds_a_batch.clone();
        let claim_life = Duration::from_secs(u64::from(policy.claim_seconds));
        tokio::spawn(async move {
            let report = tokio::task::spawn_blocking(move || {
                kill_a_console_mid_batch(&database, &holds_a_batch)
            })
            .await
            .expect("the killing task");
            tokio::time::sleep(claim_life + Duration::from_millis(500)).await;
            lapsed.store(true, Ordering::SeqCst);
            report
        })
    };
    let mut reviewers = Vec::new();
    for reviewer in 1..REVIEWERS {
        let store = Store::connect(&t.scratch.database).await.expect("console");
        let importing_done = importing_done.clone();
        let dead_claims_lapsed = dead_claims_lapsed.clone();
        let console_holds_a_batch = console_holds_a_batch.clone();
        reviewers.push(tokio::spawn(async move {
            let name = format!("reviewer-{reviewer}");
            let mut decided = 0_u64;
            while !console_holds_a_batch.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            loop {
                let finished = importing_done.load(Ordering::SeqCst)
                    && dead_claims_lapsed.load(Ordering::SeqCst);
                let batch = store.claim_reviews(&name, 0.15, 25).await.expect("claim");
                if batch.items.is_empty() {
                    if finished && batch.remaining == 0 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                for item in &batch.items {
                    match store.add_review(&agree(item.verdict_id, &name)).await {
                        Ok(_) => decided += 1,
                        // A claim that ran out while its reviewer was slow may be someone else's
                        // now; one that still runs may not.
                        Err(StoreError::Taken { .. })
                            if aegis_store::now_millis() >= batch.claimed_until => {}
                        Err(e) => panic!("{name} decides a verdict it holds: {e}"),
                    }
                }
            }
            store.close().await;
            (name, decided)
        }));
    }

    for importer in importers {
        importer.await.expect("importer");
    }
    importing_done.store(true, Ordering::SeqCst);
    eprintln!("imported in {:?}", started.elapsed());
    let mut decided_by = BTreeMap::new();
    let killed_reported = killed.await.expect("the killed console");
    for reviewer in reviewers {
        let (name, decided) = reviewer.await.expect("reviewer");
        decided_by.insert(name, decided);
    }

    eprintln!("decided in {:?}", started.elapsed());
    let s = &t.store;
    let total: i64 = s.count(&Default::default()).await.expect("count");
    assert_eq!(total, LOAD_MESSAGES, "no imported row is lost");
    let reviews: Vec<(i64, String)> = {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = s
                .list(&Default::default(), after, 1000)
                .await
                .expect("page");
            for row in &page.rows {
                let detail = s.get(row.verdict_id).await.expect("get").expect("row");
                for review in detail.reviews {
                    all.push((row.verdict_id, review.reviewer));
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break all,
            }
        }
    };
    let mut per_verdict: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (id, reviewer) in reviews {
        per_verdict.entry(id).or_default().push(reviewer);
    }
    assert_eq!(
        per_verdict.len() as i64,
        LOAD_MESSAGES,
        "every message decided"
    );
    let mut overlapped = 0;
    for (id, reviewers) in &per_verdict {
        let distinct: BTreeSet<&String> = reviewers.iter().collect();
        assert_eq!(
            distinct.len(),
            reviewers.len(),
            "verdict {id}: {reviewers:?}"
        );
        assert_eq!(
            reviewers.len(),
            policy.reviewers_wanted(*id),
            "verdict {id} decided by {reviewers:?}"
        );
        overlapped += usize::from(reviewers.len() == 2);
    }
    assert_eq!(overlapped as i64, LOAD_MESSAGES / 10, "the overlap share");
    let mut recorded_by: BTreeMap<&str, u64> = BTreeMap::new();
    for reviewer in per_verdict.values().flatten() {
        *recorded_by.entry(reviewer.as_str()).or_default() += 1;
    }
    let killed_recorded = recorded_by.remove(KILLED_REVIEWER).unwrap_or(0);
    assert!(killed_reported >= 5, "killed mid-batch");
    // A decision may commit just as the kill lands, before its line is written.
    assert!(
        (killed_reported..=killed_reported + 1).contains(&killed_recorded),
        "the killed console reported {killed_reported} decisions, the history holds {killed_recorded}"
    );
    let recorded_by: BTreeMap<String, u64> = recorded_by
        .into_iter()
        .map(|(name, n)| (name.to_string(), n))
        .collect();
    assert_eq!(
        decided_by, recorded_by,
        "every decision a console made is kept"
    );
}
