//! `api/acl.go`: tokens and policies of Nomad's ACL system, as `nomad acl ...` and the Go
//! client decode them.

use serde_json::Value;

use super::*;

go_struct! {
    /// Mirrors `ACLPolicyListStub` in api/acl.go (GET /v1/acl/policies).
    ACLPolicyListStub {
        Name: String,
        Description: String,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `JobACL` in api/acl.go.
    JobACL {
        Namespace: String,
        JobID: String,
        Group: String,
        Task: String,
    }
}

go_struct! {
    /// Mirrors `ACLPolicy` in api/acl.go (GET /v1/acl/policy/{name}).
    ACLPolicy {
        Name: String,
        Description: String,
        Rules: String,
        JobACL: Option<JobACL>,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `ACLTokenRoleLink` in api/acl.go.
    ACLTokenRoleLink {
        ID: String,
        Name: String,
    }
}

go_struct! {
    /// Mirrors `ACLToken` in api/acl.go (bootstrap, create, update, read, self). Its
    /// `ExpirationTTL` goes through the token's own JSON methods (a duration string or
    /// nanoseconds), so it is taken as any JSON value here.
    ACLToken {
        AccessorID: String,
        SecretID: String,
        Name: String,
        Type: String,
        Policies: Vec<String>,
        Roles: Vec<Option<ACLTokenRoleLink>>,
        Global: bool,
        CreateTime: GoTime,
        ExpirationTime: Option<GoTime>,
        ExpirationTTL: Value,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `ACLTokenListStub` in api/acl.go (GET /v1/acl/tokens).
    ACLTokenListStub {
        AccessorID: String,
        Name: String,
        Type: String,
        Policies: Vec<String>,
        Roles: Vec<Option<ACLTokenRoleLink>>,
        Global: bool,
        CreateTime: GoTime,
        ExpirationTime: Option<GoTime>,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `OneTimeToken` in api/acl.go.
    OneTimeToken {
        OneTimeSecretID: String,
        AccessorID: String,
        ExpiresAt: GoTime,
        CreateIndex: u64,
        ModifyIndex: u64,
    }
}

go_struct! {
    /// Mirrors `OneTimeTokenUpsertResponse` in api/acl.go (PUT /v1/acl/token/onetime).
    OneTimeTokenUpsertResponse {
        OneTimeToken: Option<OneTimeToken>,
    }
}

go_struct! {
    /// Mirrors `OneTimeTokenExchangeResponse` in api/acl.go
    /// (PUT /v1/acl/token/onetime/exchange).
    OneTimeTokenExchangeResponse {
        Token: Option<ACLToken>,
    }
}

go_struct! {
    /// Mirrors `Namespace` in api/namespace.go (GET /v1/namespace/{name}, /v1/namespaces).
    Namespace {
        Name: String,
        Description: String,
        Quota: String,
        Capabilities: Option<NamespaceCapabilities>,
        NodePoolConfiguration: Option<NamespaceNodePoolConfiguration>,
        VaultConfiguration: Option<Value>,
        ConsulConfiguration: Option<Value>,
        Meta: std::collections::BTreeMap<String, String>,
        CreateIndex: u64,
        ModifyIndex: u64,
        RequiredExtraClaims: std::collections::BTreeMap<String, String>,
        OptionalExtraClaims: std::collections::BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `NamespaceCapabilities` in api/namespace.go.
    NamespaceCapabilities {
        EnabledTaskDrivers: Vec<String>,
        DisabledTaskDrivers: Vec<String>,
        EnabledNetworkModes: Vec<String>,
        DisabledNetworkModes: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `NamespaceNodePoolConfiguration` in api/namespace.go.
    NamespaceNodePoolConfiguration {
        Default: String,
        Allowed: Vec<String>,
        Denied: Vec<String>,
    }
}
