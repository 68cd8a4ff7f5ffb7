//! Nomad's list query (`nomad/state/paginator`): `filter` (a go-bexpr expression over
//! each listed object, [`crate::filter`]), `per_page` and `next_token` paging, and
//! `reverse`, on the list endpoints Nomad offers them on. Objects are ordered by their
//! token (an ID, `CreateIndex.ID` or `Namespace.ID`, as Nomad's tokenizers make them);
//! a page starts at the object whose token is `next_token` (or the first past it) and
//! the next page's token comes back in `X-Nomad-NextToken`. Errors are Nomad's: a bad
//! expression is a 400 when the paginator is made, one that cannot be evaluated on an
//! object a 400 when the page is read.

use std::cmp::Ordering;

use axum::http::HeaderValue;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::ApiError;
use crate::filter::Filter;

/// What a request's token may see of a list, decided before paging (as Nomad's paginator
/// applies its namespace selector): a page holds `per_page` objects the token may read,
/// a next token names one of them, and a filter or a count says nothing of the others.
/// Without the ACL system, or for a management token, everything.
pub(super) struct Sees(Option<std::sync::Arc<crate::acl::Acl>>);

impl Sees {
    /// What a request's token may see: `acl` is its rights when the ACL system is on.
    pub(super) fn of(acl: Option<&crate::acl::Acl>) -> Self {
        Sees(
            acl.filter(|a| !a.is_management())
                .map(|a| std::sync::Arc::new(a.clone())),
        )
    }

    /// Whether objects of namespace `ns` are shown to holders of `caps` (any one).
    pub(super) fn namespace(&self, ns: &str, caps: &[&str]) -> bool {
        self.0
            .as_ref()
            .is_none_or(|a| caps.iter().any(|c| a.allow_ns_spec(ns, c)))
    }

    /// Whether the variable at `path` in `ns` may be listed.
    pub(super) fn variable(&self, ns: &str, path: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|a| a.allow_variable(ns, path, "list"))
    }
}

/// The query parameters of a list.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    filter: Option<String>,
    #[serde(default)]
    per_page: Option<String>,
    #[serde(default)]
    next_token: Option<String>,
    #[serde(default)]
    reverse: Option<String>,
}

/// An object's place in a list: its token.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Key {
    /// By ID (or `Namespace.ID`, given as one string).
    Text(String),
    /// By create index, then ID (`CreateIndex.ID`).
    IndexId(u64, String),
}

impl Key {
    /// Nomad's `Namespace.ID` token.
    pub(super) fn namespaced(namespace: &str, id: &str) -> Self {
        Key::Text(format!("{namespace}.{id}"))
    }

    fn token(&self) -> String {
        match self {
            Key::Text(s) => s.clone(),
            Key::IndexId(i, id) => format!("{i}.{id}"),
        }
    }

    /// How this key compares with the token a client sent, as Nomad's tokenizers compare:
    /// a `CreateIndex.ID` token numerically by index, then by ID; otherwise as text.
    fn cmp_token(&self, target: &str) -> Ordering {
        if let Key::IndexId(i, id) = self
            && let Some((ti, tid)) = target.split_once('.')
            && let Ok(ti) = ti.parse::<u64>()
        {
            return (*i, id.as_str()).cmp(&(ti, tid));
        }
        self.token().as_str().cmp(target)
    }
}

/// A list query read and checked.
pub(super) struct Lister {
    filter: Option<Filter>,
    per_page: i64,
    next_token: String,
    reverse: bool,
}

/// Nomad's refusal of a `filter` that does not parse.
const PAGINATOR: &str = "failed to create result paginator";

impl ListQuery {
    /// The lister, or Nomad's 400 for a `per_page` that is not a number or a `filter`
    /// that does not parse.
    pub(super) fn lister(&self) -> Result<Lister, ApiError> {
        let per_page = match self.per_page.as_deref().filter(|p| !p.is_empty()) {
            None => 0,
            Some(p) => p.parse::<i32>().map(i64::from).map_err(|_| {
                ApiError::bad_request("Expect a number for `per_page` query string parameter")
            })?,
        };
        let filter = match self.filter.as_deref().filter(|f| !f.is_empty()) {
            None => None,
            Some(src) => Some(Filter::parse(src).map_err(|e| {
                ApiError::bad_request(format!(
                    "{PAGINATOR}: failed to read filter expression: {e}"
                ))
            })?),
        };
        Ok(Lister {
            filter,
            per_page,
            next_token: self.next_token.clone().unwrap_or_default(),
            reverse: self.reverse.as_deref() == Some("true"),
        })
    }

    /// Whether a `filter` was given (some endpoints refuse it beside their own filters).
    pub(super) fn has_filter(&self) -> bool {
        self.filter.as_deref().is_some_and(|f| !f.is_empty())
    }
}

/// One page of a list.
pub(super) struct Page<T> {
    pub items: Vec<T>,
    /// The token of the next page's first object, when there is one.
    pub next: Option<String>,
}

impl<T> Page<T> {
    /// Add `X-Nomad-NextToken` to an answer when there is a next page.
    pub(super) fn with_token(&self, mut r: Response) -> Response {
        if let Some(t) = &self.next
            && let Ok(v) = HeaderValue::from_str(t)
        {
            r.headers_mut().insert("X-Nomad-NextToken", v);
        }
        r
    }
}

impl Lister {
    /// Whether the list may be answered from an index in its natural order (no filter,
    /// not reversed, no negative page size), rather than walked object by object.
    pub(super) fn is_plain(&self) -> bool {
        self.filter.is_none() && !self.reverse && self.per_page >= 0
    }

