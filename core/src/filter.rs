//! Boolean filter expressions compatible with HashiCorp's go-bexpr, the
//! language Nomad's HTTP API accepts in the `filter` query parameter, evaluated
//! over `serde_json::Value` documents.
//!
//! The parser follows go-bexpr's PEG grammar (`grammar/grammar.peg`)
//! alternative by alternative and reports errors the way its pigeon-generated
//! parser does: the errors raised by grammar predicates ("Unterminated string
//! literal", "Invalid number literal", "Unmatched parentheses", ...), or else
//! "no match found, expected: ..." at the farthest position reached.
//!
//! Evaluation mirrors go-bexpr's reflection-based evaluator applied to the
//! JSON form of the data: objects behave like Go maps, arrays like
//! `[]interface{}`, integral numbers like `int64` (or `uint64` above
//! `i64::MAX`) and other numbers like `float64`. Known differences:
//! - JSON `null` acts like a nil slice or map: `is empty` is true, `in` and
//!   `contains` find nothing, `any`/`all` iterate over nothing, and `null`
//!   array elements are skipped by `in`. (go-bexpr errors or panics on a
//!   decoded JSON null, but treats nil slices and maps of Go structs this way.)
//! - Regular expressions run on the `regex` crate after translating RE2/Go
//!   syntax that it reads differently (ASCII `\d \w \s \b`, `\Q...\E`,
//!   literal `{`, repeat counts above 1000). They are compiled when parsing,
//!   but a bad pattern is reported only when that `matches` is evaluated, as
//!   go-bexpr does; the compiler's error texts differ.
//! - Nesting deeper than [`MAX_NESTING`] levels is a parse error. pigeon
//!   instead gives up after two million parsing steps, which go-bexpr's
//!   backtracking reaches at about ten nested parentheses.
//! - Go's hexadecimal floats (`0x1p-2`) are not accepted when a value is
//!   coerced to a float, and `\x`/octal escapes that do not form valid UTF-8
//!   become U+FFFD.
//! - Objects are iterated in `serde_json`'s key order, not Go's random order.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// Maximum nesting of parenthesised and collection expressions.
pub const MAX_NESTING: usize = 64;

/// A parsed filter expression.
#[derive(Debug, Clone)]
pub struct Filter {
    expr: Expr,
}

/// A syntax error, positioned like pigeon does (1-based line and column
/// counted in characters, 0-based byte offset).
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub offset: usize,
    pub message: String,
}

/// An error raised while evaluating a filter against a document.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} ({}): {}",
            self.line, self.column, self.offset, self.message
        )
    }
}

impl std::error::Error for ParseError {}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

impl Filter {
    /// Parses a go-bexpr expression.
    pub fn parse(src: &str) -> Result<Filter, ParseError> {
        let mut parser = Parser::new(src);
        let result = parser.input();
        let mut expr = parser.finish(result)?;
        compile_regexes(&mut expr);
        Ok(Filter { expr })
    }

    /// Evaluates the expression against one document.
    pub fn matches(&self, datum: &Value) -> Result<bool, EvalError> {
        eval(&self.expr, datum, &mut Vec::new())
    }
}

// ---------------------------------------------------------------------------
// Syntax tree
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Expr {
    /// Right-associative chains of `and`/`or` are flattened; evaluation is
    /// left to right with short-circuiting, exactly like the nested form.
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Match(Box<MatchExpr>),
    Collection(Box<CollectionExpr>),
}

#[derive(Debug, Clone, PartialEq)]
struct Selector {
    json_pointer: bool,
    path: Vec<String>,
}

