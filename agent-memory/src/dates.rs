//! Calendar ids of the TOC hierarchy, from Unix milliseconds (UTC): the
//! proleptic Gregorian calendar and ISO weeks, computed here (no calendar
//! dependency).

const DAY_MS: u64 = 86_400_000;

/// Year, month (1–12) and day (1–31) of day number `days` since
/// 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    // Shift to a calendar starting on 0000-03-01 so leap days end a year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of the 400-year era
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // month is 1..=12 and day 1..=31 by construction.
    let small = |n: i64| u32::try_from(n).unwrap_or(0);
    (year, small(month), small(day))
}

/// Day number since 1970-01-01 of a civil date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn day_number(ms: u64) -> i64 {
    i64::try_from(ms / DAY_MS).unwrap_or(i64::MAX)
}

/// Year, month (1–12) and day (1–31), UTC, of Unix milliseconds `ms`: the
/// calendar the TOC ids are made of, for tools that print times.
pub fn civil_date(ms: u64) -> (i64, u32, u32) {
    civil(day_number(ms))
}

/// ISO year and week (1–53) of day number `days`.
fn iso_week(days: i64) -> (i64, u32) {
    // 1970-01-01 was a Thursday; weekday 1 = Monday.
    let weekday = (days + 3).rem_euclid(7) + 1;
    let thursday = days - weekday + 4;
    let (year, _, _) = civil(thursday);
    let jan1 = days_from_civil(year, 1, 1);
    let week = (thursday - jan1) / 7 + 1;
    (year, u32::try_from(week).unwrap_or(0))
}

/// `toc:year:2024`.
pub fn year_id(ms: u64) -> String {
    let (y, _, _) = civil(day_number(ms));
    format!("toc:year:{y:04}")
}

/// `toc:month:2024-01`.
pub fn month_id(ms: u64) -> String {
    let (y, m, _) = civil(day_number(ms));
    format!("toc:month:{y:04}-{m:02}")
}

/// `toc:week:2024-w05`: the ISO week (its year may differ from the
/// calendar year around New Year).
pub fn week_id(ms: u64) -> String {
    let (y, w) = iso_week(day_number(ms));
    format!("toc:week:{y:04}-w{w:02}")
}

/// `toc:day:2024-01-29`.
pub fn day_id(ms: u64) -> String {
    let (y, m, d) = civil(day_number(ms));
    format!("toc:day:{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::{day_id, days_from_civil, month_id, week_id, year_id};

    #[test]
    fn calendar_ids_match_known_dates() {
        // 1706540400000 = 2024-01-29 15:00:00 UTC, a Monday of ISO week 5.
        let t = 1_706_540_400_000;
        assert_eq!(year_id(t), "toc:year:2024");
        assert_eq!(month_id(t), "toc:month:2024-01");
        assert_eq!(day_id(t), "toc:day:2024-01-29");
        assert_eq!(week_id(t), "toc:week:2024-w05");
        // 2024-02-29 (leap day) 00:00 UTC = 1709164800000.
        assert_eq!(day_id(1_709_164_800_000), "toc:day:2024-02-29");
        // 2021-01-03 (Sunday) belongs to ISO week 53 of 2020:
        // 1609632000000 = 2021-01-03 00:00 UTC.
        assert_eq!(week_id(1_609_632_000_000), "toc:week:2020-w53");
        assert_eq!(day_id(1_609_632_000_000), "toc:day:2021-01-03");
        // 2024-12-30 (Monday) is in ISO week 1 of 2025: 1735516800000.
        assert_eq!(week_id(1_735_516_800_000), "toc:week:2025-w01");
        // The epoch and a date far ahead.
        assert_eq!(day_id(0), "toc:day:1970-01-01");
        assert_eq!(week_id(0), "toc:week:1970-w01");
        // 2100-03-01 00:00 UTC = 4107542400000 (2100 is not a leap year).
        assert_eq!(day_id(4_107_542_400_000), "toc:day:2100-03-01");
        assert_eq!(day_id(4_107_542_400_000 - 1), "toc:day:2100-02-28");
        assert_eq!(days_from_civil(2024, 1, 29), 19_751);
        // Day numbers counted by Python's `datetime.date` arithmetic.
        assert_eq!(days_from_civil(2024, 3, 1), 19_783);
        assert_eq!(days_from_civil(2100, 3, 1), 47_541);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(1600, 2, 29), -135_081);
        // The last day of a 400-year cycle and the day after:
        // 2000-02-29 and 2000-03-01 00:00 UTC.
        assert_eq!(day_id(951_782_400_000), "toc:day:2000-02-29");
        assert_eq!(day_id(951_868_800_000), "toc:day:2000-03-01");
    }
}
