//! `variable` blocks, `locals`, and the expressions that read them: `var.x` and `local.x`
//! as whole values and inside strings, with `-var` values over the defaults. Runtime
//! interpolations (`${NOMAD_*}`, `${attr.*}`, ...) are kept for the client.

use std::collections::BTreeMap;
use std::ops::Range;

use hcl::edit::Span;
use hcl::edit::expr::{Expression, ObjectKey, TraversalOperator};
use hcl::edit::structure::{Body, Structure};
use serde_json::{Map, Value};

use super::{Conv, R, label};
use crate::jobspec::JobspecError;

impl Conv<'_> {
    /// `variable` blocks (with `-var` values, then `NOMAD_VAR_*` values of `env`, over
    /// their defaults) and `locals` blocks, in the order they can be evaluated. A variable
    /// without a value is an error naming it; a given value for an undeclared variable is
    /// one too, an `env` value for one is ignored (the environment holds other jobs' too).
    pub(super) fn variables(
        &mut self,
        body: &Body,
        given: &BTreeMap<String, String>,
        env: &BTreeMap<String, String>,
    ) -> R<()> {
        let mut declared = Vec::new();
        for b in body.iter().filter_map(|s| s.as_block()) {
            if b.ident.as_str() != "variable" {
                continue;
            }
            let name = label(b).ok_or_else(|| {
                self.err_at(
                    "variable",
                    b.span(),
                    "a variable block needs a label: variable \"<name>\"",
                )
            })?;
            let hcl = format!("variable.{name}");
            let mut default = None;
            for item in b.body.iter() {
                match item {
                    Structure::Attribute(a) if a.key.as_str() == "default" => {
                        default = Some(self.expr(&a.value, &format!("{hcl}.default"))?);
                    }
                    Structure::Attribute(a)
                        if matches!(a.key.as_str(), "type" | "description" | "sensitive") => {}
                    Structure::Block(v) if v.ident.as_str() == "validation" => {}
                    other => {
                        let (key, span) = match other {
                            Structure::Attribute(a) => (a.key.as_str().to_string(), a.span()),
                            Structure::Block(b) => (b.ident.as_str().to_string(), b.span()),
                        };
                        return Err(self.err_at(&format!("{hcl}.{key}"), span, "unknown field"));
                    }
                }
            }
            // As Nomad's CLI: `-var` and var files over `NOMAD_VAR_<name>`, over the default.
            let value = match given.get(&name).or_else(|| env.get(&name)) {
                Some(text) => var_value(text),
                None => default.ok_or_else(|| {
                    self.err_at(
                        &hcl,
                        b.span(),
                        format!("variable {name:?} has no value: give it a default or pass -var {name}=..."),
                    )
                })?,
            };
            self.values.insert(format!("var.{name}"), value);
            declared.push(name);
        }
        if let Some(unknown) = given.keys().find(|k| !declared.contains(k)) {
            return Err(JobspecError::new(
                format!("var.{unknown}"),
                "no such variable is declared in the job file",
            ));
        }
        // Locals may refer to variables and to each other: evaluate what can be until a
        // round makes no progress.
        let mut pending: Vec<(String, &Expression, Option<Range<usize>>)> = body
            .iter()
            .filter_map(|s| s.as_block())
            .filter(|b| b.ident.as_str() == "locals")
            .flat_map(|b| b.body.iter().filter_map(|s| s.as_attribute()))
            .map(|a| (a.key.as_str().to_string(), &a.value, a.span()))
            .collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut last_err = None;
            pending.retain(
                |(name, e, _)| match self.expr(e, &format!("locals.{name}")) {
                    Ok(v) => {
                        self.values.insert(format!("local.{name}"), v);
                        false
                    }
                    Err(err) => {
                        last_err = Some(err);
                        true
                    }
                },
            );
            if pending.len() == before {
                return Err(last_err.expect("a local that did not evaluate left its error"));
            }
        }
        Ok(())
    }

    /// The value of `var.x` / `local.x`, if `e` is such a reference; a bad reference is an
    /// error at `hcl`.
    pub(super) fn reference(&self, e: &Expression, hcl: &str) -> Option<R<Value>> {
        let bad = |m: String| Some(Err(self.err_at(hcl, e.span(), m)));
        let Expression::Traversal(t) = e else {
            return None;
        };
        let Expression::Variable(root) = &t.expr else {
            return None;
        };
        let root = root.as_str();
        if root != "var" && root != "local" {
            return None;
        }
        let [first, rest @ ..] = t.operators.as_slice() else {
            return bad(format!("{root} needs a name: {root}.<name>"));
        };
        let TraversalOperator::GetAttr(name) = first.value() else {
            return bad(format!("use {root}.<name>"));
        };
        let key = format!("{root}.{}", name.as_str());
        let Some(mut v) = self.values.get(&key).cloned() else {
            return bad(format!("{key} is not defined"));
        };
        for op in rest {
            v = match (op.value(), v) {
                (TraversalOperator::GetAttr(a), Value::Object(mut m)) => match m.remove(a.as_str())
                {
                    Some(x) => x,
                    None => return bad(format!("{key} has no attribute {:?}", a.as_str())),
                },
                (TraversalOperator::Index(Expression::Number(n)), Value::Array(a)) => {
                    let i = n.value().as_u64().unwrap_or(u64::MAX) as usize;
                    match a.get(i) {
                        Some(x) => x.clone(),
                        None => return bad(format!("{key}[{i}] is out of range")),
                    }
                }
                (TraversalOperator::LegacyIndex(i), Value::Array(a)) => {
                    match a.get(*i.value() as usize) {
                        Some(x) => x.clone(),
                        None => return bad(format!("{key}.{} is out of range", i.value())),
                    }
                }
                _ => return bad(format!("unsupported access into {key}")),
            };
        }
        Some(Ok(v))
    }

    /// A template's text with `${var.*}` and `${local.*}` replaced by their values; other
    /// `${...}` (runtime interpolations such as `${NOMAD_TASK_NAME}`) stay for the client.
    pub(super) fn substitute(
        &self,
        text: &str,
        hcl: &str,
        span: Option<Range<usize>>,
    ) -> R<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find("${") {
            let (head, tail) = rest.split_at(i);
            out.push_str(head);
            let Some(end) = tail.find('}') else {
                out.push_str(tail);
                return Ok(out);
            };
            let inner = tail[2..end].trim();
            if let Some(key) = ["var.", "local."]
                .iter()
                .find(|p| inner.starts_with(**p))
                .map(|_| inner)
            {
                let v = self.values.get(key).ok_or_else(|| {
                    self.err_at(hcl, span.clone(), format!("{key} is not defined"))
                })?;
                match v {
                    Value::String(s) => out.push_str(s),
                    Value::Number(_) | Value::Bool(_) => out.push_str(&v.to_string()),
                    _ => {
                        return Err(self.err_at(
                            hcl,
                            span.clone(),
                            format!(
                                "{key} is not a string, number or bool and cannot go in a string"
                            ),
                        ));
                    }
                }
            } else {
                out.push_str(&tail[..=end]);
            }
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    pub(super) fn expr(&self, e: &Expression, hcl: &str) -> R<Value> {
        Ok(match e {
            Expression::Null(_) => Value::Null,
            Expression::Bool(b) => Value::Bool(*b.value()),
            Expression::Number(n) => {
                let text = n.value().to_string();
                serde_json::from_str::<Value>(&text)
                    .map_err(|_| self.err_at(hcl, e.span(), format!("unsupported number {text}")))?
            }
            Expression::String(s) => Value::String(s.value().to_string()),
            // Templates keep their `${...}` for the client to interpolate at run time.
            Expression::StringTemplate(_) => {
                let span = e
                    .span()
                    .ok_or_else(|| self.err_at(hcl, None, "template without source"))?;
                let raw = &self.src[span.clone()];
                let text = raw
                    .strip_prefix('"')
                    .and_then(|r| r.strip_suffix('"'))
                    .unwrap_or(raw)
                    .replace("\\\"", "\"")
                    .replace("\\n", "\n");
                Value::String(self.substitute(&text, hcl, Some(span))?)
            }
            Expression::HeredocTemplate(h) => {
                let span = h
                    .template
                    .span()
                    .ok_or_else(|| self.err_at(hcl, e.span(), "heredoc without source"))?;
                Value::String(self.substitute(&self.src[span.clone()], hcl, Some(span))?)
            }
            Expression::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.expr(x, &format!("{hcl}[{i}]")))
                    .collect::<R<_>>()?,
            ),
            Expression::Object(o) => {
                let mut m = Map::new();
                for (k, v) in o.iter() {
                    let key = match k {
                        ObjectKey::Ident(i) => i.as_str().to_string(),
                        ObjectKey::Expression(Expression::String(s)) => s.value().to_string(),
                        ObjectKey::Expression(other) => {
                            return Err(self.err_at(
                                hcl,
                                other.span(),
                                "object keys must be names or plain strings",
                            ));
                        }
                    };
                    let v = self.expr(v.expr(), &format!("{hcl}.{key}"))?;
                    m.insert(key, v);
                }
                Value::Object(m)
            }
            Expression::Parenthesis(p) => self.expr(p.inner(), hcl)?,
            other => match self.reference(other, hcl) {
                Some(r) => r?,
                None => {
                    return Err(self.err_at(
                        hcl,
                        e.span(),
                        "only literal values, var.* and local.* are supported here (HCL functions and operators are not yet)",
                    ));
                }
            },
        })
    }
}

