//! Template text into a tree: text and actions between delimiters, `{{-`/`-}}` trimming
//! applied to the neighbouring text, `with`/`range` blocks with their `else` and `end`
//! matched up. Every error names the line and quotes the action.

/// A template that cannot be rendered (or parsed).
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

/// What an action computes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `env "NAME"`.
    Env(String),
    /// `nomadVar "path"`: the variable's items.
    NomadVar(String),
    /// `nomadVarList ["prefix"]`: metadata of the variables the task may read.
    NomadVarList(String),
    /// `nomadService "[tag.]name"` or `nomadService COUNT KEY "[tag.]name"`: the
    /// registrations of a service in the task's namespace (those carrying `tag` only;
    /// `COUNT` of them picked for `KEY`, a string or any value: `(env "NOMAD_ALLOC_ID")`).
    NomadService {
        /// The service's name.
        name: String,
        /// Only registrations with this tag.
        tag: Option<String>,
        /// How many to pick, for which key.
        choose: Option<(u32, Box<Expr>)>,
    },
    /// `nomadServices`: every service in the task's namespace, with its tags.
    NomadServices,
    /// `index TERM "key"`: one item, for keys that are not identifiers.
    Index(Box<Expr>, String),
    /// `.`, `.a.b`: the dot and fields of it.
    Dot(Vec<String>),
    /// `$`, `$x`, `$x.a`: a variable (`$` is the top-level dot) and fields of it.
    Var(String, Vec<String>),
    /// A string literal.
    Str(String),
    /// A function of [`FUNCTIONS`] applied to its arguments; a pipeline's earlier value is
    /// its last argument (`.x | replaceAll "a" "b"` is `replaceAll "a" "b" .x`).
    Call(String, Vec<Expr>),
}

/// The functions a template may call besides `env`, `nomadVar`, `nomadVarList`,
/// `nomadService`, `nomadServices` and `index`: consul-template's most used ones and a few
/// of sprig's string helpers, with their argument counts.
pub const FUNCTIONS: &[(&str, usize)] = &[
    ("toJSON", 1),
    ("toJSONPretty", 1),
    ("split", 2),
    ("join", 2),
    ("replaceAll", 3),
    ("toUpper", 1),
    ("toLower", 1),
    ("trimSpace", 1),
    ("trimPrefix", 2),
    ("trimSuffix", 2),
    ("base64Encode", 1),
    ("base64Decode", 1),
    ("file", 1),
    ("timestamp", 0),
    ("printf", 1),
    ("eq", 2),
    ("ne", 2),
    ("lt", 2),
    ("le", 2),
    ("gt", 2),
    ("ge", 2),
    ("not", 1),
    ("and", 1),
    ("or", 1),
    ("contains", 2),
    ("hasPrefix", 2),
    ("hasSuffix", 2),
];

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Text, already trimmed by its neighbours' `-`.
    Text(String),
    /// `{{ expr }}`: prints the value.
    Output(Action, Expr),
    /// `{{ with expr }}body{{ else }}otherwise{{ end }}`: the body with the dot set to the
    /// value when it is not empty, else `otherwise`.
    With(Action, Expr, Vec<Node>, Vec<Node>),
    /// `{{ if expr }}body{{ else if expr }}…{{ else }}otherwise{{ end }}`: the body when the
    /// value is not empty (an `else if` is an `if` in the `else` branch).
    If(Action, Expr, Vec<Node>, Vec<Node>),
    /// `{{ range [$k[, $v] :=] expr }}body{{ else }}otherwise{{ end }}`.
    Range(Action, Range, Vec<Node>, Vec<Node>),
}

/// Where an action is and what it says, for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// 1-based line.
    pub line: usize,
    /// The action's text, delimiters and trim markers left out.
    pub text: String,
}

impl Action {
    /// An error about this action.
    pub fn error(&self, message: impl Into<String>) -> RenderError {
        RenderError {
            line: self.line,
            message: message.into(),
        }
    }
}