impl Selector {
    /// go-bexpr's `Selector.String()`.
    fn text(&self) -> String {
        self.path.join(if self.json_pointer { "/" } else { "." })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MatchOp {
    Equal,
    NotEqual,
    In,
    NotIn,
    IsEmpty,
    IsNotEmpty,
    Matches,
    NotMatches,
    IsNil,
    IsNotNil,
}

impl MatchOp {
    /// Result when the selected key is missing from its parent map.
    fn not_present(self) -> bool {
        use MatchOp::*;
        matches!(self, NotEqual | NotIn | IsEmpty | NotMatches | IsNil)
    }

    fn negated(self) -> bool {
        use MatchOp::*;
        matches!(self, NotEqual | NotIn | IsNotEmpty | NotMatches | IsNotNil)
    }
}

#[derive(Debug, Clone)]
struct MatchExpr {
    selector: Selector,
    op: MatchOp,
    /// The raw value text (empty for the operators without a value).
    value: String,
    /// Compiled pattern for `matches`, or the error message to report.
    regex: Option<Result<Regex, String>>,
}

#[derive(Debug, Clone, Default)]
struct Binding {
    default: Option<String>,
    index: Option<String>,
    value: Option<String>,
}

#[derive(Debug, Clone)]
struct CollectionExpr {
    all: bool,
    selector: Selector,
    binding: Binding,
    inner: Expr,
}

fn compile_regexes(expr: &mut Expr) {
    match expr {
        Expr::And(terms) | Expr::Or(terms) => terms.iter_mut().for_each(compile_regexes),
        Expr::Not(inner) => compile_regexes(inner),
        Expr::Collection(c) => compile_regexes(&mut c.inner),
        Expr::Match(m) => {
            if matches!(m.op, MatchOp::Matches | MatchOp::NotMatches) {
                m.regex = Some(compile_go_regex(&m.value));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Parser: a hand-written PEG parser for go-bexpr's grammar.peg
// ---------------------------------------------------------------------------

/// What a primitive matcher wanted, as pigeon names it in "expected" lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Lit(&'static str),
    Class(&'static str),
    Any,
}

impl Want {
    fn render(self) -> String {
        match self {
            Want::Lit(s) => go_quote(s),
            Want::Class(s) => s.to_string(),
            Want::Any => ".".to_string(),
        }
    }
}

#[derive(Clone, Copy)]
enum Tok {
    /// `_`: one or more whitespace characters.
    Ws,
    /// `_?`
    OptWs,
    Kw(&'static str),
}

use self::Tok::{Kw, OptWs, Ws};

type OpTable = [(&'static [Tok], MatchOp)];

const VALUE_OPS: &OpTable = &[
    (&[OptWs, Kw("=="), OptWs], MatchOp::Equal),
    (&[OptWs, Kw("!="), OptWs], MatchOp::NotEqual),
    (&[Ws, Kw("contains"), Ws], MatchOp::In),
    (&[Ws, Kw("not"), Ws, Kw("contains"), Ws], MatchOp::NotIn),
    (&[Ws, Kw("matches"), Ws], MatchOp::Matches),
    (&[Ws, Kw("not"), Ws, Kw("matches"), Ws], MatchOp::NotMatches),
];

const UNARY_OPS: &OpTable = &[
    (&[Ws, Kw("is"), Ws, Kw("empty")], MatchOp::IsEmpty),
    (
        &[Ws, Kw("is"), Ws, Kw("not"), Ws, Kw("empty")],
        MatchOp::IsNotEmpty,
    ),
    (&[Ws, Kw("is"), Ws, Kw("nil")], MatchOp::IsNil),
    (
        &[Ws, Kw("is"), Ws, Kw("not"), Ws, Kw("nil")],
        MatchOp::IsNotNil,
    ),
];

const IN_OPS: &OpTable = &[
    (&[Ws, Kw("in"), Ws], MatchOp::In),
    (&[Ws, Kw("not"), Ws, Kw("in"), Ws], MatchOp::NotIn),
];

const WS_CLASS: &str = "[ \\t\\r\\n]";

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    /// True while inside a `!` predicate (pigeon's maxFailInvertExpected).
    inverted: bool,
    fail_pos: usize,
    expected: Vec<(bool, Want)>,
    errors: Vec<(usize, String)>,
    depth: usize,
    /// Where the nesting limit was exceeded; parsing then gives up.
    too_deep: Option<usize>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            inverted: false,
            fail_pos: 0,
            expected: Vec::new(),
            errors: Vec::new(),
            depth: 0,
            too_deep: None,
        }
    }

    // ----- primitives ------------------------------------------------------

    fn fail_at(&mut self, matched: bool, pos: usize, want: Want) {
        if matched != self.inverted || pos < self.fail_pos {
            return;
        }
        if pos > self.fail_pos {
            self.fail_pos = pos;
            self.expected.clear();
        }
        let entry = (self.inverted, want);
        if !self.expected.contains(&entry) {
            self.expected.push(entry);
        }
    }

    fn lit(&mut self, s: &'static str) -> bool {
        let start = self.pos;
        let ok = self.src[start..].starts_with(s);
        if ok {
            self.pos += s.len();
        }
        self.fail_at(ok, start, Want::Lit(s));
        ok
    }

    fn class(&mut self, pred: impl Fn(char) -> bool, name: &'static str) -> bool {
        let start = self.pos;
        let ok = match self.src[start..].chars().next() {
            Some(c) if pred(c) => {
                self.pos += c.len_utf8();
                true
            }
            _ => false,
        };
        self.fail_at(ok, start, Want::Class(name));
        ok
    }

    fn any(&mut self) -> bool {
        let start = self.pos;
        let ok = match self.src[start..].chars().next() {
            Some(c) => {
                self.pos += c.len_utf8();
                true
            }
            None => false,
        };
        self.fail_at(ok, start, Want::Any);
        ok
    }

    /// `!expr`
    fn not(&mut self, f: impl FnOnce(&mut Self) -> bool) -> bool {
        let start = self.pos;
        self.inverted = !self.inverted;
        let ok = f(self);
        self.inverted = !self.inverted;
        self.pos = start;
        !ok
    }

    /// `&expr`
    fn ahead(&mut self, f: impl FnOnce(&mut Self) -> bool) -> bool {
        let start = self.pos;
        let ok = f(self);
        self.pos = start;
        ok
    }

    /// Runs a sequence, rewinding when it fails.
    fn attempt<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let start = self.pos;
        let result = f(self);
        if result.is_none() {
            self.pos = start;
        }
        result
    }

    fn ws(&mut self) -> bool {
        let is_ws = |c| matches!(c, ' ' | '\t' | '\r' | '\n');
        if !self.class(is_ws, WS_CLASS) {
            return false;
        }
        while self.class(is_ws, WS_CLASS) {}
        true
    }

    fn opt_ws(&mut self) {
        self.ws();
    }

    fn eof(&mut self) -> bool {
        self.not(|p| p.any())
    }

    fn seq(&mut self, toks: &[Tok]) -> bool {
        self.attempt(|p| {
            for tok in toks {
                let ok = match *tok {
                    Ws => p.ws(),
                    OptWs => {
                        p.opt_ws();
                        true
                    }
                    Kw(s) => p.lit(s),
                };
                if !ok {
                    return None;
                }
            }
            Some(())
        })
        .is_some()
    }

    fn first_op(&mut self, table: &OpTable) -> Option<MatchOp> {
        table
            .iter()
            .find(|(toks, _)| self.seq(toks))
            .map(|(_, op)| *op)
    }

    /// Records a predicate error raised in grammar rule `rule`.
    fn error_at(&mut self, pos: usize, rule: &str, msg: &str) {
        self.errors.push((pos, format!("rule \"{rule}\": {msg}")));
    }

    fn error(&mut self, rule: &str, msg: &str) {
        self.error_at(self.pos, rule, msg);
    }

    // ----- rules -----------------------------------------------------------

    /// `Input <- _? "(" _? OrExpression _? ")" _? EOF / _? OrExpression _? EOF`
    fn input(&mut self) -> Option<Expr> {
        let wrapped = self.attempt(|p| {
            p.opt_ws();
            if !p.lit("(") {
                return None;
            }
            p.opt_ws();
            let expr = p.or_expr()?;
            p.opt_ws();
            if !p.lit(")") {
                return None;
            }
            p.opt_ws();
            p.eof().then_some(expr)
        });
        if wrapped.is_some() {
            return wrapped;
        }
        self.attempt(|p| {
            p.opt_ws();
            let expr = p.or_expr()?;
            p.opt_ws();
            p.eof().then_some(expr)
        })
    }

    /// `OrExpression <- AndExpression _ "or" _ OrExpression / AndExpression
    ///                 / CollectionExpression`, parsed iteratively.
    fn or_expr(&mut self) -> Option<Expr> {
        if self.too_deep.is_some() {
            return None;
        }
        if self.depth >= MAX_NESTING {
            self.too_deep = Some(self.pos);
            return None;
        }
        self.depth += 1;
        let result = self.or_chain();
        self.depth -= 1;
        result
    }

    fn or_chain(&mut self) -> Option<Expr> {
        let mut terms = Vec::new();
        let mut end = self.pos;
        loop {
            let start = self.pos;
            if let Some(term) = self.and_expr() {
                terms.push(term);
                end = self.pos;
                if self.seq(&[Ws, Kw("or"), Ws]) {
                    continue;
                }
                break;
            }
            self.pos = start;
            if let Some(collection) = self.collection_expr() {
                terms.push(collection);
                end = self.pos;
            }
            // Otherwise the right-hand side failed: the previous alternative
            // (a bare AndExpression) applies, ending before the "or".
            break;
        }
        self.pos = end;
        chain(terms, Expr::Or)
    }

    /// `AndExpression <- NotExpression _ "and" _ AndExpression / NotExpression`
    fn and_expr(&mut self) -> Option<Expr> {
        let mut terms = Vec::new();
        let mut end = self.pos;
        while let Some(term) = self.not_expr() {
            terms.push(term);
            end = self.pos;
            if !self.seq(&[Ws, Kw("and"), Ws]) {
                break;
            }
        }
        self.pos = end;
        chain(terms, Expr::And)
    }

    /// `NotExpression <- "not" _ NotExpression / ParenthesizedExpression`
    fn not_expr(&mut self) -> Option<Expr> {
        let mut starts = Vec::new();
        loop {
            let start = self.pos;
            if !self.seq(&[Kw("not"), Ws]) {
                break;
            }
            starts.push(start);
        }
        let mut level = starts.len();
        loop {
            if let Some(mut expr) = self.paren_expr() {
                for _ in 0..level {
                    expr = match expr {
                        Expr::Not(inner) => *inner,
                        other => Expr::Not(Box::new(other)),
                    };
                }
                return Some(expr);
            }
            if level == 0 {
                return None;
            }
            level -= 1;
            self.pos = starts[level];
        }
    }

    /// `ParenthesizedExpression <- "(" _? OrExpression _? ")" / MatchExpression
    ///                            / "(" _? OrExpression _? !")" &{Unmatched}`
    fn paren_expr(&mut self) -> Option<Expr> {
        let start = self.pos;
        let mut unclosed_at = None;
        if self.lit("(") {
            self.opt_ws();
            if let Some(expr) = self.or_expr() {
                self.opt_ws();
                if self.lit(")") {
                    return Some(expr);
                }
                unclosed_at = Some(self.pos);
            }
        }
        self.pos = start;
        if let Some(expr) = self.match_expr() {
            return Some(expr);
        }
        if let Some(pos) = unclosed_at {
            self.error_at(pos, "grouping", "Unmatched parentheses");
        }
        self.pos = start;
        None
    }

    /// `CollectionExpression <- (("any" / "all") _) Selector _ "as" _
    ///     CollectionIdentifiers _? "{" _? OrExpression _? "}"`
    fn collection_expr(&mut self) -> Option<Expr> {
        self.attempt(|p| {
            let all = if p.seq(&[Kw("any"), Ws]) {
                false
            } else if p.seq(&[Kw("all"), Ws]) {
                true
            } else {
                return None;
            };
            let selector = p.selector()?;
            if !p.seq(&[Ws, Kw("as"), Ws]) {
                return None;
            }
            let binding = p.collection_identifiers()?;
            p.opt_ws();
            if !p.lit("{") {
                return None;
            }
            p.opt_ws();
            let inner = p.or_expr()?;
            p.opt_ws();
            if !p.lit("}") {
                return None;
            }
            let c = CollectionExpr {
                all,
                selector,
                binding,
                inner,
            };
            Some(Expr::Collection(Box::new(c)))
        })
    }

    /// `k, v` / `k, _` / `_, v` / `v`
    fn collection_identifiers(&mut self) -> Option<Binding> {
        let pair = |p: &mut Self, first_blank: bool, second_blank: bool| {
            p.attempt(|p| {
                let first = if first_blank {
                    p.lit("_").then(String::new)
                } else {
                    p.identifier()
                }?;
                p.opt_ws();
                if !p.lit(",") {
                    return None;
                }
                p.opt_ws();
                let second = if second_blank {
                    p.lit("_").then(String::new)
                } else {
                    p.identifier()
                }?;
                Some((first, second))
            })
        };
        if let Some((index, value)) = pair(self, false, false) {
            return Some(Binding {
                index: Some(index),
                value: Some(value),
                ..Binding::default()
            });
        }
        if let Some((index, _)) = pair(self, false, true) {
            return Some(Binding {
                index: Some(index),
                ..Binding::default()
            });
        }
        if let Some((_, value)) = pair(self, true, false) {
            return Some(Binding {
                value: Some(value),
                ..Binding::default()
            });
        }
        let default = self.identifier()?;
        Some(Binding {
            default: Some(default),
            ..Binding::default()
        })
    }

    /// `MatchExpression <- MatchSelectorOpValue / MatchSelectorOp / MatchValueOpSelector`
    fn match_expr(&mut self) -> Option<Expr> {
        let selector_first = self.attempt(|p| {
            let selector = p.selector()?;
            let op = p.first_op(VALUE_OPS)?;
            let value = p.value()?;
            Some(make_match(selector, op, value))
        });
        if selector_first.is_some() {
            return selector_first;
        }
        let unary = self.attempt(|p| {
            let selector = p.selector()?;
            let op = p.first_op(UNARY_OPS)?;
            Some(make_match(selector, op, String::new()))
        });
        if unary.is_some() {
            return unary;
        }
        self.match_value_op_selector()
    }

    /// `Value ("in" / "not in") Selector`, or the "Invalid selector" error.
    fn match_value_op_selector(&mut self) -> Option<Expr> {
        self.attempt(|p| {
            let value = p.value()?;
            let op = p.first_op(IN_OPS)?;
            let after_op = p.pos;
            let selector = p.selector();
            if selector.is_none() {
                p.error_at(after_op, "match", "Invalid selector");
            }
            Some(make_match(selector?, op, value))
        })
    }

    /// `Selector <- Identifier SelectorOrIndex* / '"' JsonPointerSegment* '"'`
    fn selector(&mut self) -> Option<Selector> {
        if let Some(first) = self.identifier() {
            let mut path = vec![first];
            while let Some(part) = self.selector_or_index() {
                path.push(part);
            }
            return Some(Selector {
                json_pointer: false,
                path,
            });
        }
        self.attempt(|p| {
            if !p.lit("\"") {
                return None;
            }
            let mut segments = Vec::new();
            while let Some(segment) = p.json_pointer_segment() {
                segments.push(segment);
            }
            if !p.lit("\"") {
                return None;
            }
            Some(Selector {
                json_pointer: true,
                path: json_pointer_parts(&segments),
            })
        })
    }

    /// `JsonPointerSegment <- '/' [\pL\pN-_.~:|]+`
    fn json_pointer_segment(&mut self) -> Option<&'a str> {
        self.attempt(|p| {
            if !p.lit("/") {
                return None;
            }
            let start = p.pos;
            let is_seg = |c: char| {
                c.is_alphabetic()
                    || c.is_numeric()
                    || matches!(c, '-' | '_' | '.' | '~' | ':' | '|')
            };
            let name = "[\\pL\\pN-_.~:|]";
            if !p.class(is_seg, name) {
                return None;
            }
            while p.class(is_seg, name) {}
            Some(&p.src[start..p.pos])
        })
    }

    /// `Identifier <- [a-zA-Z] [a-zA-Z0-9_/]*`
    fn identifier(&mut self) -> Option<String> {
        let start = self.pos;
        if !self.class(|c| c.is_ascii_alphabetic(), "[a-zA-Z]") {
            return None;
        }
        let rest = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '/';
        while self.class(rest, "[a-zA-Z0-9_/]") {}
        Some(self.src[start..self.pos].to_string())
    }

    /// `SelectorOrIndex <- "." Identifier / IndexExpression / "." [0-9]+`
    fn selector_or_index(&mut self) -> Option<String> {
        let dotted = self.attempt(|p| if p.lit(".") { p.identifier() } else { None });
        if dotted.is_some() {
            return dotted;
        }
        if let Some(index) = self.index_expr() {
            return Some(index);
        }
        self.attempt(|p| {
            if !p.lit(".") {
                return None;
            }
            let start = p.pos;
            if !p.class(|c| c.is_ascii_digit(), "[0-9]") {
                return None;
            }
            while p.class(|c| c.is_ascii_digit(), "[0-9]") {}
            Some(p.src[start..p.pos].to_string())
        })
    }

    /// `IndexExpression <- "[" _? StringLiteral _? "]"` plus its two error
    /// alternatives ("Invalid index", "Unclosed index expression").
    fn index_expr(&mut self) -> Option<String> {
        let start = self.pos;
        if !self.lit("[") {
            return None;
        }
        self.opt_ws();
        match self.string_literal() {
            None => self.error("index", "Invalid index"),
            Some(key) => {
                self.opt_ws();
                if self.lit("]") {
                    return Some(key);
                }
                self.error("index", "Unclosed index expression");
            }
        }
        self.pos = start;
        None
    }

    /// `Value <- Selector / NumberLiteral / StringLiteral`; a selector stands
    /// for its own text.
    fn value(&mut self) -> Option<String> {
        if let Some(selector) = self.selector() {
            return Some(selector.text());
        }
        if let Some(number) = self.number_literal() {
            return Some(number);
        }
        self.string_literal()
    }

    /// `NumberLiteral <- "-"? IntegerOrFloat &AfterNumbers` or the
    /// "Invalid number literal" error.
    fn number_literal(&mut self) -> Option<String> {
        let start = self.pos;
        self.lit("-");
        if !self.integer_or_float() {
            self.pos = start;
            return None;
        }
        let end = self.pos;
        let after_numbers = |p: &mut Self| p.ws() || p.eof() || p.lit(")");
        if self.ahead(after_numbers) {
            return Some(self.src[start..end].to_string());
        }
        self.error("number", "Invalid number literal");
        self.pos = start;
        None
    }

    /// `IntegerOrFloat <- ("0" / [1-9][0-9]*) ("." [0-9]+)?`
    fn integer_or_float(&mut self) -> bool {
        let digit = |c: char| c.is_ascii_digit();
        if !self.lit("0") {
            if !self.class(|c| matches!(c, '1'..='9'), "[1-9]") {
                return false;
            }
            while self.class(digit, "[0-9]") {}
        }
        let before_fraction = self.pos;
        if self.lit(".") && self.class(digit, "[0-9]") {
            while self.class(digit, "[0-9]") {}
        } else {
            self.pos = before_fraction;
        }
        true
    }

    /// `StringLiteral <- ('`' RawStringChar* '`' / '"' DoubleStringChar* '"')`
    /// unquoted like Go's `strconv.Unquote`, or the unterminated error.
    fn string_literal(&mut self) -> Option<String> {
        let start = self.pos;
        for quote in ["`", "\""] {
            if !self.lit(quote) {
                continue;
            }
            while self.not(|p| p.lit(quote)) && self.any() {}
            if self.lit(quote) {
                let text = &self.src[start..self.pos];
                return Some(go_unquote(text).unwrap_or_else(|| {
                    self.error_at(start, "string", "invalid syntax");
                    String::new()
                }));
            }
            // Second alternative: the quote is never closed before EOF.
            if self.eof() {
                self.error("string", "Unterminated string literal");
            }
            self.pos = start;
            return None;
        }
        None
    }

    // ----- result ----------------------------------------------------------

    fn finish(self, result: Option<Expr>) -> Result<Expr, ParseError> {
        if let Some(pos) = self.too_deep {
            let msg = format!("expressions nested more than {MAX_NESTING} levels deep");
            return Err(make_parse_error(self.src, pos, msg));
        }
        let Some((first_pos, first_msg)) = self.errors.first().cloned() else {
            if let Some(expr) = result {
                return Ok(expr);
            }
            let message = format!("no match found, expected: {}", self.expected_list());
            return Err(make_parse_error(self.src, self.fail_pos, message));
        };
        // Like pigeon, report every distinct error, one per line.
        let mut seen: Vec<String> = Vec::new();
        for (pos, msg) in &self.errors {
            let (line, column) = position(self.src, *pos);
            let full = format!("{line}:{column} ({pos}): {msg}");
            if !seen.contains(&full) {
                seen.push(full);
            }
        }
        let mut message = first_msg;
        for extra in seen.iter().skip(1) {
            message.push('\n');
            message.push_str(extra);
        }
        Err(make_parse_error(self.src, first_pos, message))
    }

    fn expected_list(&self) -> String {
        let mut items: Vec<String> = Vec::new();
        let mut eof = false;
        for (inverted, want) in &self.expected {
            let item = format!("{}{}", if *inverted { "!" } else { "" }, want.render());
            if item == "!." {
                eof = true;
            } else if !items.contains(&item) {
                items.push(item);
            }
        }
        items.sort();
        if eof {
            items.push("EOF".to_string());
        }
        match items.split_last() {
            None => String::new(),
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {}", rest.join(", "), last),
        }
    }
}

fn chain(mut terms: Vec<Expr>, make: fn(Vec<Expr>) -> Expr) -> Option<Expr> {
    match terms.len() {
        0 => None,
        1 => terms.pop(),
        _ => Some(make(terms)),
    }
}

fn make_match(selector: Selector, op: MatchOp, value: String) -> Expr {
    Expr::Match(Box::new(MatchExpr {
        selector,
        op,
        value,
        regex: None,
    }))
}

/// pointerstructure.Parse of "/" + segments: `~1` becomes `/`, then `~0` `~`.
fn json_pointer_parts(segments: &[&str]) -> Vec<String> {
    if segments.is_empty() {
        return vec![String::new()];
    }
    segments
        .iter()
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// pigeon's position of the character at `offset`: a newline character
/// itself sits at column 0 of the following line.
fn position(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let mut line = 1 + before.matches('\n').count();
    let mut column = before[line_start..].chars().count() + 1;
    if src[offset..].starts_with('\n') {
        line += 1;
        column = 0;
    }
    (line, column)
}

fn make_parse_error(src: &str, offset: usize, message: String) -> ParseError {
    let (line, column) = position(src, offset);
    ParseError {
        line,
        column,
        offset,
        message,
    }
}

/// Go's `strconv.Unquote` for a complete "..." or `...` literal.
fn go_unquote(text: &str) -> Option<String> {
    let inner = &text[1..text.len() - 1];
    if text.starts_with('`') {
        return Some(inner.replace('\r', ""));
    }
    if !inner.contains('\\') && !inner.contains('\n') {
        return Some(inner.to_string());
    }
    let bytes = inner.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => return None,
            b'\\' => i = unquote_escape(bytes, i + 1, &mut out)?,
            _ => {
                let c = inner[i..].chars().next()?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i += c.len_utf8();
            }
        }
    }
    Some(
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// Decodes the escape whose letter is at `bytes[i]`; returns the next index.
fn unquote_escape(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> Option<usize> {
    let simple = match *bytes.get(i)? {
        b'a' => Some(7),
        b'b' => Some(8),
        b'f' => Some(12),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(11),
        b'\\' => Some(b'\\'),
        b'"' => Some(b'"'),
        _ => None,
    };
    if let Some(byte) = simple {
        out.push(byte);
        return Some(i + 1);
    }
    let (digits, radix) = match bytes[i] {
        b'x' => (2, 16),
        b'u' => (4, 16),
        b'U' => (8, 16),
        b'0'..=b'7' => (3, 8),
        _ => return None,
    };
    let start = if radix == 8 { i } else { i + 1 };
    let text = bytes.get(start..start + digits)?;
    let mut v: u32 = 0;
    for &b in text {
        v = v * radix + char::from(b).to_digit(radix)?;
    }
    if radix == 8 || bytes[i] == b'x' {
        out.push(u8::try_from(v).ok()?);
    } else {
        let c = char::from_u32(v)?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    Some(start + digits)
}

// ---------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------

/// The Go reflect kind a JSON value stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    /// Go's `int`: the index bound by a collection expression over a list.
    GoInt,
    Int,
    Uint,
    Float,
    Str,
    Map,
    Slice,
    Invalid,
}

impl Kind {
    fn of(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Invalid,
            Value::Bool(_) => Kind::Bool,
            Value::Number(n) if n.is_i64() => Kind::Int,
            Value::Number(n) if n.is_u64() => Kind::Uint,
            Value::Number(_) => Kind::Float,
            Value::String(_) => Kind::Str,
            Value::Array(_) => Kind::Slice,
            Value::Object(_) => Kind::Map,
        }
    }

    /// `reflect.Kind.String()`
    fn name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::GoInt => "int",
            Kind::Int => "int64",
            Kind::Uint => "uint64",
            Kind::Float => "float64",
            Kind::Str => "string",
            Kind::Map => "map",
            Kind::Slice => "slice",
            Kind::Invalid => "invalid",
        }
    }

    /// `reflect.Type.String()`
    fn type_name(self) -> &'static str {
        match self {
            Kind::Map => "map[string]interface {}",
            Kind::Slice => "[]interface {}",
            Kind::Invalid => "<nil>",
            other => other.name(),
        }
    }

    fn is_primitive(self) -> bool {
        !matches!(self, Kind::Map | Kind::Slice | Kind::Invalid)
    }
}

/// A collection placeholder bound by `any`/`all`.
struct Local {
    name: String,
    bound: Bound,
}

enum Bound {
    /// Stands for another selector path (resolved again on use).
    Path(Vec<String>),
    /// A concrete value (list index or map key) and its Go kind.
    Value(Value, Kind),
}

impl Binding {
    fn check(&self) -> Result<(), EvalError> {
        match (&self.index, &self.value) {
            (Some(index), Some(value)) if index == value => Err(EvalError(format!(
                "{} cannot be used as a placeholder for both the index and the value",
                go_quote(index)
            ))),
            _ => Ok(()),
        }
    }

    fn locals(&self, base: &[String], key: Option<&str>, index: usize) -> Vec<Local> {
        let element = key.map_or_else(|| index.to_string(), str::to_string);
        let path = || {
            let mut path = base.to_vec();
            path.push(element.clone());
            Bound::Path(path)
        };
        let local = |name: &String, bound| Local {
            name: name.clone(),
            bound,
        };
        let mut out = Vec::new();
        if let Some(key) = key {
            let key_value = || Bound::Value(Value::String(key.to_string()), Kind::Str);
            if let Some(name) = &self.default {
                out.push(local(name, key_value()));
            }
            if let Some(name) = &self.index {
                out.push(local(name, key_value()));
            }
        } else {
            if let Some(name) = &self.index {
                out.push(local(name, Bound::Value(Value::from(index), Kind::GoInt)));
            }
            if let Some(name) = &self.default {
                out.push(local(name, path()));
            }
        }
        if let Some(name) = &self.value {
            out.push(local(name, path()));
        }
        out
    }
}

fn eval(expr: &Expr, datum: &Value, locals: &mut Vec<Local>) -> Result<bool, EvalError> {
    match expr {
        Expr::And(terms) => {
            for term in terms {
                if !eval(term, datum, locals)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Expr::Or(terms) => {
            for term in terms {
                if eval(term, datum, locals)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Expr::Not(inner) => Ok(!eval(inner, datum, locals)?),
        Expr::Match(m) => eval_match(m, datum, locals),
        Expr::Collection(c) => eval_collection(c, datum, locals),
    }
}

fn eval_match(m: &MatchExpr, datum: &Value, locals: &[Local]) -> Result<bool, EvalError> {
    let Some((value, kind)) = get_value(datum, &m.selector.path, locals)? else {
        return Ok(m.op.not_present());
    };
    let value = value.as_ref();
    let result = match m.op {
        MatchOp::Equal | MatchOp::NotEqual => match_equal(m, value, kind),
        MatchOp::In | MatchOp::NotIn => match_in(m, value, kind),
        MatchOp::IsEmpty | MatchOp::IsNotEmpty => match_is_empty(m, value, kind),
        MatchOp::Matches | MatchOp::NotMatches => match_regex(m, value, kind),
        MatchOp::IsNil | MatchOp::IsNotNil => match_is_nil(m, value, kind),
    }?;
    Ok(result != m.op.negated())
}

fn eval_collection(
    c: &CollectionExpr,
    datum: &Value,
    locals: &mut Vec<Local>,
) -> Result<bool, EvalError> {
    let Some((target, _)) = get_value(datum, &c.selector.path, locals)? else {
        return Ok(c.all);
    };
    let (count, keys): (usize, Vec<&String>) = match target.as_ref() {
        Value::Array(items) => (items.len(), Vec::new()),
        Value::Object(map) => (map.len(), map.keys().collect()),
        Value::Null => (0, Vec::new()),
        _ => {
            return Err(EvalError(format!(
                "{} is not a list or a map",
                c.selector.text()
            )));
        }
    };
    for i in 0..count {
        c.binding.check()?;
        let key = keys.get(i).map(|k| k.as_str());
        let bound = c.binding.locals(&c.selector.path, key, i);
        let depth = locals.len();
        locals.extend(bound);
        let result = eval(&c.inner, datum, locals);
        locals.truncate(depth);
        let result = result?;
        if result != c.all {
            return Ok(result);
        }
    }
    Ok(c.all)
}

/// Resolves a selector path through the collection placeholders, then in the
/// document. `Ok(None)` means "missing key of a map" (not-present disposition).
fn get_value<'v>(
    datum: &'v Value,
    path: &[String],
    locals: &[Local],
) -> Result<Option<(Cow<'v, Value>, Kind)>, EvalError> {
    let mut path = path.to_vec();
    for local in locals.iter().rev() {
        if path.first() != Some(&local.name) {
            continue;
        }
        match &local.bound {
            Bound::Value(value, kind) => {
                if path.len() > 1 {
                    return Err(EvalError(format!(
                        "{} references a {} so {} is invalid",
                        pointer_string(&path[..1]),
                        kind.type_name(),
                        pointer_string(&path)
                    )));
                }
                return Ok(Some((Cow::Owned(value.clone()), *kind)));
            }
            Bound::Path(prefix) => {
                let mut full = prefix.clone();
                full.extend_from_slice(&path[1..]);
                path = full;
            }
        }
    }
    match pointer_get(datum, &path) {
        Ok(value) => Ok(Some((Cow::Borrowed(value), Kind::of(value)))),
        Err(e) if e.not_found && parent_is_map(datum, &path) => Ok(None),
        Err(e) => Err(EvalError(format!(
            "error finding value in datum: {}",
            e.message
        ))),
    }
}

struct PointerError {
    not_found: bool,
    message: String,
}

/// mitchellh/pointerstructure's `Pointer.Get` over JSON values.
fn pointer_get<'v>(datum: &'v Value, parts: &[String]) -> Result<&'v Value, PointerError> {
    let mut current = datum;
    for (i, part) in parts.iter().enumerate() {
        let fail = |not_found: bool, detail: String| PointerError {
            not_found,
            message: format!("{} at part {}: {}", pointer_string(parts), i, detail),
        };
        current = match current {
            Value::Object(map) => match map.get(part) {
                Some(v) => v,
                None => return Err(fail(true, format!("couldn't find key {}", go_quote(part)))),
            },
            Value::Array(items) => array_index(items, part).map_err(|d| fail(false, d))?,
            other => {
                return Err(PointerError {
                    not_found: false,
                    message: format!(
                        "{}: at part {}, invalid value kind: {}",
                        pointer_string(parts),
                        i,
                        Kind::of(other).name()
                    ),
                });
            }
        };
    }
    Ok(current)
}

fn array_index<'v>(items: &'v [Value], part: &str) -> Result<&'v Value, String> {
    // mapstructure's weak decoding: "" is 0, otherwise strconv.ParseInt(s, 0, 64).
    let text = if part.is_empty() { "0" } else { part };
    let index = go_parse_int(text)
        .map_err(|_| format!("couldn't convert value {} to type int", go_quote(part)))?;
    usize::try_from(index)
        .ok()
        .and_then(|i| items.get(i))
        .ok_or_else(|| format!("index {} is out of range (length = {})", index, items.len()))
}

fn parent_is_map(datum: &Value, path: &[String]) -> bool {
    path.len() >= 2
        && matches!(
            pointer_get(datum, &path[..path.len() - 1]),
            Ok(Value::Object(_))
        )
}

fn pointer_string(parts: &[String]) -> String {
    let mut out = String::new();
    for part in parts {
        out.push('/');
        out.push_str(&part.replace('~', "~0").replace('/', "~1"));
    }
    out
}

/// The raw value converted to the kind of the selected value.
enum Coerced<'a> {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Raw(&'a str),
}

