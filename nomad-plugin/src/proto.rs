//! The generated gRPC code, checked in under `src/generated/` (made by `codegen/` from
//! `proto/`, see `proto/README.md`; a test below fails when the protos changed since).
//! Modules nest as the protobuf packages do, since the generated code refers across
//! packages by relative path.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// go-plugin's own services (package `plugin`).
pub mod plugin {
    include!("generated/plugin.rs");
}

pub mod hashicorp {
    pub mod nomad {
        pub mod plugins {
            pub mod base {
                pub mod proto {
                    include!("generated/hashicorp.nomad.plugins.base.proto.rs");
                }
            }
            pub mod drivers {
                pub mod proto {
                    include!("generated/hashicorp.nomad.plugins.drivers.proto.rs");
                }
            }
            pub mod shared {
                pub mod hclspec {
                    include!("generated/hashicorp.nomad.plugins.shared.hclspec.rs");
                }
                pub mod structs {
                    include!("generated/hashicorp.nomad.plugins.shared.structs.rs");
                }
            }
        }
    }
}

pub mod google {
    pub mod rpc {
        include!("generated/google.rpc.rs");
    }
}

pub use hashicorp::nomad::plugins::base::proto as base;
pub use hashicorp::nomad::plugins::drivers::proto as drivers;
pub use hashicorp::nomad::plugins::shared::hclspec;
pub use hashicorp::nomad::plugins::shared::structs;

#[cfg(test)]
mod tests {
    use sha2::Digest;

    /// The checked-in code is generated from the protos as they are: editing a `.proto`
    /// without running the generator fails here.
    #[test]
    fn the_generated_code_is_of_the_protos_as_they_are() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let files = include_str!("../proto/FILES");
        let mut digest = sha2::Sha256::new();
        for f in files.lines().filter(|l| !l.is_empty()) {
            digest.update(f.as_bytes());
            digest.update([0]);
            digest.update(std::fs::read(root.join(f)).unwrap());
            digest.update([0]);
        }
        let now = hex::encode(digest.finalize());
        let recorded = std::fs::read_to_string(root.join("src/generated/PROTO_SHA256")).unwrap();
        assert_eq!(
            now,
            recorded.trim(),
            "nomad-plugin/proto changed since its code was generated: run \
             `cargo run --manifest-path nomad-plugin/codegen/Cargo.toml`"
        );
    }
}
