//! Resource charts drawn on the server as SVG (no chart library, no script): CPU and
//! memory over the last minute for an allocation and for the node, from the client's
//! samples ([`crate::client::history`]), and the node's allocations laid out by their share
//! of its CPU and memory (Nomad's topology view, for one node).
//!
//! Each chart is a `figure.chart` with a `data-points` count; each sample is a `circle`
//! whose `title` says when and how much, so the values are there for a screen reader and
//! a test as well as for the eye.

use maud::{Markup, html};

use super::{AppState, enc, short};
use crate::client::history::Point;
use crate::structs::Allocation;

/// The drawing's size in SVG units (it scales to the page's width).
const W: f64 = 300.0;
const H: f64 = 80.0;

/// `1.2 GiB`, `640 MiB`, `12 KiB`.
fn bytes(b: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let (mut v, mut u) = (b, 0);
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v >= 10.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A sample's time as `HH:MM:SS UTC`.
fn clock(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(|t| t.strftime("%H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// How often the page fetches its charts again, ms: twice the sampling interval, at
/// least 2 s.
pub(super) fn poll_ms(agent: &AppState) -> u128 {
    (agent.client().history().interval * 2)
        .max(std::time::Duration::from_secs(2))
        .as_millis()
}

/// One chart: `values` (time in ms, value) oldest first, drawn against `limit` (what is
/// reserved or the whole) when there is one; the newest sample at the right edge.
fn chart(
    kind: &str,
    title: &str,
    values: &[(u64, f64)],
    limit: Option<(f64, String)>,
    fmt: &dyn Fn(f64) -> String,
) -> Markup {
    let top = values
        .iter()
        .map(|(_, v)| *v)
        .chain(limit.as_ref().map(|(l, _)| *l))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.05;
    let slots = crate::client::history::POINTS.max(2) - 1;
    let start = slots.saturating_sub(values.len().saturating_sub(1));
    let xy = |i: usize, v: f64| {
        let x = (start + i) as f64 / slots as f64 * W;
        let y = H - v / top * H;
        (x, y)
    };
    let line: String = values
        .iter()
        .enumerate()
        .map(|(i, (_, v))| {
            let (x, y) = xy(i, *v);
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ");
    let now = values.last().map(|(_, v)| fmt(*v));
    let label = format!("{title} over the last minute");
    html! {
        figure.chart data-chart=(kind) data-points=(values.len()) {
            figcaption {
                (title) " "
                @match &now {
                    Some(v) => strong { (v) },
                    None => span.empty { "no samples yet" },
                }
                @if let Some((_, l)) = &limit { " of " (l) }
            }
            svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-label=(label) {
                @if let Some((l, _)) = &limit {
                    @let y = H - l / top * H;
                    line.limit x1="0" x2=(W) y1=(format!("{y:.1}")) y2=(format!("{y:.1}")) {}
                }
                @if values.len() > 1 { polyline.line points=(line) {} }
                @for (i, (at, v)) in values.iter().enumerate() {
                    @let (x, y) = xy(i, *v);
                    circle.pt cx=(format!("{x:.1}")) cy=(format!("{y:.1}")) r="1.6" data-value=(format!("{v:.2}")) {
                        title { (clock(*at)) ": " (fmt(*v)) }
                    }
                }
            }
        }
    }
}

/// An allocation's CPU (MHz, against what its tasks reserved) and memory (against its
/// tasks' `memory`).
pub(super) fn alloc_usage(agent: &AppState, a: &Allocation) -> Markup {
    let points = agent.client().history().alloc(&a.id);
    let (cpu, mem) = reserved(a);
    html! {
        div.charts {
            (chart("cpu", "CPU", &series(&points, |p| p.cpu), Some((cpu as f64, format!("{cpu} MHz reserved"))),
                &|v| format!("{v:.0} MHz")))
            (chart("memory", "Memory", &series(&points, |p| p.memory as f64),
                Some(((mem << 20) as f64, format!("{} reserved", bytes((mem << 20) as f64)))), &|v| bytes(v)))
        }
        @if points.is_empty() {
            p.hint { "Samples are taken every " (crate::util::go_duration(agent.client().history().interval))
                " while a task runs." }
        }
    }
}

/// The node's CPU (percent of all cores) and memory in use (of all of it).
pub(super) fn node_usage(agent: &AppState) -> Markup {
    let points = agent.client().history().node();
    let (total, _, _) = crate::node::meminfo();
    html! {
        div.charts {
            (chart("cpu", "CPU", &series(&points, |p| p.cpu), Some((100.0, "all cores".into())),
                &|v| format!("{v:.0}%")))
            (chart("memory", "Memory", &series(&points, |p| p.memory as f64),
                Some((total as f64, bytes(total as f64))), &|v| bytes(v)))
        }
    }
}

fn series(points: &[Point], f: impl Fn(&Point) -> f64) -> Vec<(u64, f64)> {
    points.iter().map(|p| (p.at_ms, f(p))).collect()
}

/// What an allocation's tasks reserved: (MHz, MB).
fn reserved(a: &Allocation) -> (u64, u64) {
    a.allocated_resources
        .tasks
        .values()
        .fold((0, 0), |(c, m), t| {
            (c + t.cpu.cpu_shares, m + t.memory.memory_mb)
        })
}

/// A live allocation's hold on the node.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    create_index: u64,
    id: String,
    namespace: String,
    job: String,
    group: String,
    cpu: u64,
    memory: u64,
    /// Whether the viewer may read its namespace's jobs.
    seen: bool,
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// One resource's bar: a segment per allocation the viewer may read, sized by its share
/// of `whole`, and one for the rest.
fn share_bar(kind: &str, live: &[Held], pick: fn(&Held) -> u64, whole: u64, unit: &str) -> Markup {
    let hidden: u64 = live.iter().filter(|h| !h.seen).map(pick).sum();
    html! {
        div.share-bar data-resource=(kind) {
            @for h in live.iter().filter(|h| h.seen) {
                a.share href=(format!("/ui/allocations/{}", enc(&h.id)))
                    style=(format!("width: {:.2}%", share(pick(h), whole)))
                    title=(format!("{} / {} ({}): {} {unit}", h.job, h.group, short(&h.id), pick(h))) {
                    span.visually-hidden { (h.job) " " (short(&h.id)) }
                }
            }
            @if hidden > 0 {
                span.share.other style=(format!("width: {:.2}%", share(hidden, whole)))
                    title="allocations of namespaces your token may not read" {}
            }
        }
    }
}

/// The node's live allocations laid out by their share of its CPU and memory: a bar per
/// resource with a segment per allocation, and a table of the figures. Allocations of
/// namespaces the viewer may not read are one anonymous segment.
pub(super) fn topology(
    agent: &AppState,
    viewer: &super::auth::Viewer,
    n: &crate::agent::NodeView,
) -> Markup {
    let total_cpu = n.node_resources.cpu["CpuShares"].as_u64().unwrap_or(0);
    let total_mem = n.node_resources.memory["MemoryMB"].as_u64().unwrap_or(0);
    let mut live = agent.visit_allocations(|a| {
        (!a.is_terminal()).then(|| {
            let (cpu, memory) = reserved(a);
            Held {
                create_index: a.create_index,
                id: a.id.clone(),
                namespace: a.namespace.clone(),
                job: a.job_id.clone(),
                group: a.task_group.clone(),
                cpu,
                memory,
                seen: viewer.reads_jobs(agent, &a.namespace),
            }
        })
    });
    live.sort();
    let used_cpu: u64 = live.iter().map(|h| h.cpu).sum();
    let used_mem: u64 = live.iter().map(|h| h.memory).sum();
    html! {
        div.topology {
            div.share-row {
                span { "CPU " strong { (used_cpu) " / " (total_cpu) " MHz" }
                    " (" (format!("{:.0}", share(used_cpu, total_cpu))) "%)" }
                (share_bar("cpu", &live, |h| h.cpu, total_cpu, "MHz"))
            }
            div.share-row {
                span { "Memory " strong { (used_mem) " / " (total_mem) " MiB" }
                    " (" (format!("{:.0}", share(used_mem, total_mem))) "%)" }
                (share_bar("memory", &live, |h| h.memory, total_mem, "MiB"))
            }
        }
        @if live.is_empty() {
            p.empty { "No allocation runs on this node." }
        } @else {
            div.scroll { table.node-allocs {
                thead { tr {
                    th scope="col" { "Allocation" } th scope="col" { "Job" } th scope="col" { "Group" }
                    th scope="col" { "CPU" } th scope="col" { "Memory" }
                } }
                tbody {
                    @for h in live.iter().filter(|h| h.seen) {
                        tr data-alloc=(h.id) {
                            td { a href=(format!("/ui/allocations/{}", enc(&h.id))) { code { (short(&h.id)) } } }
                            td { a href=(super::job_href(&h.namespace, &h.job)) { (h.job) } }
                            td { (h.group) }
                            td { (h.cpu) " MHz (" (format!("{:.1}", share(h.cpu, total_cpu))) "%)" }
                            td { (h.memory) " MiB (" (format!("{:.1}", share(h.memory, total_mem))) "%)" }
                        }
                    }
                }
            } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_draws_each_sample_with_its_value() {
        let values = [(1_000, 10.0), (2_000, 40.0), (3_000, 20.0)];
        let m = chart(
            "cpu",
            "CPU",
            &values,
            Some((50.0, "50 MHz reserved".into())),
            &|v| format!("{v:.0} MHz"),
        )
        .into_string();
        assert!(m.contains(r#"data-points="3""#), "{m}");
        assert_eq!(m.matches("<circle").count(), 3, "{m}");
        assert!(
            m.contains("<strong>20 MHz</strong>") && m.contains("of 50 MHz reserved"),
            "{m}"
        );
        assert!(m.contains("<polyline"), "{m}");
        // The newest sample is at the right edge, the largest value highest.
        assert!(m.contains(r#"cx="300.0""#), "{m}");
        let empty = chart("cpu", "CPU", &[], None, &|v| format!("{v}")).into_string();
        assert!(
            empty.contains("no samples yet") && !empty.contains("<circle"),
            "{empty}"
        );
    }

    #[test]
    fn sizes_read_as_nomad_prints_them() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(64.0 * 1024.0 * 1024.0), "64 MiB");
    }
}