fn coerce(raw: &str, kind: Kind) -> Result<Coerced<'_>, NumError> {
    Ok(match kind {
        Kind::Bool => Coerced::Bool(go_parse_bool(raw)?),
        Kind::GoInt | Kind::Int => Coerced::Int(go_parse_int(raw)?),
        Kind::Uint => Coerced::Uint(go_parse_uint(raw)?),
        Kind::Float => Coerced::Float(go_parse_float(raw)?),
        _ => Coerced::Raw(raw),
    })
}

fn primitive_equal(coerced: &Coerced<'_>, value: &Value) -> bool {
    match (coerced, value) {
        (Coerced::Bool(b), Value::Bool(v)) => b == v,
        (Coerced::Int(i), Value::Number(n)) => n.as_i64() == Some(*i),
        (Coerced::Uint(u), Value::Number(n)) => n.as_u64() == Some(*u),
        (Coerced::Float(f), Value::Number(n)) => n.as_f64() == Some(*f),
        (Coerced::Raw(s), Value::String(v)) => s == v,
        _ => false,
    }
}

fn match_value_error(e: NumError) -> EvalError {
    EvalError(format!("error getting match value in expression: {e}"))
}

fn match_equal(m: &MatchExpr, value: &Value, kind: Kind) -> Result<bool, EvalError> {
    if !kind.is_primitive() {
        let msg = "unable to find suitable primitive comparison function for matching";
        return Err(EvalError(msg.to_string()));
    }
    let coerced = coerce(&m.value, kind).map_err(match_value_error)?;
    Ok(primitive_equal(&coerced, value))
}

