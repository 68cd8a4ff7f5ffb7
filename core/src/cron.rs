//! Cron expressions as Nomad's `periodic` block reads them (the `cronexpr` syntax): five
//! fields (minute to day of week), six (with a year), seven (seconds first, with a year), or
//! a macro (`@hourly`, `@daily`/`@midnight`, `@weekly`, `@monthly`, `@yearly`/`@annually`);
//! days of the week `0`–`7` (Sunday is `0` and `7`) or `SUN`–`SAT`. The schedule is read in
//! an IANA time zone, daylight saving included. Evaluation is `jiff-cron`'s; this module
//! translates Nomad's forms to it.

use std::str::FromStr;

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A parsed `periodic` schedule: one or more expressions in one time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    specs: Vec<jiff_cron::Schedule>,
    tz: TimeZone,
}

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// An expression does not parse.
    #[error("invalid cron expression {spec:?}: {reason}")]
    Expression {
        /// The expression.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// The time zone is not a known IANA name.
    #[error("unknown time zone {0:?}")]
    TimeZone(String),
    /// No expression at all.
    #[error("no cron expression given")]
    Empty,
}

impl Schedule {
    /// Parse `specs` in time zone `tz` (empty: UTC).
    pub fn parse(specs: &[String], tz: &str) -> Result<Self, CronError> {
        if specs.is_empty() {
            return Err(CronError::Empty);
        }
        let tz = if tz.is_empty() || tz == "UTC" {
            TimeZone::UTC
        } else {
            TimeZone::get(tz).map_err(|_| CronError::TimeZone(tz.to_string()))?
        };
        let specs = specs
            .iter()
            .map(|s| {
                let bad = |reason: String| CronError::Expression {
                    spec: s.clone(),
                    reason,
                };
                let translated = translate(s).map_err(bad)?;
                jiff_cron::Schedule::from_str(&translated).map_err(|e| bad(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { specs, tz })
    }

    /// The first launch time strictly after `t`, if any expression has one.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let from = t.to_zoned(self.tz.clone());
        self.specs
            .iter()
            .filter_map(|s| s.after(from.clone()).next())
            .map(|z| z.timestamp())
            .filter(|n| *n > t)
            .min()
    }
}

/// Nomad's (cronexpr's) form of an expression in the form `jiff-cron` reads: seconds first,
/// days of the week by name.
fn translate(spec: &str) -> Result<String, String> {
    let spec = spec.trim();
    if let Some(m) = spec.strip_prefix('@') {
        return Ok(match m {
            "annually" | "yearly" => "@yearly".into(),
            "midnight" | "daily" => "@daily".into(),
            "monthly" | "weekly" | "hourly" => format!("@{m}"),
            other => return Err(format!("unknown macro @{other}")),
        });
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    // Positions, after normalising: sec min hour dom month dow [year].
    let mut f: Vec<String> = match fields.len() {
        5 | 6 => std::iter::once("0")
            .chain(fields.iter().copied())
            .map(str::to_string)
            .collect(),
        7 => fields.iter().map(|s| s.to_string()).collect(),
        n => return Err(format!("expected 5, 6 or 7 fields, found {n}")),
    };
    for i in [3, 5] {
        if f[i] == "?" {
            f[i] = "*".into();
        }
    }
    f[5] = weekdays(&f[5])?;
    Ok(f.join(" "))
}

const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A day-of-week field with numbers (`0`–`7`, Sunday `0` or `7`) as names.
fn weekdays(field: &str) -> Result<String, String> {
    let day = |t: &str| -> Result<String, String> {
        match t.parse::<usize>() {
            Ok(n) if n <= 7 => Ok(DAYS[n % 7].to_string()),
            Ok(n) => Err(format!("day of week {n} is out of range (0-7)")),
            Err(_) if t.contains(['L', '#']) => Err(format!(
                "{t:?}: `L` and `#` in the day of week are not supported"
            )),
            Err(_) => Ok(t.to_string()),
        }
    };
    field
        .split(',')
        .map(|item| {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => (r, Some(s)),
                None => (item, None),
            };
            let range = match range.split_once('-') {
                Some((a, b)) => format!("{}-{}", day(a)?, day(b)?),
                None => day(range)?,
            };
            Ok(match step {
                Some(s) => format!("{range}/{s}"),
                None => range,
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map(|items| items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(specs: &[&str], tz: &str, after: &str) -> String {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        Schedule::parse(&specs, tz)
            .unwrap()
            .next_after(at(after))
            .unwrap()
            .to_string()
    }

    #[test]
    fn nomad_forms_are_read_as_nomad_reads_them() {
        assert_eq!(
            next(&["*/15 * * * *"], "", "2026-12-01T10:07:00Z"),
            "2026-12-01T10:15:00Z"
        );
        // Five fields: minute first. Monday 9:30 (1 is Monday, 0 and 7 Sunday).
        assert_eq!(
            next(&["30 9 * * 1"], "UTC", "2026-12-01T10:00:00Z"),
            "2026-12-07T09:30:00Z"
        );
        assert_eq!(
            next(&["0 0 * * 0"], "UTC", "2026-12-01T10:00:00Z"),
            "2026-12-06T00:00:00Z"
        );
        assert_eq!(
            next(&["0 0 * * 7"], "UTC", "2026-12-01T10:00:00Z"),
            "2026-12-06T00:00:00Z"
        );
        assert_eq!(
            next(&["0 12 * * 1-5"], "UTC", "2026-12-05T13:00:00Z"),
            "2026-12-07T12:00:00Z"
        );
        // Seven fields: seconds first, with a year.
        assert_eq!(
            next(&["*/10 * * * * * *"], "UTC", "2026-12-01T10:00:01Z"),
            "2026-12-01T10:00:10Z"
        );
        // Six fields: a year last. A year that has passed never comes.
        let past = Schedule::parse(&["0 0 1 1 * 2020".to_string()], "UTC").unwrap();
        assert_eq!(past.next_after(at("2026-12-01T00:00:00Z")), None);
        assert_eq!(
            next(&["@daily"], "UTC", "2026-12-01T10:00:00Z"),
            "2026-12-02T00:00:00Z"
        );
        assert_eq!(
            next(&["@midnight"], "UTC", "2026-12-01T10:00:00Z"),
            "2026-12-02T00:00:00Z"
        );
    }

    #[test]
    fn the_soonest_of_several_expressions_wins_in_the_job_s_time_zone() {
        // 09:00 in New York is 14:00 UTC in winter.
        assert_eq!(
            next(
                &["0 9 * * *", "0 23 * * *"],
                "America/New_York",
                "2026-12-01T12:00:00Z"
            ),
            "2026-12-01T14:00:00Z"
        );
    }

    #[test]
    fn bad_expressions_and_zones_say_what_is_wrong() {
        let e = |s: &str, tz: &str| Schedule::parse(&[s.to_string()], tz).unwrap_err();
        assert!(
            matches!(e("* * *", ""), CronError::Expression { reason, .. } if reason.contains("5, 6 or 7"))
        );
        assert!(
            matches!(e("0 0 * * 9", ""), CronError::Expression { reason, .. } if reason.contains("out of range"))
        );
        assert!(
            matches!(e("0 0 * * 5L", ""), CronError::Expression { reason, .. } if reason.contains("not supported"))
        );
        assert_eq!(
            e("@daily", "Mars/Olympus"),
            CronError::TimeZone("Mars/Olympus".into())
        );
        assert_eq!(Schedule::parse(&[], "").unwrap_err(), CronError::Empty);
    }
}
