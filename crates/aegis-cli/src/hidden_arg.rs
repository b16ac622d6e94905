//! `aegis train --hidden VALIDATOR:UNITS`, parsed.

/// `VALIDATOR:UNITS` of `--hidden`.
pub(crate) fn parse_hidden(spec: &str) -> Result<(String, usize), String> {
    let (validator, units) = spec
        .split_once(':')
        .ok_or_else(|| format!("{spec:?} is not VALIDATOR:UNITS, e.g. toxic:64"))?;
    match units.trim().parse::<usize>() {
        Ok(units) if units > 0 && !validator.trim().is_empty() => {
            Ok((validator.trim().to_string(), units))
        }
        _ => Err(format!(
            "{spec:?}: UNITS must be a whole number above 0, after a validator's key"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_hidden;

    #[test]
    fn a_hidden_layer_is_asked_for_as_a_validator_and_a_width_above_zero() {
        assert_eq!(parse_hidden("toxic:64"), Ok(("toxic".to_string(), 64)));
        assert_eq!(
            parse_hidden(" harassment : 8 "),
            Ok(("harassment".to_string(), 8))
        );
        for refused in [
            "toxic",
            "toxic:0",
            "toxic:-3",
            "toxic:",
            ":64",
            " :64",
            "toxic:six",
        ] {
            let error = parse_hidden(refused).expect_err(refused);
            assert!(error.contains(refused), "{refused}: {error}");
        }
    }
}
