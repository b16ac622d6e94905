//! How rows are dealt into cross-validation folds: stratified by class in input order, or by
//! source, each fold holding out whole groups.

use std::collections::BTreeMap;

/// The k-th example of each class goes to fold k mod `folds`: every fold gets both classes in
/// proportion, in a way that depends only on input order.
pub(crate) fn stratified_folds(labels: &[bool], folds: usize) -> Vec<usize> {
    let (mut seen_pos, mut seen_neg) = (0, 0);
    labels
        .iter()
        .map(|&label| {
            let seen = if label { &mut seen_pos } else { &mut seen_neg };
            let fold = *seen % folds;
            *seen += 1;
            fold
        })
        .collect()
}

/// Folds that each hold out whole groups (sources), at most `folds` of them. Groups with
/// positives are dealt first, largest first, each to the fold with the fewest positives so far,
/// so that every fold's training side keeps both classes; the rest, largest first, to the fold
/// with the fewest rows. Returns the fold of each row and the number of folds, or why the rows
/// cannot be split by source (fewer than two groups with positives, or with negatives).
pub fn source_folds(
    labels: &[bool],
    groups: &[&str],
    folds: usize,
) -> std::result::Result<(Vec<usize>, usize), String> {
    // name -> (rows, positives)
    let mut sizes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (&group, &label) in groups.iter().zip(labels) {
        let entry = sizes.entry(group).or_default();
        entry.0 += 1;
        entry.1 += usize::from(label);
    }
    let with_positives = sizes.values().filter(|(_, p)| *p > 0).count();
    let with_negatives = sizes.values().filter(|(n, p)| n > p).count();
    if with_positives < 2 || with_negatives < 2 {
        return Err(format!(
            "{} source(s) with positives and {} with negatives: holding one out needs two of each",
            with_positives, with_negatives
        ));
    }
    let folds = folds.min(sizes.len());
    let mut order: Vec<(&str, usize, usize)> =
        sizes.iter().map(|(g, (n, p))| (*g, *n, *p)).collect();
    // Positives first (most first), then by size; the name breaks ties, so the split depends only
    // on the rows.
    order.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(b.0)));
    let mut fold_rows = vec![0usize; folds];
    let mut fold_positives = vec![0usize; folds];
    let mut fold_of_group: BTreeMap<&str, usize> = BTreeMap::new();
    for (group, rows, positives) in order {
        let load = |f: usize| {
            if positives > 0 {
                (fold_positives[f], fold_rows[f])
            } else {
                (fold_rows[f], fold_positives[f])
            }
        };
        let fold = (0..folds).min_by_key(|&f| (load(f), f)).unwrap_or(0);
        fold_rows[fold] += rows;
        fold_positives[fold] += positives;
        fold_of_group.insert(group, fold);
    }
    let fold_of: Vec<usize> = groups.iter().map(|g| fold_of_group[g]).collect();
    // Every fold's training side must hold both classes (a fit needs them).
    let total_positives = labels.iter().filter(|&&l| l).count();
    let total_negatives = labels.len() - total_positives;
    for fold in 0..folds {
        let held_negatives = fold_rows[fold] - fold_positives[fold];
        if fold_positives[fold] == total_positives || held_negatives == total_negatives {
            return Err(format!("fold {fold} would hold out every row of one class"));
        }
    }
    Ok((fold_of, folds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_folds_keep_both_classes_on_every_training_side() {
        // Positives come from two sources only: they must land in different folds.
        let labels = [
            true, true, true, false, false, true, false, false, false, false,
        ];
        let groups = ["a", "a", "a", "a", "b", "c", "d", "d", "e", "f"];
        let (fold_of, folds) = source_folds(&labels, &groups, 5).expect("splittable");
        assert_eq!(folds, 5);
        assert_ne!(fold_of[0], fold_of[5]);
        for fold in 0..folds {
            let train: Vec<bool> = (0..labels.len())
                .filter(|&i| fold_of[i] != fold)
                .map(|i| labels[i])
                .collect();
            assert!(
                train.contains(&true) && train.contains(&false),
                "fold {fold}"
            );
        }
        // Fewer groups than folds: one fold a group.
        let (_, folds) = source_folds(&[true, false, true, false], &["a", "a", "b", "b"], 5)
            .expect("two groups of each");
        assert_eq!(folds, 2);
    }

    #[test]
    fn folds_are_stratified() {
        let labels = [true, false, false, true, false, true, false];
        assert_eq!(stratified_folds(&labels, 2), vec![0, 0, 1, 1, 0, 0, 1]);
    }
}