    /// The page size asked (`None`: all).
    pub(super) fn per_page(&self) -> Option<usize> {
        usize::try_from(self.per_page).ok().filter(|n| *n > 0)
    }

    /// The token the page starts at (empty: the first object).
    pub(super) fn next_token(&self) -> &str {
        &self.next_token
    }

    /// Whether `view` of one object passes the filter (for lists Nomad filters but does
    /// not page, such as the evaluation count).
    pub(super) fn keeps(&self, view: &Value) -> Result<bool, ApiError> {
        match &self.filter {
            None => Ok(true),
            Some(f) => f
                .matches(view)
                .map_err(|e| ApiError::bad_request(format!("failed to read result page: {e}"))),
        }
    }

    /// Nomad's paginator over `items`: ordered by `key` (descending with `reverse`),
    /// from `next_token` on, kept when `view` of an object passes the filter, at most
    /// `per_page` (0: all).
    pub(super) fn page<T>(
        &self,
        items: Vec<T>,
        key: impl Fn(&T) -> Key,
        view: impl Fn(&T) -> Value,
    ) -> Result<Page<T>, ApiError> {
        let mut keyed: Vec<(Key, T)> = items.into_iter().map(|t| (key(&t), t)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        if self.reverse {
            keyed.reverse();
        }
        let mut found = self.next_token.is_empty();
        let mut out = Vec::new();
        let mut count = 0i64;
        for (k, item) in keyed {
            let cmp = k.cmp_token(&self.next_token);
            let before = if self.reverse {
                cmp == Ordering::Greater
            } else {
                cmp == Ordering::Less
            };
            if !found && before {
                continue;
            }
            if let Some(f) = &self.filter {
                let keep = f.matches(&view(&item)).map_err(|e| {
                    ApiError::bad_request(format!("failed to read result page: {e}"))
                })?;
                if !keep {
                    continue;
                }
            }
            found = true;
            count += 1;
            if self.per_page != 0 && count > self.per_page {
                return Ok(Page {
                    items: out,
                    next: Some(k.token()),
                });
            }
            out.push(item);
        }
        Ok(Page {
            items: out,
            next: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lister(q: &[(&str, &str)]) -> Result<Lister, ApiError> {
        let mut lq = ListQuery::default();
        for (k, v) in q {
            let v = Some(v.to_string());
            match *k {
                "filter" => lq.filter = v,
                "per_page" => lq.per_page = v,
                "next_token" => lq.next_token = v,
                "reverse" => lq.reverse = v,
                _ => unreachable!(),
            }
        }
        lq.lister()
    }

    fn ids(page: &Page<(u64, &str)>) -> Vec<String> {
        page.items
            .iter()
            .map(|(i, id)| format!("{i}.{id}"))
            .collect()
    }

    fn run(q: &[(&str, &str)]) -> Page<(u64, &'static str)> {
        let items = vec![(2, "b"), (10, "a"), (2, "a"), (3, "c")];
        lister(q)
            .unwrap()
            .page(
                items,
                |(i, id)| Key::IndexId(*i, id.to_string()),
                |(i, id)| json!({ "ID": id, "CreateIndex": i }),
            )
            .unwrap()
    }

    #[test]
    fn pages_follow_nomads_paginator() {
        let all = run(&[]);
        assert_eq!(
            ids(&all),
            ["2.a", "2.b", "3.c", "10.a"],
            "numeric order of the index"
        );
        let first = run(&[("per_page", "2")]);
        assert_eq!(ids(&first), ["2.a", "2.b"]);
        assert_eq!(first.next.as_deref(), Some("3.c"));
        let second = run(&[("per_page", "2"), ("next_token", "3.c")]);
        assert_eq!(ids(&second), ["3.c", "10.a"]);
        assert_eq!(second.next, None);
        // A token between two objects starts at the next one.
        assert_eq!(ids(&run(&[("next_token", "2.c")])), ["3.c", "10.a"]);
        let rev = run(&[("reverse", "true"), ("per_page", "3")]);
        assert_eq!(ids(&rev), ["10.a", "3.c", "2.b"]);
        assert_eq!(rev.next.as_deref(), Some("2.a"));
        assert_eq!(
            ids(&run(&[("reverse", "true"), ("next_token", "3.c")])),
            ["3.c", "2.b", "2.a"]
        );
        let f = run(&[("filter", "ID == \"a\""), ("per_page", "1")]);
        assert_eq!(ids(&f), ["2.a"]);
        assert_eq!(
            f.next.as_deref(),
            Some("10.a"),
            "the next match, not the next object"
        );
    }

    #[test]
    fn bad_queries_are_nomads_400s() {
        let e = lister(&[("per_page", "ten")]).err().unwrap();
        assert_eq!(e.1, "Expect a number for `per_page` query string parameter");
        let e = lister(&[("filter", "ID ==")]).err().unwrap();
        assert_eq!(e.0, 400);
        assert!(
            e.1.starts_with(
                "failed to create result paginator: failed to read filter expression: "
            ),
            "{}",
            e.1
        );
        let l = lister(&[("filter", "Nope == 1")]).unwrap();
        let e = l
            .page(vec![1], |_| Key::Text("x".into()), |_| json!({ "ID": "x" }))
            .err()
            .unwrap();
        assert_eq!(e.0, 400);
        assert!(e.1.starts_with("failed to read result page: "), "{}", e.1);
    }
}
