//! The API's query strings, sent over loopback to the real server of a real agent
//! (in-memory state, the built-in components, one job with its allocations).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use crate::agent::{Agent, AgentOptions};

struct Served {
    _tokio: tokio::runtime::Runtime,
    addr: SocketAddr,
    alloc: String,
    _dir: tempfile::TempDir,
}

/// One agent per process, started at the first input.
fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let dir = tempfile::tempdir().expect("a temporary dir");
        let (addr, alloc) = tokio.block_on(async {
            let agent = Agent::start(AgentOptions {
                data_dir: Some(dir.path().to_path_buf()),
                in_memory_state: true,
                // No task of the job starts a host process.
                executor_program: Some("/bin/false".into()),
                ..Default::default()
            })
            .await
            .expect("the agent starts");
            let job =
                crate::jobspec::parse_job_json(include_bytes!("../../../examples/jobs/hello.json"))
                    .expect("the example job parses");
            let placed = agent
                .server()
                .register_job(job)
                .expect("the example job registers");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port");
            let addr = listener.local_addr().expect("its address");
            tokio::spawn(crate::api::serve(agent, listener, std::future::pending()));
            (addr, placed.allocs.first().cloned().unwrap_or_default())
        });
        Served {
            _tokio: tokio,
            addr,
            alloc,
            _dir: dir,
        }
    })
}

/// Input: a path on the first line (`ALLOC` stands for an allocation's id), then the query
/// string, sent as they are in a GET's request line. Whatever the bytes, the server
/// answers, never with a server error, and at once unless the request asks to wait (a
/// blocking query's `index`, an event stream, a followed log).
pub fn api_query(data: &[u8]) {
    let split = data.iter().position(|b| *b == b'\n');
    let (path, query) = match split {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"/v1/jobs"[..], data),
    };
    let s = served();
    let path = String::from_utf8_lossy(path).replace("ALLOC", &s.alloc);
    let mut request = format!("GET {path}?").into_bytes();
    request.extend_from_slice(query);
    let shown = String::from_utf8_lossy(&request).into_owned();
    request.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    // A blocking query, a stream or a followed log may rightly hold its answer: it is not
    // waited for long (the smoke run meets such inputs often); every other request must
    // answer within 2 s.
    let text = String::from_utf8_lossy(query);
    let waits = text.contains("index=") || path.contains("stream") || path.contains("/logs/");
    let mut conn = TcpStream::connect(s.addr).expect("connecting to the agent");
    let patience = if waits {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(2)
    };
    conn.set_read_timeout(Some(patience)).unwrap();
    conn.write_all(&request).expect("sending the request");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        match conn.read(&mut byte) {
            Ok(0) => panic!("{shown}: the connection closed without an answer"),
            Ok(_) => head.push(byte[0]),
            Err(e) => {
                assert!(waits, "{shown}: no answer in 2 s ({e})");
                return;
            }
        }
    }
    let status: u16 = String::from_utf8_lossy(&head)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{shown}: a status line {head:?}"));
    assert!(status < 500 || status == 501, "{shown}: answered {status}");
}
