//! Log lines as Nomad writes them with `log_json = true` (hclog's JSON): one object per
//! line with `@timestamp`, `@level`, `@module` and `@message`, then the event's fields as
//! keys. Log pipelines built for Nomad read Paddock's lines unchanged.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The hclog JSON event format.
pub struct HclogJson;

struct Fields(serde_json::Map<String, serde_json::Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(key(field), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(key(field), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(key(field), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(key(field), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(key(field), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(key(field), format!("{value:?}").into());
    }
}

/// `message` is hclog's `@message`; other names are kept.
fn key(field: &Field) -> String {
    match field.name() {
        "message" => "@message".into(),
        n => n.to_string(),
    }
}

impl<S, N> FormatEvent<S, N> for HclogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields(serde_json::Map::new());
        fields.0.insert("@timestamp".into(), timestamp().into());
        fields
            .0
            .insert("@level".into(), meta.level().as_str().to_lowercase().into());
        fields.0.insert("@module".into(), meta.target().into());
        event.record(&mut fields);
        fields.0.entry("@message").or_insert_with(|| "".into());
        writeln!(writer, "{}", serde_json::Value::Object(fields.0))
    }
}

/// Now, UTC, as hclog writes it: `2006-01-02T15:04:05.000000Z`.
fn timestamp() -> String {
    crate::util::format_now("%Y-%m-%dT%H:%M:%S%.6fZ")
}
