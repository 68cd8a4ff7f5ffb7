//! The template language: text with actions between delimiters (`{{` `}}` by default), a
//! small, exact subset of Go's text/template as Nomad jobs use it:
//!
//! - `{{ env "NAME" }}`: the task's environment variable (empty when unset, or an error
//!   with `error_on_missing_key`);
//! - `{{- ... -}}`: trims the whitespace before / after the action;
//! - `{{/* comment */}}`: nothing.
//!
//! Anything else is an error that quotes the action, so a job never renders half-understood.

/// A template that cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    /// 1-based line of the action.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Render `text` with the given delimiters; `lookup` answers `env "NAME"`.
pub fn render(
    text: &str,
    left: &str,
    right: &str,
    err_missing_key: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut consumed = 0usize;
    while let Some(start) = rest.find(left) {
        let line = line_at(text, consumed + start);
        let mut before = &rest[..start];
        let after_left = &rest[start + left.len()..];
        let Some(end) = after_left.find(right) else {
            return Err(RenderError {
                line,
                message: format!("unclosed action: no {right:?} after {left:?}"),
            });
        };
        let mut action = &after_left[..end];
        if let Some(a) = action
            .strip_prefix('-')
            .filter(|a| a.starts_with(char::is_whitespace))
        {
            before = before.trim_end();
            action = a;
        }
        let mut trim_after = false;
        if let Some(a) = action
            .strip_suffix('-')
            .filter(|a| a.ends_with(char::is_whitespace))
        {
            trim_after = true;
            action = a;
        }
        out.push_str(before);
        out.push_str(&eval(action.trim(), line, err_missing_key, lookup)?);
        let next = &after_left[end + right.len()..];
        let next = if trim_after { next.trim_start() } else { next };
        consumed = text.len() - next.len();
        rest = next;
    }
    out.push_str(rest);
    Ok(out)
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

fn eval(
    action: &str,
    line: usize,
    err_missing_key: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, RenderError> {
    let err = |message: String| RenderError { line, message };
    if action.starts_with("/*") && action.ends_with("*/") {
        return Ok(String::new());
    }
    let Some(arg) = action.strip_prefix("env").map(str::trim_start) else {
        return Err(err(format!(
            "unsupported action {action:?}: this hook renders `env \"NAME\"` and comments"
        )));
    };
    let name = arg
        .strip_prefix('"')
        .and_then(|a| a.strip_suffix('"'))
        .filter(|n| !n.is_empty() && !n.contains('"'))
        .ok_or_else(|| err(format!("expected env \"NAME\", found {action:?}")))?;
    match lookup(name) {
        Some(v) => Ok(v),
        None if err_missing_key => Err(err(format!("env {name:?} is not set"))),
        None => Ok(String::new()),
    }
}

/// Parse an env template's output: `KEY=value` lines; blank lines and `#` comments are
/// skipped, `export ` is allowed, and a value may be quoted.
pub fn parse_env(text: &str) -> Result<Vec<(String, String)>, RenderError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            return Err(RenderError {
                line: i + 1,
                message: format!("expected KEY=value, found {raw:?}"),
            });
        };
        let key = k.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(RenderError {
                line: i + 1,
                message: format!("invalid variable name {key:?}"),
            });
        }
        let v = v.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| v.strip_prefix(*q).and_then(|x| x.strip_suffix(*q)))
            .unwrap_or(v);
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "NOMAD_TASK_NAME" => Some("web".into()),
            "PORT" => Some("8080".into()),
            _ => None,
        }
    }

    fn r(text: &str) -> Result<String, RenderError> {
        render(text, "{{", "}}", false, &env)
    }

    #[test]
    fn renders_env_and_keeps_text() {
        assert_eq!(
            r("name={{ env \"NOMAD_TASK_NAME\" }}\nport={{env \"PORT\"}}\n").unwrap(),
            "name=web\nport=8080\n"
        );
        assert_eq!(r("no actions").unwrap(), "no actions");
    }

    #[test]
    fn missing_keys_are_empty_or_errors() {
        assert_eq!(r("[{{ env \"NOPE\" }}]").unwrap(), "[]");
        let e = render("a\n{{ env \"NOPE\" }}", "{{", "}}", true, &env).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("NOPE"), "{e}");
    }

    #[test]
    fn trims_comments_and_custom_delimiters() {
        assert_eq!(r("a  {{- env \"PORT\" -}}  b").unwrap(), "a8080b");
        assert_eq!(r("x{{/* note */}}y").unwrap(), "xy");
        assert_eq!(
            render("<< env \"PORT\" >> {{ literal }}", "<<", ">>", false, &env).unwrap(),
            "8080 {{ literal }}"
        );
    }

    #[test]
    fn unsupported_and_malformed_actions_are_errors() {
        let e = r("ok\n\n{{ key \"x\" }}").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("unsupported action"), "{e}");
        assert!(
            r("{{ env PORT }}")
                .unwrap_err()
                .message
                .contains("expected env")
        );
        assert!(
            r("{{ env \"PORT\" ")
                .unwrap_err()
                .message
                .contains("unclosed")
        );
    }

    #[test]
    fn env_files_parse() {
        let v = parse_env("# c\nA=1\nexport B = \"two words\"\n\nC='x'\n").unwrap();
        assert_eq!(
            v,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x".into())
            ]
        );
        assert_eq!(parse_env("A=1\nnot a pair").unwrap_err().line, 2);
        assert!(parse_env("A-B=1").is_err());
    }
}
