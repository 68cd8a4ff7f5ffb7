//! Sources: which ones this hook fetches (`http://` and `https://`, go-getter's query options
//! taken out), and the download itself through `wasi:http`, where the host checks every
//! request against the hook's `network` grant.

use std::collections::BTreeMap;

/// A source URL this hook can fetch, split for `wasi:http`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `http` or `https`.
    pub scheme: String,
    /// `host[:port]`.
    pub authority: String,
    /// Path and query, starting with `/`.
    pub path_and_query: String,
}

impl Url {
    /// The last part of the path (no query): the file's name.
    pub fn file_name(&self) -> &str {
        let path = self.path_and_query.split('?').next().unwrap_or("");
        path.rsplit('/').next().unwrap_or("")
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme, self.authority, self.path_and_query
        )
    }
}

/// go-getter's options written in a URL's query: they are options, not part of the request.
const QUERY_OPTIONS: &[&str] = &["checksum", "archive", "filename"];

/// Parse `source`, moving go-getter's query options (`?checksum=…&archive=false`) into
/// `options` (a block's own option wins). Anything but http(s) is named as another hook's.
pub fn parse(source: &str, options: &mut BTreeMap<String, String>) -> Result<Url, String> {
    let forced = source
        .split_once("::")
        .filter(|(g, _)| !g.is_empty() && g.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map(|(g, _)| g);
    let scheme = source.split_once("://").map(|(s, _)| s);
    let what = match (forced, scheme) {
        (Some(g), _) => Some(g.to_string()),
        (None, Some("http" | "https")) => None,
        (None, Some(s)) => Some(s.to_string()),
        (None, None) if source.starts_with("github.com/") || source.starts_with("git@") => {
            Some("git".into())
        }
        (None, None) if source.starts_with("/") || source.starts_with("./") => {
            Some("a local path".into())
        }
        (None, None) => Some("a source without a scheme".into()),
    };
    if let Some(what) = what {
        return Err(format!(
            "source {source:?}: the built-in artifact hook fetches http:// and https:// only; {what} needs a third-party artifact hook"
        ));
    }
    let (scheme, rest) = source.split_once("://").expect("checked above");
    let rest = rest.split('#').next().unwrap_or("");
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "source {source:?}: expected http(s)://host[:port]/path (no user info)"
        ));
    }
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut kept = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if QUERY_OPTIONS.contains(&k) {
            options.entry(k.to_string()).or_insert_with(|| unescape(v));
        } else if !pair.is_empty() {
            kept.push(pair);
        }
    }
    let path = if path.is_empty() { "/" } else { path };
    let path_and_query = if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    };
    Ok(Url {
        scheme: scheme.to_ascii_lowercase(),
        authority: authority.to_string(),
        path_and_query,
    })
}

/// `%XX` escapes of a query value undone (a checksum or archive type has none, usually).
fn unescape(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(x) = std::str::from_utf8(&b[i + 1..i + 3])
                .map_err(|_| ())
                .and_then(|h| u8::from_str_radix(h, 16).map_err(|_| ()))
        {
            out.push(x);
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a redirect's `Location` leads from `base`.
pub fn redirect(base: &Url, location: &str) -> Result<Url, String> {
    if location.contains("://") {
        return parse(location, &mut BTreeMap::new());
    }
    if let Some(rest) = location.strip_prefix("//") {
        return parse(&format!("{}://{rest}", base.scheme), &mut BTreeMap::new());
    }
    let path = if location.starts_with('/') {
        location.to_string()
    } else {
        let dir = base
            .path_and_query
            .split('?')
            .next()
            .unwrap_or("/")
            .rsplit_once('/')
            .map_or("", |(d, _)| d);
        format!("{dir}/{location}")
    };
    Ok(Url {
        path_and_query: path,
        ..base.clone()
    })
}

/// What a download needs besides the URL.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub struct Request<'a> {
    /// Headers to send.
    pub headers: &'a BTreeMap<String, String>,
    /// Longest wait for the next bytes, ns.
    pub read_timeout_ns: u64,
    /// Most bytes accepted.
    pub max_size: u64,
}

/// Redirects followed at most, as go-getter's HTTP client.
#[cfg(target_arch = "wasm32")]
const MAX_REDIRECTS: usize = 10;

/// GET `url` (following redirects; headers go to the first authority only), handing each
/// chunk of the body to `sink`.
#[cfg(target_arch = "wasm32")]
pub fn get(
    url: &Url,
    req: &Request<'_>,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    use wasi::http::types::{Fields, Method, OutgoingRequest, RequestOptions, Scheme};
    use wasi::io::streams::StreamError;

    let mut at = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let fields = Fields::new();
        if at.authority == url.authority {
            for (k, v) in req.headers {
                fields
                    .append(k, v.as_bytes())
                    .map_err(|e| format!("header {k:?}: {e:?}"))?;
            }
        }
        let out = OutgoingRequest::new(fields);
        let scheme = if at.scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        };
        out.set_method(&Method::Get).map_err(|_| "method refused")?;
        out.set_scheme(Some(&scheme))
            .map_err(|_| "scheme refused")?;
        out.set_authority(Some(&at.authority))
            .map_err(|_| format!("authority {:?} refused", at.authority))?;
        out.set_path_with_query(Some(&at.path_and_query))
            .map_err(|_| format!("path {:?} refused", at.path_and_query))?;
        let opts = RequestOptions::new();
        let _ = opts.set_connect_timeout(Some(req.read_timeout_ns));
        let _ = opts.set_first_byte_timeout(Some(req.read_timeout_ns));
        let _ = opts.set_between_bytes_timeout(Some(req.read_timeout_ns));
        let pending = wasi::http::outgoing_handler::handle(out, Some(opts))
            .map_err(|e| format!("GET {at}: {}", http_error(&e)))?;
        pending.subscribe().block();
        let response = pending
            .get()
            .ok_or_else(|| format!("GET {at}: no response"))?
            .map_err(|_| format!("GET {at}: response taken twice"))?
            .map_err(|e| format!("GET {at}: {}", http_error(&e)))?;
        let status = response.status();
        if (300..400).contains(&status) {
            let location = response
                .headers()
                .get("location")
                .into_iter()
                .next()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .ok_or_else(|| format!("GET {at}: status {status} without a Location"))?;
            at = redirect(&at, &location)?;
            continue;
        }
        if !(200..300).contains(&status) {
            return Err(format!("GET {at}: status {status}"));
        }
        let body = response
            .consume()
            .map_err(|_| format!("GET {at}: no body"))?;
        let stream = body
            .stream()
            .map_err(|_| format!("GET {at}: no body stream"))?;
        let mut read = 0u64;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => {
                    read += chunk.len() as u64;
                    if read > req.max_size {
                        return Err(format!(
                            "GET {at}: larger than {} bytes (http_max_size)",
                            req.max_size
                        ));
                    }
                    sink(&chunk)?;
                }
                Err(StreamError::Closed) => return Ok(()),
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(format!(
                        "GET {at}: reading the body after {read} bytes: {}",
                        e.to_debug_string()
                    ));
                }
            }
        }
    }
    Err(format!("GET {url}: more than {MAX_REDIRECTS} redirects"))
}