fn match_in(m: &MatchExpr, value: &Value, kind: Kind) -> Result<bool, EvalError> {
    coerce(&m.value, kind).map_err(match_value_error)?;
    match value {
        Value::Object(map) => Ok(map.contains_key(&m.value)),
        Value::Array(items) => in_array(&m.value, items),
        Value::String(s) => Ok(s.contains(m.value.as_str())),
        Value::Null => Ok(false),
        _ => Err(EvalError(format!(
            "cannot perform in/contains operations on type {} for selector: {}",
            kind.name(),
            go_quote(&m.selector.text())
        ))),
    }
}

/// go-bexpr's `[]interface{}` handling: every element is compared according
/// to its own kind; elements the value cannot be parsed as are skipped.
fn in_array(raw: &str, items: &[Value]) -> Result<bool, EvalError> {
    for item in items {
        let kind = Kind::of(item);
        match kind {
            Kind::Invalid => continue,
            Kind::Map | Kind::Slice => {
                return Err(EvalError(format!(
                    "unable to find suitable primitive comparison function for \"in\" \
                     comparison in interface slice: {}",
                    kind.name()
                )));
            }
            _ => {}
        }
        match coerce(raw, kind) {
            Ok(coerced) if primitive_equal(&coerced, item) => return Ok(true),
            Ok(_) => {}
            Err(e) if !e.range => {}
            Err(_) => {
                let msg = "error getting interface slice match value in expression";
                return Err(EvalError(msg.to_string()));
            }
        }
    }
    Ok(false)
}