/// What a `range` declares and ranges over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// `$k` of `$k, $v :=` (the key or index), when two are declared.
    pub key: Option<String>,
    /// `$v` of `$v :=` or `$k, $v :=` (the element).
    pub value: Option<String>,
    pub expr: Expr,
}

/// One piece of the template between delimiters or outside them.
enum Token {
    Text(String),
    Action(Action),
}

/// Split `text` into text and actions, applying trim markers.
fn tokens(text: &str, left: &str, right: &str) -> Result<Vec<Token>, RenderError> {
    if left.is_empty() || right.is_empty() {
        // An empty delimiter is found everywhere: the split would never advance.
        return Err(RenderError {
            line: 1,
            message: format!("empty delimiter (left {left:?}, right {right:?})"),
        });
    }
    let mut out = Vec::new();
    let mut rest = text;
    let mut trim_next = false;
    // Lines are counted as the split moves on, each newline once.
    let (mut line, mut counted) = (1, 0);
    while let Some(start) = rest.find(left) {
        let at = text.len() - rest.len() + start;
        line += text[counted..at].matches('\n').count();
        counted = at;
        let mut before = &rest[..start];
        if trim_next {
            before = before.trim_start();
        }
        let after_left = &rest[start + left.len()..];
        let Some(end) = find_right(after_left, right) else {
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
        trim_next = false;
        if let Some(a) = action
            .strip_suffix('-')
            .filter(|a| a.ends_with(char::is_whitespace))
        {
            trim_next = true;
            action = a;
        }
        out.push(Token::Text(before.to_string()));
        out.push(Token::Action(Action {
            line,
            text: action.trim().to_string(),
        }));
        rest = &after_left[end + right.len()..];
    }
    out.push(Token::Text(
        if trim_next { rest.trim_start() } else { rest }.to_string(),
    ));
    Ok(out)
}

/// Where `right` first appears outside a string literal.
fn find_right(s: &str, right: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if s[i..].starts_with(right) => return Some(i),
            None if c == '"' || c == '`' => quote = Some(c),
            None => {}
        }
    }
    None
}

/// The words of an action.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    Ident(String),
    Str(String),
    Dot(Vec<String>),
    Var(String, Vec<String>),
    Declare,
    Comma,
    Pipe,
    Open,
    Close,
}

