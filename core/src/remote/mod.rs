//! Components from elsewhere than a watched folder: an OCI registry (`oci://`), an https
//! address, or a `file://` path, named by a plugin block's `source`, pinned by its `sha256`
//! and verified by its `verify` key before a byte of them is compiled.
//!
//! - [`oci`]: the pull through `oci-client` — the manifest (digest checked against the pin
//!   and the reference), the wasm artifact layout (a `application/vnd.wasm.config.v0+json`
//!   config and one `application/wasm` layer, under the size limit), the cosign signature
//!   (tag `sha256-<hex>.sig`) checked before the layer is fetched; and the push the CLI's
//!   `component push`/`sign` make.
//! - [`cosign`]: keys, payloads and signatures.
//! - [`cache`]: what was pulled and verified, by digest, next to the compile cache, written
//!   so that a `kill -9` at any point leaves it whole, and read again (and verified again)
//!   when the source cannot be reached.
//! - [`creds`]: the docker credentials file.
//!
//! The swapper ([`crate::swap`]) decides when to pull and installs what a pull hands it
//! through the same make-before-break path as a file.

pub mod cache;
pub mod cosign;
pub mod creds;
pub mod oci;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A component's `max_size` when the plugin block sets none.
pub const DEFAULT_MAX_SIZE: u64 = 128 << 20;

/// Where a component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `oci://REGISTRY/REPO:TAG` or `oci://REGISTRY/REPO@sha256:…` (what follows `oci://`).
    Oci(String),
    /// An `https://` (or loopback `http://`) address of the `.wasm` file.
    Https(String),
    /// A `file:///…` path.
    File(PathBuf),
}

impl Source {
    /// Read a plugin block's `source`; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(rest) = s.strip_prefix("oci://") {
            let r: oci_client::Reference = rest
                .parse()
                .map_err(|e| format!("{s:?} is not an OCI reference: {e}"))?;
            if !rest.starts_with(r.registry()) {
                return Err(format!(
                    "{s:?} names no registry: write oci://REGISTRY/REPOSITORY:TAG"
                ));
            }
            if let Some(d) = r.digest()
                && !d.starts_with("sha256:")
            {
                return Err(format!("{s:?}: only sha256 digests are pinned"));
            }
            return Ok(Source::Oci(rest.to_string()));
        }
        if s.starts_with("https://") {
            return Ok(Source::Https(s.to_string()));
        }
        if let Some(rest) = s.strip_prefix("http://") {
            let host = rest.split(['/', '?']).next().unwrap_or_default();
            if is_loopback_host(host) {
                return Ok(Source::Https(s.to_string()));
            }
            return Err(format!(
                "{s:?}: plain http is taken only from a loopback address; use https://"
            ));
        }
        if let Some(rest) = s.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(format!(
                    "{s:?}: a file:// source takes an absolute path (file:///…)"
                ));
            }
            return Ok(Source::File(PathBuf::from(rest)));
        }
        Err(format!(
            "{s:?} is not a source: write oci://REGISTRY/REPO:TAG, oci://REGISTRY/REPO@sha256:…, https://…/x.wasm or file:///…/x.wasm"
        ))
    }

    /// Whether the source fixes its bytes (a digest in the reference, or a file).
    pub fn digest(&self) -> Option<String> {
        match self {
            Source::Oci(r) => r.split_once('@').map(|(_, d)| d.to_ascii_lowercase()),
            _ => None,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Oci(r) => write!(f, "oci://{r}"),
            Source::Https(u) => write!(f, "{u}"),
            Source::File(p) => write!(f, "file://{}", p.display()),
        }
    }
}

/// Whether `host` (with or without a port) is on the loopback: `localhost`, 127.0.0.0/8,
/// `::1`. A registry there is reached over plain HTTP.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or_default()
    } else {
        host
    };
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// How a new version whose declared grants exceed the running version's is let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoApprove {
    /// Always held for `agent component approve`.
    Never,
    /// Let in when it declares no more than the running version (the default).
    #[default]
    SameGrants,
    /// Always let in (the operator's grants still bound it).
    Always,
}

impl AutoApprove {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "never" => Some(Self::Never),
            "same-grants" => Some(Self::SameGrants),
            "always" => Some(Self::Always),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::SameGrants => "same-grants",
            Self::Always => "always",
        }
    }
}

