//! The outbound network grant (`grant { network { hosts = [...] } }`): which addresses a
//! component may connect to through WASI sockets, deny by default. Every connect a guest
//! makes is checked here before the host opens it ([`NetworkGrant::allows`], installed as
//! wasmtime's `socket_addr_check`); a refusal is remembered in the call's [`Denials`], so
//! the host can answer with a typed denial naming the grant and the address rather than
//! whatever the guest made of `access-denied`.
//!
//! The same grant bounds `wasi:http`'s outgoing requests ([`HttpHooks`]): a request goes out
//! only to an authority the grant lists — a name only by an entry naming it (or `*`), an IP
//! by an IP or network entry — and its response body is cut at `max_response_bytes`. A
//! request's name is never resolved here to be matched against an IP entry: the connection
//! resolves it again, and a second answer could differ.
//!
//! An entry is `HOST:PORT`: `HOST` an IP address (`127.0.0.1`, `[::1]`), a network
//! (`10.0.0.0/8`, `[fd00::/8]`), a name (`db.internal`, resolved when a connect is checked:
//! the connect's address must be one the name resolves to) or `*`; `PORT` a number, a range
//! (`8000-8999`) or `*`. Listening (bind) and UDP are never allowed.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// What the operator lets a component reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkGrant {
    /// `HOST:PORT` entries a connect may go to; empty: none.
    pub hosts: Vec<String>,
    /// The most bytes of one `wasi:http` response body a component may read; past it the
    /// body ends with an error (`HTTP-response-body-size`). Absent: no cap but the
    /// component's memory. Raw sockets are not counted.
    pub max_response_bytes: Option<u64>,
}

/// One parsed `hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    host: HostPart,
    ports: (u16, u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPart {
    Any,
    Net(IpAddr, u8),
    Name(String),
}

impl HostRule {
    /// Parse `HOST:PORT`.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "{entry:?}: {why} (write HOST:PORT, e.g. \"127.0.0.1:*\", \"db.internal:5432\", \"10.0.0.0/8:80-89\")"
            )
        };
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let (h, p) = rest
                .split_once("]:")
                .ok_or_else(|| bad("an IPv6 host needs [..]:PORT"))?;
            (h, p)
        } else {
            entry.rsplit_once(':').ok_or_else(|| bad("no port"))?
        };
        let ports = match port {
            "*" => (0, u16::MAX),
            p => {
                let num = |s: &str| {
                    s.parse::<u16>()
                        .map_err(|_| bad("the port is not a number, a range or *"))
                };
                match p.split_once('-') {
                    Some((lo, hi)) => {
                        let (lo, hi) = (num(lo)?, num(hi)?);
                        if lo > hi {
                            return Err(bad("the port range is backwards"));
                        }
                        (lo, hi)
                    }
                    None => {
                        let n = num(p)?;
                        (n, n)
                    }
                }
            }
        };
        let host = if host == "*" {
            HostPart::Any
        } else if let Some((ip, len)) = host.split_once('/') {
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| bad("the network's address is not an IP"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| bad("the network's prefix length is out of range"))?;
            HostPart::Net(ip, len)
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            HostPart::Net(ip, if ip.is_ipv4() { 32 } else { 128 })
        } else if !host.is_empty()
            && host.len() <= 253
            && host
                .split('.')
                .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        {
            HostPart::Name(host.to_ascii_lowercase())
        } else {
            return Err(bad("the host is not an IP, a network, a name or *"));
        };
        Ok(Self { host, ports })
    }

    /// Whether an HTTP request's authority matches, by its text: a name by a name entry
    /// (case-insensitive), an IP literal by an IP or network entry, anything by `*`.
    fn matches_authority(&self, host: &str, port: u16) -> bool {
        if !(self.ports.0..=self.ports.1).contains(&port) {
            return false;
        }
        match &self.host {
            HostPart::Any => true,
            HostPart::Name(name) => host.eq_ignore_ascii_case(name),
            HostPart::Net(net, len) => host
                .parse::<IpAddr>()
                .is_ok_and(|ip| in_net(ip, *net, *len)),
        }
    }

    /// Whether `addr` matches: by port, then by address (a name is resolved).
    async fn matches(&self, addr: SocketAddr) -> bool {
        if !(self.ports.0..=self.ports.1).contains(&addr.port()) {
            return false;
        }
        match &self.host {
            HostPart::Any => true,
            HostPart::Net(net, len) => in_net(addr.ip(), *net, *len),
            HostPart::Name(name) => match tokio::net::lookup_host((name.as_str(), 0)).await {
                Ok(found) => found.into_iter().any(|a| same_ip(a.ip(), addr.ip())),
                Err(_) => false,
            },
        }
    }
}