fn words(a: &Action) -> Result<Vec<Word>, RenderError> {
    let text = &a.text;
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' || c == '`' {
            chars.next();
            let mut s = String::new();
            let mut closed = false;
            while let Some((_, d)) = chars.next() {
                match d {
                    d if d == c => {
                        closed = true;
                        break;
                    }
                    '\\' if c == '"' => match chars.next().map(|(_, e)| e) {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(e @ ('"' | '\\')) => s.push(e),
                        other => {
                            return Err(a.error(format!(
                                "unsupported escape \\{} in {text:?}",
                                other.map(String::from).unwrap_or_default()
                            )));
                        }
                    },
                    d => s.push(d),
                }
            }
            if !closed {
                return Err(a.error(format!("unterminated string in {text:?}")));
            }
            out.push(Word::Str(s));
        } else if text[i..].starts_with(":=") {
            chars.next();
            chars.next();
            out.push(Word::Declare);
        } else if c == ',' {
            chars.next();
            out.push(Word::Comma);
        } else if c == '|' {
            chars.next();
            out.push(Word::Pipe);
        } else if c == '(' {
            chars.next();
            out.push(Word::Open);
        } else if c == ')' {
            chars.next();
            out.push(Word::Close);
        } else if c == '.' || c == '$' || ident(c) {
            let mut j = i;
            while let Some(&(k, d)) = chars.peek() {
                if ident(d) || d == '.' || (k == i && d == '$') {
                    j = k + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(
                chain(&text[i..j])
                    .ok_or_else(|| a.error(format!("bad name {:?} in {text:?}", &text[i..j])))?,
            );
        } else {
            return Err(a.error(format!("unexpected {c:?} in {text:?}")));
        }
    }
    Ok(out)
}

/// `.a.b`, `$x.a` or a bare identifier as a word.
fn chain(w: &str) -> Option<Word> {
    let fields = |s: &str| -> Option<Vec<String>> {
        if s.is_empty() {
            return Some(Vec::new());
        }
        let rest = s.strip_prefix('.')?;
        let parts: Vec<String> = rest.split('.').map(str::to_string).collect();
        parts.iter().all(|p| !p.is_empty()).then_some(parts)
    };
    if w == "." {
        return Some(Word::Dot(Vec::new()));
    }
    if w.starts_with('.') {
        return fields(w).map(Word::Dot);
    }
    if let Some(v) = w.strip_prefix('$') {
        let (name, rest) = v.find('.').map_or((v, ""), |k| (&v[..k], &v[k..]));
        return fields(rest).map(|f| Word::Var(format!("${name}"), f));
    }
    (!w.contains('.')).then(|| Word::Ident(w.to_string()))
}

/// What one action is.
enum Parsed {
    Comment,
    Output(Expr),
    With(Expr),
    If(Expr),
    Range(Range),
    Else,
    ElseIf(Expr),
    End,
}

fn parse_action(a: &Action) -> Result<Parsed, RenderError> {
    if a.text.starts_with("/*") && a.text.ends_with("*/") {
        return Ok(Parsed::Comment);
    }
    let w = words(a)?;
    match w.as_slice() {
        [Word::Ident(k)] if k == "else" => Ok(Parsed::Else),
        [Word::Ident(k)] if k == "end" => Ok(Parsed::End),
        [Word::Ident(k), rest @ ..] if k == "with" => Ok(Parsed::With(expr(a, rest)?)),
        [Word::Ident(k), rest @ ..] if k == "if" => Ok(Parsed::If(expr(a, rest)?)),
        [Word::Ident(k), Word::Ident(i), rest @ ..] if k == "else" && i == "if" => {
            Ok(Parsed::ElseIf(expr(a, rest)?))
        }
        [Word::Ident(k), rest @ ..] if k == "range" => {
            let bad = || {
                a.error(format!(
                    "expected range $value := ..., or range $key, $value := ..., found {:?}",
                    a.text
                ))
            };
            let var = |w: &Word| match w {
                Word::Var(n, f) if f.is_empty() && n != "$" => Ok(n.clone()),
                _ => Err(bad()),
            };
            let (key, value, rest) = match rest {
                [v, Word::Declare, rest @ ..] => (None, Some(var(v)?), rest),
                [k, Word::Comma, v, Word::Declare, rest @ ..] => {
                    (Some(var(k)?), Some(var(v)?), rest)
                }
                rest if rest
                    .iter()
                    .any(|w| matches!(w, Word::Declare | Word::Comma)) =>
                {
                    return Err(bad());
                }
                rest => (None, None, rest),
            };
            Ok(Parsed::Range(Range {
                key,
                value,
                expr: expr(a, rest)?,
            }))
        }
        _ => Ok(Parsed::Output(expr(a, &w)?)),
    }
}

/// A pipeline: commands separated by `|` (outside parentheses), each later one given the
/// earlier one's value as its last argument.
fn expr(a: &Action, w: &[Word]) -> Result<Expr, RenderError> {
    let mut parts: Vec<&[Word]> = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, word) in w.iter().enumerate() {
        match word {
            Word::Open => depth += 1,
            Word::Close => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| a.error(format!("unopened ) in {:?}", a.text)))?
            }
            Word::Pipe if depth == 0 => {
                parts.push(&w[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(a.error(format!("unclosed ( in {:?}", a.text)));
    }
    parts.push(&w[start..]);
    let mut value = command(a, parts[0])?;
    for part in &parts[1..] {
        match part {
            [Word::Ident(f), args @ ..] if function(f).is_some() => {
                let mut args = operands(a, args)?;
                args.push(value);
                value = call(a, f, args)?;
            }
            [Word::Ident(f), ..] => {
                return Err(a.error(format!(
                    "unknown function {f:?} after | in {:?}: this hook pipes into {}",
                    a.text,
                    function_names()
                )));
            }
            _ => {
                return Err(a.error(format!(
                    "after | comes a function of {}, found {:?}",
                    function_names(),
                    a.text
                )));
            }
        }
    }
    Ok(value)
}

fn function(name: &str) -> Option<usize> {
    FUNCTIONS.iter().find(|(n, _)| *n == name).map(|(_, n)| *n)
}

fn function_names() -> String {
    FUNCTIONS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A call of a [`FUNCTIONS`] entry, its arguments counted (`timestamp` takes 0 or 1,
/// `printf` a format and any number).
fn call(a: &Action, name: &str, args: Vec<Expr>) -> Result<Expr, RenderError> {
    let want = function(name).unwrap_or(0);
    let ok = match name {
        "timestamp" => args.len() <= 1,
        "printf" | "and" | "or" => !args.is_empty(),
        "eq" => args.len() >= 2,
        _ => args.len() == want,
    };
    if !ok {
        return Err(a.error(format!(
            "{name} takes {want} argument{}, found {} in {:?}",
            if want == 1 { "" } else { "s" },
            args.len(),
            a.text
        )));
    }
    Ok(Expr::Call(name.to_string(), args))
}

/// Operands of a call: literals, the dot, variables, and parenthesized pipelines.
fn operands(a: &Action, w: &[Word]) -> Result<Vec<Expr>, RenderError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < w.len() {
        match &w[i] {
            Word::Open => {
                let mut depth = 0;
                let mut j = i;
                loop {
                    match w.get(j) {
                        Some(Word::Open) => depth += 1,
                        Some(Word::Close) => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Some(_) => {}
                        None => return Err(a.error(format!("unclosed ( in {:?}", a.text))),
                    }
                    j += 1;
                }
                out.push(expr(a, &w[i + 1..j])?);
                i = j + 1;
            }
            Word::Str(s) => {
                out.push(Expr::Str(s.clone()));
                i += 1;
            }
            Word::Dot(f) => {
                out.push(Expr::Dot(f.clone()));
                i += 1;
            }
            Word::Var(n, f) => {
                out.push(Expr::Var(n.clone(), f.clone()));
                i += 1;
            }
            Word::Ident(n) if n.parse::<i64>().is_ok() => {
                out.push(Expr::Str(n.clone()));
                i += 1;
            }
            _ => {
                return Err(a.error(format!(
                    "an argument must be a string, ., a $variable or a (pipeline), in {:?}",
                    a.text
                )));
            }
        }
    }
    Ok(out)
}

/// One command of a pipeline.
fn command(a: &Action, w: &[Word]) -> Result<Expr, RenderError> {
    let text = &a.text;
    let string_arg = |name: &str, args: &[Word]| match args {
        [Word::Str(s)] if !s.is_empty() => Ok(s.clone()),
        _ => Err(a.error(format!("expected {name} \"...\", found {text:?}"))),
    };
    match w {
        [] => Err(a.error(format!("missing value in {text:?}"))),
        [Word::Ident(f), args @ ..] if f == "env" => match args {
            [Word::Str(s)] if !s.is_empty() => Ok(Expr::Env(s.clone())),
            _ => Err(a.error(format!("expected env \"NAME\", found {text:?}"))),
        },
        [Word::Ident(f), args @ ..] if f == "nomadVar" => {
            Ok(Expr::NomadVar(string_arg("nomadVar", args)?))
        }
        [Word::Ident(f), args @ ..] if f == "nomadVarList" => match args {
            [] => Ok(Expr::NomadVarList(String::new())),
            [Word::Str(s)] => Ok(Expr::NomadVarList(s.clone())),
            _ => Err(a.error(format!("expected nomadVarList or nomadVarList \"prefix\", found {text:?}"))),
        },
        [Word::Ident(f), args @ ..] if f == "nomadService" => {
            let bad = || {
                a.error(format!(
                    "expected nomadService \"[tag.]name\" or nomadService COUNT \"key\" \"[tag.]name\", found {text:?}"
                ))
            };
            let (query, choose) = match args {
                [Word::Str(q)] => (q, None),
                [Word::Ident(n), key @ .., Word::Str(q)] if !key.is_empty() => {
                    let count = n.parse::<u32>().ok().filter(|c| *c > 0).ok_or_else(bad)?;
                    let mut key = operands(a, key)?;
                    if key.len() != 1 {
                        return Err(bad());
                    }
                    (q, Some((count, Box::new(key.remove(0)))))
                }
                _ => return Err(bad()),
            };
            let (tag, name) = service_query(query).ok_or_else(bad)?;
            Ok(Expr::NomadService { name, tag, choose })
        }
        [Word::Ident(f)] if f == "nomadServices" => Ok(Expr::NomadServices),
        [Word::Ident(f), ..] if f == "nomadServices" => Err(a.error(format!(
            "nomadServices takes no arguments here (the task's namespace), found {text:?}"
        ))),
        [Word::Ident(f), args @ ..] if f == "index" => match args {
            [t, Word::Str(k)] => Ok(Expr::Index(Box::new(expr(a, std::slice::from_ref(t))?), k.clone())),
            _ => Err(a.error(format!("expected index . \"key\", found {text:?}"))),
        },
        [Word::Ident(f), args @ ..] if function(f).is_some() => call(a, f, operands(a, args)?),
        [Word::Open, .., Word::Close] => {
            let mut inner = operands(a, w)?;
            if inner.len() != 1 {
                return Err(a.error(format!("unexpected words in {text:?}")));
            }
            Ok(inner.remove(0))
        }
        [Word::Dot(f)] => Ok(Expr::Dot(f.clone())),
        [Word::Var(n, f)] => Ok(Expr::Var(n.clone(), f.clone())),
        [Word::Str(s)] => Ok(Expr::Str(s.clone())),
        [Word::Ident(f), ..] => Err(a.error(format!(
            "unknown function {f:?} in {text:?}: this hook knows env, nomadVar, nomadVarList, nomadService, nomadServices, index and {}",
            function_names()
        ))),
        _ => Err(a.error(format!("unexpected words in {text:?}"))),
    }
}

/// `[tag.]name[@region]` of `nomadService`, as consul-template reads it: the tag is what
/// comes before the last `.`; a region other than this agent's is not served.
fn service_query(q: &str) -> Option<(Option<String>, String)> {
    let q = q.split_once('@').map_or(q, |(q, _region)| q);
    let (tag, name) = match q.rsplit_once('.') {
        Some((tag, name)) => (Some(tag.to_string()), name),
        None => (None, q),
    };
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.'))
    };
    (ok(name) && tag.as_deref().is_none_or(ok)).then(|| (tag, name.to_string()))
}

/// Parse a whole template.
pub fn parse(text: &str, left: &str, right: &str) -> Result<Vec<Node>, RenderError> {
    let mut toks = tokens(text, left, right)?.into_iter();
    match block(&mut toks, None, 0)? {
        (_, Close::Else(a) | Close::End(a) | Close::ElseIf(a, _)) => {
            Err(a.error(format!("unexpected {{{{{}}}}}", a.text)))
        }
        (nodes, Close::Eof) => Ok(nodes),
    }
}

/// What ends a block.
enum Close {
    Else(Action),
    ElseIf(Action, Expr),
    End(Action),
    /// The end of the text.
    Eof,
}

/// How deep `with` and `range` blocks may nest: parsing, rendering and dropping the tree
/// recurse once per level, and the hook's stack is small.
pub const MAX_NESTING: usize = 100;

/// Nodes up to the `else` or `end` that closes `opener` (or the end of the text when there
/// is no opener), and what closed them; `depth` blocks enclose them.
fn block(
    toks: &mut impl Iterator<Item = Token>,
    opener: Option<&Action>,
    depth: usize,
) -> Result<(Vec<Node>, Close), RenderError> {
    if let Some(o) = opener
        && depth > MAX_NESTING
    {
        return Err(o.error(format!(
            "blocks nest more than {MAX_NESTING} deep at {{{{{}}}}}",
            o.text
        )));
    }
    let mut out = Vec::new();
    while let Some(t) = toks.next() {
        let a = match t {
            Token::Text(s) if s.is_empty() => continue,
            Token::Text(s) => {
                out.push(Node::Text(s));
                continue;
            }
            Token::Action(a) => a,
        };
        match parse_action(&a)? {
            Parsed::Comment => {}
            Parsed::Output(e) => out.push(Node::Output(a, e)),
            Parsed::Else => return Ok((out, Close::Else(a))),
            Parsed::ElseIf(e) => return Ok((out, Close::ElseIf(a, e))),
            Parsed::If(e) => {
                let (body, otherwise) = if_branches(toks, &a, depth + 1)?;
                out.push(Node::If(a, e, body, otherwise));
            }
            Parsed::End => return Ok((out, Close::End(a))),
            Parsed::With(e) => {
                let (body, otherwise) = branches(toks, &a, depth + 1)?;
                out.push(Node::With(a, e, body, otherwise));
            }
            Parsed::Range(r) => {
                let (body, otherwise) = branches(toks, &a, depth + 1)?;
                out.push(Node::Range(a, r, body, otherwise));
            }
        }
    }
    match opener {
        Some(o) => Err(o.error(format!("{{{{{}}}}} has no {{{{end}}}}", o.text))),
        None => Ok((out, Close::Eof)),
    }
}

/// The body and `else` branch of an `if` opened by `opener`: an `else if` makes the `else`
/// branch one nested `if`, which the same `end` closes.
fn if_branches(
    toks: &mut impl Iterator<Item = Token>,
    opener: &Action,
    depth: usize,
) -> Result<(Vec<Node>, Vec<Node>), RenderError> {
    let (body, close) = block(toks, Some(opener), depth)?;
    match close {
        Close::ElseIf(a, e) => {
            if depth > MAX_NESTING {
                return Err(a.error(format!("else-if chains nest more than {MAX_NESTING} deep")));
            }
            let (inner, otherwise) = if_branches(toks, &a, depth + 1)?;
            Ok((body, vec![Node::If(a, e, inner, otherwise)]))
        }
        Close::Else(_) => {
            let (otherwise, close) = block(toks, Some(opener), depth)?;
            match close {
                Close::Else(a) | Close::ElseIf(a, _) => Err(a.error(format!(
                    "an {{{{else}}}} after the last {{{{else}}}} in {{{{{}}}}}",
                    opener.text
                ))),
                _ => Ok((body, otherwise)),
            }
        }
        _ => Ok((body, Vec::new())),
    }
}

/// The body and `else` branch of a `with` or `range` opened by `opener`.
fn branches(
    toks: &mut impl Iterator<Item = Token>,
    opener: &Action,
    depth: usize,
) -> Result<(Vec<Node>, Vec<Node>), RenderError> {
    let (body, close) = block(toks, Some(opener), depth)?;
    let close = match close {
        Close::ElseIf(a, _) => {
            return Err(a.error(format!(
                "{{{{else if}}}} belongs to an {{{{if}}}}, not to {{{{{}}}}}",
                opener.text
            )));
        }
        c => c,
    };
    let Close::Else(_) = close else {
        return Ok((body, Vec::new()));
    };
    let (otherwise, close) = block(toks, Some(opener), depth)?;
    match close {
        Close::Else(a) | Close::ElseIf(a, _) => {
            Err(a.error(format!("a second {{{{else}}}} in {{{{{}}}}}", opener.text)))
        }
        _ => Ok((body, otherwise)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Vec<Node>, RenderError> {
        parse(text, "{{", "}}")
    }

    /// Found by fuzzing (`fuzz/corpus/template/empty-delimiters`): an empty delimiter
    /// matched at the same place forever, and the hook hung.
    #[test]
    fn an_empty_delimiter_is_an_error() {
        for (l, r) in [("", ""), ("", "}}"), ("{{", "")] {
            let e = parse("a {{ x }} b", l, r).unwrap_err();
            assert!(e.message.contains("empty delimiter"), "{e}");
        }
    }

    /// A template of 100,000 actions on as many lines parses in linear time (the line of each
    /// action was once counted from the start of the text).
    #[test]
    fn line_numbers_of_many_actions_are_counted_once() {
        let text = "{{ .x }}\n".repeat(100_000) + "{{ end }}";
        let started = std::time::Instant::now();
        let e = p(&text).unwrap_err();
        assert_eq!(e.line, 100_001, "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn blocks_nest_at_most_max_nesting_deep() {
        let nested = |n: usize| "{{ with \"x\" }}".repeat(n) + &"{{ end }}".repeat(n);
        assert!(p(&nested(MAX_NESTING)).is_ok());
        let e = p(&nested(100_000)).unwrap_err();
        assert!(e.message.contains("nest more than"), "{e}");
    }

    #[test]
    fn blocks_nest_with_their_else_branches() {
        let nodes = p("a{{ with nomadVar \"x\" }}{{ .k }}{{ else }}none{{ end }}b").unwrap();
        let Node::With(_, Expr::NomadVar(path), body, otherwise) = &nodes[1] else {
            panic!("{nodes:?}")
        };
        assert_eq!(path, "x");
        assert!(matches!(&body[0], Node::Output(_, Expr::Dot(f)) if f == &["k"]));
        assert_eq!(otherwise, &[Node::Text("none".into())]);
        assert_eq!(nodes[2], Node::Text("b".into()));
    }

    #[test]
    fn range_declarations() {
        let r = |t: &str| match p(t).unwrap().remove(0) {
            Node::Range(_, r, ..) => r,
            n => panic!("{n:?}"),
        };
        let two = r("{{ range $k, $v := nomadVar \"p\" }}{{ end }}");
        assert_eq!(
            (two.key.as_deref(), two.value.as_deref()),
            (Some("$k"), Some("$v"))
        );
        let one = r("{{ range $m := nomadVarList }}{{ end }}");
        assert_eq!((one.key, one.value.as_deref()), (None, Some("$m")));
        assert_eq!(one.expr, Expr::NomadVarList(String::new()));
        let none = r("{{ range nomadVarList \"nomad/jobs\" }}{{ end }}");
        assert_eq!((none.key, none.value), (None, None));
        assert!(p("{{ range $k, := nomadVarList }}{{ end }}").is_err());
    }

    #[test]
    fn structure_errors_name_the_line_and_the_action() {
        let e = p("x\n{{ with nomadVar \"a\" }}").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("{{with nomadVar \"a\"}} has no {{end}}"),
            "{e}"
        );
        let e = p("{{ end }}").unwrap_err();
        assert!(e.message.contains("unexpected {{end}}"), "{e}");
        let e = p("{{ else }}").unwrap_err();
        assert!(e.message.contains("unexpected {{else}}"), "{e}");
        let e = p("{{ with . }}{{ else }}{{ else }}{{ end }}").unwrap_err();
        assert!(e.message.contains("a second {{else}}"), "{e}");
        let e = p("{{ nomadVar x }}").unwrap_err();
        assert!(e.message.contains("expected nomadVar"), "{e}");
        let e = p("{{ env \"A\" | lower }}").unwrap_err();
        assert!(
            e.message.contains("unknown function \"lower\" after |"),
            "{e}"
        );
        let e = p("{{ env \"A\" | \"x\" }}").unwrap_err();
        assert!(e.message.contains("after | comes a function of"), "{e}");
    }

    #[test]
    fn strings_may_hold_the_right_delimiter_and_escapes() {
        let nodes = p("{{ \"a}}b\\\"c\" }}{{ `raw\\n` }}").unwrap();
        assert!(matches!(&nodes[0], Node::Output(_, Expr::Str(s)) if s == "a}}b\"c"));
        assert!(matches!(&nodes[1], Node::Output(_, Expr::Str(s)) if s == "raw\\n"));
    }
}
