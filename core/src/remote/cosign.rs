//! Cosign's keyed signatures, as `cosign sign --key` writes them and `cosign verify --key`
//! reads them: a signature of the manifest `sha256:<hex>` is an OCI manifest tagged
//! `sha256-<hex>.sig` in the same repository, whose layers (media type
//! `application/vnd.dev.cosign.simplesigning.v1+json`) each hold a "simple signing" payload
//! naming the digest, with the base64 of an ECDSA P-256 / SHA-256 signature (ASN.1 DER) of
//! those exact payload bytes in the layer's `dev.cosignproject.cosign/signature`
//! annotation. `cosign sign-blob` signs a file's bytes the same way, the base64 signature in
//! a file of its own (`x.wasm.sig`).
//!
//! Keys are PEM: a public key as SubjectPublicKeyInfo (`PUBLIC KEY`, what `cosign.pub`
//! holds), a signing key as unencrypted PKCS#8 (`PRIVATE KEY`, what `openssl genpkey` and
//! `agent component keygen` write; cosign's own encrypted key files are not read — `cosign
//! import-key-pair` takes ours).

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use serde::{Deserialize, Serialize};

/// The media type of a signature layer.
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The DER prefix of a SubjectPublicKeyInfo for an uncompressed P-256 point:
/// `SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }`.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A key that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("no PEM block {0:?} in it")]
    NoPem(&'static str),
    #[error("its PEM body is not base64")]
    Base64,
    #[error(
        "it is not an ECDSA P-256 public key (SubjectPublicKeyInfo): only keyed cosign signatures with P-256 are verified"
    )]
    NotP256,
    #[error(
        "it is not an unencrypted PKCS#8 ECDSA P-256 key ({0}); make one with `agent component keygen` or `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`"
    )]
    BadPrivate(String),
}

/// The body of the first PEM block labelled `label` in `text`.
fn pem_body(text: &str, label: &'static str) -> Result<Vec<u8>, KeyError> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin).ok_or(KeyError::NoPem(label))? + begin.len();
    let stop = text[start..].find(&end).ok_or(KeyError::NoPem(label))? + start;
    let b64: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| KeyError::Base64)
}

/// `der` as a PEM block labelled `label`, 64 characters a line.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// A P-256 public key that signatures are checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point (65 bytes).
    point: Vec<u8>,
}

impl PublicKey {
    /// Read a `PUBLIC KEY` PEM block (`cosign.pub`).
    pub fn from_pem(text: &str) -> Result<Self, KeyError> {
        let der = pem_body(text, "PUBLIC KEY")?;
        if der.len() != P256_SPKI_PREFIX.len() + 65 || der[..26] != P256_SPKI_PREFIX {
            return Err(KeyError::NotP256);
        }
        Ok(Self {
            point: der[26..].to_vec(),
        })
    }

    /// The key as a `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        pem("PUBLIC KEY", &self.spki())
    }

    fn spki(&self) -> Vec<u8> {
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(&self.point);
        der
    }

    /// `sha256:` and the hex of the SubjectPublicKeyInfo's sha256: how the view names a
    /// signer (`openssl pkey -pubin -outform DER | sha256sum` prints the same).
    pub fn fingerprint(&self) -> String {
        format!("sha256:{}", crate::runtime::cache::sha256_hex(&self.spki()))
    }

    /// Whether `signature` (ASN.1 DER) is this key's signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }
}

/// A P-256 signing key (`agent component sign`).
pub struct SigningKey {
    pair: EcdsaKeyPair,
}

impl SigningKey {
    /// Read a `PRIVATE KEY` PEM block (unencrypted PKCS#8).
    pub fn from_pem(text: &str) -> Result<Self, KeyError> {
        if text.contains("ENCRYPTED") {
            return Err(KeyError::BadPrivate(
                "it is encrypted; export it unencrypted for signing".into(),
            ));
        }
        let der = pem_body(text, "PRIVATE KEY")?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &SystemRandom::new())
                .map_err(|e| KeyError::BadPrivate(e.to_string()))?;
        Ok(Self { pair })
    }

    /// A new key: its `PRIVATE KEY` PEM and the key itself.
    pub fn generate() -> Result<(String, Self), KeyError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|e| KeyError::BadPrivate(e.to_string()))?;
        let text = pem("PRIVATE KEY", doc.as_ref());
        let key = Self::from_pem(&text)?;
        Ok((text, key))
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey {
            point: self.pair.public_key().as_ref().to_vec(),
        }
    }

    /// The signature (ASN.1 DER) of `message`.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|e| KeyError::BadPrivate(e.to_string()))
    }
}