/// IPv4-mapped IPv6 addresses compare as their IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    canonical(a) == canonical(b)
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (canonical(ip), canonical(net)) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

impl NetworkGrant {
    /// Check every entry, naming the bad one (`grant.network.hosts[1]: …`).
    pub fn validate(&self) -> Result<Vec<HostRule>, String> {
        self.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| HostRule::parse(h).map_err(|e| format!("grant.network.hosts[{i}]: {e}")))
            .collect()
    }
}

/// The refusals of one call, read by the host after it (most recent last).
#[derive(Debug, Clone, Default)]
pub struct Denials(Arc<Mutex<Vec<String>>>);

impl Denials {
    fn push(&self, why: String) {
        let mut v = self.0.lock().unwrap();
        if v.len() < 16 {
            v.push(why);
        }
    }

    /// The refusals so far, emptied.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// What a connect check needs: the component's name, its rules as written and parsed.
#[derive(Debug, Clone)]
pub struct ConnectCheck {
    component: String,
    written: Vec<String>,
    rules: Vec<HostRule>,
    denials: Denials,
}

impl ConnectCheck {
    /// The check for `component` under `grant` (`None`: no network grant, every connect
    /// refused), recording refusals in `denials`.
    pub fn new(component: &str, grant: Option<&NetworkGrant>, denials: Denials) -> Self {
        let (written, rules) = match grant {
            Some(g) => (g.hosts.clone(), g.validate().unwrap_or_default()),
            None => (Vec::new(), Vec::new()),
        };
        Self {
            component: component.to_string(),
            written,
            rules,
            denials,
        }
    }

    /// Whether the component may make a TCP connection to `addr`; a refusal is recorded,
    /// naming the grant.
    pub async fn allows(&self, addr: SocketAddr, connect: bool) -> bool {
        if connect {
            for r in &self.rules {
                if r.matches(addr).await {
                    return true;
                }
            }
        }
        let why = if !connect {
            format!(
                "component {:?} may not listen or use UDP ({addr}): the `network` grant allows outbound TCP connections only",
                self.component
            )
        } else if self.written.is_empty() {
            format!(
                "component {:?} has no `network` grant: connecting to {addr} is refused (plugin {:?} {{ grant {{ network {{ hosts = [\"{addr}\"] }} }} }} would allow it)",
                self.component, self.component
            )
        } else {
            format!(
                "component {:?} may not connect to {addr}: not in its `network` grant's hosts {:?}",
                self.component, self.written
            )
        };
        tracing::warn!(component = %self.component, address = %addr, "network connect refused by the grant");
        self.denials.push(why);
        false
    }
}

impl ConnectCheck {
    /// Whether the component may send an HTTP request to `host:port` (its URI's authority,
    /// IPv6 without brackets); a refusal is recorded, naming the grant.
    pub fn allows_authority(&self, host: &str, port: u16) -> bool {
        if self.rules.iter().any(|r| r.matches_authority(host, port)) {
            return true;
        }
        let shown = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let why = if self.written.is_empty() {
            format!(
                "component {:?} has no `network` grant: an HTTP request to {shown} is refused",
                self.component
            )
        } else {
            format!(
                "component {:?} may not send an HTTP request to {shown}: not in its `network` grant's hosts {:?}",
                self.component, self.written
            )
        };
        tracing::warn!(component = %self.component, authority = %shown, "HTTP request refused by the grant");
        self.denials.push(why);
        false
    }
}

/// `wasi:http`'s outgoing requests of one store, under the component's `network` grant.
pub struct HttpHooks {
    check: Arc<ConnectCheck>,
    max_response_bytes: Option<u64>,
}

impl HttpHooks {
    /// Requests checked by `check`, response bodies cut at `max_response_bytes`.
    pub fn new(check: Arc<ConnectCheck>, max_response_bytes: Option<u64>) -> Self {
        Self {
            check,
            max_response_bytes,
        }
    }
}

type HttpResult<T> = Result<T, wasmtime_wasi_http::Error>;
type IoFuture = Box<dyn std::future::Future<Output = HttpResult<()>> + Send>;

impl wasmtime_wasi_http::WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: IoFuture,
    ) -> Box<
        dyn std::future::Future<
                Output = HttpResult<(http::Response<wasmtime_wasi_http::WasiBody>, IoFuture)>,
            > + Send,
    > {
        drop(fut);
        let check = self.check.clone();
        let max = self.max_response_bytes;
        Box::new(async move {
            use http_body_util::BodyExt;
            let uri = request.uri();
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
            let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
            if host.is_empty() || !check.allows_authority(&host, port) {
                return Err(wasmtime_wasi_http::Error::HttpRequestDenied);
            }
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            let response = response.map(|body| match max {
                Some(max) => Capped {
                    inner: body.boxed_unsync(),
                    left: max,
                    max,
                }
                .boxed_unsync(),
                None => body.boxed_unsync(),
            });
            Ok((response, Box::new(io) as IoFuture))
        })
    }
}

