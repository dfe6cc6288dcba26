//! Calendar ids of the TOC hierarchy, from Unix milliseconds (UTC): the
//! proleptic Gregorian calendar and ISO weeks, computed here (no calendar
//! dependency).

use crate::Level;

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

/// Year, month and day of day number `days` (for checking a date read
/// back).
pub(crate) fn civil_of(days: i64) -> (i64, u32, u32) {
    civil(days)
}

/// Day number since 1970-01-01 of a civil date.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
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

/// ISO weekday of day number `days`: 1 = Monday ... 7 = Sunday.
fn weekday(days: i64) -> i64 {
    // 1970-01-01 was a Thursday.
    (days + 3).rem_euclid(7) + 1
}

/// ISO year and week (1–53) of day number `days`.
fn iso_week(days: i64) -> (i64, u32) {
    let thursday = days - weekday(days) + 4;
    let (year, _, _) = civil(thursday);
    let jan1 = days_from_civil(year, 1, 1);
    let week = (thursday - jan1) / 7 + 1;
    (year, u32::try_from(week).unwrap_or(0))
}

/// Day number of the Thursday of ISO week `week` of ISO year `year`: the
/// day that names the week's year and, in the hierarchy, its month.
fn iso_thursday(year: i64, week: u32) -> i64 {
    // 4 January is always in week 1.
    let jan4 = days_from_civil(year, 1, 4);
    jan4 - weekday(jan4) + 4 + 7 * (i64::from(week) - 1)
}

/// Unix milliseconds of the start of day number `days`, 0 before the
/// epoch (the week of 1970-01-01 began on 1969-12-29).
fn day_start_ms(days: i64) -> u64 {
    u64::try_from(days)
        .ok()
        .and_then(|d| d.checked_mul(DAY_MS))
        .unwrap_or(0)
}

/// `toc:year:2024`: the calendar year of `ms` itself (the year a day sits
/// under in the hierarchy is its week's: [`calendar_chain`]).
pub fn year_id(ms: u64) -> String {
    let (y, _, _) = civil(day_number(ms));
    format!("toc:year:{y:04}")
}

/// `toc:month:2024:01`: the original's spelling (year and month separated
/// by `:`), the calendar month of `ms` itself (the month a day sits under
/// in the hierarchy is its week's Thursday's: [`calendar_chain`]).
pub fn month_id(ms: u64) -> String {
    let (y, m, _) = civil(day_number(ms));
    format!("toc:month:{y:04}:{m:02}")
}

/// `toc:week:2024:W05`: the ISO week, whose year may differ from the
/// calendar year around New Year (2021-01-03 is in `toc:week:2020:W53`).
pub fn week_id(ms: u64) -> String {
    let (y, w) = iso_week(day_number(ms));
    format!("toc:week:{y:04}:W{w:02}")
}

/// `toc:day:2024-01-29`.
pub fn day_id(ms: u64) -> String {
    let (y, m, d) = civil(day_number(ms));
    format!("toc:day:{y:04}-{m:02}-{d:02}")
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

fn month_name(m: u32) -> &'static str {
    MONTHS[usize::try_from(m.clamp(1, 12) - 1).unwrap_or(0)]
}

/// One calendar node of the hierarchy above a day: its id, level, title
/// and span (start inclusive, end exclusive, Unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarNode {
    /// `toc:year:2024`, `toc:month:2024:01`, `toc:week:2024:W05` or
    /// `toc:day:2024-01-29`.
    pub node_id: String,
    /// Year, month, week or day.
    pub level: Level,
    /// `2024`, `January 2024`, `Week 5 of 2024`, `Monday, January 29, 2024`.
    pub title: String,
    /// The span's first millisecond.
    pub start_ms: u64,
    /// The span's end (exclusive).
    pub end_ms: u64,
}

/// The calendar nodes an event at `ms` sits under, year first: its day,
/// the day's ISO week, the month of that week's Thursday and that month's
/// year. A week belongs to one month (the one holding most of its days),
/// so a week that spans two months sits under one, and a day of
/// 2021-01-03 sits under `toc:week:2020:W53`, `toc:month:2020:12` and
/// `toc:year:2020`: the hierarchy is a tree, as the original's.
pub fn calendar_chain(ms: u64) -> [CalendarNode; 4] {
    let days = day_number(ms);
    let (dy, dm, dd) = civil(days);
    let monday = days - weekday(days) + 1;
    let (wy, w) = iso_week(days);
    let (my, mm, _) = civil(monday + 3);
    let month_start = days_from_civil(my, mm, 1);
    let month_end = if mm == 12 {
        days_from_civil(my + 1, 1, 1)
    } else {
        days_from_civil(my, mm + 1, 1)
    };
    let weekday_name = WEEKDAYS[usize::try_from(weekday(days) - 1).unwrap_or(0)];
    [
        CalendarNode {
            node_id: format!("toc:year:{my:04}"),
            level: Level::Year,
            title: format!("{my}"),
            start_ms: day_start_ms(days_from_civil(my, 1, 1)),
            end_ms: day_start_ms(days_from_civil(my + 1, 1, 1)),
        },
        CalendarNode {
            node_id: format!("toc:month:{my:04}:{mm:02}"),
            level: Level::Month,
            title: format!("{} {my}", month_name(mm)),
            start_ms: day_start_ms(month_start),
            end_ms: day_start_ms(month_end),
        },
        CalendarNode {
            node_id: format!("toc:week:{wy:04}:W{w:02}"),
            level: Level::Week,
            title: format!("Week {w} of {wy}"),
            start_ms: day_start_ms(monday),
            end_ms: day_start_ms(monday + 7),
        },
        CalendarNode {
            node_id: format!("toc:day:{dy:04}-{dm:02}-{dd:02}"),
            level: Level::Day,
            title: format!("{weekday_name}, {} {dd:02}, {dy}", month_name(dm)),
            start_ms: day_start_ms(days),
            end_ms: day_start_ms(days + 1),
        },
    ]
}

