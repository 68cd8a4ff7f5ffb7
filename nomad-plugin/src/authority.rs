//! gRPC clients built on gRPC's C core (Python's `grpcio`, C++, Ruby, PHP) name a Unix
//! socket's path as the `:authority` of their requests, percent-encoded
//! (`%2Ftmp%2Fpaddock-plugin…%2Fplugin.sock`). That is no valid URI authority, and the
//! HTTP/2 server under tonic resets every such stream (`PROTOCOL_ERROR`, "malformed
//! authority"), with no setting to relax it. go-plugin's Go client sends a plain name.
//!
//! So every connection to the plugin's socket goes through [`relay`]: the client's frames
//! pass to the server unchanged, except header blocks (`HEADERS` and its `CONTINUATION`s),
//! which are decoded (HPACK, with the dynamic table the client's encoder keeps) and encoded
//! again for the server with an authority it accepts in place of one it would refuse
//! (`localhost`, what go-plugin's client sends). The server's frames pass back untouched.
//! On a Unix socket the authority names nothing the plugin uses, so no information is lost.

use http::uri::Authority;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::UnixStream;

/// The connection preface every HTTP/2 client sends first.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame every HTTP/2 peer accepts (SETTINGS_MAX_FRAME_SIZE's floor).
const MAX_FRAME: usize = 16_384;
/// The largest header block the relay collects (tonic's default header list limit is
/// 16 KiB; a client sending more is refused by the server anyway).
const MAX_BLOCK: usize = 1 << 20;
/// What stands for an authority the server would refuse.
const STAND_IN: &[u8] = b"localhost";

/// Why a connection was cut.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("reading or writing the connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the client did not open with HTTP/2's connection preface")]
    Preface,
    #[error("a header block of stream {stream} was interrupted by a frame of type {kind}")]
    Interleaved { stream: u32, kind: u8 },
    #[error("a header block over {MAX_BLOCK} bytes")]
    TooLarge,
    #[error("a malformed HEADERS frame (padding or priority beyond its length)")]
    Malformed,
    #[error("the client's header block does not decode: {0}")]
    Hpack(String),
}

/// One frame's header.
struct Head {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl Head {
    fn parse(b: &[u8; 9]) -> Self {
        Head {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        let l = self.len;
        out.extend_from_slice(&[
            (l >> 16) as u8,
            (l >> 8) as u8,
            l as u8,
            self.kind,
            self.flags,
        ]);
        out.extend_from_slice(&self.stream.to_be_bytes());
    }
}

/// The client's header blocks, decoded with its encoder's table and encoded again for the
/// server with an authority the server accepts.
struct Rewriter {
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
    /// Authorities replaced so far (for the log).
    replaced: u64,
}

impl Rewriter {
    fn new() -> Self {
        Rewriter {
            decoder: loona_hpack::Decoder::new(),
            encoder: loona_hpack::Encoder::new(),
            replaced: 0,
        }
    }