pub(super) fn var_value(text: &str) -> Value {
    let src = format!("v = {text}\n");
    let conv = Conv {
        src: &src,
        places: Vec::new(),
        values: BTreeMap::new(),
    };
    hcl::edit::parser::parse_body(&src)
        .ok()
        .and_then(|body| {
            let attrs: Vec<_> = body.iter().filter_map(|s| s.as_attribute()).collect();
            match attrs.as_slice() {
                [a] if !matches!(
                    a.value,
                    Expression::StringTemplate(_) | Expression::HeredocTemplate(_)
                ) =>
                {
                    conv.expr(&a.value, "v").ok()
                }
                _ => None,
            }
        })
        .unwrap_or_else(|| Value::String(text.to_string()))
}

/// A variables file as `-var-file` takes it (`name = value` lines, HCL syntax): each
/// name with its value's source text, which then reads as a `-var name=...` value does.
pub fn parse_var_file(src: &str) -> R<BTreeMap<String, String>> {
    let body = hcl::edit::parser::parse_body(src)
        .map_err(|e| JobspecError::new("var-file", format!("invalid HCL: {e}")))?;
    let mut out = BTreeMap::new();
    for s in body.iter() {
        let Structure::Attribute(a) = s else {
            return Err(JobspecError::new(
                "var-file",
                "a variables file holds only `name = value` assignments, not blocks",
            ));
        };
        let text = a
            .value
            .span()
            .and_then(|r| src.get(r))
            .ok_or_else(|| JobspecError::new(format!("var.{}", a.key.as_str()), "no value"))?;
        out.insert(a.key.as_str().to_string(), text.trim().to_string());
    }
    Ok(out)
}
