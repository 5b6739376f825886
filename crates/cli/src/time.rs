//! Points in time on the command line (`--since`, `--until`): an RFC 3339 time, or a
//! duration meaning "that long ago" (`30m`, `1h`, `7d`, `1h30m`), resolved against the
//! current time when the command runs.

use std::str::FromStr;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};

/// What `--help` says TIME is.
pub const TIME_HELP: &str = "TIME is an RFC 3339 time (2026-11-30T10:00:00Z, 2026-11-30T11:00:00+01:00) \
     or a duration meaning that long ago: a number with a unit, s (seconds), m (minutes), h (hours), \
     d (days) or w (weeks), e.g. 30m, 1h, 7d, or several of them, e.g. 1h30m.";

const EXPECTED: &str = "expected an RFC 3339 time like 2026-11-30T10:00:00Z, or a duration ago like 30m, 1h or 7d";

/// A time given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeArg {
    /// An absolute time.
    At(DateTime<Utc>),
    /// That long before the command runs.
    Ago(TimeDelta),
}

impl TimeArg {
    /// clap's value parser: `--since` and `--until` reject what this rejects, with its
    /// message.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err(format!("empty time: {EXPECTED}"));
        }
        // Durations are digits and unit letters only; anything else is meant as a time.
        if s.chars().all(|c| c.is_ascii_alphanumeric()) && s.starts_with(|c: char| c.is_ascii_digit()) {
            let ago = parse_duration(s)?;
            // Far enough back to leave chrono's range is a typo, not a query.
            if Utc::now().checked_sub_signed(ago).is_none() {
                return Err(format!("{s:?} is too long ago"));
            }
            return Ok(TimeArg::Ago(ago));
        }
        DateTime::parse_from_rfc3339(s)
            .map(|t| TimeArg::At(t.with_timezone(&Utc)))
            .map_err(|_| {
                // Something like a date: say what RFC 3339 wants besides it.
                let hint = if s.contains(|c: char| c.is_ascii_digit()) {
                    " (a time needs a date, a time of day and an offset)"
                } else {
                    ""
                };
                format!("{s:?} is not a time: {EXPECTED}{hint}")
            })
    }

    /// The time this stands for when the command runs at `now`; durations are counted back
    /// from `now` in whole seconds. `None` only when that leaves chrono's range.
    pub fn resolve(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            TimeArg::At(t) => Some(t),
            TimeArg::Ago(d) => now.checked_sub_signed(d).map(|t| t.trunc_subsecs(0)),
        }
    }
}

impl FromStr for TimeArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TimeArg::parse(s)
    }
}

/// `1h`, `30m`, `7d`, `1h30m`: numbers each followed by a unit (s, m, h, d, w).
fn parse_duration(s: &str) -> Result<TimeDelta, String> {
    let too_long = || format!("{s:?} is too long ago");
    let mut total = TimeDelta::zero();
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "{s:?} is not a duration: a unit must follow a number ({EXPECTED})"
            ));
        }
        let n: i64 = rest[..digits].parse().map_err(|_| too_long())?;
        let Some(unit) = rest[digits..].chars().next() else {
            return Err(format!(
                "{s:?} has no unit: add s, m, h, d or w (e.g. {n}m for {n} minutes ago)"
            ));
        };
        let d = match unit {
            's' => TimeDelta::try_seconds(n),
            'm' => TimeDelta::try_minutes(n),
            'h' => TimeDelta::try_hours(n),
            'd' => TimeDelta::try_days(n),
            'w' => TimeDelta::try_weeks(n),
            u => {
                return Err(format!(
                    "{s:?}: unknown unit {u:?}; use s, m, h, d or w (seconds, minutes, hours, days, weeks)"
                ));
            }
        };
        total = d.and_then(|d| total.checked_add(&d)).ok_or_else(too_long)?;
        rest = &rest[digits + unit.len_utf8()..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ago(secs: i64) -> Result<TimeArg, String> {
        TimeDelta::try_seconds(secs)
            .map(TimeArg::Ago)
            .ok_or_else(|| "bad test value".to_owned())
    }

    #[test]
    fn durations_count_back_from_now() -> Result<(), String> {
        assert_eq!(TimeArg::parse("30s")?, ago(30)?);
        assert_eq!(TimeArg::parse("30m")?, ago(30 * 60)?);
        assert_eq!(TimeArg::parse("1h")?, ago(3600)?);
        assert_eq!(TimeArg::parse("7d")?, ago(7 * 86400)?);
        assert_eq!(TimeArg::parse("2w")?, ago(14 * 86400)?);
        assert_eq!(TimeArg::parse("1h30m")?, ago(5400)?);
        assert_eq!(TimeArg::parse(" 0m ")?, ago(0)?);

        let now: DateTime<Utc> = "2026-11-30T12:00:00.750Z".parse().map_err(|e| format!("{e}"))?;
        let t = TimeArg::parse("90m")?.resolve(now).ok_or("out of range")?;
        assert_eq!(t.to_rfc3339(), "2026-11-30T10:30:00+00:00");
        Ok(())
    }

    #[test]
    fn rfc3339_times_are_taken_as_given() -> Result<(), String> {
        let t = TimeArg::parse("2026-11-30T11:00:00+01:00")?;
        let want: DateTime<Utc> = "2026-11-30T10:00:00Z".parse().map_err(|e| format!("{e}"))?;
        assert_eq!(t, TimeArg::At(want));
        assert_eq!(t.resolve(Utc::now()), Some(want));
        assert_eq!(TimeArg::parse("2026-11-30t10:00:00z")?, TimeArg::At(want));
        Ok(())
    }

    #[test]
    fn bad_values_are_explained() {
        let err = |s: &str| TimeArg::parse(s).err().unwrap_or_default();
        assert_eq!(
            err("yesterday"),
            "\"yesterday\" is not a time: expected an RFC 3339 time like 2026-11-30T10:00:00Z, \
             or a duration ago like 30m, 1h or 7d"
        );
        assert!(err("2026-11-30").contains("needs a date, a time of day and an offset"));
        assert!(err("2026-11-30T10:00:00").contains("is not a time"));
        assert!(err("").starts_with("empty time"));
        assert!(err("15").contains("has no unit"), "{}", err("15"));
        assert!(err("1y").contains("unknown unit 'y'"), "{}", err("1y"));
        assert!(err("1mo").contains("is not a duration"), "{}", err("1mo"));
        assert!(err("1h30").contains("has no unit"));
        assert!(err("99999999999999w").contains("too long ago"));
        assert!(err("999999999999999999999s").contains("too long ago"));
        assert!(err("-1h").contains("is not a time"));
    }
}