fn match_is_empty(m: &MatchExpr, value: &Value, kind: Kind) -> Result<bool, EvalError> {
    match value {
        Value::String(s) => Ok(s.is_empty()),
        Value::Array(items) => Ok(items.is_empty()),
        Value::Object(map) => Ok(map.is_empty()),
        Value::Null => Ok(true),
        _ => Err(EvalError(format!(
            "cannot perform is-empty operations on type {} for selector: {}",
            kind.name(),
            go_quote(&m.selector.text())
        ))),
    }
}

fn match_is_nil(m: &MatchExpr, value: &Value, kind: Kind) -> Result<bool, EvalError> {
    match value {
        Value::Null => Ok(true),
        Value::Array(_) | Value::Object(_) => Ok(false),
        _ => Err(EvalError(format!(
            "cannot perform is-nil operations on type {} for selector: {}",
            kind.name(),
            go_quote(&m.selector.text())
        ))),
    }
}

fn match_regex(m: &MatchExpr, value: &Value, kind: Kind) -> Result<bool, EvalError> {
    let Value::String(s) = value else {
        return Err(EvalError(format!(
            "value of type {} is not convertible to []byte",
            kind.type_name()
        )));
    };
    let compiled;
    let regex = match &m.regex {
        Some(r) => r,
        None => {
            compiled = compile_go_regex(&m.value);
            &compiled
        }
    };
    match regex {
        Ok(re) => Ok(re.is_match(s)),
        Err(msg) => Err(EvalError(msg.clone())),
    }
}

// ---------------------------------------------------------------------------
// Go regular expressions on the regex crate
// ---------------------------------------------------------------------------

fn compile_go_regex(pattern: &str) -> Result<Regex, String> {
    let failure = |detail: &str| {
        format!(
            "failed to compile regular expression {}: error parsing regexp: {}",
            go_quote(pattern),
            detail
        )
    };
    let translated = translate_go_regex(pattern).map_err(|detail| failure(&detail))?;
    RegexBuilder::new(&translated)
        .octal(true)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            failure(
                text.lines()
                    .rev()
                    .find_map(|l| l.strip_prefix("error: "))
                    .unwrap_or(&text),
            )
        })
}

/// Rewrites RE2/Go syntax whose meaning differs in the regex crate.
fn translate_go_regex(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            i = translate_escape(&chars, i + 1, in_class, &mut out)?;
        } else if in_class {
            i = translate_class_char(&chars, i, &mut out, &mut in_class)?;
        } else if c == '[' {
            in_class = true;
            out.push('[');
            i += 1;
            if chars.get(i) == Some(&'^') {
                out.push('^');
                i += 1;
            }
            if chars.get(i) == Some(&']') {
                out.push_str("\\]");
                i += 1;
            }
        } else if c == '{' || c == '}' {
            match repeat_len(&chars[i..]) {
                Some(len) if c == '{' => {
                    let spec: String = chars[i..i + len].iter().collect();
                    let count = |n: &str| n.parse::<u64>().unwrap_or(u64::MAX);
                    let (min, max) = match spec[1..len - 1].split_once(',') {
                        None => (count(&spec[1..len - 1]), Some(count(&spec[1..len - 1]))),
                        Some((min, "")) => (count(min), None),
                        Some((min, max)) => (count(min), Some(count(max))),
                    };
                    if min > 1000 || max.is_some_and(|m| m > 1000 || m < min) {
                        return Err(format!("invalid repeat count: `{spec}`"));
                    }
                    out.push_str(&spec);
                    i += len;
                }
                _ => {
                    out.push('\\');
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

/// Translates the escape whose letter is `chars[i]`; returns the next index.
fn translate_escape(
    chars: &[char],
    i: usize,
    in_class: bool,
    out: &mut String,
) -> Result<usize, String> {
    let replacement = match chars[i] {
        'd' => "[0-9]",
        'D' => "[^0-9]",
        'w' => "[0-9A-Za-z_]",
        'W' => "[^0-9A-Za-z_]",
        's' => "[\\t\\n\\f\\r ]",
        'S' => "[^\\t\\n\\f\\r ]",
        'b' if !in_class => "(?-u:\\b)",
        'B' if !in_class => "(?-u:\\B)",
        '<' => "<",
        '>' => ">",
        'Q' if !in_class => {
            let rest: String = chars[i + 1..].iter().collect();
            let (literal, consumed) = match rest.find("\\E") {
                Some(end) => (&rest[..end], rest[..end].chars().count() + 2),
                None => (rest.as_str(), rest.chars().count()),
            };
            out.push_str(&regex::escape(literal));
            return Ok(i + 1 + consumed);
        }
        other => return copy_escape(chars, i, other, out),
    };
    out.push_str(replacement);
    Ok(i + 1)
}

/// Copies an escape both syntaxes share, rejecting letters RE2 does not know.
fn copy_escape(chars: &[char], i: usize, letter: char, out: &mut String) -> Result<usize, String> {
    if letter.is_ascii_alphanumeric() && !"aftnrvxpPAz01234567".contains(letter) {
        return Err(format!("invalid escape sequence: `\\{letter}`"));
    }
    let next = chars.get(i + 1).copied();
    let is_class = matches!(letter, 'p' | 'P');
    if let Some(class) = next.filter(|c| is_class && *c != '{' && !"CLMNPSZ".contains(*c)) {
        return Err(format!(
            "invalid character class range: `\\{letter}{class}`"
        ));
    }
    out.push('\\');
    out.push(letter);
    // Keep `\p{Greek}`, `\x{263a}` and the like together.
    let braced = (is_class || letter == 'x') && next == Some('{');
    match chars[i + 1..].iter().position(|&c| c == '}') {
        Some(close) if braced => {
            out.extend(&chars[i + 1..=i + 1 + close]);
            Ok(i + 2 + close)
        }
        _ => Ok(i + 1),
    }
}

const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

fn translate_class_char(
    chars: &[char],
    i: usize,
    out: &mut String,
    in_class: &mut bool,
) -> Result<usize, String> {
    match chars[i] {
        ']' => {
            *in_class = false;
            out.push(']');
        }
        '[' if chars.get(i + 1) == Some(&':') => {
            let rest: String = chars[i..].iter().collect();
            if let Some(end) = rest.find(":]") {
                let name = rest[2..end].trim_start_matches('^');
                if !POSIX_CLASSES.contains(&name) {
                    return Err(format!(
                        "invalid character class range: `{}`",
                        &rest[1..end + 2]
                    ));
                }
                out.push_str(&rest[..end + 2]);
                return Ok(i + rest[..end + 2].chars().count());
            }
            out.push_str("\\[");
        }
        c @ ('[' | '&' | '~') => {
            out.push('\\');
            out.push(c);
        }
        c => out.push(c),
    }
    Ok(i + 1)
}

/// Length of a valid `{n}`, `{n,}` or `{n,m}` repetition at the start.
fn repeat_len(chars: &[char]) -> Option<usize> {
    let number = |from: usize| {
        let len = chars[from..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let leading_zero = len >= 2 && chars[from] == '0';
        (len > 0 && !leading_zero).then_some(from + len)
    };
    if chars.first() != Some(&'{') {
        return None;
    }
    let mut i = number(1)?;
    if chars.get(i) == Some(&',') {
        i += 1;
        if chars.get(i) != Some(&'}') {
            i = number(i)?;
        }
    }
    (chars.get(i) == Some(&'}')).then_some(i + 1)
}

// ---------------------------------------------------------------------------
// Go strconv work-alikes
// ---------------------------------------------------------------------------

/// A `*strconv.NumError`.
#[derive(Debug)]
struct NumError {
    func: &'static str,
    num: String,
    range: bool,
}

impl fmt::Display for NumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = if self.range {
            "value out of range"
        } else {
            "invalid syntax"
        };
        write!(
            f,
            "strconv.{}: parsing {}: {}",
            self.func,
            go_quote(&self.num),
            why
        )
    }
}

fn num_error(func: &'static str, num: &str, range: bool) -> NumError {
    NumError {
        func,
        num: num.to_string(),
        range,
    }
}

fn go_parse_bool(s: &str) -> Result<bool, NumError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(num_error("ParseBool", s, false)),
    }
}

/// `strconv.ParseUint(s, 0, 64)`; the error flag tells a range error.
fn parse_unsigned(s: &str) -> Result<u64, bool> {
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(false);
    }
    let (base, digits): (u64, &[u8]) = match (b[0], b.get(1).map(|c| c | 0x20)) {
        (b'0', Some(b'b')) if b.len() >= 3 => (2, &b[2..]),
        (b'0', Some(b'o')) if b.len() >= 3 => (8, &b[2..]),
        (b'0', Some(b'x')) if b.len() >= 3 => (16, &b[2..]),
        (b'0', _) => (8, &b[1..]),
        _ => (10, b),
    };
    let cutoff = u64::MAX / base + 1;
    let mut n: u64 = 0;
    let mut underscores = false;
    for &c in digits {
        let lower = c | 0x20;
        let d = match c {
            b'_' => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => u64::from(c - b'0'),
            _ if lower.is_ascii_lowercase() => u64::from(lower - b'a' + 10),
            _ => return Err(false),
        };
        if d >= base {
            return Err(false);
        }
        if n >= cutoff {
            return Err(true);
        }
        n = (n * base).checked_add(d).ok_or(true)?;
    }
    if underscores && !underscore_ok(s) {
        return Err(false);
    }
    Ok(n)
}