/// A `wasi:http` error in words; a refusal by the host's grant says so.
#[cfg(target_arch = "wasm32")]
fn http_error(e: &wasi::http::types::ErrorCode) -> String {
    use wasi::http::types::ErrorCode;
    match e {
        ErrorCode::HttpRequestDenied => {
            "refused by the host: the hook's `network` grant does not allow this host (see the agent's log)".into()
        }
        ErrorCode::HttpResponseBodySize(Some(n)) => {
            format!("the response is larger than the grant's max_response_bytes ({n})")
        }
        ErrorCode::ConnectionRefused => "connection refused".into(),
        ErrorCode::ConnectionTimeout => "connection timed out".into(),
        ErrorCode::ConnectionReadTimeout => "timed out waiting for bytes (http_read_timeout)".into(),
        ErrorCode::DnsError(d) => format!("DNS: {:?}", d.rcode),
        ErrorCode::TlsCertificateError => "TLS certificate not trusted".into(),
        other => format!("{other:?}"),
    }
}

/// Natively (the unit tests), nothing is fetched.
#[cfg(not(target_arch = "wasm32"))]
pub fn get(
    url: &Url,
    _req: &Request<'_>,
    _sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    Err(format!("GET {url}: no network in native tests"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_sources_parse_with_their_query_options_taken_out() {
        let mut o = BTreeMap::new();
        o.insert("archive".to_string(), "zip".to_string());
        let u = parse(
            "https://example.com:8443/rel/app.tar.gz?checksum=sha256%3Aab&archive=false&v=2",
            &mut o,
        )
        .unwrap();
        assert_eq!(u.authority, "example.com:8443");
        assert_eq!(u.path_and_query, "/rel/app.tar.gz?v=2");
        assert_eq!(u.file_name(), "app.tar.gz");
        assert_eq!(o["checksum"], "sha256:ab");
        assert_eq!(o["archive"], "zip", "the block's own option wins");
        assert_eq!(u.to_string(), "https://example.com:8443/rel/app.tar.gz?v=2");
        let u = parse("http://127.0.0.1:9", &mut BTreeMap::new()).unwrap();
        assert_eq!(u.path_and_query, "/");
    }

    #[test]
    fn other_getters_are_named_as_a_third_party_hook_s() {
        for (src, says) in [
            ("s3::https://s3.amazonaws.com/b/k", "s3 needs"),
            ("git::https://github.com/x/y", "git needs"),
            ("gcs://bucket/x", "gcs needs"),
            ("github.com/hashicorp/nomad", "git needs"),
            ("/etc/passwd", "a local path needs"),
            ("file:///etc/passwd", "file needs"),
            ("https://user:pw@example.com/x", "no user info"),
        ] {
            let e = parse(src, &mut BTreeMap::new()).unwrap_err();
            assert!(e.contains(says), "{src}: {e}");
        }
    }

    #[test]
    fn redirects_resolve_against_the_request() {
        let base = parse("https://a.example/d/x.tgz?q=1", &mut BTreeMap::new()).unwrap();
        assert_eq!(
            redirect(&base, "/y.tgz").unwrap().to_string(),
            "https://a.example/y.tgz"
        );
        assert_eq!(
            redirect(&base, "z.tgz").unwrap().to_string(),
            "https://a.example/d/z.tgz"
        );
        assert_eq!(
            redirect(&base, "//cdn.example/f").unwrap().to_string(),
            "https://cdn.example/f"
        );
        assert!(redirect(&base, "ftp://x/y").is_err());
    }
}
