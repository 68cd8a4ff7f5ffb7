//! `api/operator_metrics.go`: go-metrics' summary (`/v1/metrics`).

use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `MetricsSummary` in api/operator_metrics.go (GET /v1/metrics).
    MetricsSummary {
        Timestamp: String,
        Gauges: Vec<GaugeValue>,
        Points: Vec<PointValue>,
        Counters: Vec<SampledValue>,
        Samples: Vec<SampledValue>,
    }
}

go_struct! {
    /// Mirrors `GaugeValue` in api/operator_metrics.go (`Value float32`;
    /// `Hash` and `Labels []Label` are `json:"-"`; `DisplayLabels` is `json:"Labels"`).
    GaugeValue {
        Name: String,
        Value: f64,
        #[serde(rename = "Labels")]
        DisplayLabels: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `PointValue` in api/operator_metrics.go (`Points []float32`).
    PointValue {
        Name: String,
        Points: Vec<f64>,
    }
}

go_struct! {
    /// Mirrors `SampledValue` in api/operator_metrics.go; embeds
    /// `*AggregateSample` (`Count int`, `Rate`, `Sum`, `Min`, `Max float64`;
    /// `SumSq` and `LastUpdated` are `json:"-"`), promoted here.
    SampledValue {
        Name: String,
        // *AggregateSample (embedded)
        Count: i64,
        Rate: f64,
        Sum: f64,
        Min: f64,
        Max: f64,
        Mean: f64,
        Stddev: f64,
        #[serde(rename = "Labels")]
        DisplayLabels: BTreeMap<String, String>,
    }
}