    /// A header block, its authority made acceptable.
    fn block(&mut self, block: &[u8]) -> Result<Vec<u8>, RelayError> {
        let mut headers = self
            .decoder
            .decode(block)
            .map_err(|e| RelayError::Hpack(format!("{e:?}")))?;
        for (name, value) in &mut headers {
            if name.as_slice() == b":authority" && Authority::try_from(value.as_slice()).is_err() {
                *value = STAND_IN.to_vec();
                self.replaced += 1;
            }
        }
        Ok(self
            .encoder
            .encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice()))))
    }

    /// A `HEADERS` frame's payload (`flags` its flags) and any `CONTINUATION`s' fragments:
    /// the frames to send instead, one `HEADERS` and as many `CONTINUATION`s as the block
    /// needs at the smallest frame size every peer accepts.
    fn frames(
        &mut self,
        head: &Head,
        payload: &[u8],
        continued: &[u8],
    ) -> Result<Vec<u8>, RelayError> {
        let mut p = payload;
        if head.flags & PADDED != 0 {
            let (&pad, rest) = p.split_first().ok_or(RelayError::Malformed)?;
            p = rest
                .get(
                    ..rest
                        .len()
                        .checked_sub(usize::from(pad))
                        .ok_or(RelayError::Malformed)?,
                )
                .ok_or(RelayError::Malformed)?;
        }
        let priority = if head.flags & PRIORITY != 0 {
            let (pri, rest) = p.split_at_checked(5).ok_or(RelayError::Malformed)?;
            p = rest;
            Some(pri)
        } else {
            None
        };
        let mut block = p.to_vec();
        block.extend_from_slice(continued);
        let block = self.block(&block)?;

        let mut out = Vec::with_capacity(block.len() + 32);
        let first_room = MAX_FRAME - priority.map_or(0, <[u8]>::len);
        let (first, mut rest) = block.split_at(block.len().min(first_room));
        let mut flags = head.flags & END_STREAM;
        if priority.is_some() {
            flags |= PRIORITY;
        }
        if rest.is_empty() {
            flags |= END_HEADERS;
        }
        Head {
            len: first.len() + priority.map_or(0, <[u8]>::len),
            kind: HEADERS,
            flags,
            stream: head.stream,
        }
        .write(&mut out);
        out.extend_from_slice(priority.unwrap_or_default());
        out.extend_from_slice(first);
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME));
            rest = tail;
            Head {
                len: chunk.len(),
                kind: CONTINUATION,
                flags: if rest.is_empty() { END_HEADERS } else { 0 },
                stream: head.stream,
            }
            .write(&mut out);
            out.extend_from_slice(chunk);
        }
        Ok(out)
    }
}

/// Serve `client` through the rewriter: the returned stream is the server's end.
pub fn relay(client: UnixStream) -> DuplexStream {
    let (server_end, ours) = tokio::io::duplex(64 * 1024);
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = tokio::io::split(ours);
    tokio::spawn(async move {
        let mut rw = Rewriter::new();
        let r = to_server(&mut client_rx, &mut server_tx, &mut rw).await;
        if rw.replaced > 0 {
            tracing::debug!(
                replaced = rw.replaced,
                "requests named the socket's path as their authority: sent as localhost"
            );
        }
        match r {
            Ok(()) | Err(RelayError::Io(_)) => {}
            Err(e) => tracing::warn!(error = %e, "a client connection was cut"),
        }
        let _ = server_tx.shutdown().await;
    });
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
        let _ = client_tx.shutdown().await;
    });
    server_end
}