fn go_parse_uint(s: &str) -> Result<u64, NumError> {
    parse_unsigned(s).map_err(|range| num_error("ParseUint", s, range))
}

fn go_parse_int(s: &str) -> Result<i64, NumError> {
    let (negative, body) = match s.as_bytes().first() {
        None => return Err(num_error("ParseInt", s, false)),
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        Some(_) => (false, s),
    };
    let magnitude = match parse_unsigned(body) {
        Ok(n) => n,
        Err(true) => u64::MAX,
        Err(false) => return Err(num_error("ParseInt", s, false)),
    };
    const LIMIT: u64 = 1 << 63;
    if (!negative && magnitude >= LIMIT) || (negative && magnitude > LIMIT) {
        return Err(num_error("ParseInt", s, true));
    }
    let n = magnitude as i64; // wraps to i64::MIN for exactly 2^63
    Ok(if negative { n.wrapping_neg() } else { n })
}

/// `strconv.ParseFloat(s, 64)` for decimal syntax, infinities and NaN.
fn go_parse_float(s: &str) -> Result<f64, NumError> {
    let (sign, body, signed) = match s.as_bytes().first() {
        Some(b'+') => (1.0, &s[1..], true),
        Some(b'-') => (-1.0, &s[1..], true),
        _ => (1.0, s, false),
    };
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Ok(sign * f64::INFINITY);
    }
    if !signed && body.eq_ignore_ascii_case("nan") {
        return Ok(f64::NAN);
    }
    if !is_go_decimal_float(s) {
        return Err(num_error("ParseFloat", s, false));
    }
    let cleaned: String = s.chars().filter(|&c| c != '_').collect();
    match cleaned.parse::<f64>() {
        Ok(v) if v.is_infinite() => Err(num_error("ParseFloat", s, true)),
        Ok(v) => Ok(v),
        Err(_) => Err(num_error("ParseFloat", s, false)),
    }
}

fn is_go_decimal_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let (mut digits, mut dot, mut underscores) = (false, false, false);
    while i < b.len() {
        match b[i] {
            b'_' => underscores = true,
            b'.' if !dot => dot = true,
            b'0'..=b'9' => digits = true,
            _ => break,
        }
        i += 1;
    }
    if !digits {
        return false;
    }
    if i < b.len() && (b[i] | 0x20) == b'e' {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return false;
        }
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            underscores |= b[i] == b'_';
            i += 1;
        }
    }
    i == b.len() && (!underscores || underscore_ok(s))
}

