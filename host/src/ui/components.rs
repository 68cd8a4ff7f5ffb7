//! `/ui/components`: every loaded component with its identity, grants, limits, calls,
//! traps and call latency; the version the current one replaced (still draining, kept for
//! auto-revert, or let go); and what happened to it lately (swapped, refused, reverted,
//! removed), newest first. Refused files and components no longer loaded show their
//! history too. What it shows is what `GET /v1/components` answers.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::AppState;
use super::{Tab, label, page, time_el, when};
use crate::metrics::{LATENCY_BUCKETS, Metric};
use crate::swap::{PreviousVersion, SwapEvent};

/// One component's calls, traps and latency, summed over its operations.
#[derive(Default)]
struct Calls {
    traps: f64,
    buckets: Vec<u64>,
    count: u64,
}

/// The bound under which a share `q` of the calls finished (`>5s` past the last bucket).
fn quantile(c: &Calls, q: f64) -> String {
    if c.count == 0 {
        return "–".into();
    }
    let want = (q * c.count as f64).ceil() as u64;
    for (bound, n) in LATENCY_BUCKETS.iter().zip(&c.buckets) {
        if *n >= want {
            return if *bound < 0.001 {
                format!("≤{}µs", (bound * 1e6).round())
            } else if *bound < 1.0 {
                format!("≤{}ms", (bound * 1e3).round())
            } else {
                format!("≤{bound}s")
            };
        }
    }
    format!(">{}s", LATENCY_BUCKETS[LATENCY_BUCKETS.len() - 1])
}

/// The first 16 hex digits of a sha256, the whole of it in the title.
fn sha(s: &str) -> Markup {
    html! { code title=(s) { (s.get(..16).unwrap_or(s)) } }
}

/// The version the current one replaced, and where it stands.
fn previous(p: &PreviousVersion) -> Markup {
    let standing = if p.draining {
        "draining: tasks still run on it"
    } else if p.kept_for_revert {
        "kept for auto-revert"
    } else {
        "let go"
    };
    html! {
        span.previous data-previous=(p.sha256) {
            (sha(&p.sha256))
            @if !p.plugin_version.is_empty() { " " (p.plugin_version) }
            ", loaded " (time_el(p.loaded_at)) " (" (standing) ")"
        }
    }
}

/// A component's (or a file's) recent events, newest first.
fn history(events: &[SwapEvent]) -> Markup {
    html! {
        @if events.is_empty() {
            p.empty { "No swaps, refusals or reverts since the agent started." }
        } @else {
            ol.timeline.history {
                @for e in events {
                    @let kind = label(&e.kind);
                    li data-swap-event=(kind) {
                        (time_el(e.time)) " " strong { (kind) } " "
                        (sha(&e.sha256))
                        @if !e.previous_sha256.is_empty() {
                            @if kind == "reverted" { " (rolled back " } @else { " (replacing " }
                            (sha(&e.previous_sha256)) ")"
                        }
                        @if !e.reason.is_empty() { " " span.msg { (e.reason) } }
                    }
                }
            }
        }
    }
}

/// `GET /ui/components`.
pub(super) async fn components(State(agent): State<AppState>) -> Response {
    let calls = calls_by_component(agent.metrics().await);
    let list = agent.components();
    let gone = agent.unloaded_components();
    let none = Calls::default();
    let body = html! {
        h1 { "Components" }
        div #components data-live {
            @if list.is_empty() { p.empty { "No components loaded." } }
            @for c in &list { (component(c, calls.get(&c.name).unwrap_or(&none))) }
            @if !gone.is_empty() {
                h2 { "No longer loaded" }
                @for g in &gone {
                    section.component data-unloaded=(g.name) aria-label=(g.name) {
                        h3 { (g.name) " (" (g.world) ")" }
                        (history(&g.history))
                    }
                }
            }
        }
    };
    page("Components", Tab::Components, None, body).into_response()
}

/// Traps and call latencies per component, from the metrics model.
fn calls_by_component(metrics: Vec<Metric>) -> BTreeMap<String, Calls> {
    let mut calls: BTreeMap<String, Calls> = BTreeMap::new();
    for m in metrics {
        let component = |l: &crate::metrics::Labels| {
            l.iter()
                .find(|(k, _)| *k == "component")
                .map(|(_, v)| v.clone())
        };
        match m {
            Metric::Counter("paddock.component.traps", l, v) => {
                if let Some(c) = component(&l) {
                    calls.entry(c).or_default().traps += v;
                }
            }
            Metric::Histogram("paddock.component.call_seconds", l, buckets, count, _) => {
                if let Some(c) = component(&l) {
                    let e = calls.entry(c).or_default();
                    e.buckets.resize(buckets.len().max(e.buckets.len()), 0);
                    for (a, b) in e.buckets.iter_mut().zip(&buckets) {
                        *a += b;
                    }
                    e.count += count;
                }
            }
            _ => {}
        }
    }
    calls
}

