//! The contract's versions: which `paddock:plugin` versions are released (each a folder
//! `wit/<version>/` that is never edited once released), which this agent serves, and the
//! rule that decides whether a component's version is served.
//!
//! The policy (docs/plugins.md): an additive change (a new function, interface, record
//! field in a new record, world) goes to a new minor version whose folder copies the last
//! one and marks what is new with `@since(version = …)`; the bindings read the newest minor
//! of a major track, and wasmtime's semver-aware linking serves guests built against any
//! older minor of that track from them. A breaking change goes to a new major (for 0.x: a
//! new minor track, `0.2.0`) with a bindings module of its own. Guests built against a
//! newer minor than the agent has are refused here, naming both versions, rather than
//! failing to link.

use std::cmp::Ordering;

/// A released contract version and the sha256 of each file in its `wit/<version>/` folder.
#[derive(Debug, Clone, Copy)]
pub struct Release {
    /// The version, e.g. `0.1.0`.
    pub version: &'static str,
    /// `(file name, sha256 hex)` of every file in the folder, sorted by name.
    pub files: &'static [(&'static str, &'static str)],
}

/// Every released version, oldest first. A released folder is frozen: the test below fails
/// when a file in it changes, is added or goes.
pub const RELEASED: &[Release] = &[
    Release {
        version: "0.1.0",
        files: &[
            (
                "host.wit",
                "15f19e2f0c21ab670b6a7969b6ba0de81509fe184d75f1cf4b3fe4f4ab822400",
            ),
            (
                "plugins.wit",
                "e292ee8804d471f26cfa7415d59da428b3f4156c1ffd192097d4ba530327f883",
            ),
            (
                "types.wit",
                "c9736af2c92a98a25cc99ff98921277331d6f795aa375596db8e584f99b46b58",
            ),
        ],
    },
    // 0.1.1: the `services` host interface, imported by the `hook` world; the `check` world.
    Release {
        version: "0.1.1",
        files: &[
            (
                "host.wit",
                "e79ce2ec2e1ecdd09bba77a2c0a2260f97dda7495c6bcf28d57efb064f6fd1e3",
            ),
            (
                "plugins.wit",
                "77f8e02e439755a26c314a2281014d51c654a81898b6b0db95b8c16d1547edb9",
            ),
            (
                "types.wit",
                "8799dc030b58b4595130e65332e8856d12464969c42c8cbfb03c9ff0b9aab9d4",
            ),
        ],
    },
    // 0.1.2: the `artifacts` host interface, imported by the `hook` world.
    Release {
        version: "0.1.2",
        files: &[
            (
                "host.wit",
                "cd37dc55a47262e3936713984f530f3715d93c3511e2ea0f7c200704009d9517",
            ),
            (
                "plugins.wit",
                "db32d6614d67eaf9397cb2c3785cb59261e9a6f89e66d9be5dba61f2758a2c7c",
            ),
            (
                "types.wit",
                "4b074f76eca07b6b612e26829f2eeaffb905ad817d52ab21d47ea0f479b8bf0e",
            ),
        ],
    },
    // 0.1.3: the `task-exec` interface (`alloc exec`), exported by the `exec-driver` world.
    Release {
        version: "0.1.3",
        files: &[
            (
                "host.wit",
                "82646c249525c93c146011007f60ed8340a34bce101109530a96e2d627a43e48",
            ),
            (
                "plugins.wit",
                "ad8c86c42f41ce8e3780736d6505249d83d7a892aaaf8fab3e045ecc92c49fd3",
            ),
            (
                "types.wit",
                "47c447a1635bd33b8c97321560ad9720c457526c816817a12949d221bbab4eed",
            ),
        ],
    },
];

/// The versions this agent's bindings serve, newest of each track: a guest built against
/// any version of the same track up to one of these is served.
pub const SERVED: &[&str] = &[crate::bindings::v0_1::VERSION];

/// A `major.minor.patch` version (pre-release and build tags are not used by the contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
}

impl Version {
    /// Parse `1.2.3`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let mut next = || parts.next()?.parse::<u64>().ok();
        let v = Version {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        parts.next().is_none().then_some(v)
    }