/// A response body that ends with `HTTP-response-body-size` past `max` bytes.
struct Capped {
    inner: wasmtime_wasi_http::WasiBody,
    left: u64,
    max: u64,
}

impl http_body::Body for Capped {
    type Data = bytes::Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let frame = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let std::task::Poll::Ready(Some(Ok(f))) = &frame
            && let Some(data) = f.data_ref()
        {
            let n = data.len() as u64;
            if n > self.left {
                let max = self.max;
                self.left = 0;
                return std::task::Poll::Ready(Some(Err(
                    wasmtime_wasi_http::Error::HttpResponseBodySize(Some(max)),
                )));
            }
            self.left -= n;
        }
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn entries_allow_their_hosts_and_ports_only() {
        let grant = NetworkGrant {
            hosts: vec![
                "127.0.0.1:*".into(),
                "10.1.0.0/16:5432".into(),
                "[::1]:8000-8010".into(),
                "localhost:6379".into(),
            ],
            max_response_bytes: None,
        };
        let d = Denials::default();
        let c = ConnectCheck::new("probe", Some(&grant), d.clone());
        for ok in [
            "127.0.0.1:1",
            "127.0.0.1:65535",
            "10.1.200.3:5432",
            "[::1]:8005",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(c.allows(addr(ok), true).await, "{ok}");
        }
        assert!(d.take().is_empty());
        for no in [
            "127.0.0.2:80",
            "10.2.0.1:5432",
            "10.1.0.1:5433",
            "[::1]:8011",
            "8.8.8.8:53",
        ] {
            assert!(!c.allows(addr(no), true).await, "{no}");
        }
        let denials = d.take();
        assert_eq!(denials.len(), 5);
        assert!(
            denials[0].contains("may not connect to 127.0.0.2:80")
                && denials[0].contains("network"),
            "{denials:?}"
        );
        // A name allows what it resolves to, on its port.
        assert!(c.allows(addr("127.0.0.1:6379"), true).await);
        // Listening is never allowed, even where connecting is.
        assert!(!c.allows(addr("127.0.0.1:8080"), false).await);
        assert!(d.take()[0].contains("may not listen"));
        // No grant: every connect refused, saying how to allow it.
        let none = ConnectCheck::new("probe", None, d.clone());
        assert!(!none.allows(addr("127.0.0.1:6379"), true).await);
        assert!(d.take()[0].contains("has no `network` grant"));
    }

    #[test]
    fn http_authorities_match_by_their_text() {
        let grant = NetworkGrant {
            hosts: vec![
                "api.internal:443".into(),
                "10.0.0.0/8:80".into(),
                "[::1]:8080".into(),
            ],
            max_response_bytes: None,
        };
        let d = Denials::default();
        let c = ConnectCheck::new("probe", Some(&grant), d.clone());
        for (host, port) in [
            ("api.internal", 443),
            ("API.internal", 443),
            ("10.2.3.4", 80),
            ("::1", 8080),
        ] {
            assert!(c.allows_authority(host, port), "{host}:{port}");
        }
        assert!(d.take().is_empty());
        // A name is not resolved to match an IP entry (it could answer differently when
        // the request connects); another port or name is refused.
        for (host, port) in [
            ("localhost", 80),
            ("api.internal", 80),
            ("other.internal", 443),
            ("127.0.0.1", 8080),
        ] {
            assert!(!c.allows_authority(host, port), "{host}:{port}");
        }
        let denials = d.take();
        assert!(
            denials[0].contains("HTTP request to localhost:80"),
            "{denials:?}"
        );
        assert!(
            denials[3].contains("not in its `network` grant's hosts"),
            "{denials:?}"
        );
    }

    #[test]
    fn bad_entries_are_named() {
        for bad in [
            "127.0.0.1",
            "host:port",
            "10.0.0.0/33:1",
            "[::1:80",
            ":80",
            "a b:1",
            "1.2.3.4:9-1",
        ] {
            let g = NetworkGrant {
                hosts: vec!["*:*".into(), bad.into()],
                max_response_bytes: None,
            };
            let e = g.validate().unwrap_err();
            assert!(e.starts_with("grant.network.hosts[1]: "), "{bad}: {e}");
        }
        assert!(
            NetworkGrant {
                hosts: vec!["*:*".into(), "db-1.internal:5432".into()],
                max_response_bytes: None
            }
            .validate()
            .is_ok()
        );
    }
}
