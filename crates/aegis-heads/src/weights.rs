//! How much each training row counts in a head's fit: the classes balanced, and an author's
//! label weighed as one.

/// Each row's weight in the fit. The classes are balanced ([`balancing_weights`]). A row an
/// author taught weighs, in either class, as much as a row of the smaller class: a validator
/// taught a new policy has a few dozen taught positives against thousands of shipped negatives
/// that never mention its topic, and the near misses its author labels (on the topic, not
/// breaking the policy) would count one in thousands and teach the head nothing, however well
/// chosen. The smaller class is then scaled so the classes still weigh the same. With nothing
/// taught (the shipped heads) the weights are exactly the balancing ones.
pub(crate) fn row_weights(labels: &[bool], taught: &[bool]) -> Vec<f64> {
    let mut weights = balancing_weights(labels);
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if !taught.iter().any(|&t| t) || positives == 0 || negatives == 0 {
        return weights;
    }
    let minority_label = positives < negatives;
    let (minority, majority) = if minority_label {
        (positives, negatives)
    } else {
        (negatives, positives)
    };
    let ratio = majority as f64 / minority as f64;
    for ((weight, &label), &was_taught) in weights.iter_mut().zip(labels).zip(taught) {
        if was_taught && label != minority_label {
            *weight = ratio;
        }
    }
    let total = |of: bool| -> f64 {
        weights
            .iter()
            .zip(labels)
            .filter(|(_, &l)| l == of)
            .map(|(w, _)| w)
            .sum()
    };
    let scale = total(!minority_label) / total(minority_label);
    for (weight, &label) in weights.iter_mut().zip(labels) {
        if label == minority_label {
            *weight *= scale;
        }
    }
    weights
}

/// Each row's weight when the smaller class's rows are repeated in order, cyclically, until the
/// classes are the same size.
fn balancing_weights(labels: &[bool]) -> Vec<f64> {
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    let (minority_label, minority, majority) = if positives < negatives {
        (true, positives, negatives)
    } else {
        (false, negatives, positives)
    };
    if minority == 0 {
        return vec![1.0; labels.len()];
    }
    let (each, remainder) = (
        (majority - minority) / minority,
        (majority - minority) % minority,
    );
    let mut seen = 0;
    labels
        .iter()
        .map(|&label| {
            if label != minority_label {
                return 1.0;
            }
            let weight = 1 + each + usize::from(seen < remainder);
            seen += 1;
            weight as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smaller_class_weighs_as_much_as_the_larger() {
        let labels = [true, false, false, true, false, false, false, false];
        // 2 positives against 6 negatives: each positive counts 3 times.
        assert_eq!(
            balancing_weights(&labels),
            vec![3.0, 1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0]
        );
        // 3 against 4: the first positive counts twice, as the cyclic repeat would.
        let labels = [false, true, true, false, true, false, false];
        assert_eq!(
            balancing_weights(&labels),
            vec![1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        );
    }

    #[test]
    fn a_taught_row_of_the_larger_class_weighs_as_a_row_of_the_smaller() {
        let labels = [true, false, false, true, false, false, false, false];
        // Nothing taught: the balancing weights, bit for bit.
        assert_eq!(
            row_weights(&labels, &[false; 8]),
            balancing_weights(&labels)
        );
        // One taught negative weighs 3 (6 / 2), like a positive; the positives grow so the
        // classes still weigh the same: negatives 5 + 3 = 8, positives 2 x 4.
        let taught = [true, false, true, false, false, false, false, false];
        assert_eq!(
            row_weights(&labels, &taught),
            vec![4.0, 1.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0]
        );
    }
}
