//! Components in OCI registries, in the CNCF wasm artifact layout (what `wkg oci push`
//! writes): an image manifest whose config is `application/vnd.wasm.config.v0+json` and
//! whose one layer is the component, `application/wasm`. Pulled through `oci-client`; the
//! manifest digest is the sha256 of the manifest's bytes as served, checked against the
//! reference's digest and the plugin block's pin; with a key, the cosign signature is
//! checked before the layer is fetched; the layer's bytes are counted against the size
//! limit as they arrive and hashed against the manifest's digest of them.

use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::{
    Evidence, PullError, Pulled, RemoteSpec, check_pin, check_size, cosign, creds, read_key,
    signer_name,
};

/// The config media type of a wasm artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of its component layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// An OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// The largest manifest read.
const MAX_MANIFEST: usize = 4 << 20;
/// The largest signature payload read.
const MAX_PAYLOAD: u64 = 1 << 20;

/// A client for `reference`'s registry: plain HTTP on the loopback or when `insecure`,
/// else HTTPS with the web's roots and `ca_file`'s certificates.
pub fn client(
    reference: &Reference,
    insecure: bool,
    ca_file: Option<&std::path::Path>,
) -> Result<Client, PullError> {
    let plain = insecure || super::is_loopback_host(reference.resolve_registry());
    let mut extra_root_certificates = Vec::new();
    if let Some(ca) = ca_file {
        for data in super::read_ca(ca)? {
            extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
    }
    Ok(Client::new(ClientConfig {
        protocol: if plain {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        extra_root_certificates,
        connect_timeout: Some(std::time::Duration::from_secs(10)),
        read_timeout: Some(std::time::Duration::from_secs(60)),
        ..Default::default()
    }))
}

/// Parse what follows `oci://`.
pub fn reference(s: &str) -> Result<Reference, PullError> {
    s.parse()
        .map_err(|e| PullError::Other(format!("{s:?} is not an OCI reference: {e}")))
}

/// A registry's error, as a pull error.
fn map_err(e: OciDistributionError) -> PullError {
    match e {
        OciDistributionError::RequestError(r) => {
            if r.is_connect() || r.is_timeout() || r.is_request() || r.is_body() {
                PullError::Unreachable(r.to_string())
            } else {
                PullError::Other(r.to_string())
            }
        }
        OciDistributionError::RegistryError { envelope, url } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) {
                PullError::NotFound(url)
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                PullError::Unauthorized(url)
            } else {
                PullError::Other(format!("{url}: {envelope}"))
            }
        }
        OciDistributionError::ServerError { code, url, message } => match code {
            404 => PullError::NotFound(url),
            401 | 403 => PullError::Unauthorized(url),
            c if c >= 500 => PullError::Unreachable(format!("{url}: {c} {message}")),
            c => PullError::Other(format!("{url}: {c} {message}")),
        },
        OciDistributionError::UnauthorizedError { url } => PullError::Unauthorized(url),
        OciDistributionError::AuthenticationFailure(m) => PullError::Unauthorized(m),
        OciDistributionError::ImageManifestNotFoundError(m) => PullError::NotFound(m),
        OciDistributionError::DigestError(d) => PullError::Tampered(d.to_string()),
        OciDistributionError::IoError(e) => PullError::Unreachable(e.to_string()),
        other => PullError::Other(other.to_string()),
    }
}

/// Bytes gathered up to a limit.
struct Capped {
    buf: Vec<u8>,
    limit: u64,
    over: bool,
}

