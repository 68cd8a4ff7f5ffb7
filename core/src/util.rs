//! Small helpers shared across the agent.

/// Now, in nanoseconds since the Unix epoch.
pub fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Run `wait`, a blocking wait, telling tokio when it is called from a worker of a
/// multi-thread runtime: the worker's queue moves to another thread meanwhile, so a wait
/// for an fsync or a lock does not stall the tasks queued behind it (on 2 cores, two such
/// waits would stop everything else).
pub fn wait_blocking<R>(wait: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
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

/// Nomad's glob (go-glob): `*` in `pattern` matches any run of characters, nothing else
/// is special; as node pools and datacenters are matched.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob_match(rest, &tail[i..]))
        }
    }
}

/// RFC 3339 UTC time (`2026-11-29T21:13:28Z`) of `t`, as Nomad's API shows file times.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let ns = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    go_time(ns)
}

/// A time in nanoseconds since the Unix epoch as Go's `time.Time` marshals it: RFC 3339
/// in UTC with as many fractional digits as it needs; 0 (unset) is Go's zero time,
/// `0001-01-01T00:00:00Z`, which is what Nomad sends for a time that never happened.
pub fn go_time(ns: u64) -> String {
    if ns == 0 {
        return GO_ZERO_TIME.to_string();
    }
    match jiff::Timestamp::from_nanosecond(i128::from(ns)) {
        Ok(t) => t.to_string(),
        Err(_) => GO_ZERO_TIME.to_string(),
    }
}

/// Go's zero `time.Time` in JSON.
pub const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// An RFC 3339 time as nanoseconds since the Unix epoch; times at or before the epoch
/// (Go's zero time among them) are 0, unset.
pub fn parse_go_time(s: &str) -> Option<u64> {
    let t: jiff::Timestamp = s.parse().ok()?;
    Some(u64::try_from(t.as_nanosecond()).unwrap_or(0))
}

/// Serde for times kept as nanoseconds since the epoch and shown as Go's `time.Time`
/// (RFC 3339). Reading also takes the integer nanoseconds older state files hold.
pub mod go_time_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    /// As RFC 3339.
    pub fn serialize<S: Serializer>(ns: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::go_time(*ns))
    }

    /// From RFC 3339 or integer nanoseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Nanos(u64),
            Text(String),
        }
        match Either::deserialize(d)? {
            Either::Nanos(n) => Ok(n),
            Either::Text(t) => super::parse_go_time(&t)
                .ok_or_else(|| serde::de::Error::custom(format!("{t:?} is not an RFC 3339 time"))),
        }
    }
}

/// Now, UTC, formatted with `strftime` directives (e.g. go-metrics' and hclog's formats).
pub fn format_now(fmt: &str) -> String {
    jiff::Timestamp::now().strftime(fmt).to_string()
}

#[cfg(test)]
mod go_time_tests {
    use super::*;

    #[test]
    fn times_are_go_time_json_and_read_back() {
        assert_eq!(go_time(0), "0001-01-01T00:00:00Z");
        assert_eq!(go_time(1_795_986_808_000_000_000), "2026-11-29T21:13:28Z");
        assert_eq!(
            go_time(1_795_986_808_123_456_789),
            "2026-11-29T21:13:28.123456789Z"
        );
        assert_eq!(
            go_time(1_795_986_808_120_000_000),
            "2026-11-29T21:13:28.12Z"
        );
        assert_eq!(
            parse_go_time("2026-11-29T21:13:28.123456789Z"),
            Some(1_795_986_808_123_456_789)
        );
        assert_eq!(
            parse_go_time("2026-11-29T22:13:28+01:00"),
            Some(1_795_986_808_000_000_000)
        );
        assert_eq!(parse_go_time(GO_ZERO_TIME), Some(0));
        assert_eq!(parse_go_time("yesterday"), None);
        let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00Z");
    }
}

/// `d` as Go's `time.Duration` prints it (`0s`, `250ms`, `1.5s`, `1m30s`, `1h0m0s`): the
/// form Nomad's task event messages use ("Task restarting in 15s").
pub fn go_duration(d: std::time::Duration) -> String {
    /// `v` in `unit`s, with the fraction's trailing zeros dropped.
    fn frac(v: u128, unit: u128) -> String {
        let (int, rem) = (v / unit, v % unit);
        if rem == 0 {
            return int.to_string();
        }
        let width = unit.ilog10() as usize;
        let digits = format!("{rem:0width$}");
        format!("{int}.{}", digits.trim_end_matches('0'))
    }
    let ns = d.as_nanos();
    const S: u128 = 1_000_000_000;
    match ns {
        0 => "0s".into(),
        1..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{}µs", frac(ns, 1_000)),
        1_000_000..S => format!("{}ms", frac(ns, 1_000_000)),
        _ => {
            let secs = ns / S;
            let (h, m) = (secs / 3600, secs / 60 % 60);
            let s = frac(secs % 60 * S + ns % S, S);
            match (h, m) {
                (0, 0) => format!("{s}s"),
                (0, m) => format!("{m}m{s}s"),
                (h, m) => format!("{h}h{m}m{s}s"),
            }
        }
    }
}

#[cfg(test)]
mod go_duration_tests {
    use super::go_duration;
    use std::time::Duration;

    #[test]
    fn prints_as_go_does() {
        let ms = Duration::from_millis;
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_nanos(42)), "42ns");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(ms(250)), "250ms");
        assert_eq!(go_duration(ms(1_500)), "1.5s");
        assert_eq!(go_duration(ms(15_000)), "15s");
        assert_eq!(go_duration(ms(90_000)), "1m30s");
        assert_eq!(go_duration(ms(3_600_000)), "1h0m0s");
        assert_eq!(go_duration(ms(3_661_250)), "1h1m1.25s");
    }
}
