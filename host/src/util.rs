//! Small helpers shared across the agent.

/// Now, in nanoseconds since the Unix epoch.
pub fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Linux signal number of a name such as "SIGTERM", "TERM" or "15".
pub fn signal_number(name: &str) -> Option<i32> {
    if let Ok(n) = name.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match bare {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ILL" => 4,
        "TRAP" => 5,
        "ABRT" => 6,
        "BUS" => 7,
        "FPE" => 8,
        "KILL" => 9,
        "USR1" => 10,
        "SEGV" => 11,
        "USR2" => 12,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        "CHLD" => 17,
        "CONT" => 18,
        "STOP" => 19,
        "TSTP" => 20,
        "TTIN" => 21,
        "TTOU" => 22,
        "WINCH" => 28,
        _ => return None,
    })
}

/// Parse a Nomad-style duration: "10s", "250ms", "1m30s", "1h", "500us", "20ns".
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if num_end == 0 {
            return None;
        }
        let num: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale: f64 = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += (num * scale) as u128;
        rest = &rest[unit_end..];
    }
    Some(std::time::Duration::from_nanos(
        total.min(u64::MAX as u128) as u64
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("abc"), None);
        assert_eq!(parse_duration("10"), None);
    }

    #[test]
    fn signals() {
        assert_eq!(signal_number("SIGTERM"), Some(15));
        assert_eq!(signal_number("kill"), Some(9));
        assert_eq!(signal_number("9"), Some(9));
        assert_eq!(signal_number("SIGNOPE"), None);
    }
}

/// RFC 3339 UTC time (`2026-11-29T21:13:28Z`) of `t`, as Nomad's API shows file times.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let ns = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    rfc3339_nanos(ns)
}

/// [`rfc3339`] of a time in nanoseconds since the Unix epoch.
pub fn rfc3339_nanos(ns: u64) -> String {
    let (y, m, d, h, mi, s) = utc_datetime(ns);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

#[cfg(test)]
mod rfc3339_tests {
    #[test]
    fn formats_utc_times() {
        let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert_eq!(super::rfc3339(t(0)), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(t(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(t(1_795_986_808)), "2026-11-29T21:13:28Z");
    }
}

/// Nanoseconds since the Unix epoch as a UTC civil date and time: `(year, month, day,
/// hour, minute, second)` (Howard Hinnant's days-to-civil algorithm).
pub fn utc_datetime(ns: u64) -> (i64, i64, i64, i64, i64, i64) {
    let secs = (ns / 1_000_000_000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}