impl Capped {
    fn new(limit: u64) -> Self {
        Self {
            buf: Vec::new(),
            limit,
            over: false,
        }
    }
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.buf.len() as u64 + data.len() as u64 > self.limit {
            self.over = true;
            return Poll::Ready(Err(std::io::Error::other("over the size limit")));
        }
        self.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Fetch one blob of `reference` into memory, at most `limit` bytes (oci-client checks its
/// digest as it arrives).
async fn blob(
    client: &Client,
    reference: &Reference,
    desc: &OciDescriptor,
    limit: u64,
) -> Result<Vec<u8>, PullError> {
    if desc.size < 0 || desc.size as u64 > limit {
        return Err(PullError::TooLarge {
            size: desc.size.max(0) as u64,
            limit,
        });
    }
    let mut out = Capped::new(limit);
    match client.pull_blob(reference, desc, &mut out).await {
        Ok(()) => {}
        Err(_) if out.over => {
            return Err(PullError::TooLarge {
                size: out.buf.len() as u64,
                limit,
            });
        }
        Err(e) => return Err(map_err(e)),
    }
    // Checked again here, whatever the library did.
    let actual = format!("sha256:{}", crate::runtime::cache::sha256_hex(&out.buf));
    if !actual.eq_ignore_ascii_case(&desc.digest) {
        return Err(PullError::Tampered(format!(
            "blob {} holds bytes whose digest is {actual}",
            desc.digest
        )));
    }
    Ok(out.buf)
}

/// The component layer of a manifest, once its layout is the wasm artifact's.
pub fn component_layer(raw: &[u8], spec_limit: u64) -> Result<OciDescriptor, PullError> {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "mediaType", default)]
        media_type: Option<String>,
    }
    let probe: Probe = serde_json::from_slice(raw)
        .map_err(|e| PullError::MediaType(format!("the manifest is not JSON: {e}")))?;
    if let Some(t) = probe.media_type.as_deref()
        && (t == OCI_INDEX || t == DOCKER_LIST)
    {
        return Err(PullError::MediaType(format!(
            "it is an image index ({t}), not a component: name one manifest of it by digest"
        )));
    }
    let m: OciImageManifest = serde_json::from_slice(raw)
        .map_err(|e| PullError::MediaType(format!("the manifest does not parse: {e}")))?;
    if m.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(PullError::MediaType(format!(
            "its config is {:?}, not a wasm artifact's {WASM_CONFIG_MEDIA_TYPE:?}",
            m.config.media_type
        )));
    }
    let [layer] = m.layers.as_slice() else {
        return Err(PullError::MediaType(format!(
            "it has {} layers; a component artifact has one {WASM_LAYER_MEDIA_TYPE:?} layer",
            m.layers.len()
        )));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(PullError::MediaType(format!(
            "its layer is {:?}, not {WASM_LAYER_MEDIA_TYPE:?}",
            layer.media_type
        )));
    }
    check_size_i64(layer.size, spec_limit)?;
    Ok(layer.clone())
}

fn check_size_i64(size: i64, limit: u64) -> Result<(), PullError> {
    if size < 0 || size as u64 > limit {
        return Err(PullError::TooLarge {
            size: size.max(0) as u64,
            limit,
        });
    }
    Ok(())
}

/// A manifest resolved and checked (digest, pin, layout), before its signature and layer
/// are fetched.
pub struct Resolved {
    client: Client,
    auth: RegistryAuth,
    reference: Reference,
    raw: Vec<u8>,
    layer: OciDescriptor,
    /// The manifest's digest, `sha256:<hex>`.
    pub digest: String,
}

/// Resolve `spec`'s reference to its manifest and check it: its digest against the
/// reference's and the pin, its layout, the layer's declared size.
pub async fn resolve(spec: &RemoteSpec) -> Result<Resolved, PullError> {
    let super::Source::Oci(text) = &spec.source else {
        return Err(PullError::Other("not an oci:// source".into()));
    };
    let reference = reference(text)?;
    let client = client(&reference, spec.insecure, spec.ca_file.as_deref())?;
    let auth = creds::auth_for(reference.resolve_registry());
    let (raw, _) = client
        .pull_manifest_raw(
            &reference,
            &auth,
            &[OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST],
        )
        .await
        .map_err(map_err)?;
    if raw.len() > MAX_MANIFEST {
        return Err(PullError::TooLarge {
            size: raw.len() as u64,
            limit: MAX_MANIFEST as u64,
        });
    }
    let digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&raw));
    if let Some(d) = reference.digest()
        && !d.eq_ignore_ascii_case(&digest)
    {
        return Err(PullError::Tampered(format!(
            "the manifest asked for as {d} has the digest {digest}"
        )));
    }
    check_pin(spec, &digest)?;
    let layer = component_layer(&raw, spec.max_size)?;
    Ok(Resolved {
        client,
        auth,
        reference,
        raw,
        layer,
        digest,
    })
}