/// A plugin block's remote source with what it is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    /// The plugin block's name: the name the component must report.
    pub name: String,
    pub source: Source,
    /// The manifest digest (OCI) or the bytes' sha256 (https, file), `sha256:<hex>`.
    pub pin: Option<String>,
    /// The public key signatures must verify under.
    pub key: Option<PathBuf>,
    /// Plain HTTP to a registry that is not on the loopback.
    pub insecure: bool,
    /// More CA certificates (PEM) to trust for the registry or the address.
    pub ca_file: Option<PathBuf>,
    /// The component's size limit, bytes.
    pub max_size: u64,
    /// How often a tag is resolved again; `None`: only at start, reload and `pull`.
    pub poll_interval: Option<Duration>,
    pub auto_approve: AutoApprove,
}

impl RemoteSpec {
    /// `sha256:<hex>` from `sha256:<hex>` or bare hex (the plugin block's `sha256`).
    pub fn normalize_pin(s: &str) -> Result<String, String> {
        let hex = s.strip_prefix("sha256:").unwrap_or(s).to_ascii_lowercase();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "{s:?} is not a sha256 digest (64 hex digits, with or without sha256:)"
            ));
        }
        Ok(format!("sha256:{hex}"))
    }

    /// The digest the source must resolve to, if anything fixes it (the pin or the
    /// reference's digest; a config error when they disagree is the config's to say).
    pub fn fixed_digest(&self) -> Option<String> {
        self.pin.clone().or_else(|| self.source.digest())
    }
}

/// What a pull verified and brought.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// The source as resolved: `oci://REGISTRY/REPO@sha256:…`, or the address.
    pub reference: String,
    /// The manifest digest (OCI) or the bytes' digest (https, file), `sha256:<hex>`.
    pub digest: String,
    /// Who signed it, when a key was asked for: `key <file> (sha256:<fingerprint>)`.
    pub signer: Option<String>,
    /// Read from the cache (the source could not be reached, or its digest is fixed).
    pub from_cache: bool,
    /// What verifies it again offline (kept in the cache with it).
    pub evidence: Evidence,
}

/// Why a pull brought nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// The registry or address could not be reached (the cache may stand in).
    #[error("cannot reach it: {0}")]
    Unreachable(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("the registry refused the credentials: {0}")]
    Unauthorized(String),
    #[error("its digest is {actual}, but the plugin block pins {pinned}")]
    DigestMismatch { pinned: String, actual: String },
    #[error("{0}")]
    MediaType(String),
    #[error("it is {size} bytes, over the limit of {limit} (the plugin block's max_size)")]
    TooLarge { size: u64, limit: u64 },
    #[error("its content does not match its digest (tampered with, or corrupted): {0}")]
    Tampered(String),
    #[error("no signature: {0}")]
    Unsigned(String),
    #[error("the signature does not verify: {0}")]
    BadSignature(String),
    #[error("the key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("{0}")]
    Other(String),
}

impl PullError {
    /// Whether the cache may stand in: the source could not be asked, as opposed to
    /// answering something that was refused.
    pub fn unreachable(&self) -> bool {
        matches!(self, PullError::Unreachable(_))
    }
}

/// Read the public key `path`.
pub fn read_key(path: &Path) -> Result<cosign::PublicKey, PullError> {
    let key_err = |reason: String| PullError::Key {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| key_err(e.to_string()))?;
    cosign::PublicKey::from_pem(&text).map_err(|e| key_err(e.to_string()))
}

/// How a signer is named: the key's file and fingerprint.
pub fn signer_name(path: &Path, key: &cosign::PublicKey) -> String {
    format!("key {} ({})", path.display(), key.fingerprint())
}

