//! Nomad's list query over allocations (`api/listing.rs`, `filter.rs`):
//! - `filter/parse`: a typical expression parsed once per request.
//! - `filter/view`: one allocation (a real one, `fixtures/allocation.json`, with its job)
//!   turned into the JSON the filter reads — what a filtered list pays per object.
//! - `filter/match/*`: the expression evaluated on that view: a top-level field, a field of
//!   the job's meta, a regular expression, a miss in a list.
//!
//! A filtered list of N allocations costs about N × (view + match); the unfiltered list
//! pays neither. Run: `cargo bench -p paddock --bench listing`. Quote medians.

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use paddock::filter::Filter;
use paddock::structs::Allocation;

fn allocation() -> Allocation {
    let text = include_str!("fixtures/allocation.json");
    serde_json::from_str(text).expect("the fixture is an allocation as the API answers it")
}

fn filter(c: &mut Criterion) {
    let mut g = c.benchmark_group("filter");
    let expr = r#"ClientStatus == "running" and Job.Meta.owner == "ops""#;
    g.bench_function("parse", |b| {
        b.iter(|| Filter::parse(black_box(expr)).unwrap())
    });
    let alloc = allocation();
    g.bench_function("view", |b| {
        b.iter(|| serde_json::to_value(black_box(&alloc)).unwrap())
    });
    g.bench_function("view_job_only", |b| {
        b.iter(|| serde_json::to_value(black_box(&*alloc.job)).unwrap())
    });
    let view = serde_json::to_value(&alloc).unwrap();
    for (name, src) in [
        ("top_level", r#"ClientStatus == "running""#),
        ("job_meta", r#"Job.Meta.owner == "ops""#),
        ("regex", r#"Name matches "^web\\.g\\[[0-9]+\\]$""#),
        ("miss_in_list", r#""nope" in Job.Datacenters"#),
    ] {
        let f = Filter::parse(src).unwrap();
        assert!(f.matches(&view).is_ok(), "{name}: {:?}", f.matches(&view));
        g.bench_function(format!("match/{name}"), |b| {
            b.iter(|| f.matches(black_box(&view)).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, filter);
criterion_main!(benches);
