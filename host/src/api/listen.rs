//! Serving the API's connections with Nomad's `limits`: at most `http_max_conns_per_client`
//! connections from one client address (past it, Nomad's 429 text and the connection is
//! closed), and a request's headers must arrive within `http_read_header_timeout` (a
//! client trickling them holds a connection for no longer). Connections are HTTP/1.1 with
//! upgrades, as Nomad's tools speak; a shutdown stops accepting, lets requests in flight
//! finish and closes idle connections.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;

use crate::config::HttpLimits;

/// What a connection past the per-client limit is told, as Nomad words it.
const TOO_MANY: &str =
    "Your IP is issuing too many concurrent connections, please rate limit your calls\n";

/// Connections refused for being past the per-client limit, since the start.
pub static REFUSED_CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// Open connections by client address.
type Counts = Arc<Mutex<HashMap<IpAddr, u32>>>;

/// One open connection of a client, counted while it lives.
struct Counted {
    counts: Counts,
    ip: IpAddr,
}

impl Counted {
    /// Count one more connection from `ip`, unless it already holds `limit` (0: none).
    fn take(counts: &Counts, ip: IpAddr, limit: u32) -> Option<Self> {
        let mut c = counts.lock().unwrap();
        let n = c.entry(ip).or_default();
        if limit > 0 && *n >= limit {
            return None;
        }
        *n += 1;
        Some(Self {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap();
        if let Some(n) = c.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.remove(&self.ip);
            }
        }
    }
}

/// Serve `router` on `listener` within `limits` until `shutdown` resolves; then stop
/// accepting, let requests in flight end, and return once every connection is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let counts: Counts = Default::default();
    // Every connection holds a receiver; shutting down waits until they are all gone.
    let (signal, _) = tokio::sync::watch::channel(false);
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: wait and try again.
                    tracing::warn!(error = %e, "accepting an API connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Some(counted) = Counted::take(&counts, addr.ip(), limits.max_conns_per_client) else {
            REFUSED_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(client = %addr.ip(), limit = limits.max_conns_per_client, "too many concurrent connections: refused");
            tokio::spawn(refuse(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stop = signal.subscribe();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.read_header_timeout);
            let conn = builder
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::trace!(error = %e, "API connection ended");
                        }
                        break;
                    }
                    _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
                }
            }
            drop((counted, open));
        });
    }
    drop(listener);
    let _ = signal.send(true);
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}

/// Tell a connection past the limit why, briefly, and close it.
async fn refuse(mut stream: tokio::net::TcpStream) {
    let answer = format!(
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{TOO_MANY}",
        TOO_MANY.len()
    );
    let _ = tokio::time::timeout(
        Duration::from_millis(10),
        stream.write_all(answer.as_bytes()),
    )
    .await;
}