/// Pull `spec`'s component and verify it; on `Unreachable`, and when its digest is fixed
/// and already cached, read it from `cache` (verified again). What is pulled is not cached
/// here: the swapper keeps a version once it runs it ([`cache::Cache::store`]), so the cache
/// always holds the last version let in, never one held for approval.
pub async fn fetch(spec: &RemoteSpec, cache: &cache::Cache) -> Result<Pulled, PullError> {
    // A digest the config fixes and the cache holds: no network at all.
    if spec.fixed_digest().is_some()
        && let Some(p) = cache.load(spec)
    {
        return Ok(p);
    }
    let pulled = match &spec.source {
        // A manifest that is the one cached (a tag polled again, unchanged): the cached
        // version, verified again offline — one request, not four.
        Source::Oci(_) => match oci::resolve(spec).await {
            Ok(r) => match cache.load(spec).filter(|c| c.digest == r.digest) {
                Some(cached) => Ok(cached),
                None => oci::fetch(spec, r).await,
            },
            Err(e) => Err(e),
        },
        Source::Https(url) => https(spec, url).await,
        Source::File(path) => file(spec, path).await,
    };
    match pulled {
        Ok(p) => Ok(p),
        Err(e) if e.unreachable() => match cache.load(spec) {
            Some(p) => {
                tracing::warn!(component = %spec.name, source = %spec.source, error = %e, digest = %p.digest, "the source cannot be reached: running the cached version");
                Ok(p)
            }
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// What the cache keeps of a pull to verify it again offline.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Evidence {
    /// The manifest's bytes (OCI), base64.
    #[serde(default)]
    pub manifest: String,
    /// The signature payload and its base64 signature, when a key verified it.
    #[serde(default)]
    pub payload: String,
    #[serde(default)]
    pub signature: String,
}

fn check_size(spec: &RemoteSpec, size: u64) -> Result<(), PullError> {
    if size > spec.max_size {
        return Err(PullError::TooLarge {
            size,
            limit: spec.max_size,
        });
    }
    Ok(())
}

fn check_pin(spec: &RemoteSpec, actual: &str) -> Result<(), PullError> {
    match &spec.pin {
        Some(p) if !p.eq_ignore_ascii_case(actual) => Err(PullError::DigestMismatch {
            pinned: p.clone(),
            actual: actual.to_string(),
        }),
        _ => Ok(()),
    }
}

/// An https (or loopback http) source: the file, then, with a key, `<address>.sig` (what
/// `cosign sign-blob` writes) verified over its bytes.
async fn https(spec: &RemoteSpec, url: &str) -> Result<Pulled, PullError> {
    let client = http_client(spec)?;
    let get = |u: String| {
        let client = client.clone();
        async move {
            let res = client
                .get(&u)
                .send()
                .await
                .map_err(|e| PullError::Unreachable(format!("{u}: {e}")))?;
            match res.status() {
                s if s.is_success() => Ok(res),
                reqwest::StatusCode::NOT_FOUND => Err(PullError::NotFound(u)),
                reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN => {
                    Err(PullError::Unauthorized(format!("{u}: {}", res.status())))
                }
                s if s.is_server_error() => Err(PullError::Unreachable(format!("{u}: {s}"))),
                s => Err(PullError::Other(format!("{u}: {s}"))),
            }
        }
    };
    let mut res = get(url.to_string()).await?;
    if let Some(len) = res.content_length() {
        check_size(spec, len)?;
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| PullError::Unreachable(format!("{url}: {e}")))?
    {
        bytes.extend_from_slice(&chunk);
        check_size(spec, bytes.len() as u64)?;
    }
    let sig_url = format!("{url}.sig");
    signed_blob(spec, bytes, url.to_string(), &sig_url.clone(), async || {
        let sig = match get(sig_url.clone()).await {
            Err(PullError::NotFound(_)) => {
                return Err(PullError::Unsigned(format!("{sig_url} does not exist")));
            }
            r => r?,
        };
        sig.text()
            .await
            .map_err(|e| PullError::Unreachable(format!("{sig_url}: {e}")))
    })
    .await
}

/// A `file://` source: the file, and with a key `<file>.sig` beside it.
async fn file(spec: &RemoteSpec, path: &Path) -> Result<Pulled, PullError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => PullError::NotFound(path.display().to_string()),
        _ => PullError::Other(format!("{}: {e}", path.display())),
    })?;
    check_size(spec, meta.len())?;
    let bytes =
        std::fs::read(path).map_err(|e| PullError::Other(format!("{}: {e}", path.display())))?;
    check_size(spec, bytes.len() as u64)?;
    let sig_path = PathBuf::from(format!("{}.sig", path.display()));
    let place = sig_path.display().to_string();
    signed_blob(
        spec,
        bytes,
        format!("file://{}", path.display()),
        &place,
        async || {
            std::fs::read_to_string(&sig_path)
                .map_err(|e| PullError::Unsigned(format!("{}: {e}", sig_path.display())))
        },
    )
    .await
}