/// One loaded (or refused, or draining) component version.
fn component(c: &crate::swap::ComponentStatus, m: &Calls) -> Markup {
    html! {
        @let state = label(&c.state);
        @let title = if c.name.is_empty() { c.source.clone() } else { c.name.clone() };
        @let refused = c.state == crate::swap::ComponentState::Refused;
        section.component data-component=(c.name) data-state=(state) aria-label=(title) {
            h2 { (title) " " span class=(format!("status {}", state.to_lowercase())) { (state) } }
            @if !c.reason.is_empty() { p.error { (c.reason) } }
            dl.facts {
                @if refused {
                    @if !c.sha256.is_empty() { dt { "SHA-256" } dd { (sha(&c.sha256)) } }
                    @if !c.reference.is_empty() { dt { "Reference" } dd { (c.reference) } }
                } @else {
                    dt { "World" } dd { (c.world) }
                    dt { "Version" } dd { (c.plugin_version) " (contract " (c.contract_version) ")" }
                    dt { "SHA-256" } dd { (sha(&c.sha256)) }
                    @if let Some(p) = &c.previous {
                        dt { "Previous version" } dd { (previous(p)) }
                    } @else if !c.previous_sha256.is_empty() {
                        dt { "Previous version" } dd { (sha(&c.previous_sha256)) }
                    }
                    dt { "Source" } dd { (c.source) }
                    @if !c.digest.is_empty() { dt { "Digest" } dd.digest { (c.digest) } }
                    @if !c.signer.is_empty() { dt { "Signed by" } dd.signer { (c.signer) } }
                    @if let Some(g) = &c.declared_grants {
                        dt { "Declares" } dd.declared { (g.extra()) }
                    }
                    @if c.state == crate::swap::ComponentState::PendingApproval {
                        dt { "Waits for approval" } dd.pending {
                            @if c.grants_diff.is_empty() { "a new version (auto_approve = \"never\")" }
                            @else { ul.grants-diff { @for d in &c.grants_diff { li { code { (d) } } } } }
                            "Let it in with " code { "agent component approve " (c.name) } "."
                        }
                    }
                    dt { "Loaded" } dd { (when(c.loaded_at)) " in " (format!("{:.1}", c.load_millis)) " ms" }
                    dt { "Grants" } dd { @if c.grants.is_empty() { "none" } @else { (c.grants.join(", ")) } }
                    dt { "Limits" } dd {
                        (c.memory_mb) " MiB memory, " (c.call_timeout_millis) " ms per call, "
                        (c.instance_reuse) " calls per instance"
                    }
                    dt { "Calls" } dd { (c.calls) }
                    dt { "Errors" } dd { (c.errors) }
                    dt { "Traps" } dd { (m.traps) }
                    dt { "Latency p50 / p99" } dd { (quantile(m, 0.5)) " / " (quantile(m, 0.99)) }
                    @if !c.tasks.is_empty() { dt { "Tasks" } dd { (c.tasks.join(", ")) } }
                }
            }
            @if c.state != crate::swap::ComponentState::Draining || !c.history.is_empty() {
                details.history open[!c.history.is_empty()] {
                    summary { "History (" (c.history.len()) ")" }
                    (history(&c.history))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_read_cumulative_buckets() {
        let mut b = vec![0u64; LATENCY_BUCKETS.len()];
        // 90 calls within 1ms, all 100 within 50ms.
        for (i, v) in b.iter_mut().enumerate() {
            *v = if i < 4 {
                0
            } else if i < 7 {
                90
            } else {
                100
            };
        }
        let c = Calls {
            traps: 0.0,
            buckets: b,
            count: 100,
        };
        assert_eq!(quantile(&c, 0.5), "≤1ms");
        assert_eq!(quantile(&c, 0.99), "≤50ms");
    }

    #[test]
    fn history_names_each_event_and_its_versions() {
        let e = |kind, prev: &str, reason: &str| SwapEvent {
            time: 1_700_000_000_000_000_000,
            kind,
            sha256: "a".repeat(64),
            previous_sha256: prev.to_string(),
            reason: reason.to_string(),
            source: "/c/h.wasm".into(),
        };
        let html = history(&[
            e(
                crate::swap::SwapEventKind::Reverted,
                &"b".repeat(64),
                "it trapped",
            ),
            e(crate::swap::SwapEventKind::Refused, "", "not a component"),
        ])
        .into_string();
        assert!(
            html.contains(r#"<li data-swap-event="reverted">"#),
            "{html}"
        );
        assert!(html.contains("rolled back <code"), "{html}");
        assert!(html.contains("it trapped"), "{html}");
        assert!(html.contains(r#"<li data-swap-event="refused">"#), "{html}");
        assert!(history(&[]).into_string().contains("No swaps"));
    }
}