    /// The semver track: versions on one track are compatible (the major, or the minor
    /// while the major is 0), which is how wasmtime's linker matches names.
    fn track(self) -> (u64, u64) {
        if self.major == 0 {
            (0, self.minor)
        } else {
            (self.major, 0)
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why a version is not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unserved {
    /// No served version is on its track (another major, or a 0.x minor track).
    OtherTrack,
    /// Its track is served, but only up to an older version.
    Newer {
        /// The newest version of that track this agent serves.
        served: String,
    },
}

/// Whether `version` is served by this agent, and if not, why.
pub fn served(version: &str) -> Result<(), Unserved> {
    let Some(wanted) = Version::parse(version) else {
        return Err(Unserved::OtherTrack);
    };
    let newest = SERVED
        .iter()
        .filter_map(|s| Version::parse(s))
        .filter(|s| s.track() == wanted.track())
        .max();
    match newest {
        None => Err(Unserved::OtherTrack),
        Some(have) => match have.cmp(&wanted) {
            Ordering::Less => Err(Unserved::Newer {
                served: have.to_string(),
            }),
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;
    use std::path::Path;

    fn wit_root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit")
    }

    /// Editing, adding or removing a file in a released `wit/<version>/` fails here: a
    /// released contract is frozen; changes go to a new version's folder.
    #[test]
    fn released_contract_folders_are_unchanged() {
        for release in RELEASED {
            let dir = wit_root().join(release.version);
            let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| {
                    let e = e.unwrap();
                    let bytes = std::fs::read(e.path()).unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        hex::encode(sha2::Sha256::digest(&bytes)),
                    )
                })
                .collect();
            found.sort();
            let pinned: Vec<(String, String)> = release
                .files
                .iter()
                .map(|(n, s)| (n.to_string(), s.to_string()))
                .collect();
            assert_eq!(
                found, pinned,
                "wit/{} is a released contract and must not change: put the change in a new \
                 version's folder (docs/plugins.md, \"The contract's versions\")",
                release.version
            );
        }
    }

    /// Every folder under `wit/` is a released version (pinned above) or the one newer
    /// version being prepared; the bindings serve released versions only.
    #[test]
    fn every_contract_folder_is_pinned_and_every_served_version_released() {
        let mut unpinned = Vec::new();
        for e in std::fs::read_dir(wit_root()).unwrap() {
            let e = e.unwrap();
            if !e.file_type().unwrap().is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                Version::parse(&name).is_some(),
                "wit/{name}: contract folders are named by version"
            );
            if !RELEASED.iter().any(|r| r.version == name) {
                unpinned.push(name);
            }
        }
        let newest_released = RELEASED
            .iter()
            .filter_map(|r| Version::parse(r.version))
            .max()
            .unwrap();
        assert!(
            unpinned.len() <= 1
                && unpinned
                    .iter()
                    .all(|u| Version::parse(u).unwrap() > newest_released),
            "wit/{unpinned:?}: only one folder, newer than every release, may be unpinned (the \
             version being prepared); pin it in RELEASED when it is released"
        );
        for s in SERVED {
            assert!(
                RELEASED.iter().any(|r| r.version == *s),
                "{s} is not released"
            );
        }
    }

    #[test]
    fn a_version_is_served_up_to_the_newest_of_its_track() {
        assert_eq!(served("0.1.0"), Ok(()));
        assert_eq!(served("0.1.1"), Ok(()));
        assert_eq!(served("0.1.2"), Ok(()));
        assert_eq!(served("0.1.3"), Ok(()));
        assert_eq!(
            served("0.1.4"),
            Err(Unserved::Newer {
                served: "0.1.3".into()
            })
        );
        assert_eq!(served("0.2.0"), Err(Unserved::OtherTrack));
        assert_eq!(served("1.0.0"), Err(Unserved::OtherTrack));
        assert_eq!(served("9.0.0"), Err(Unserved::OtherTrack));
        assert_eq!(served("0.1"), Err(Unserved::OtherTrack));
        assert_eq!(served(""), Err(Unserved::OtherTrack));
        assert_eq!(
            Version::parse("1.2.3").unwrap().track(),
            Version::parse("1.9.0").unwrap().track()
        );
        assert_ne!(
            Version::parse("0.1.3").unwrap().track(),
            Version::parse("0.2.0").unwrap().track()
        );
    }
}