/// What an https or file source brought: its digest checked against the pin and, with a
/// key, its `cosign sign-blob` signature (read by `signature`, found at `place`) verified
/// over its bytes.
async fn signed_blob(
    spec: &RemoteSpec,
    bytes: Vec<u8>,
    reference: String,
    place: &str,
    signature: impl AsyncFnOnce() -> Result<String, PullError>,
) -> Result<Pulled, PullError> {
    let digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&bytes));
    check_pin(spec, &digest)?;
    let mut evidence = Evidence::default();
    let signer = match &spec.key {
        None => None,
        Some(path) => {
            let key = read_key(path)?;
            let text = signature().await?;
            cosign::verify_blob(&key, &bytes, &text)
                .map_err(|e| PullError::BadSignature(format!("{place}: {e}")))?;
            evidence.signature = text.trim().to_string();
            Some(signer_name(path, &key))
        }
    };
    Ok(Pulled {
        bytes,
        reference,
        digest,
        signer,
        from_cache: false,
        evidence,
    })
}

/// An HTTP client for `spec`: its CA file added to the web's roots, bounded waits.
fn http_client(spec: &RemoteSpec) -> Result<reqwest::Client, PullError> {
    let mut b = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(300))
        .redirect(reqwest::redirect::Policy::limited(10));
    if let Some(ca) = &spec.ca_file {
        for cert in read_ca(ca)? {
            let c = reqwest::Certificate::from_pem(&cert)
                .map_err(|e| PullError::Other(format!("ca_file {}: {e}", ca.display())))?;
            b = b.add_root_certificate(c);
        }
    }
    b.build().map_err(|e| PullError::Other(e.to_string()))
}

/// The PEM certificates of `path`, each on its own.
pub fn read_ca(path: &Path) -> Result<Vec<Vec<u8>>, PullError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| PullError::Other(format!("ca_file {}: {e}", path.display())))?;
    let mut out = Vec::new();
    let end = "-----END CERTIFICATE-----";
    let mut rest = text.as_str();
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let Some(stop) = rest[start..].find(end) else {
            break;
        };
        out.push(rest.as_bytes()[start..start + stop + end.len()].to_vec());
        rest = &rest[start + stop + end.len()..];
    }
    if out.is_empty() {
        return Err(PullError::Other(format!(
            "ca_file {}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_say_what_is_wrong() {
        assert_eq!(
            Source::parse("oci://127.0.0.1:5000/acme/driver:1.0"),
            Ok(Source::Oci("127.0.0.1:5000/acme/driver:1.0".into()))
        );
        let pinned = format!("oci://ghcr.io/acme/driver@sha256:{}", "a".repeat(64));
        assert_eq!(
            Source::parse(&pinned).unwrap().digest(),
            Some(format!("sha256:{}", "a".repeat(64)))
        );
        assert!(
            Source::parse("oci://driver:1")
                .unwrap_err()
                .contains("names no registry")
        );
        assert!(
            Source::parse("http://example.com/x.wasm")
                .unwrap_err()
                .contains("loopback")
        );
        assert!(Source::parse("http://127.0.0.1:8080/x.wasm").is_ok());
        assert!(
            Source::parse("file://x.wasm")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(
            Source::parse("s3://bucket/x")
                .unwrap_err()
                .contains("is not a source")
        );
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in [
            "127.0.0.1:5000",
            "localhost",
            "LOCALHOST:80",
            "[::1]:5000",
            "127.3.2.1",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "ghcr.io",
            "10.0.0.1:5000",
            "localhost.example.com",
            "[::2]:1",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn pins_take_either_spelling() {
        let hex = "AB".repeat(32);
        assert_eq!(
            RemoteSpec::normalize_pin(&hex).unwrap(),
            format!("sha256:{}", hex.to_ascii_lowercase())
        );
        assert_eq!(
            RemoteSpec::normalize_pin(&format!("sha256:{hex}")).unwrap(),
            format!("sha256:{}", hex.to_ascii_lowercase())
        );
        assert!(RemoteSpec::normalize_pin("sha256:abc").is_err());
    }
}
