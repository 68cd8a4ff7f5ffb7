//! Go-typed mirrors of the answers of Nomad's HTTP API, as the Go `api` package
//! (`github.com/hashicorp/nomad/api`) declares them: the package the `nomad` CLI and the
//! Terraform provider decode Paddock's answers with. The integration test `gotypes`
//! decodes every endpoint's answer into these types with [`decode`], which applies Go's
//! `encoding/json` rules, so an answer Go would refuse (or a field a Go client would
//! dereference and find nil) fails the test with its field path.
//!
//! One module per Nomad source file (`api/jobs.go` is [`jobs`], `api/nodes.go` is
//! [`nodes`], ...); every type is re-exported here. Each struct mirrors one Go struct
//! field by field: the JSON name is the Go field name unless a `json:` tag renames it,
//! and the Rust type has the width and kind of the Go type:
//!
//! | Go                                   | Rust                                   |
//! |--------------------------------------|----------------------------------------|
//! | `time.Time`                          | [`GoTime`] (RFC 3339 string only)      |
//! | `time.Duration`, `int`, `int64`      | `i64`                                  |
//! | `int8` / `int32` / `uint8` / `uint16` / `uint32` / `uint64` | `i8` / `i32` / `u8` / `u16` / `u32` / `u64` |
//! | `float64`, `float32`                 | `f64`                                  |
//! | `string`, `bool`                     | `String`, `bool`                       |
//! | `[]byte`                             | [`GoBytes`] (base64 string)            |
//! | `*T`                                 | `Option<T>`                            |
//! | `[]T` / `[]*T`                       | `Vec<T>` / `Vec<Option<T>>`            |
//! | `map[string]T` / `map[string]*T`     | `BTreeMap<String, T>` / `BTreeMap<String, Option<T>>` |
//! | `interface{}`, `map[string]interface{}` | `serde_json::Value` / `BTreeMap<String, Value>` |
//! | `error` (interface)                  | [`GoError`] (only `null` decodes)      |
//!
//! Go takes `null` or absence as the zero value of any field and ignores unknown keys;
//! [`go_struct!`] gives every field that rule. A field written `Name: always T` is one
//! Nomad always sends and a Go client dereferences without a nil check (`*job.Version`
//! in `nomad alloc status`, `alloc.Metrics.NodesEvaluated`): Go would decode its absence,
//! then the client would panic, so absence or `null` fails the decode here.
//!
//! Sources: hashicorp/nomad `api/*.go` and `command/*.go` (Nomad 1.6 to 1.10), and
//! armon/go-metrics' `inmem_endpoint.go` for the metrics summary.

#![allow(non_snake_case, clippy::upper_case_acronyms)]

mod decode;
mod scalars;

pub mod acl;
pub mod agent;
pub mod allocations;
pub mod consul;
pub mod evaluations;
pub mod events;
pub mod jobs;
pub mod metrics;
pub mod nodes;
pub mod operator;
pub mod resources;
pub mod services;
pub mod tasks;

pub use acl::*;
pub use agent::*;
pub use allocations::*;
pub use consul::*;
pub use decode::{GoValue, decode};
pub use evaluations::*;
pub use events::*;
pub use jobs::*;
pub use metrics::*;
pub use nodes::*;
pub use operator::*;
pub use resources::*;
pub use scalars::{GoBytes, GoError, GoTime};
pub use services::*;
pub use tasks::*;

use serde::{Deserialize, Deserializer};

/// What [`always`] says of a field that is absent or `null`.
pub const NEVER_NIL: &str =
    "absent or null, but Nomad always sends it and Go clients dereference it";

/// The rule of every Go field: `null` (or, with `#[serde(default)]`, absence) gives
/// `T::default()`, Go's zero value; anything else must decode as `T`.
pub fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The rule of an `always` field: it must be there and not `null` (see the module doc).
/// [`decode`] presents an absent field as `null`, so both fail here with the field's path.
pub fn always<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)?.ok_or_else(|| serde::de::Error::custom(NEVER_NIL))
}

/// Declares a Go struct mirror: every field public, decoded by [`nullable`], or by
/// [`always`] when written `Field: always Type`.
macro_rules! go_struct {
    ($(#[$meta:meta])* $name:ident { $($body:tt)* }) => {
        $crate::gotypes::go_struct!(@fields [$(#[$meta])*] $name [] $($body)*);
    };
    (@fields $m:tt $name:ident [$($out:tt)*]
        $(#[$f:meta])* $field:ident : always $ty:ty $(, $($rest:tt)*)?) => {
        $crate::gotypes::go_struct!(@fields $m $name [$($out)*
            $(#[$f])*
            #[serde(deserialize_with = "crate::gotypes::always")]
            pub $field: $ty,
        ] $($($rest)*)?);
    };
    (@fields $m:tt $name:ident [$($out:tt)*]
        $(#[$f:meta])* $field:ident : $ty:ty $(, $($rest:tt)*)?) => {
        $crate::gotypes::go_struct!(@fields $m $name [$($out)*
            $(#[$f])*
            #[serde(default, deserialize_with = "crate::gotypes::nullable")]
            pub $field: $ty,
        ] $($($rest)*)?);
    };
    (@fields [$($m:tt)*] $name:ident [$($out:tt)*]) => {
        $($m)*
        #[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
        pub struct $name { $($out)* }
    };
}
pub(crate) use go_struct;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    go_struct! {
        /// A probe with an `always` field.
        Probe { Version: always Option<u64>, Name: String, Count: i64 }
    }

    #[test]
    fn always_fields_must_be_sent_and_not_null() {
        let p: Probe = decode(&json!({"Version": 3})).unwrap();
        assert_eq!((p.Version, p.Name.as_str(), p.Count), (Some(3), "", 0));
        for v in [json!({}), json!({"Version": null, "Name": "x"})] {
            let e = decode::<Probe>(&v).unwrap_err().to_string();
            assert!(e.contains(NEVER_NIL), "{v}: {e}");
        }
        // Case-insensitively matched, as Go matches it.
        assert!(decode::<Probe>(&json!({"version": 0})).is_ok());
    }
}
