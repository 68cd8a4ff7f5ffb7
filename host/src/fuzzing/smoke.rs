//! The fuzz targets' smoke run in every `cargo test`: each target over each file of its
//! corpus (`fuzz/corpus/<target>/`), then over seeded mutations of them, and the state
//! targets over a real state file and its rows, damaged. A failing input is written to
//! `target/fuzz-smoke-failures/` and named in the failure.

use std::path::{Path, PathBuf};

use super::{TARGETS, Target};
use crate::state::{Backend, KvState, MemBackend, RedbState, StateDb, tables};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens worth inserting: delimiters and syntax of every language the targets read.
const TOKENS: &[&[u8]] = &[
    b"${",
    b"}",
    b"{{",
    b"}}",
    b"{{-",
    b"-}}",
    b"\"",
    b"\\",
    b"{",
    b"[",
    b"]",
    b":",
    b",",
    b"=",
    b"&",
    b"%",
    b"%ff",
    b"%00",
    b"\n",
    b"null",
    b"-1",
    b"18446744073709551616",
    b"1e309",
    b"\xff",
    b"\xe2\x82",
    b"range",
    b"with",
    b"end",
    b"else",
    b"$x :=",
    b"index",
    b"var.",
    b"local.",
    b"job \"j\" {",
    b"group \"g\" {",
    b"task \"t\" {",
    b"variable \"v\" {",
    b"<<EOF\n",
    b"\nEOF\n",
    b"\0asm",
    b"\x0d\x00\x01\x00",
    b"index=",
    b"wait=",
    b"namespace=",
    b"prefix=",
    b"?",
    b"#var ",
];

/// One mutation of `input`, maybe spliced with `other`.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, rng.next() as u8),
            2 if at < v.len() => {
                let n = 1 + rng.below((v.len() - at).min(16));
                v.drain(at..at + n);
            }
            3 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            4 if at < v.len() => {
                let n = 1 + rng.below((v.len() - at).min(64));
                let copy = v[at..at + n].to_vec();
                v.splice(at..at, copy);
            }
            5 if !other.is_empty() => {
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(128));
                v.splice(at..at, other[from..from + n].iter().copied());
            }
            6 => v.truncate(at),
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let n = 1 + rng.below(64);
                for _ in 0..n {
                    v.splice(at..at, t.iter().copied());
                }
            }
        }
    }
    v
}

fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(name)
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(name))
        .unwrap_or_else(|e| panic!("the corpus of {name}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Run `target` on `input`; on a panic, keep the input and fail naming it.
fn run(name: &str, target: Target, input: &[u8]) {
    if std::panic::catch_unwind(|| target(input)).is_err() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-smoke-failures");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{name}-{}", hex::encode(&sha2_of(input)[..8])));
        std::fs::write(&file, input).unwrap();
        panic!(
            "fuzz target {name} failed on {} ({:?})",
            file.display(),
            String::from_utf8_lossy(&input[..input.len().min(400)])
        );
    }
}

fn sha2_of(b: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(b).to_vec()
}

/// Every target over its corpus and `mutations` seeded mutations of it.
fn smoke(name: &str, mutations: usize) {
    let target = TARGETS.iter().find(|(n, _)| *n == name).unwrap().1;
    let inputs = corpus(name);
    assert!(!inputs.is_empty(), "the corpus of {name} is empty");
    for input in &inputs {
        run(name, target, input);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    for _ in 0..mutations {
        let a = &inputs[rng.below(inputs.len())];
        let b = &inputs[rng.below(inputs.len())];
        run(name, target, &mutate(&mut rng, a, b));
    }
}

#[test]
fn fuzz_smoke_every_target_has_a_corpus_and_a_cargo_fuzz_target() {
    for (name, _) in TARGETS {
        assert!(!corpus(name).is_empty(), "{name}");
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/fuzz_targets")
            .join(format!("{name}.rs"));
        assert!(file.exists(), "{} is missing", file.display());
    }
}

#[test]
fn fuzz_smoke_jobspec_json() {
    smoke("jobspec_json", 1500);
}

#[test]
fn fuzz_smoke_jobspec_hcl() {
    smoke("jobspec_hcl", 1500);
}

#[test]
fn fuzz_smoke_interpolate() {
    smoke("interpolate", 3000);
}

#[test]
fn fuzz_smoke_template() {
    smoke("template", 3000);
}

#[test]
fn fuzz_smoke_agent_config() {
    smoke("agent_config", 1500);
}

#[test]
fn fuzz_smoke_state_records() {
    smoke("state_records", 500);
}

#[test]
fn fuzz_smoke_state_file() {
    smoke("state_file", 60);
}

#[test]
fn fuzz_smoke_loader_inspect() {
    smoke("loader_inspect", 1000);
}

#[test]
fn fuzz_smoke_api_query() {
    smoke("api_query", 300);
}

/// A state with one of everything the agent stores.
fn fill(db: &dyn StateDb) {
    let alloc = crate::taskrunner::tests::allocation(serde_json::json!(
        {"Name": "t", "Driver": "mock", "Config": {"run_for": "1s"}}
    ));
    db.put_job(&alloc.job).unwrap();
    db.put_job_version(&alloc.job).unwrap();
    db.put_alloc(&alloc).unwrap();
    db.put_node_identity(&[("id".to_string(), "n1".to_string())].into())
        .unwrap();
    db.put_plugin_state("drivers", "mock", &serde_json::json!({"healthy": true}))
        .unwrap();
    db.put_process(&crate::state::ProcessRecord {
        id: 1,
        pid: 42,
        owner: "raw_exec".into(),
        start_ticks: 7,
    })
    .unwrap();
    db.flush().unwrap();
}

/// The rows of a filled state in `state_records`' input format.
fn rows<B: Backend>(b: &B) -> Vec<u8> {
    let mut out = Vec::new();
    for t in tables::ALL {
        for (k, v) in b.scan(t, "").unwrap() {
            out.extend_from_slice(format!("{t}\t{k}\t").as_bytes());
            out.extend_from_slice(&v);
            out.push(b'\n');
        }
    }
    out
}

#[test]
fn fuzz_smoke_state_records_of_a_real_state_damaged() {
    let db = KvState::with_backend(MemBackend::default(), Default::default());
    fill(&db);
    let rows = rows(db.backend());
    let target = super::state_records as Target;
    run("state_records", target, &rows);
    let mut rng = Rng(7);
    for _ in 0..300 {
        run("state_records", target, &mutate(&mut rng, &rows, &rows));
    }
    if let Some(dir) = std::env::var_os("PADDOCK_FUZZ_SEEDS") {
        std::fs::write(Path::new(&dir).join("state_records"), &rows).unwrap();
    }
}

#[test]
fn fuzz_smoke_state_file_of_a_real_state_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    {
        let db = RedbState::open(&path).unwrap();
        fill(&db);
    }
    let file = std::fs::read(&path).unwrap();
    let target = super::state_file as Target;
    run("state_file", target, &file);
    let mut rng = Rng(11);
    for _ in 0..40 {
        let mut damaged = file.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(damaged.len());
            let n = 1 + rng.below(64);
            for b in &mut damaged[at..(at + n).min(file.len())] {
                *b = rng.next() as u8;
            }
        }
        if rng.below(4) == 0 {
            damaged.truncate(rng.below(file.len()));
        }
        run("state_file", target, &damaged);
    }
    if let Some(dir) = std::env::var_os("PADDOCK_FUZZ_SEEDS") {
        std::fs::write(Path::new(&dir).join("state_file"), &file).unwrap();
    }
}