fn number<T: std::str::FromStr>(text: &str, digits: usize) -> Option<T> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The day number of a `YYYY-MM-DD` date, if it is one.
fn parse_date(text: &str) -> Option<i64> {
    let mut parts = text.split('-');
    let y: i64 = number(parts.next()?, 4)?;
    let m: u32 = number(parts.next()?, 2)?;
    let d: u32 = number(parts.next()?, 2)?;
    if parts.next().is_some() {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // 2023-02-30, 2023-13-01 and 2023-01-00 are no dates: they come back
    // as others.
    (civil(days) == (y, m, d)).then_some(days)
}

/// The id of the node that `node_id` sits under in the hierarchy: a
/// segment's day, a day's ISO week, a week's month (its Thursday's), a
/// month's year; `None` for a year or an id that is no node of the
/// hierarchy.
pub fn parent_id(node_id: &str) -> Option<String> {
    let rest = node_id.strip_prefix("toc:")?;
    let (level, rest) = rest.split_once(':')?;
    match level {
        "segment" => {
            let (day, suffix) = rest.split_once(':')?;
            (parse_date(day).is_some() && !suffix.is_empty()).then(|| format!("toc:day:{day}"))
        }
        "day" => {
            let days = parse_date(rest)?;
            let (y, w) = iso_week(days);
            Some(format!("toc:week:{y:04}:W{w:02}"))
        }
        "week" => {
            let (y, w) = rest.split_once(":W")?;
            let (y, w): (i64, u32) = (number(y, 4)?, number(w, 2)?);
            let thursday = iso_thursday(y, w);
            // Week 53 exists only in years whose weeks reach it.
            if w == 0 || iso_week(thursday) != (y, w) {
                return None;
            }
            let (my, mm, _) = civil(thursday);
            Some(format!("toc:month:{my:04}:{mm:02}"))
        }
        "month" => {
            let (y, m) = rest.split_once(':')?;
            let (y, m): (i64, u32) = (number(y, 4)?, number(m, 2)?);
            (1..=12).contains(&m).then(|| format!("toc:year:{y:04}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{
        CalendarNode, Level, calendar_chain, day_id, days_from_civil, month_id, parent_id, week_id,
        year_id,
    };

    #[test]
    fn calendar_ids_match_known_dates() {
        // 1706540400000 = 2024-01-29 15:00:00 UTC, a Monday of ISO week 5.
        let t = 1_706_540_400_000;
        assert_eq!(year_id(t), "toc:year:2024");
        assert_eq!(month_id(t), "toc:month:2024:01");
        assert_eq!(day_id(t), "toc:day:2024-01-29");
        assert_eq!(week_id(t), "toc:week:2024:W05");
        // 2024-02-29 (leap day) 00:00 UTC = 1709164800000.
        assert_eq!(day_id(1_709_164_800_000), "toc:day:2024-02-29");
        // 2021-01-03 (Sunday) belongs to ISO week 53 of 2020:
        // 1609632000000 = 2021-01-03 00:00 UTC.
        assert_eq!(week_id(1_609_632_000_000), "toc:week:2020:W53");
        assert_eq!(day_id(1_609_632_000_000), "toc:day:2021-01-03");
        // 2024-12-30 (Monday) is in ISO week 1 of 2025: 1735516800000.
        assert_eq!(week_id(1_735_516_800_000), "toc:week:2025:W01");
        // The epoch and a date far ahead.
        assert_eq!(day_id(0), "toc:day:1970-01-01");
        assert_eq!(week_id(0), "toc:week:1970:W01");
        // 2100-03-01 00:00 UTC = 4107542400000 (2100 is not a leap year).
        assert_eq!(day_id(4_107_542_400_000), "toc:day:2100-03-01");
        assert_eq!(day_id(4_107_542_400_000 - 1), "toc:day:2100-02-28");
        assert_eq!(days_from_civil(2024, 1, 29), 19_751);
        assert_eq!(super::civil_date(t), (2024, 1, 29));
        assert_eq!(super::civil_date(0), (1970, 1, 1));
        assert_eq!(super::civil_date(4_107_542_400_000 - 1), (2100, 2, 28));
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

    fn node(node_id: &str, level: Level, title: &str, start_ms: u64, end_ms: u64) -> CalendarNode {
        CalendarNode {
            node_id: node_id.to_owned(),
            level,
            title: title.to_owned(),
            start_ms,
            end_ms,
        }
    }

    /// Spans and placement worked out with a calendar: ISO week 5 of 2024
    /// runs from Monday 29 January to Sunday 4 February, so its Thursday
    /// (1 February) puts it under February.
    #[test]
    fn a_day_sits_under_its_week_and_the_week_under_its_thursdays_month() {
        // 2024-01-29 15:00 UTC.
        let chain = calendar_chain(1_706_540_400_000);
        assert_eq!(
            chain,
            [
                // 2024-01-01 and 2025-01-01 00:00 UTC.
                node(
                    "toc:year:2024",
                    Level::Year,
                    "2024",
                    1_704_067_200_000,
                    1_735_689_600_000
                ),
                // 2024-02-01 and 2024-03-01 00:00 UTC.
                node(
                    "toc:month:2024:02",
                    Level::Month,
                    "February 2024",
                    1_706_745_600_000,
                    1_709_251_200_000
                ),
                // Monday 2024-01-29 and Monday 2024-02-05 00:00 UTC.
                node(
                    "toc:week:2024:W05",
                    Level::Week,
                    "Week 5 of 2024",
                    1_706_486_400_000,
                    1_707_091_200_000
                ),
                node(
                    "toc:day:2024-01-29",
                    Level::Day,
                    "Monday, January 29, 2024",
                    1_706_486_400_000,
                    1_706_572_800_000
                ),
            ]
        );
        // Sunday 2021-01-03 12:00 UTC: week 53 of 2020, whose Thursday is
        // 2020-12-31.
        let chain = calendar_chain(1_609_675_200_000);
        let ids: Vec<&str> = chain.iter().map(|n| n.node_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "toc:year:2020",
                "toc:month:2020:12",
                "toc:week:2020:W53",
                "toc:day:2021-01-03"
            ]
        );
        assert_eq!(chain[3].title, "Sunday, January 03, 2021");
        // 2020-12-01 and 2021-01-01 00:00 UTC; Monday 2020-12-28.
        assert_eq!(
            (chain[1].start_ms, chain[1].end_ms),
            (1_606_780_800_000, 1_609_459_200_000)
        );
        assert_eq!(chain[2].start_ms, 1_609_113_600_000);
        // The epoch's week began before it: the span starts at 0.
        let chain = calendar_chain(0);
        assert_eq!(chain[2].node_id, "toc:week:1970:W01");
        assert_eq!((chain[2].start_ms, chain[2].end_ms), (0, 345_600_000));
        // December's month node ends at the next year's first millisecond.
        let chain = calendar_chain(1_703_980_800_000); // 2023-12-31 00:00 UTC
        assert_eq!(chain[1].node_id, "toc:month:2023:12");
        assert_eq!(chain[1].end_ms, 1_704_067_200_000);
    }

    #[test]
    fn parents_follow_the_same_placement() {
        let parent = |id: &str| parent_id(id);
        assert_eq!(
            parent("toc:segment:2024-01-29:01HNVX2X7Q").as_deref(),
            Some("toc:day:2024-01-29")
        );
        // The original's own example: 2024-01-15 is in week 3.
        assert_eq!(
            parent("toc:day:2024-01-15").as_deref(),
            Some("toc:week:2024:W03")
        );
        assert_eq!(
            parent("toc:day:2021-01-03").as_deref(),
            Some("toc:week:2020:W53")
        );
        assert_eq!(
            parent("toc:week:2024:W05").as_deref(),
            Some("toc:month:2024:02")
        );
        assert_eq!(
            parent("toc:week:2020:W53").as_deref(),
            Some("toc:month:2020:12")
        );
        assert_eq!(
            parent("toc:week:2024:W01").as_deref(),
            Some("toc:month:2024:01")
        );
        assert_eq!(
            parent("toc:month:2024:01").as_deref(),
            Some("toc:year:2024")
        );
        // Each parent agrees with the chain of a time inside the child.
        for ms in [0, 1_609_675_200_000, 1_706_540_400_000, 1_735_516_800_000] {
            let chain = calendar_chain(ms);
            for pair in chain.windows(2) {
                assert_eq!(
                    parent(&pair[1].node_id).as_deref(),
                    Some(pair[0].node_id.as_str())
                );
            }
        }
        for no in [
            "toc:year:2024",
            "toc:week:2021:W53", // 2021 has 52 ISO weeks
            "toc:week:2024:W00",
            "toc:week:2024-w05", // the old spelling
            "toc:month:2024-01",
            "toc:month:2024:13",
            "toc:day:2023-02-30",
            "toc:day:2024-01-00",
            "toc:day:2024-13-01",
            "toc:day:2024-00-10",
            "toc:day:2024-01-01-05",
            "toc:segment:2024-13-01:x",
            "toc:day:2024-1-29",
            "toc:segment:2024-01-29:",
            "toc:segment:2024-01-29",
            "toc:other:2024",
            "day:2024-01-29",
        ] {
            assert_eq!(parent(no), None, "{no}");
        }
    }
}
