//! The generated gRPC code (see `build.rs` and `proto/README.md`). Modules nest as the
//! protobuf packages do, since the generated code refers across packages by relative path.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// go-plugin's own services (package `plugin`).
pub mod plugin {
    tonic::include_proto!("plugin");
}

pub mod hashicorp {
    pub mod nomad {
        pub mod plugins {
            pub mod base {
                pub mod proto {
                    tonic::include_proto!("hashicorp.nomad.plugins.base.proto");
                }
            }
            pub mod drivers {
                pub mod proto {
                    tonic::include_proto!("hashicorp.nomad.plugins.drivers.proto");
                }
            }
            pub mod shared {
                pub mod hclspec {
                    tonic::include_proto!("hashicorp.nomad.plugins.shared.hclspec");
                }
                pub mod structs {
                    tonic::include_proto!("hashicorp.nomad.plugins.shared.structs");
                }
            }
        }
    }
}

pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}

pub use hashicorp::nomad::plugins::base::proto as base;
pub use hashicorp::nomad::plugins::drivers::proto as drivers;
pub use hashicorp::nomad::plugins::shared::hclspec;
pub use hashicorp::nomad::plugins::shared::structs;
