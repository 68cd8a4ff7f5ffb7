//! `options { checksum = "<type>:<hex>" }`: the digest a download must have (go-getter's
//! md5, sha1, sha256 and sha512), computed while the bytes arrive.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

/// A checksum an artifact must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// `md5`, `sha1`, `sha256` or `sha512`.
    pub kind: &'static str,
    /// The digest, lower-case hex.
    pub hex: String,
}

impl Expected {
    /// `text` as written in the job: `sha256:9f86…`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (kind, hex) = text
            .split_once(':')
            .ok_or_else(|| format!("checksum {text:?}: expected \"<type>:<hex digest>\""))?;
        let (kind, len) = match kind {
            "md5" => ("md5", 32),
            "sha1" => ("sha1", 40),
            "sha256" => ("sha256", 64),
            "sha512" => ("sha512", 128),
            "file" => {
                return Err(format!(
                    "checksum {text:?}: a checksum file is not fetched by this hook; give the digest itself"
                ));
            }
            other => {
                return Err(format!(
                    "checksum {text:?}: unknown type {other:?} (md5, sha1, sha256 or sha512)"
                ));
            }
        };
        if hex.len() != len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "checksum {text:?}: a {kind} digest is {len} hex digits"
            ));
        }
        Ok(Self {
            kind,
            hex: hex.to_ascii_lowercase(),
        })
    }

    /// A hasher of this checksum's type.
    pub fn hasher(&self) -> Hasher {
        match self.kind {
            "md5" => Hasher::Md5(Md5::new()),
            "sha1" => Hasher::Sha1(Sha1::new()),
            "sha256" => Hasher::Sha256(Sha256::new()),
            _ => Hasher::Sha512(Sha512::new()),
        }
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.hex)
    }
}

/// A running digest.
pub enum Hasher {
    Md5(Md5),
    Sha1(Sha1),
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    /// Add `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(bytes),
            Hasher::Sha1(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    /// The digest, lower-case hex.
    pub fn finish(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Md5(h) => h.finalize().to_vec(),
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests_of_known_bytes() {
        // Digests of "abc" from the algorithms' specifications.
        for (text, ok) in [
            ("md5:900150983cd24fb0d6963f7d28e17f72", true),
            ("sha1:A9993E364706816ABA3E25717850C26C9CD0D89D", true),
            (
                "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                true,
            ),
            (
                "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ae",
                false,
            ),
        ] {
            let e = Expected::parse(text).unwrap();
            let mut h = e.hasher();
            h.update(b"a");
            h.update(b"bc");
            assert_eq!(h.finish() == e.hex, ok, "{text}");
        }
        let e = Expected::parse(&format!("sha512:{}", "ddaf35a193617aba".repeat(8))).unwrap();
        assert_eq!(e.kind, "sha512");
    }

    #[test]
    fn malformed_checksums_name_what_is_wrong() {
        for (text, says) in [
            ("sha256", "<type>:<hex digest>"),
            ("crc32:1234", "unknown type \"crc32\""),
            ("sha1:abc", "40 hex digits"),
            ("md5:zz0150983cd24fb0d6963f7d28e17f72", "32 hex digits"),
            ("file:https://x/SHA256SUMS", "checksum file"),
        ] {
            let e = Expected::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