/// Go's rule for `_` digit separators: only between digits (or after a base
/// prefix).
fn underscore_ok(s: &str) -> bool {
    let mut b = s.as_bytes();
    if let Some(b'+' | b'-') = b.first() {
        b = &b[1..];
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1] | 0x20, b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1] | 0x20 == b'x';
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && (c | 0x20).is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// Go's `strconv.Quote` (also what `%q` and `%#v` print for strings).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            ' ' => out.push(' '),
            c if !c.is_control() && !c.is_whitespace() => out.push(c),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if u32::from(c) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job() -> Value {
        json!({
            "ID": "example", "Name": "example", "Status": "running",
            "Priority": 50, "Stop": false, "Big": 18446744073709551615u64, "Neg": -7,
            "Ratio": 0.5, "Email": "foo@example.com", "Braces": "{x}", "Digits": "\u{663}",
            "Datacenters": ["dc1", "dc2"], "Tags": [], "Nil": null,
            "Mixed": ["foobar", 1, true, 2.5],
            "Meta": {"owner": "team-a", "env": "prod", "with space": "yes", "a/b": "slash",
                     "t~x": "tilde", "empty": "", "co:lon": "c"},
            "TaskGroups": [
                {"Name": "web", "Count": 3, "Tasks": [
                    {"Name": "nginx", "Driver": "docker"}, {"Name": "sidecar", "Driver": "exec"}]},
                {"Name": "db", "Count": 1, "Tasks": [{"Name": "pg", "Driver": "docker"}]}
            ]
        })
    }

    fn run(src: &str, datum: &Value) -> Result<bool, EvalError> {
        Filter::parse(src)
            .unwrap_or_else(|e| panic!("parse {src:?}: {e}"))
            .matches(datum)
    }

    #[track_caller]
    fn check(src: &str, expected: bool) {
        assert_eq!(run(src, &job()), Ok(expected), "{src}");
    }

    #[track_caller]
    fn eval_err(src: &str) -> String {
        match run(src, &job()) {
            Err(e) => e.0,
            Ok(v) => panic!("{src}: expected an error, got {v}"),
        }
    }

    #[track_caller]
    fn parse_err(src: &str) -> String {
        match Filter::parse(src) {
            Err(e) => e.to_string(),
            Ok(f) => panic!("{src}: expected a parse error, got {f:?}"),
        }
    }

    #[test]
    fn equality_on_strings_numbers_and_bools() {
        check("Name == example", true);
        check("Name == `example`", true);
        check(r#"Name == "example""#, true);
        check("Name == other", false);
        check("Priority == 50", true);
        check("Priority == 51", false);
        check("Stop == false", true);
        check("Ratio == 0.5", true);
        check("Neg == -7", true);
    }

    #[test]
    fn inequality() {
        check("Name != other", true);
        check("Name != example", false);
        check("Priority != 50", false);
        check("Stop != true", true);
    }

    #[test]
    fn bare_selector_values_compare_as_their_text() {
        check("Status == running", true);
        let datum = json!({"Path": "a.b", "Index": "x.y z", "Slash": "a/b"});
        assert_eq!(run("Path == a.b", &datum), Ok(true));
        assert_eq!(run(r#"Index == x["y z"]"#, &datum), Ok(true));
        assert_eq!(run("Slash == a/b", &datum), Ok(true));
        // A quoted JSON pointer is a selector too, so the value loses its slash.
        assert_eq!(run(r#"Slash == "/a/b""#, &datum), Ok(true));
        check(r#"ID == "/example""#, true);
    }

    #[test]
    fn integer_coercion_follows_strconv_parse_int_base_0() {
        check(r#"Priority == "0x32""#, true);
        check(r#"Priority == "0o62""#, true);
        check(r#"Priority == "062""#, true);
        check(r#"Priority == "5_0""#, true);
        check(r#"Priority == "+50""#, true);
        assert_eq!(
            eval_err("Priority == 5.5"),
            r#"error getting match value in expression: strconv.ParseInt: parsing "5.5": invalid syntax"#
        );
        assert_eq!(
            eval_err(r#"Priority == "99999999999999999999""#),
            "error getting match value in expression: strconv.ParseInt: parsing \
             \"99999999999999999999\": value out of range"
        );
    }

    #[test]
    fn unsigned_and_float_coercion() {
        check("Big == 18446744073709551615", true);
        assert_eq!(
            eval_err("Big == -1"),
            r#"error getting match value in expression: strconv.ParseUint: parsing "-1": invalid syntax"#
        );
        check(r#"Ratio == "5e-1""#, true);
        check(r#"Ratio == ".5""#, true);
        check(r#"Ratio != "NaN""#, true);
        assert_eq!(
            eval_err(r#"Ratio == "1e400""#),
            r#"error getting match value in expression: strconv.ParseFloat: parsing "1e400": value out of range"#
        );
    }

    #[test]
    fn bool_coercion_follows_strconv_parse_bool() {
        for v in ["false", "False", "FALSE", "f", "F", "0", r#""false""#] {
            check(&format!("Stop == {v}"), true);
        }
        for v in ["true", "True", "TRUE", "t", "T", "1"] {
            check(&format!("Stop == {v}"), false);
        }
        assert_eq!(
            eval_err("Stop == no"),
            r#"error getting match value in expression: strconv.ParseBool: parsing "no": invalid syntax"#
        );
    }

    #[test]
    fn equality_on_collections_is_an_error() {
        let msg = "unable to find suitable primitive comparison function for matching";
        assert_eq!(eval_err("Datacenters == dc1"), msg);
        assert_eq!(eval_err("Meta != x"), msg);
        assert_eq!(eval_err("Nil == x"), msg);
    }

    #[test]
    fn in_and_contains_on_arrays() {
        check(r#""dc1" in Datacenters"#, true);
        check("dc3 in Datacenters", false);
        check("dc3 not in Datacenters", true);
        check("Datacenters contains dc2", true);
        check("Datacenters not contains dc2", false);
        check("x in Tags", false);
    }

    #[test]
    fn in_on_mixed_arrays_coerces_per_element() {
        check(r#""foobar" in Mixed"#, true);
        check(r#""1" in Mixed"#, true);
        check(r#""true" in Mixed"#, true);
        check("2.5 in Mixed", true);
        check(r#""2" in Mixed"#, false);
        assert_eq!(
            eval_err(r#""99999999999999999999" in Mixed"#),
            "error getting interface slice match value in expression"
        );
        assert_eq!(
            eval_err("web in TaskGroups"),
            "unable to find suitable primitive comparison function for \"in\" comparison in \
             interface slice: map"
        );
    }

    #[test]
    fn in_on_maps_checks_keys() {
        check("owner in Meta", true);
        check(r#""team-a" in Meta"#, false);
        check(r#""with space" in Meta"#, true);
        check("Meta contains env", true);
        check("Meta not contains nope", true);
    }

    #[test]
    fn in_on_strings_is_substring() {
        check("amp in Name", true);
        check("Email contains \"@example\"", true);
        check("Name not contains xyz", true);
        check("Name contains Name", false);
    }

    #[test]
    fn in_on_scalars_is_an_error() {
        assert_eq!(
            eval_err("5 in Priority"),
            r#"cannot perform in/contains operations on type int64 for selector: "Priority""#
        );
        assert_eq!(
            eval_err("x in Priority"),
            r#"error getting match value in expression: strconv.ParseInt: parsing "x": invalid syntax"#
        );
        assert_eq!(
            eval_err(r#"true in "/Stop""#),
            r#"cannot perform in/contains operations on type bool for selector: "Stop""#
        );
    }

    #[test]
    fn is_empty_and_is_not_empty() {
        check("Tags is empty", true);
        check("Datacenters is empty", false);
        check("Datacenters is not empty", true);
        check("Meta.empty is empty", true);
        check("Meta is not empty", true);
        check("Nil is empty", true);
        assert_eq!(
            eval_err("Priority is empty"),
            r#"cannot perform is-empty operations on type int64 for selector: "Priority""#
        );
    }

    #[test]
    fn is_nil_and_is_not_nil() {
        check("Nil is nil", true);
        check("Nil is not nil", false);
        check("Meta is nil", false);
        check("Tags is not nil", true);
        assert_eq!(
            eval_err("Name is nil"),
            r#"cannot perform is-nil operations on type string for selector: "Name""#
        );
    }

    #[test]
    fn matches_uses_go_regexp_syntax() {
        check(r#"Email matches "^foo@""#, true);
        check(r#"Email matches "(foz|foo)@example.com""#, true);
        check("Name not matches `^ex.*`", false);
        check("Name matches `^ex\\w+$`", true);
        // Go's \d is ASCII only; `{` that starts no repetition is a literal.
        check(r"Digits matches `\d`", false);
        check("Braces matches `^{.*}$`", true);
        check(r"Email matches `\Qexample.com\E$`", true);
        assert_eq!(
            eval_err("Priority matches `5`"),
            "value of type int64 is not convertible to []byte"
        );
    }

    #[test]
    fn invalid_regex_fails_only_when_evaluated() {
        let err = eval_err(r#"Name matches "(abc""#);
        assert!(
            err.starts_with(
                r#"failed to compile regular expression "(abc": error parsing regexp: "#
            ),
            "{err}"
        );
        assert_eq!(
            eval_err("Name matches `x{1001}`"),
            "failed to compile regular expression \"x{1001}\": error parsing regexp: invalid \
             repeat count: `{1001}`"
        );
        check(r#"Stop == true and Name matches "(abc""#, false);
        assert!(eval_err(r"Name matches `\pl`").ends_with("invalid character class range: `\\pl`"));
    }

    #[test]
    fn and_binds_tighter_than_or() {
        check("Name == example or Name == x and Stop == true", true);
        check("(Name == example or Name == x) and Stop == true", false);
        check("Name == x and Stop == true or Priority == 50", true);
        check("Name == x and (Stop == true or Priority == 50)", false);
    }

    #[test]
    fn negation() {
        check("not Name == x", true);
        check("not not Name == example", true);
        check("not not not Name == example", false);
        check("not (Name == example and Stop == true)", true);
        check("not Name == example or Stop == false", true);
        check("not Name == example and Stop == false", false);
    }

    #[test]
    fn parentheses_and_whitespace() {
        check(
            "\t\r\n ( \t\r\n Name \t\r\n == \t\r\n example \t\r\n ) \t\r\n",
            true,
        );
        check("(((Name == example)))", true);
        check("(Name == x) or (Priority == 50)", true);
        check("Name==example", true);
    }

    #[test]
    fn and_or_short_circuit() {
        check("Name == example or Missing == 1", true);
        check("Name == x and Missing == 1", false);
        assert!(eval_err("Missing == 1 or Name == example").contains("couldn't find key"));
    }

    #[test]
    fn missing_map_key_dispositions() {
        let cases = [
            ("Meta.missing == 4", false),
            ("Meta.missing != 4", true),
            ("4 in Meta.missing", false),
            ("4 not in Meta.missing", true),
            ("Meta.missing is empty", true),
            ("Meta.missing is not empty", false),
            (r#"Meta.missing matches ".*""#, false),
            (r#"Meta.missing not matches ".*""#, true),
            ("Meta.missing is nil", true),
            ("Meta.missing is not nil", false),
            ("all Meta.missing as x { x == 1 }", true),
            ("any Meta.missing as x { x == 1 }", false),
            ("TaskGroups.0.Missing == 1", false),
            (r#"Meta["nope"] != 1"#, true),
        ];
        for (src, expected) in cases {
            check(src, expected);
        }
    }

    #[test]
    fn lookup_errors() {
        assert_eq!(
            eval_err("Missing == 1"),
            r#"error finding value in datum: /Missing at part 0: couldn't find key "Missing""#
        );
        assert_eq!(
            eval_err("Meta.missing.deeper == 1"),
            r#"error finding value in datum: /Meta/missing/deeper at part 1: couldn't find key "missing""#
        );
        assert_eq!(
            eval_err("Name.foo == 1"),
            "error finding value in datum: /Name/foo: at part 1, invalid value kind: string"
        );
        assert_eq!(
            eval_err("Datacenters.5 == x"),
            "error finding value in datum: /Datacenters/5 at part 1: index 5 is out of range (length = 2)"
        );
        assert_eq!(
            eval_err("Datacenters.x == x"),
            r#"error finding value in datum: /Datacenters/x at part 1: couldn't convert value "x" to type int"#
        );
    }

    #[test]
    fn index_selectors() {
        check("Datacenters.1 == dc2", true);
        check("TaskGroups.1.Name == db", true);
        check("TaskGroups.0.Tasks.1.Driver == exec", true);
        check(r#"Meta["with space"] == yes"#, true);
        check("Meta[ `with space` ] == \"yes\"", true);
        check(r#"TaskGroups["0"]["Name"] == web"#, true);
        check(r#"Meta["a/b"] == slash"#, true);
    }

    #[test]
    fn json_pointer_selectors() {
        check(r#""/Meta/owner" == "team-a""#, true);
        check(r#""/Meta/a~1b" == slash"#, true);
        check(r#""/Meta/t~0x" == tilde"#, true);
        check(r#""/Meta/co:lon" == c"#, true);
        check(r#""/TaskGroups/0/Name" == web"#, true);
        check(r#"owner in "/Meta""#, true);
        assert_eq!(
            eval_err(r#""/Meta/nope/x" == 1"#),
            r#"error finding value in datum: /Meta/nope/x at part 1: couldn't find key "nope""#
        );
    }

    #[test]
    fn string_literals_raw_and_escaped() {
        let datum = json!({"S": "tab\there", "P": "C:\\dir\\n", "U": "åß∂ƒ", "Q": "say \"hi\""});
        assert_eq!(run(r#"S == "tab\there""#, &datum), Ok(true));
        assert_eq!(run(r#"S == "tab\x09here""#, &datum), Ok(true));
        assert_eq!(run(r#"S == "tab\011here""#, &datum), Ok(true));
        assert_eq!(run(r"P == `C:\dir\n`", &datum), Ok(true));
        assert_eq!(run(r#"U == "\u00e5\U000000DF∂ƒ""#, &datum), Ok(true));
        assert_eq!(run("U == \"åß∂ƒ\"", &datum), Ok(true));
        assert_eq!(run(r#"Q contains `"hi"`"#, &datum), Ok(true));
    }

    #[test]
    fn invalid_escapes_are_parse_errors() {
        assert_eq!(
            parse_err(r#"Name == "a\qb""#),
            r#"1:9 (8): rule "string": invalid syntax"#
        );
        // As in go-bexpr a double-quoted string ends at the first quote.
        assert_eq!(
            parse_err(r#"Name == "a\"b""#),
            r#"1:9 (8): rule "string": invalid syntax"#
        );
        assert_eq!(
            parse_err(r#"Name == "\ud800""#),
            r#"1:9 (8): rule "string": invalid syntax"#
        );
    }

    #[test]
    fn parse_error_unterminated_string() {
        assert_eq!(
            parse_err("foo == \"12x"),
            r#"1:12 (11): rule "string": Unterminated string literal"#
        );
        assert_eq!(
            parse_err("foo == `12x"),
            r#"1:12 (11): rule "string": Unterminated string literal"#
        );
    }

    #[test]
    fn parse_error_invalid_number() {
        assert_eq!(
            parse_err("foo == 3x"),
            r#"1:9 (8): rule "number": Invalid number literal"#
        );
        assert_eq!(
            parse_err("foo == 01"),
            r#"1:9 (8): rule "number": Invalid number literal"#
        );
        // Numbers must be followed by whitespace, ")" or the end, even in braces.
        assert_eq!(
            parse_err("any Datacenters as d { d == 3}"),
            r#"1:30 (29): rule "number": Invalid number literal"#
        );
    }

    #[test]
    fn parse_error_unmatched_parenthesis() {
        let err = Filter::parse("(foo == 4").unwrap_err();
        assert_eq!((err.line, err.column, err.offset), (1, 10, 9));
        assert_eq!(err.message, r#"rule "grouping": Unmatched parentheses"#);
        assert_eq!(
            err.to_string(),
            r#"1:10 (9): rule "grouping": Unmatched parentheses"#
        );
    }

    #[test]
    fn parse_error_dangling_operators() {
        let cases = [
            (
                "x in foo and ",
                r#"1:14 (13): no match found, expected: "(", "-", "0", "\"", "`", "not", [ \t\r\n], [1-9] or [a-zA-Z]"#,
            ),
            (
                "x in foo or ",
                r#"1:13 (12): no match found, expected: "(", "-", "0", "\"", "`", "all", "any", "not", [ \t\r\n], [1-9] or [a-zA-Z]"#,
            ),
            (
                "x in foo or not ",
                r#"1:17 (16): no match found, expected: "!=", "(", "-", "0", "==", "\"", "`", "contains", "in", "is", "matches", "not", [ \t\r\n], [1-9] or [a-zA-Z]"#,
            ),
            (
                "x in foo abc",
                r#"1:10 (9): no match found, expected: "and", "or", [ \t\r\n] or EOF"#,
            ),
            (
                "32 == 32",
                r#"1:4 (3): no match found, expected: "in", "not" or [ \t\r\n]"#,
            ),
            (
                "",
                r#"1:1 (0): no match found, expected: "(", "-", "0", "\"", "`", "all", "any", "not", [ \t\r\n], [1-9] or [a-zA-Z]"#,
            ),
        ];
        for (src, expected) in cases {
            assert_eq!(parse_err(src), expected, "{src:?}");
        }
    }

    #[test]
    fn parse_errors_from_go_bexpr_grammar_tests() {
        let cases = [
            ("foo[3] == abc", r#"1:5 (4): rule "index": Invalid index"#),
            (
                "x in foo[\"abc\"",
                r#"1:15 (14): rule "index": Unclosed index expression"#,
            ),
            (
                "foo[\"abc\" == 3",
                r#"1:11 (10): rule "index": Unclosed index expression"#,
            ),
            ("x in 32", r#"1:6 (5): rule "match": Invalid selector"#),
            (
                "32 is empty",
                r#"1:4 (3): no match found, expected: "in", "not" or [ \t\r\n]"#,
            ),
            (
                r#""/hy-phen/ti~lde/" == 3"#,
                r#"1:20 (19): no match found, expected: "in", "not" or [ \t\r\n]"#,
            ),
            (
                r#"all group.tasks as { t.name == "hello" }"#,
                r#"1:20 (19): no match found, expected: "_", [ \t\r\n] or [a-zA-Z]"#,
            ),
            (
                r#"all as t { t.name == "hello" }"#,
                r#"1:8 (7): no match found, expected: "as" or [ \t\r\n]"#,
            ),
        ];
        for (src, expected) in cases {
            assert_eq!(parse_err(src), expected, "{src:?}");
        }
    }

    #[test]
    fn parse_error_positions_count_lines_and_characters() {
        assert_eq!(
            parse_err("x in foo\nabc"),
            r#"2:1 (9): no match found, expected: "and", "or", [ \t\r\n] or EOF"#
        );
        assert_eq!(
            parse_err("Meta[\"é\"] == \"ß"),
            r#"1:16 (17): rule "string": Unterminated string literal"#
        );
        // Every distinct error is reported, one per line.
        assert_eq!(
            parse_err("foo[\"abc"),
            "1:9 (8): rule \"string\": Unterminated string literal\n1:5 (4): rule \"index\": Invalid index"
        );
    }

    #[test]
    fn keywords_need_whitespace() {
        assert!(Filter::parse("not(Name == x)").is_err());
        assert!(Filter::parse(r#"Datacenters contains"dc1""#).is_err());
        assert!(Filter::parse("Name == x andStop == true").is_err());
        // A keyword not followed by whitespace is read as a selector.
        let datum = json!({"not": 3, "any": 3, "all": [1]});
        assert_eq!(run("not == 3", &datum), Ok(true));
        assert_eq!(run("not not == 3", &datum), Ok(false));
        assert_eq!(run("any == 4 or 1 in all", &datum), Ok(true));
    }

    #[test]
    fn any_and_all_over_arrays() {
        check("any TaskGroups as tg { tg.Name == db }", true);
        check("all TaskGroups as tg { tg.Name == db }", false);
        check("all TaskGroups as tg { tg.Count != 0 }", true);
        check(r#"any TaskGroups as i { "/i/Name" == web }"#, true);
        check("any Tags as t { t == x }", false);
        check("all Tags as t { t == x }", true);
        check(
            "any TaskGroups as tg { any tg.Tasks as t { t.Driver == exec } }",
            true,
        );
        check(
            "all TaskGroups as tg { all tg.Tasks as t { t.Driver == docker } }",
            false,
        );
        // The inner binding shadows the outer one.
        check(
            "any TaskGroups as t { any t.Tasks as t { t.Name == pg } }",
            true,
        );
    }

    #[test]
    fn index_and_value_bindings_over_arrays() {
        check("any Datacenters as i, _ { i == 1 }", true);
        check("any Datacenters as i, _ { i == 2 }", false);
        check("all Datacenters as i, v { i == 0 or v == dc2 }", true);
        check("any Datacenters as _, v { v == dc2 }", true);
        check("all Datacenters as _,v { v contains dc }", true);
    }

    #[test]
    fn bindings_over_maps() {
        check("any Meta as k { k == owner }", true);
        check("all Meta as k { k != owner }", false);
        check("any Meta as k, _ { k == env }", true);
        check("any Meta as _, v { v == prod }", true);
        check(r#"any Meta as k, v { k == owner and v == "team-a" }"#, true);
        check(r#"all Meta as k, v { k != owner or v == "team-a" }"#, true);
    }

    #[test]
    fn collection_errors() {
        assert_eq!(
            eval_err("all Meta as k, k { Name == example }"),
            r#""k" cannot be used as a placeholder for both the index and the value"#
        );
        assert_eq!(
            eval_err("all Priority as k { k == 1 }"),
            "Priority is not a list or a map"
        );
        assert_eq!(
            eval_err("any Meta as k { k.Color == red }"),
            "/k references a string so /k/Color is invalid"
        );
        assert_eq!(
            eval_err("any Datacenters as i, _ { i.Color == red }"),
            "/i references a int so /i/Color is invalid"
        );
    }

    #[test]
    fn collection_placement_follows_the_grammar() {
        // A collection expression may only be a whole `or` operand.
        check("Stop == true or any Datacenters as d { d == dc1 }", true);
        check(
            "(any Datacenters as d { d == dc1 }) and Stop == false",
            true,
        );
        assert!(Filter::parse("any Datacenters as d { d == dc1 } and Stop == false").is_err());
        assert!(Filter::parse("not any Datacenters as d { d == dc1 }").is_err());
    }

    #[test]
    fn null_behaves_like_a_nil_collection() {
        check("x in Nil", false);
        check("x not in Nil", true);
        check("any Nil as v { v == 1 }", false);
        check("all Nil as v { v == 1 }", true);
    }

    #[test]
    fn readme_example() {
        let value = json!({
            "foo": {"X": 5, "y": "foo", "baz": true},
            "bar": {"X": 42, "y": "bar", "baz": false},
        });
        for src in ["foo.X == 5", "bar.y == bar", "foo.baz == true"] {
            assert_eq!(run(src, &value), Ok(true), "{src}");
        }
    }

    #[test]
    fn evaluate_test_map_examples() {
        let value = json!({
            "foo": {"bar": true, "baz": false},
            "abc": null,
            "co:lon": {"bar": true},
        });
        let cases = [
            ("bar in foo", true),
            (r#"bar in "/co:lon""#, true),
            ("arg in foo", false),
            ("baz not in foo", false),
            ("foo is not empty", true),
            ("abc is empty", true),
            ("foo in abc", false),
            ("foo not in abc", true),
            ("foo.bar == true", true),
            ("foo.baz != false", false),
        ];
        for (src, expected) in cases {
            assert_eq!(run(src, &value), Ok(expected), "{src}");
        }
        assert_eq!(
            run("foo.bar.baz == 3", &value).unwrap_err().0,
            "error finding value in datum: /foo/bar/baz: at part 2, invalid value kind: bool"
        );
    }

    #[test]
    fn evaluate_test_nested_examples() {
        let value = json!({
            "Nested": {
                "Map": {"foo": "bar", "bar": "baz", "abc": "123", "email": "foo@example.com"},
                "SliceOfInts": [1, 3, 5, 7, 9],
                "SliceOfStructs": [{"X": 1, "Y": 2}, {"X": 3, "Y": 5}],
            },
            "TopInt": 5,
        });
        let cases = [
            ("Nested.Map.foo contains ba", true),
            ("Nested.Map contains foo and Nested.Map contains bar", true),
            (
                "Nested.Map contains nope or (Nested.Map contains bar and Nested.Map.bar == `bazel`) or TopInt != 0",
                true,
            ),
            ("7 in Nested.SliceOfInts", true),
            (
                "Nested.Map is empty or (Nested.SliceOfInts contains 7 and 9 in Nested.SliceOfInts)",
                true,
            ),
            ("Nested.SliceOfStructs.0.Y == 4", false),
            ("all Nested.SliceOfInts as i { i != 42 }", true),
            (r#"all Nested.Map as v { v == "bar" }"#, false),
            (r#"all Nested.Map as k, _ { k != "foo" }"#, false),
            (r#"any Nested.SliceOfStructs as i { "/i/X" == 1 }"#, true),
            (
                r#"any Nested.Map as k, v { k == "foo" and v == "bar" }"#,
                true,
            ),
        ];
        for (src, expected) in cases {
            assert_eq!(run(src, &value), Ok(expected), "{src}");
        }
        assert_eq!(
            run("all TopInt as k, v { k != foo }", &value)
                .unwrap_err()
                .0,
            "TopInt is not a list or a map"
        );
    }

    #[test]
    fn nesting_limit() {
        let ok = format!("{}Name == example{}", "(".repeat(60), ")".repeat(60));
        assert_eq!(run(&ok, &job()), Ok(true));
        let deep = format!("{}Name == example{}", "(".repeat(500), ")".repeat(500));
        let err = parse_err(&deep);
        assert!(
            err.ends_with("expressions nested more than 64 levels deep"),
            "{err}"
        );
        // Long chains are not nesting.
        let chain = vec!["Priority == 1"; 5000].join(" or ") + " or Priority == 50";
        assert_eq!(run(&chain, &job()), Ok(true));
        let nots = "not ".repeat(5001) + "Name == x";
        assert_eq!(run(&nots, &job()), Ok(true));
        let collections = format!(
            "{}Name == example{}",
            "any TaskGroups as t { ".repeat(60),
            " }".repeat(60)
        );
        assert_eq!(run(&collections, &job()), Ok(true));
    }

    #[test]
    fn filter_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Filter>();
    }

    #[test]
    fn error_types_display() {
        let e = EvalError("boom".to_string());
        assert_eq!(e.to_string(), "boom");
        let p = ParseError {
            line: 1,
            column: 4,
            offset: 3,
            message: "msg".to_string(),
        };
        assert_eq!(p.to_string(), "1:4 (3): msg");
        let _: &dyn std::error::Error = &e;
        let _: &dyn std::error::Error = &p;
    }
}
