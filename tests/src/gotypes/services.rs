//! `api/services.go`: a group's or task's services and their checks.

use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Service` in api/services.go.
    Service {
        Name: String,
        Tags: Vec<String>,
        CanaryTags: Vec<String>,
        EnableTagOverride: bool,
        PortLabel: String,
        AddressMode: String,
        Address: String,
        Checks: Vec<ServiceCheck>,
        CheckRestart: Option<CheckRestart>,
        Connect: Option<ConsulConnect>,
        Meta: BTreeMap<String, String>,
        CanaryMeta: BTreeMap<String, String>,
        TaggedAddresses: BTreeMap<String, String>,
        TaskName: String,
        OnUpdate: String,
        Identity: Option<WorkloadIdentity>,
        Weights: Option<ServiceWeights>,
        Provider: String,
        Cluster: String,
        Kind: String,
    }
}

go_struct! {
    /// Mirrors `ServiceCheck` in api/services.go.
    ServiceCheck {
        Name: String,
        Type: String,
        Command: String,
        Args: Vec<String>,
        Path: String,
        Protocol: String,
        PortLabel: String,
        Expose: bool,
        AddressMode: String,
        Advertise: String,
        Interval: i64,
        Timeout: i64,
        InitialStatus: String,
        Notes: String,
        TLSServerName: String,
        TLSSkipVerify: bool,
        Header: BTreeMap<String, Vec<String>>,
        Method: String,
        CheckRestart: Option<CheckRestart>,
        GRPCService: String,
        GRPCUseTLS: bool,
        TaskName: String,
        SuccessBeforePassing: i64,
        FailuresBeforeCritical: i64,
        FailuresBeforeWarning: i64,
        Body: String,
        OnUpdate: String,
    }
}

go_struct! {
    /// Mirrors `CheckRestart` in api/services.go.
    CheckRestart {
        Limit: i64,
        Grace: Option<i64>,
        IgnoreWarnings: bool,
    }
}

go_struct! {
    /// Mirrors `ServiceWeights` in api/services.go.
    ServiceWeights {
        Passing: i64,
        Warning: i64,
    }
}

go_struct! {
    /// Mirrors `ServiceRegistration` in api/services.go.
    ServiceRegistration {
        ID: always String,
        ServiceName: always String,
        Namespace: String,
        NodeID: String,
        Datacenter: String,
        JobID: String,
        AllocID: String,
        Tags: Vec<String>,
        Address: String,
        Port: i64,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `ServiceRegistrationListStub` in api/services.go.
    ServiceRegistrationListStub {
        Namespace: always String,
        Services: Vec<Option<ServiceRegistrationStub>>,
    }
}

go_struct! {
    /// Mirrors `ServiceRegistrationStub` in api/services.go.
    ServiceRegistrationStub {
        ServiceName: always String,
        Tags: Vec<String>,
    }
}
