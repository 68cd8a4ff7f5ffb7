//! `api/event_stream.go`: one line of `/v1/event/stream`.

use serde_json::Value;
use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Events` in api/event_stream.go (one line of GET /v1/event/stream).
    Events {
        Index: u64,
        Events: Vec<Event>,
        Err: GoError,
    }
}

go_struct! {
    /// Mirrors `Event` in api/event_stream.go (`Topic` is `Topic`, a string).
    /// The CLI turns `Payload` into typed values with mapstructure
    /// (`Event.Allocation()`, `.Job()`, `.Evaluation()`...).
    Event {
        Topic: String,
        Type: String,
        Key: String,
        FilterKeys: Vec<String>,
        Index: u64,
        Payload: BTreeMap<String, Value>,
    }
}

go_struct! {
    /// Mirrors `eventPayload` in api/event_stream.go: what `Event.Allocation()`, `.Job()`,
    /// `.Evaluation()` and `.Node()` decode an event's `Payload` into (with mapstructure,
    /// which, as here, takes RFC 3339 strings for times and matches names ignoring case).
    EventPayload {
        Allocation: Option<Allocation>,
        Evaluation: Option<Evaluation>,
        Job: Option<Job>,
        Node: Option<Node>,
    }
}
