//! `api/agent.go`, `api/status.go`, `api/regions.go`, `api/fs.go` and `api/search.go`:
//! the agent's self and health, the cluster's leader, peers and regions, an allocation's
//! files, and prefix search.

use serde_json::Value;
use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `AgentSelf` in api/agent.go (GET /v1/agent/self; JSON names from its tags).
    AgentSelf {
        config: BTreeMap<String, Value>,
        member: AgentMember,
        stats: BTreeMap<String, BTreeMap<String, String>>,
    }
}

go_struct! {
    /// Mirrors `AgentMember` in api/agent.go.
    AgentMember {
        Name: String,
        Addr: String,
        Port: u16,
        Tags: BTreeMap<String, String>,
        Status: String,
        ProtocolMin: u8,
        ProtocolMax: u8,
        ProtocolCur: u8,
        DelegateMin: u8,
        DelegateMax: u8,
        DelegateCur: u8,
    }
}

go_struct! {
    /// Mirrors `AgentHealthResponse` in api/agent.go (GET /v1/agent/health).
    AgentHealthResponse {
        client: Option<AgentHealth>,
        server: Option<AgentHealth>,
    }
}

go_struct! {
    /// Mirrors `AgentHealth` in api/agent.go.
    AgentHealth {
        ok: bool,
        message: String,
    }
}

/// GET /v1/status/leader: `Status().Leader()` in api/status.go decodes a Go `string`.
pub type StatusLeader = String;

/// GET /v1/status/peers: `Status().Peers()` in api/status.go decodes a Go `[]string`.
pub type StatusPeers = Vec<String>;

/// GET /v1/regions: `Regions().List()` in api/regions.go decodes a Go `[]string`.
pub type RegionsList = Vec<String>;

go_struct! {
    /// Mirrors `AllocFileInfo` in api/fs.go (GET /v1/client/fs/ls, /stat).
    AllocFileInfo {
        Name: String,
        IsDir: bool,
        Size: i64,
        FileMode: String,
        ModTime: GoTime,
        ContentType: String,
    }
}

go_struct! {
    /// Mirrors `SearchResponse` in api/search.go (POST /v1/search; keys are
    /// `contexts.Context`, a string); embeds `QueryMeta` (api/api.go).
    SearchResponse {
        Matches: BTreeMap<String, Vec<String>>,
        Truncations: BTreeMap<String, bool>,
        // QueryMeta (embedded)
        LastIndex: u64,
        LastContact: i64,
        KnownLeader: bool,
        RequestTime: i64,
        NextToken: String,
    }
}

go_struct! {
    /// Mirrors `StreamFrame` in api/fs.go: one frame of GET /v1/client/fs/logs without
    /// `plain=true` (`Offset` and `Data` are `omitempty`).
    StreamFrame {
        Offset: i64,
        Data: GoBytes,
        File: String,
        FileEvent: String,
    }
}
