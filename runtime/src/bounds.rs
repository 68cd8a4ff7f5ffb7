//! Byte caps on what a guest hands back to the host. A hostcall's fuel bounds one answer at
//! 16 MiB, far more than anything a component has reason to return; and what it returns is
//! kept (task events in every allocation record, attributes in the node, hook state in the
//! state DB) and served to every API caller. So each string a plugin client takes from a
//! guest passes through here on its way to a host type: cut at its cap on a character
//! boundary, saying how much was cut; a list past its length keeps its first entries. The
//! plugin clients log once per cut, naming the component.
//!
//! README's bounds table lists these.

/// An error message, a health description, an event message, an exit's error.
pub const MESSAGE: usize = 4 << 10;
/// A key: an attribute's or a detail's name, a field name, an env var's name.
pub const KEY: usize = 256;
/// An attribute's or an event detail's value.
pub const VALUE: usize = 1 << 10;
/// Entries of one map a guest returns (fingerprint attributes, a task's status attributes,
/// an event's details, a config's field errors).
pub const ENTRIES: usize = 256;
/// Variables a hook adds to a task's environment.
pub const HOOK_ENV_ENTRIES: usize = 1024;
/// Bytes of one value a hook adds to a task's environment.
pub const HOOK_ENV_VALUE: usize = 64 << 10;
/// Bytes of all the state a hook keeps for a task (keys and values), stored with the
/// task's local state at each change.
pub const HOOK_STATE: usize = 64 << 10;
/// Bytes of a component's `info()` version string.
pub const VERSION: usize = 128;

/// `s` cut to `max` bytes on a character boundary, saying how much was cut.
pub fn text(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let total = s.len();
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str(&format!("… ({} more bytes cut)", total - cut));
    s
}

/// Whether any of `v`'s first [`ENTRIES`] entries or their count is past its cap.
pub fn pairs_over(v: &[(String, String)]) -> bool {
    v.len() > ENTRIES || v.iter().any(|(k, val)| k.len() > KEY || val.len() > VALUE)
}

/// A map's first [`ENTRIES`] entries, each key and value cut to its cap.
pub fn pairs(v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.into_iter()
        .take(ENTRIES)
        .map(|(k, val)| (text(k, KEY), text(val, VALUE)))
        .collect()
}

/// An attribute's value cut to its cap.
pub fn attribute(a: crate::types::Attribute) -> crate::types::Attribute {
    match a {
        crate::types::Attribute::Str(s) => crate::types::Attribute::Str(text(s, VALUE)),
        other => other,
    }
}

/// A map of attributes: its first [`ENTRIES`], each key and string value cut to its cap.
pub fn attributes(
    v: Vec<(String, crate::types::Attribute)>,
) -> Vec<(String, crate::types::Attribute)> {
    v.into_iter()
        .take(ENTRIES)
        .map(|(k, a)| (text(k, KEY), attribute(a)))
        .collect()
}

/// Control characters of a guest's text written into the agent's log, escaped (`\n`,
/// `\u{1b}`, …) so that no line a guest writes reads as a line of the agent's.
pub fn log_line(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_on_a_character_boundary_saying_so() {
        assert_eq!(text("short".into(), 10), "short");
        let cut = text("ééééé".into(), 5);
        assert!(
            cut.starts_with("éé") && cut.ends_with("(6 more bytes cut)"),
            "{cut}"
        );
        let long = text("x".repeat(12 << 20), MESSAGE);
        assert!(long.len() < MESSAGE + 64);
        let many: Vec<(String, String)> = (0..10_000)
            .map(|i| (format!("k{i}"), "v".repeat(2000)))
            .collect();
        assert!(pairs_over(&many));
        let kept = pairs(many);
        assert_eq!(kept.len(), ENTRIES);
        assert!(!pairs_over(
            &kept
                .iter()
                .map(|(k, _)| (k.clone(), String::new()))
                .collect::<Vec<_>>()
        ));
        assert!(kept[0].1.len() < VALUE + 64);
    }

    #[test]
    fn a_guest_line_cannot_forge_another() {
        assert_eq!(log_line("plain"), "plain");
        let forged = log_line("ok\n2026-12-03T10:00:00Z  INFO agent: token accepted\u{1b}[2K");
        assert!(
            !forged.contains('\n') && !forged.contains('\u{1b}'),
            "{forged}"
        );
        assert!(forged.contains("\\n2026"));
    }
}