/// Fetch what `r` resolved to: with a key, its signature first, then the layer.
pub async fn fetch(spec: &RemoteSpec, r: Resolved) -> Result<Pulled, PullError> {
    let Resolved {
        client,
        auth,
        reference,
        raw,
        layer,
        digest,
    } = r;
    let mut evidence = Evidence {
        manifest: base64::engine::general_purpose::STANDARD.encode(&raw),
        ..Default::default()
    };
    let signer = match &spec.key {
        None => None,
        Some(path) => {
            let key = read_key(path)?;
            let (payload, signature) = signature(&client, &auth, &reference, &digest, &key).await?;
            evidence.payload = base64::engine::general_purpose::STANDARD.encode(payload);
            evidence.signature = signature;
            Some(signer_name(path, &key))
        }
    };
    let bytes = blob(&client, &reference, &layer, spec.max_size).await?;
    check_size(spec, bytes.len() as u64)?;
    Ok(Pulled {
        bytes,
        reference: format!(
            "oci://{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ),
        digest,
        signer,
        from_cache: false,
        evidence,
    })
}

/// The signature of `digest` in `reference`'s repository that verifies under `key`: its
/// payload and base64 signature.
async fn signature(
    client: &Client,
    auth: &RegistryAuth,
    reference: &Reference,
    digest: &str,
    key: &cosign::PublicKey,
) -> Result<(Vec<u8>, String), PullError> {
    let sig_ref = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        cosign::signature_tag(digest),
    );
    let raw = match client
        .pull_manifest_raw(&sig_ref, auth, &[OCI_MANIFEST, DOCKER_MANIFEST])
        .await
        .map_err(map_err)
    {
        Err(PullError::NotFound(_)) => {
            return Err(PullError::Unsigned(format!(
                "no cosign signature of {digest} (the tag {} does not exist)",
                sig_ref.whole()
            )));
        }
        r => r?.0,
    };
    if raw.len() > MAX_MANIFEST {
        return Err(PullError::TooLarge {
            size: raw.len() as u64,
            limit: MAX_MANIFEST as u64,
        });
    }
    let m: OciImageManifest = serde_json::from_slice(&raw).map_err(|e| {
        PullError::BadSignature(format!("the signature manifest does not parse: {e}"))
    })?;
    let mut reasons = Vec::new();
    for layer in m
        .layers
        .iter()
        .filter(|l| l.media_type == cosign::SIGNATURE_MEDIA_TYPE)
    {
        let short = layer.digest.get(..19).unwrap_or(&layer.digest);
        let payload = match blob(client, &sig_ref, layer, MAX_PAYLOAD).await {
            Ok(p) => p,
            Err(e) => {
                reasons.push(format!("layer {short}: {e}"));
                continue;
            }
        };
        let b64 = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(cosign::SIGNATURE_ANNOTATION))
            .map(String::as_str);
        match cosign::verify_payload(key, digest, &payload, b64) {
            Ok(_) => return Ok((payload, b64.unwrap_or_default().to_string())),
            Err(e) => reasons.push(format!("layer {short}: {e}")),
        }
    }
    if reasons.is_empty() {
        return Err(PullError::Unsigned(format!(
            "{} holds no signature layer",
            sig_ref.whole()
        )));
    }
    Err(PullError::BadSignature(format!(
        "{} ({})",
        sig_ref.whole(),
        reasons.join("; ")
    )))
}

