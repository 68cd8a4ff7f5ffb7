//! A bound on how deep brackets nest in HCL text, checked before the text is parsed.
//!
//! The HCL parser backtracks over unclosed brackets, and its time doubles with each level:
//! fuzzing found a 2 KB agent config that took it minutes, and 20 unclosed `{ [` pairs in a
//! job file sent to `/v1/jobs/parse` take seconds. Real job and config files nest a dozen
//! levels at most.

/// The deepest nesting of `{`, `[` and `(` accepted (outside strings, heredocs, comments).
pub const MAX_DEPTH: usize = 24;

/// `Err((line, depth))` where brackets first nest deeper than [`MAX_DEPTH`].
pub fn check(src: &str) -> Result<(), (usize, usize)> {
    let b = src.as_bytes();
    let (mut i, mut depth, mut line) = (0, 0usize, 1);
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'#' => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                line += src[i..end].matches('\n').count();
                i = end;
                continue;
            }
            b'<' if src[i..].starts_with("<<") => {
                let marker: String = src[i + 2..]
                    .trim_start_matches('-')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !marker.is_empty() {
                    // The heredoc runs to a line that is its marker alone.
                    let mut rest = line_end(b, i);
                    while rest < b.len() {
                        line += 1;
                        let next = line_end(b, rest + 1);
                        if src[rest + 1..next].trim() == marker {
                            break;
                        }
                        rest = next;
                    }
                    i = rest;
                    continue;
                }
            }
            b'{' | b'[' | b'(' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err((line, depth));
                }
            }
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The index of the newline ending the line at `i` (or the end).
fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(b.len(), |p| i + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing (`fuzz/corpus/agent_config/unclosed-brackets`): unclosed brackets
    /// made the parser's time double with each level.
    #[test]
    fn unclosed_brackets_past_the_limit_are_refused_at_once() {
        let text = "x = [\n".to_string() + &"  { v = [\n".repeat(20);
        let started = std::time::Instant::now();
        assert_eq!(check(&text), Err((13, 25)));
        let e = crate::jobspec::parse_job_hcl(&format!("job \"j\" {{\n{text}")).unwrap_err();
        assert!(e.to_string().contains("nest"), "{e}");
        let e = crate::config::AgentConfig::parse(&text, "a.hcl").unwrap_err();
        assert!(e.to_string().contains("nest"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn brackets_in_strings_heredocs_and_comments_do_not_count() {
        let deep = "[".repeat(40);
        let text = format!(
            "a = \"{deep}\"\n# {deep}\n// {deep}\n/* {deep}\n */\nb = <<-EOT\n{deep}\n  EOT\nc = [[1]]\n"
        );
        assert_eq!(check(&text), Ok(()));
        assert!(check(&format!("{text}d = {deep}")).is_err());
    }
}
