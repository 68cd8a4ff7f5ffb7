//! The blocks that make a job a launcher of others: `periodic` (children on a schedule),
//! `parameterized` (children by dispatch), and a task's `dispatch_payload`.

use serde::{Deserialize, Serialize};

/// A job's `periodic` block: launch a child job on a schedule (Nomad's `PeriodicConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodicConfig {
    /// Launches happen only while enabled.
    pub enabled: bool,
    /// Cron expressions (`cron`, or several in `crons`); the soonest next time wins.
    pub specs: Vec<String>,
    /// Skip a launch while a child launched earlier still runs.
    pub prohibit_overlap: bool,
    /// The time zone the expressions are read in (an IANA name; `UTC` by default).
    pub time_zone: String,
}

impl Serialize for PeriodicConfig {
    /// Nomad's shape: `Spec` (the first expression, as older clients read it), `Specs`, ...
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("PeriodicConfig", 6)?;
        st.serialize_field("Enabled", &self.enabled)?;
        st.serialize_field("Spec", self.specs.first().map(String::as_str).unwrap_or(""))?;
        st.serialize_field("Specs", &self.specs)?;
        st.serialize_field("SpecType", "cron")?;
        st.serialize_field("ProhibitOverlap", &self.prohibit_overlap)?;
        st.serialize_field("TimeZone", &self.time_zone)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for PeriodicConfig {
    /// From what [`Serialize`] writes (the state DB).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Stored {
            #[serde(rename = "Enabled", default)]
            enabled: bool,
            #[serde(rename = "Spec", default)]
            spec: String,
            #[serde(rename = "Specs", default)]
            specs: Vec<String>,
            #[serde(rename = "ProhibitOverlap", default)]
            prohibit_overlap: bool,
            #[serde(rename = "TimeZone", default)]
            time_zone: String,
        }
        let s = Stored::deserialize(d)?;
        let mut specs = s.specs;
        if specs.is_empty() && !s.spec.is_empty() {
            specs.push(s.spec);
        }
        Ok(Self {
            enabled: s.enabled,
            specs,
            prohibit_overlap: s.prohibit_overlap,
            time_zone: s.time_zone,
        })
    }
}

/// A job's `parameterized` block (Nomad's `ParameterizedJobConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParameterizedJobConfig {
    /// `optional` (default), `required` or `forbidden`.
    #[serde(rename = "Payload")]
    pub payload: String,
    /// Meta keys every dispatch must give.
    #[serde(rename = "MetaRequired")]
    pub meta_required: Vec<String>,
    /// Meta keys a dispatch may give.
    #[serde(rename = "MetaOptional")]
    pub meta_optional: Vec<String>,
}

/// A task's `dispatch_payload` block: where the dispatch's payload is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchPayloadConfig {
    /// File name, relative to the task's `local/` dir.
    #[serde(rename = "File")]
    pub file: String,
}
