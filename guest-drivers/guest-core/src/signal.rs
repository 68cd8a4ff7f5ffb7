//! Signal names as jobs write them (`SIGTERM`, `TERM`, `sigterm`) and their Linux numbers,
//! for drivers that report the signal that ended a task or check a `kill_signal`.

/// Linux signal numbers by name, without the `SIG` prefix.
const SIGNALS: [(&str, i32); 31] = [
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// The number of the signal `name` (`SIGTERM`, `TERM`, any case), or `None` for a name
/// Linux does not have.
pub fn number(name: &str) -> Option<i32> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == bare).map(|(_, s)| *s)
}

/// The name (`SIGTERM`) of signal number `signal`.
pub fn name(signal: i32) -> Option<String> {
    SIGNALS
        .iter()
        .find(|(_, s)| *s == signal)
        .map(|(n, _)| format!("SIG{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(number("SIGTERM"), Some(15));
        assert_eq!(number("kill"), Some(9));
        assert_eq!(number(" sigint "), Some(2));
        assert_eq!(number("SIGNOPE"), None);
        assert_eq!(number(""), None);
        assert_eq!(name(1).as_deref(), Some("SIGHUP"));
        assert_eq!(name(64), None);
        for (n, s) in SIGNALS {
            assert_eq!(number(n), Some(s));
        }
    }
}
