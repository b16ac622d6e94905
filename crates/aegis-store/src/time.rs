//! Times are Unix milliseconds in the database; these convert at the edges.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Result, StoreError};

pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `YYYY-MM-DD` (UTC) to the millisecond its day starts.
pub fn parse_day(day: &str) -> Result<i64> {
    let invalid = || StoreError::Invalid(format!("{day:?} is not a date like 2026-11-22"));
    let mut parts = day.trim().splitn(3, '-');
    let mut next = |len: usize| -> Result<i64> {
        let part = parts
            .next()
            .filter(|p| p.len() == len)
            .ok_or_else(invalid)?;
        part.parse::<i64>().map_err(|_| invalid())
    };
    let (y, m, d) = (next(4)?, next(2)?, next(2)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return Err(invalid());
    }
    Ok(days_from_civil(y, m, d) * 86_400_000)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T09:30:00.000Z`.
pub fn format_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms_of_day = millis.rem_euclid(86_400_000);
    // Inverse of days_from_civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip() {
        assert_eq!(parse_day("1970-01-01").ok(), Some(0));
        let day = parse_day("2024-02-29").expect("leap day");
        assert_eq!(format_millis(day + 3_723_004), "2024-02-29T01:02:03.004Z");
        assert_eq!(
            format_millis(parse_day("2026-11-22").expect("day")),
            "2026-11-22T00:00:00.000Z"
        );
        for bad in ["2023-02-29", "2026-13-01", "yesterday", "2026-1-1", ""] {
            assert!(parse_day(bad).is_err(), "{bad}");
        }
    }
}