/// The client's side, frame by frame, until it closes.
async fn to_server<R, W>(rx: &mut R, tx: &mut W, rw: &mut Rewriter) -> Result<(), RelayError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut preface = [0u8; 24];
    rx.read_exact(&mut preface).await?;
    if &preface != PREFACE {
        return Err(RelayError::Preface);
    }
    tx.write_all(&preface).await?;
    let mut raw = [0u8; 9];
    let mut payload = Vec::new();
    loop {
        match rx.read_exact(&mut raw).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let head = Head::parse(&raw);
        payload.resize(head.len, 0);
        rx.read_exact(&mut payload).await?;
        if head.kind != HEADERS {
            tx.write_all(&raw).await?;
            tx.write_all(&payload).await?;
            continue;
        }
        // The block's CONTINUATIONs follow at once, on the same stream (RFC 9113 §6.10).
        let mut continued = Vec::new();
        let mut ended = head.flags & END_HEADERS != 0;
        while !ended {
            let mut c = [0u8; 9];
            rx.read_exact(&mut c).await?;
            let ch = Head::parse(&c);
            if ch.kind != CONTINUATION || ch.stream != head.stream {
                return Err(RelayError::Interleaved {
                    stream: head.stream,
                    kind: ch.kind,
                });
            }
            if continued.len() + ch.len > MAX_BLOCK {
                return Err(RelayError::TooLarge);
            }
            let at = continued.len();
            continued.resize(at + ch.len, 0);
            rx.read_exact(&mut continued[at..]).await?;
            ended = ch.flags & END_HEADERS != 0;
        }
        let frames = rw.frames(&head, &payload, &continued)?;
        tx.write_all(&frames).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_of(enc: &mut loona_hpack::Encoder<'_>, authority: &[u8]) -> Vec<u8> {
        enc.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", b"/plugin.GRPCController/Shutdown"),
            (b":authority", authority),
            (b"te", b"trailers"),
        ])
    }

    fn decoded(dec: &mut loona_hpack::Decoder<'_>, frames: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut block = Vec::new();
        let mut at = 0;
        while at < frames.len() {
            let h = Head::parse(frames[at..at + 9].try_into().unwrap());
            let mut p = &frames[at + 9..at + 9 + h.len];
            if h.kind == HEADERS && h.flags & PRIORITY != 0 {
                p = &p[5..];
            }
            block.extend_from_slice(p);
            at += 9 + h.len;
        }
        dec.decode(&block).unwrap()
    }

    #[test]
    fn a_percent_encoded_path_becomes_localhost_and_a_good_authority_stays() {
        let (mut client_enc, mut server_dec) =
            (loona_hpack::Encoder::new(), loona_hpack::Decoder::new());
        let mut rw = Rewriter::new();
        let head = |len| Head {
            len,
            kind: HEADERS,
            flags: END_HEADERS | END_STREAM,
            stream: 1,
        };
        // Twice the same bad authority: the second time the client's encoder sends it as an
        // index into its dynamic table, which the rewriter must have kept in step.
        for _ in 0..2 {
            let b = block_of(&mut client_enc, b"%2Ftmp%2Fpaddock-plugin1%2Fplugin.sock");
            let out = rw.frames(&head(b.len()), &b, &[]).unwrap();
            let h = decoded(&mut server_dec, &out);
            assert!(
                h.contains(&(b":authority".to_vec(), b"localhost".to_vec())),
                "{h:?}"
            );
            assert!(h.contains(&(
                b":path".to_vec(),
                b"/plugin.GRPCController/Shutdown".to_vec()
            )));
            assert_eq!(out[4], END_HEADERS | END_STREAM, "flags kept");
        }
        let b = block_of(&mut client_enc, b"plugin");
        let h = decoded(
            &mut server_dec,
            &rw.frames(&head(b.len()), &b, &[]).unwrap(),
        );
        assert!(
            h.contains(&(b":authority".to_vec(), b"plugin".to_vec())),
            "{h:?}"
        );
        assert_eq!(rw.replaced, 2);
    }

    #[test]
    fn padding_priority_and_continuations_are_read_and_a_large_block_split() {
        let (mut client_enc, mut server_dec) =
            (loona_hpack::Encoder::new(), loona_hpack::Decoder::new());
        let mut rw = Rewriter::new();
        let big = vec![b'x'; 20_000];
        let block = client_enc.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":authority", b"%2Fs"),
            (b"x-big", &big[..]),
        ]);
        // Padded, with priority, the block split over a CONTINUATION.
        let (a, b) = block.split_at(100);
        let mut payload = vec![3u8];
        payload.extend_from_slice(&[0, 0, 0, 0, 7]);
        payload.extend_from_slice(a);
        payload.extend_from_slice(&[0, 0, 0]);
        let head = Head {
            len: payload.len(),
            kind: HEADERS,
            flags: PADDED | PRIORITY,
            stream: 3,
        };
        let out = rw.frames(&head, &payload, b).unwrap();
        let first = Head::parse(out[..9].try_into().unwrap());
        assert_eq!(
            first.flags, PRIORITY,
            "no END_HEADERS: a CONTINUATION follows"
        );
        assert_eq!(&out[9..14], &[0, 0, 0, 0, 7], "the priority kept");
        assert!(first.len <= MAX_FRAME);
        let h = decoded(&mut server_dec, &out);
        assert!(h.contains(&(b":authority".to_vec(), b"localhost".to_vec())));
        assert!(h.iter().any(|(n, v)| n == b"x-big" && v.len() == 20_000));
        let bad = Head {
            len: 1,
            kind: HEADERS,
            flags: PADDED,
            stream: 5,
        };
        assert!(matches!(
            rw.frames(&bad, &[9], &[]),
            Err(RelayError::Malformed)
        ));
    }
}
