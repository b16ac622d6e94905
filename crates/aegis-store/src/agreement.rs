//! How far reviewers agree, on the verdicts two or more of them decided (the queue's overlap
//! share): Cohen's kappa per validator, over every pair of reviewers, and per pair of reviewers,
//! over every validator. Kappa discounts the agreement two reviewers would reach by chance from
//! how often each says "violation", so a validator that almost never fires does not look agreed
//! on just because everyone keeps saying no.

use std::collections::BTreeMap;

use serde::Serialize;
use sqlx::Row;

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::reviewed::review_label;
use crate::reviews::Decision;

/// Labels two reviewers gave the same things, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PairedLabels {
    both_clean: u64,
    first_only: u64,
    second_only: u64,
    both_violation: u64,
}

impl PairedLabels {
    pub(crate) fn add(&mut self, first: bool, second: bool) {
        match (first, second) {
            (false, false) => self.both_clean += 1,
            (true, false) => self.first_only += 1,
            (false, true) => self.second_only += 1,
            (true, true) => self.both_violation += 1,
        }
    }

    pub(crate) fn kappa(&self) -> Kappa {
        let compared = self.both_clean + self.first_only + self.second_only + self.both_violation;
        let agreed = self.both_clean + self.both_violation;
        let kappa = (compared > 0)
            .then(|| {
                let n = compared as f64;
                let observed = agreed as f64 / n;
                let first_yes = (self.first_only + self.both_violation) as f64 / n;
                let second_yes = (self.second_only + self.both_violation) as f64 / n;
                let chance = first_yes * second_yes + (1.0 - first_yes) * (1.0 - second_yes);
                // Both gave one label throughout: chance explains every agreement, and kappa
                // is undefined rather than perfect.
                (chance < 1.0 - 1e-12).then(|| (observed - chance) / (1.0 - chance))
            })
            .flatten();
        Kappa {
            compared,
            agreed,
            kappa,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Kappa {
    /// Labels compared: one per message and validator that both reviewers labelled.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub compared: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub agreed: u64,
    /// None with nothing compared, or when both reviewers gave a single label throughout.
    pub kappa: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ValidatorAgreement {
    pub validator: String,
    pub agreement: Kappa,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PairAgreement {
    pub first: String,
    pub second: String,
    pub agreement: Kappa,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ReviewerAgreement {
    /// Verdicts decided by two or more reviewers.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub messages: u64,
    pub validators: Vec<ValidatorAgreement>,
    pub pairs: Vec<PairAgreement>,
}

/// Reviewers whose latest reviews of one verdict gave labels, validator → reviewer → label.
type VerdictLabels = BTreeMap<String, BTreeMap<String, bool>>;

impl Store {
    pub async fn reviewer_agreement(&self) -> Result<ReviewerAgreement> {
        const OVERLAPPED: &str = "SELECT verdict_id FROM reviews GROUP BY verdict_id HAVING count(DISTINCT reviewer) >= 2";
        let results: Vec<(i64, String, i64, String)> = sqlx::query_as(&format!(
            "SELECT r.verdict_id, r.validator_key, r.passed, v.status
               FROM validator_results r JOIN verdicts v ON v.id = r.verdict_id
              WHERE r.verdict_id IN ({OVERLAPPED})"
        ))
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        // verdict → (failed, validator → violated)
        let mut verdicts: BTreeMap<i64, (bool, BTreeMap<String, bool>)> = BTreeMap::new();
        for (id, key, passed, status) in results {
            let entry = verdicts
                .entry(id)
                .or_insert((status == "failed", BTreeMap::new()));
            entry.1.insert(key, passed == 0);
        }
        let reviews = sqlx::query(&format!(
            "SELECT verdict_id, reviewer, decision, validator_decisions FROM reviews
              WHERE verdict_id IN ({OVERLAPPED}) ORDER BY verdict_id, created_at, id"
        ))
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        // A reviewer's latest review of a verdict replaces their earlier ones.
        let mut latest: BTreeMap<(i64, String), (Decision, BTreeMap<String, Decision>)> =
            BTreeMap::new();
        for row in reviews {
            let id: i64 = row.try_get(0).map_err(|e| self.sql(e))?;
            let reviewer: String = row.try_get(1).map_err(|e| self.sql(e))?;
            let decision: String = row.try_get(2).map_err(|e| self.sql(e))?;
            let validators: String = row.try_get(3).map_err(|e| self.sql(e))?;
            let validators = serde_json::from_str(&validators).map_err(|e| {
                StoreError::Invalid(format!(
                    "a review of verdict {id} has unreadable decisions: {e}"
                ))
            })?;
            latest.insert((id, reviewer), (decision.parse()?, validators));
        }
        let mut labels: BTreeMap<i64, VerdictLabels> = BTreeMap::new();
        for ((id, reviewer), (overall, on_validators)) in latest {
            let Some((failed, results)) = verdicts.get(&id) else {
                continue;
            };
            for (key, violated) in results {
                let label =
                    review_label(on_validators.get(key).copied(), overall, *violated, *failed);
                if let Some(label) = label {
                    labels
                        .entry(id)
                        .or_default()
                        .entry(key.clone())
                        .or_default()
                        .insert(reviewer.clone(), label);
                }
            }
        }
        Ok(agreement_of(verdicts.len() as u64, &labels))
    }
}

fn agreement_of(messages: u64, labels: &BTreeMap<i64, VerdictLabels>) -> ReviewerAgreement {
    let mut by_validator: BTreeMap<String, PairedLabels> = BTreeMap::new();
    let mut by_pair: BTreeMap<(String, String), PairedLabels> = BTreeMap::new();
    for per_validator in labels.values() {
        for (validator, by_reviewer) in per_validator {
            let given: Vec<(&String, &bool)> = by_reviewer.iter().collect();
            for (i, (first, first_label)) in given.iter().enumerate() {
                for (second, second_label) in &given[i + 1..] {
                    by_validator
                        .entry(validator.clone())
                        .or_default()
                        .add(**first_label, **second_label);
                    by_pair
                        .entry(((*first).clone(), (*second).clone()))
                        .or_default()
                        .add(**first_label, **second_label);
                }
            }
        }
    }
    ReviewerAgreement {
        messages,
        validators: by_validator
            .into_iter()
            .map(|(validator, paired)| ValidatorAgreement {
                validator,
                agreement: paired.kappa(),
            })
            .collect(),
        pairs: by_pair
            .into_iter()
            .map(|((first, second), paired)| PairAgreement {
                first,
                second,
                agreement: paired.kappa(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(both_clean: u64, first_only: u64, second_only: u64, both_violation: u64) -> Kappa {
        PairedLabels {
            both_clean,
            first_only,
            second_only,
            both_violation,
        }
        .kappa()
    }

    #[test]
    fn kappa_matches_a_worked_example() {
        // 50 items: 20 both yes, 15 both no, 5 first only, 10 second only. Observed 0.7;
        // first says yes 0.5, second 0.6; chance 0.5; kappa 0.4.
        let k = counted(15, 5, 10, 20);
        assert_eq!((k.compared, k.agreed), (50, 35));
        assert!((k.kappa.unwrap() - 0.4).abs() < 1e-12, "{k:?}");
    }

    #[test]
    fn kappa_is_one_for_agreement_beyond_chance_and_undefined_for_one_label_throughout() {
        assert_eq!(counted(3, 0, 0, 2).kappa, Some(1.0));
        assert_eq!(counted(7, 0, 0, 0).kappa, None);
        assert_eq!(counted(0, 0, 0, 0).kappa, None);
        assert!(
            counted(0, 3, 2, 0).kappa.unwrap() < 0.0,
            "worse than chance"
        );
    }

    #[test]
    fn every_pair_of_reviewers_is_compared_per_validator_and_per_pair() {
        let mut one = VerdictLabels::new();
        one.insert(
            "toxic".into(),
            BTreeMap::from([
                ("ana".to_string(), true),
                ("budi".to_string(), true),
                ("cici".to_string(), false),
            ]),
        );
        one.insert("spam".into(), BTreeMap::from([("ana".to_string(), false)]));
        let agreement = agreement_of(1, &BTreeMap::from([(7, one)]));
        assert_eq!(agreement.validators.len(), 1, "spam had one reviewer");
        assert_eq!(agreement.validators[0].agreement.compared, 3);
        assert_eq!(agreement.validators[0].agreement.agreed, 1);
        let pairs: Vec<(&str, &str, u64)> = agreement
            .pairs
            .iter()
            .map(|p| (p.first.as_str(), p.second.as_str(), p.agreement.agreed))
            .collect();
        assert_eq!(
            pairs,
            vec![("ana", "budi", 1), ("ana", "cici", 0), ("budi", "cici", 0)]
        );
    }
}
