//! A build stamp: a fixed-width marker in the component's data that a build or a test can
//! rewrite in the finished `.wasm` (see `guest_artifacts::restamp`) to make a distinct
//! version of the same component without compiling it again. It carries a build number, the
//! handle format a driver writes and reads, and a mode (`ok`, or `trap` for a version that
//! traps on every call but `info`).
//!
//! The marker is read with volatile reads so the optimizer cannot fold the compiled-in value
//! into the code: rewriting the bytes must change what the component does.

/// The marker as built: `paddock-stamp:` then `b` and five digits of build, `f` and four
/// digits of handle format, `m` and a four-character mode padded with `-`.
static STAMP: [u8; 32] = *b"paddock-stamp:b00000:f0001:mok--";

/// The stamp's prefix, which occurs once in a binary that reads its stamp.
pub const PREFIX: &str = "paddock-stamp:";

/// What a stamp says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Build number (0 for the build as compiled).
    pub build: u32,
    /// Handle format a driver writes and reads.
    pub handle_format: u32,
    /// `ok`, or `trap`.
    pub mode: String,
}

impl Stamp {
    /// This component's stamp.
    pub fn get() -> Self {
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            // SAFETY: `i` is in bounds of a static array; a volatile read of a `u8` is
            // always valid.
            *b = unsafe { core::ptr::read_volatile(STAMP.as_ptr().add(i)) };
        }
        let text = core::str::from_utf8(&bytes).unwrap_or_default();
        let field = |start: usize, len: usize| text.get(start..start + len).unwrap_or_default();
        Stamp {
            build: field(15, 5).parse().unwrap_or(0),
            handle_format: field(22, 4).parse().unwrap_or(1),
            mode: field(28, 4).trim_end_matches('-').to_string(),
        }
    }

    /// Whether this version is meant to trap on every call but `info`.
    pub fn traps(&self) -> bool {
        self.mode == "trap"
    }

    /// `version` with `+b<build>` appended when the build is not 0.
    pub fn version(&self, version: &str) -> String {
        match self.build {
            0 => version.to_string(),
            b => format!("{version}+b{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_as_built_reads_back() {
        let s = Stamp::get();
        assert_eq!(
            s,
            Stamp {
                build: 0,
                handle_format: 1,
                mode: "ok".into()
            }
        );
        assert_eq!(s.version("0.1.0"), "0.1.0");
        assert!(!s.traps());
        assert_eq!(&STAMP[..PREFIX.len()], PREFIX.as_bytes());
    }
}