/// The tag a signature of `digest` (`sha256:<hex>`) is pushed under.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// A simple-signing payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payload {
    pub critical: Critical,
    #[serde(default)]
    pub optional: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Critical {
    pub identity: Identity,
    pub image: Image,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Identity {
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Image {
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

/// The payload that signs `digest` of `repository` (`registry/repo`).
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    let p = Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: repository.to_string(),
            },
            image: Image {
                docker_manifest_digest: digest.to_string(),
            },
            kind: PAYLOAD_TYPE.to_string(),
        },
        optional: None,
    };
    serde_json::to_vec(&p).unwrap_or_default()
}

/// Why one signature layer did not sign a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("its payload is not a simple-signing payload: {0}")]
    Payload(String),
    #[error("its payload is of type {0:?}, not {PAYLOAD_TYPE:?}")]
    Kind(String),
    #[error("its payload signs {0}, not this digest")]
    OtherDigest(String),
    #[error("it has no {SIGNATURE_ANNOTATION} annotation")]
    NoAnnotation,
    #[error("its signature is not base64")]
    Base64,
    #[error("its signature does not verify under the key")]
    Invalid,
}

/// Check that `payload`, signed by `signature_b64`, signs `digest` under `key`; the
/// payload's docker reference on success.
pub fn verify_payload(
    key: &PublicKey,
    digest: &str,
    payload: &[u8],
    signature_b64: Option<&str>,
) -> Result<String, SignatureError> {
    let b64 = signature_b64.ok_or(SignatureError::NoAnnotation)?;
    let sig = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| SignatureError::Base64)?;
    // The signature first: nothing of an unsigned payload is believed.
    if !key.verifies(payload, &sig) {
        return Err(SignatureError::Invalid);
    }
    let p: Payload =
        serde_json::from_slice(payload).map_err(|e| SignatureError::Payload(e.to_string()))?;
    if p.critical.kind != PAYLOAD_TYPE {
        return Err(SignatureError::Kind(p.critical.kind));
    }
    if !p
        .critical
        .image
        .docker_manifest_digest
        .eq_ignore_ascii_case(digest)
    {
        return Err(SignatureError::OtherDigest(
            p.critical.image.docker_manifest_digest,
        ));
    }
    Ok(p.critical.identity.docker_reference)
}

/// Check a `cosign sign-blob` signature (base64 text) of `bytes`.
pub fn verify_blob(
    key: &PublicKey,
    bytes: &[u8],
    signature_b64: &str,
) -> Result<(), SignatureError> {
    let sig = base64::engine::general_purpose::STANDARD
        .decode(signature_b64.trim())
        .map_err(|_| SignatureError::Base64)?;
    if key.verifies(bytes, &sig) {
        Ok(())
    } else {
        Err(SignatureError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_payload_verifies_and_names_its_digest() {
        let (pem_text, key) = SigningKey::generate().unwrap();
        assert!(pem_text.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let public = PublicKey::from_pem(&key.public().to_pem()).unwrap();
        let digest = "sha256:".to_string() + &"ab".repeat(32);
        let p = payload("127.0.0.1:5000/acme/driver", &digest);
        let sig = base64::engine::general_purpose::STANDARD.encode(key.sign(&p).unwrap());
        assert_eq!(
            verify_payload(&public, &digest, &p, Some(&sig)).unwrap(),
            "127.0.0.1:5000/acme/driver"
        );
        let other = "sha256:".to_string() + &"cd".repeat(32);
        assert_eq!(
            verify_payload(&public, &other, &p, Some(&sig)),
            Err(SignatureError::OtherDigest(digest.clone()))
        );
        let mut tampered = p.clone();
        tampered[10] ^= 1;
        assert_eq!(
            verify_payload(&public, &digest, &tampered, Some(&sig)),
            Err(SignatureError::Invalid)
        );
        let (_, stranger) = SigningKey::generate().unwrap();
        assert_eq!(
            verify_payload(&stranger.public(), &digest, &p, Some(&sig)),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify_payload(&public, &digest, &p, None),
            Err(SignatureError::NoAnnotation)
        );
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "ab".repeat(32))
        );
    }

    #[test]
    fn keys_that_are_not_p256_are_refused_by_name() {
        // An Ed25519 SubjectPublicKeyInfo.
        let ed = pem(
            "PUBLIC KEY",
            &[
                0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00, 1, 2, 3, 4,
                5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
                27, 28, 29, 30, 31, 32,
            ],
        );
        assert_eq!(PublicKey::from_pem(&ed), Err(KeyError::NotP256));
        assert_eq!(
            PublicKey::from_pem("nothing"),
            Err(KeyError::NoPem("PUBLIC KEY"))
        );
        assert!(matches!(
            SigningKey::from_pem(
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAA==\n-----END ENCRYPTED PRIVATE KEY-----\n"
            ),
            Err(KeyError::BadPrivate(_))
        ));
    }
}