/// Push `bytes` as a component artifact to `target` (what follows `oci://`); its manifest
/// digest.
pub async fn push(
    target: &str,
    bytes: &[u8],
    insecure: bool,
    ca_file: Option<&std::path::Path>,
) -> Result<String, PullError> {
    let reference = reference(target)?;
    let client = client(&reference, insecure, ca_file)?;
    client
        .store_auth_if_needed(
            reference.resolve_registry(),
            &creds::auth_for(reference.resolve_registry()),
        )
        .await;
    let layer_digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(bytes));
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    }))
    .unwrap_or_default();
    let config_digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&config));
    client
        .push_blob(&reference, bytes, &layer_digest)
        .await
        .map_err(map_err)?;
    client
        .push_blob(&reference, &config, &config_digest)
        .await
        .map_err(map_err)?;
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": { "mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len() },
        "layers": [{ "mediaType": WASM_LAYER_MEDIA_TYPE, "digest": layer_digest, "size": bytes.len() }],
    }))
    .unwrap_or_default();
    let digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&manifest));
    client
        .push_manifest_raw(
            &reference,
            manifest,
            OCI_MANIFEST.parse().expect("a header value"),
        )
        .await
        .map_err(map_err)?;
    Ok(digest)
}

/// Sign the manifest `target` names with `key`, as `cosign sign --key` does: the payload as
/// a layer of the `sha256-<hex>.sig` manifest (kept with the signatures already there).
/// The digest signed and the signature's tag.
pub async fn sign(
    target: &str,
    key: &cosign::SigningKey,
    insecure: bool,
    ca_file: Option<&std::path::Path>,
) -> Result<(String, String), PullError> {
    let reference = reference(target)?;
    let client = client(&reference, insecure, ca_file)?;
    let auth = creds::auth_for(reference.resolve_registry());
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    let (raw, _) = client
        .pull_manifest_raw(&reference, &auth, &[OCI_MANIFEST, DOCKER_MANIFEST])
        .await
        .map_err(map_err)?;
    let digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&raw));
    let repository = format!("{}/{}", reference.registry(), reference.repository());
    let payload = cosign::payload(&repository, &digest);
    let signature = base64::engine::general_purpose::STANDARD.encode(
        key.sign(&payload)
            .map_err(|e| PullError::Other(e.to_string()))?,
    );
    let sig_ref = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        cosign::signature_tag(&digest),
    );
    // Signatures already there stay (cosign appends too).
    let mut layers: Vec<serde_json::Value> = match client
        .pull_manifest_raw(&sig_ref, &auth, &[OCI_MANIFEST])
        .await
        .map_err(map_err)
    {
        Ok((raw, _)) => serde_json::from_slice::<serde_json::Value>(&raw)
            .ok()
            .and_then(|m| m.get("layers").and_then(|l| l.as_array()).cloned())
            .unwrap_or_default(),
        Err(PullError::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    let payload_digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&payload));
    client
        .push_blob(&sig_ref, &payload, &payload_digest)
        .await
        .map_err(map_err)?;
    layers.push(serde_json::json!({
        "mediaType": cosign::SIGNATURE_MEDIA_TYPE,
        "digest": payload_digest,
        "size": payload.len(),
        "annotations": { cosign::SIGNATURE_ANNOTATION: signature },
    }));
    let diff_ids: Vec<serde_json::Value> = layers
        .iter()
        .filter_map(|l| l.get("digest").cloned())
        .collect();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "", "os": "", "config": {},
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    }))
    .unwrap_or_default();
    let config_digest = format!("sha256:{}", crate::runtime::cache::sha256_hex(&config));
    client
        .push_blob(&sig_ref, &config, &config_digest)
        .await
        .map_err(map_err)?;
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len() },
        "layers": layers,
    }))
    .unwrap_or_default();
    client
        .push_manifest_raw(
            &sig_ref,
            manifest,
            OCI_MANIFEST.parse().expect("a header value"),
        )
        .await
        .map_err(map_err)?;
    Ok((digest, sig_ref.whole()))
}
