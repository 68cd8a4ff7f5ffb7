//! `api/consul.go`: Consul settings and Connect (sidecars, gateways) of services.

use serde_json::Value;
use std::collections::BTreeMap;

use super::*;

go_struct! {
    /// Mirrors `Consul` in api/consul.go.
    Consul {
        Namespace: String,
        Cluster: String,
        Partition: String,
    }
}

go_struct! {
    /// Mirrors `ConsulConnect` in api/consul.go.
    ConsulConnect {
        Native: bool,
        Gateway: Option<ConsulGateway>,
        SidecarService: Option<ConsulSidecarService>,
        SidecarTask: Option<SidecarTask>,
    }
}

go_struct! {
    /// Mirrors `ConsulSidecarService` in api/consul.go.
    ConsulSidecarService {
        Tags: Vec<String>,
        Port: String,
        Proxy: Option<ConsulProxy>,
        DisableDefaultTCPCheck: bool,
        Meta: BTreeMap<String, String>,
    }
}

go_struct! {
    /// Mirrors `SidecarTask` in api/consul.go.
    SidecarTask {
        Name: String,
        Driver: String,
        User: String,
        Config: BTreeMap<String, Value>,
        Env: BTreeMap<String, String>,
        Resources: Option<Resources>,
        Meta: BTreeMap<String, String>,
        KillTimeout: Option<i64>,
        LogConfig: Option<LogConfig>,
        ShutdownDelay: Option<i64>,
        KillSignal: String,
        VolumeMounts: Vec<Option<VolumeMount>>,
        Identities: Vec<Option<WorkloadIdentity>>,
    }
}

go_struct! {
    /// Mirrors `ConsulProxy` in api/consul.go.
    ConsulProxy {
        LocalServiceAddress: String,
        LocalServicePort: i64,
        Expose: Option<ConsulExposeConfig>,
        ExposeConfig: Option<ConsulExposeConfig>,
        Upstreams: Vec<Option<ConsulUpstream>>,
        TransparentProxy: Option<ConsulTransparentProxy>,
        Config: BTreeMap<String, Value>,
    }
}

go_struct! {
    /// Mirrors `ConsulMeshGateway` in api/consul.go.
    ConsulMeshGateway {
        Mode: String,
    }
}

go_struct! {
    /// Mirrors `ConsulUpstream` in api/consul.go.
    ConsulUpstream {
        DestinationName: String,
        DestinationNamespace: String,
        DestinationPeer: String,
        DestinationPartition: String,
        DestinationType: String,
        LocalBindPort: i64,
        Datacenter: String,
        LocalBindAddress: String,
        LocalBindSocketPath: String,
        LocalBindSocketMode: String,
        MeshGateway: Option<ConsulMeshGateway>,
        Config: BTreeMap<String, Value>,
    }
}

go_struct! {
    /// Mirrors `ConsulTransparentProxy` in api/consul.go.
    ConsulTransparentProxy {
        UID: String,
        OutboundPort: u16,
        ExcludeInboundPorts: Vec<String>,
        ExcludeOutboundPorts: Vec<u16>,
        ExcludeOutboundCIDRs: Vec<String>,
        ExcludeUIDs: Vec<String>,
        NoDNS: bool,
    }
}

go_struct! {
    /// Mirrors `ConsulExposeConfig` in api/consul.go.
    ConsulExposeConfig {
        Paths: Vec<Option<ConsulExposePath>>,
        Path: Vec<Option<ConsulExposePath>>,
    }
}

go_struct! {
    /// Mirrors `ConsulExposePath` in api/consul.go.
    ConsulExposePath {
        Path: String,
        Protocol: String,
        LocalPathPort: i64,
        ListenerPort: String,
    }
}

go_struct! {
    /// Mirrors `ConsulGateway` in api/consul.go.
    ConsulGateway {
        Proxy: Option<ConsulGatewayProxy>,
        Ingress: Option<ConsulIngressConfigEntry>,
        Terminating: Option<ConsulTerminatingConfigEntry>,
        Mesh: Option<ConsulMeshConfigEntry>,
    }
}

go_struct! {
    /// Mirrors `ConsulGatewayBindAddress` in api/consul.go.
    ConsulGatewayBindAddress {
        Name: String,
        Address: String,
        Port: i64,
    }
}

go_struct! {
    /// Mirrors `ConsulGatewayProxy` in api/consul.go.
    ConsulGatewayProxy {
        ConnectTimeout: Option<i64>,
        EnvoyGatewayBindTaggedAddresses: bool,
        EnvoyGatewayBindAddresses: BTreeMap<String, Option<ConsulGatewayBindAddress>>,
        EnvoyGatewayNoDefaultBind: bool,
        EnvoyDNSDiscoveryType: String,
        Config: BTreeMap<String, Value>,
    }
}

go_struct! {
    /// Mirrors `ConsulGatewayTLSSDSConfig` in api/consul.go.
    ConsulGatewayTLSSDSConfig {
        ClusterName: String,
        CertResource: String,
    }
}

go_struct! {
    /// Mirrors `ConsulGatewayTLSConfig` in api/consul.go.
    ConsulGatewayTLSConfig {
        Enabled: bool,
        TLSMinVersion: String,
        TLSMaxVersion: String,
        CipherSuites: Vec<String>,
        SDS: Option<ConsulGatewayTLSSDSConfig>,
    }
}

go_struct! {
    /// Mirrors `ConsulHTTPHeaderModifiers` in api/consul.go.
    ConsulHTTPHeaderModifiers {
        Add: BTreeMap<String, String>,
        Set: BTreeMap<String, String>,
        Remove: Vec<String>,
    }
}

go_struct! {
    /// Mirrors `ConsulIngressService` in api/consul.go.
    ConsulIngressService {
        Name: String,
        Hosts: Vec<String>,
        TLS: Option<ConsulGatewayTLSConfig>,
        RequestHeaders: Option<ConsulHTTPHeaderModifiers>,
        ResponseHeaders: Option<ConsulHTTPHeaderModifiers>,
        MaxConnections: Option<u32>,
        MaxPendingRequests: Option<u32>,
        MaxConcurrentRequests: Option<u32>,
    }
}

go_struct! {
    /// Mirrors `ConsulIngressListener` in api/consul.go.
    ConsulIngressListener {
        Port: i64,
        Protocol: String,
        Services: Vec<Option<ConsulIngressService>>,
    }
}

go_struct! {
    /// Mirrors `ConsulIngressConfigEntry` in api/consul.go.
    ConsulIngressConfigEntry {
        TLS: Option<ConsulGatewayTLSConfig>,
        Listeners: Vec<Option<ConsulIngressListener>>,
    }
}

go_struct! {
    /// Mirrors `ConsulLinkedService` in api/consul.go.
    ConsulLinkedService {
        Name: String,
        CAFile: String,
        CertFile: String,
        KeyFile: String,
        SNI: String,
    }
}

go_struct! {
    /// Mirrors `ConsulTerminatingConfigEntry` in api/consul.go.
    ConsulTerminatingConfigEntry {
        Services: Vec<Option<ConsulLinkedService>>,
    }
}

go_struct! {
    /// Mirrors `ConsulMeshConfigEntry` in api/consul.go (no fields).
    ConsulMeshConfigEntry {}
}
