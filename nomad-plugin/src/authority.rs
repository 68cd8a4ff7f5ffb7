//! gRPC clients built on gRPC's C core (Python's `grpcio`, C++, Ruby, PHP) name a Unix
//! socket's path as the `:authority` of their requests, percent-encoded
//! (`%2Ftmp%2Fpaddock-plugin…%2Fplugin.sock`). That is no valid URI authority, and the
//! HTTP/2 server under tonic resets every such stream (`PROTOCOL_ERROR`, "malformed
//! authority"), with no setting to relax it. go-plugin's Go client sends a plain name.
//!
//! So every connection to the plugin's socket is read through [`Mended`]: the client's
//! frames reach the server unchanged, except header blocks (`HEADERS` and its
//! `CONTINUATION`s), which are decoded (HPACK, with the dynamic table the client's encoder
//! keeps) and, once one named an authority the server would refuse, encoded again with
//! `localhost` (what go-plugin's client sends) in its place. A connection whose first
//! request needs no change (Go's client, tonic's) is passed through untouched from then on;
//! the server's writes always go straight to the socket.
//! On a Unix socket the authority names nothing the plugin uses, so no information is lost.

use http::uri::Authority;
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
    /// Authorities replaced so far.
    replaced: u64,
    /// Whether a block was encoded again: from then on every block is (the server's
    /// table follows this encoder, no longer the client's).
    encoding: bool,
}

impl Rewriter {
    fn new() -> Self {
        Rewriter {
            decoder: loona_hpack::Decoder::new(),
            encoder: loona_hpack::Encoder::new(),
            replaced: 0,
            encoding: false,
        }
    }

    /// A header block, its authority made acceptable; `None` when it needs no change and
    /// no block was encoded again before (the client's own bytes may go on).
    fn block(&mut self, block: &[u8]) -> Result<Option<Vec<u8>>, RelayError> {
        let mut headers = self
            .decoder
            .decode(block)
            .map_err(|e| RelayError::Hpack(format!("{e:?}")))?;
        for (name, value) in &mut headers {
            if name.as_slice() == b":authority" && Authority::try_from(value.as_slice()).is_err() {
                *value = STAND_IN.to_vec();
                self.replaced += 1;
                if !self.encoding {
                    tracing::debug!(
                        "a client names the socket's path as its authority: sent as localhost"
                    );
                }
                self.encoding = true;
            }
        }
        Ok(self.encoding.then(|| {
            self.encoder
                .encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
        }))
    }

    /// A `HEADERS` frame's payload (`flags` its flags) and any `CONTINUATION`s' fragments:
    /// the frames to send instead, one `HEADERS` and as many `CONTINUATION`s as the block
    /// needs at the smallest frame size every peer accepts; `None` when the client's own
    /// frames may go on unchanged.
    fn frames(
        &mut self,
        head: &Head,
        payload: &[u8],
        continued: &[u8],
    ) -> Result<Option<Vec<u8>>, RelayError> {
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
        let Some(block) = self.block(&block)? else {
            return Ok(None);
        };

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
        Ok(Some(out))
    }
}

/// What the stream does with the client's bytes.
enum Mode {
    /// Waiting for the connection preface.
    Preface,
    /// Reading frames, rewriting header blocks.
    Frames,
    /// Passing everything through: the first header block's authority was one the server
    /// accepts (a client sends the same one on every request of a connection), so nothing
    /// is decoded from then on.
    Pass,
}

/// A client's connection as the server reads it: its frames as the client sent them, its
/// header blocks with an authority the server accepts. Reads are parsed in place (no
/// task, no copy for what the server writes back); a connection whose first request
/// needs no change is passed through untouched from then on.
pub struct Mended {
    io: UnixStream,
    mode: Mode,
    rw: Rewriter,
    /// Read from the client, not yet a whole frame (or header block).
    pending: Vec<u8>,
    /// Ready for the server, from `ready_at` on.
    ready: Vec<u8>,
    ready_at: usize,
}

/// Serve `client` through the rewriter.
pub fn relay(client: UnixStream) -> Mended {
    Mended {
        io: client,
        mode: Mode::Preface,
        rw: Rewriter::new(),
        pending: Vec::new(),
        ready: Vec::new(),
        ready_at: 0,
    }
}

impl tonic::transport::server::Connected for Mended {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl Mended {
    /// Move what `pending` holds whole to `ready`.
    fn advance(&mut self) -> Result<(), RelayError> {
        loop {
            match self.mode {
                Mode::Pass => {
                    self.ready.append(&mut self.pending);
                    return Ok(());
                }
                Mode::Preface => {
                    if self.pending.len() < PREFACE.len() {
                        return Ok(());
                    }
                    if &self.pending[..PREFACE.len()] != PREFACE {
                        return Err(RelayError::Preface);
                    }
                    self.ready.extend(self.pending.drain(..PREFACE.len()));
                    self.mode = Mode::Frames;
                }
                Mode::Frames => {
                    if !self.next_frames()? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Take the next frame (a header block with its CONTINUATIONs) from `pending` into
    /// `ready`; `false` while it is not all there.
    fn next_frames(&mut self) -> Result<bool, RelayError> {
        let p = &self.pending;
        let Some(raw) = p.get(..9) else {
            return Ok(false);
        };
        let head = Head::parse(raw.try_into().expect("nine bytes"));
        let end = 9 + head.len;
        if p.len() < end {
            return Ok(false);
        }
        if head.kind != HEADERS {
            self.ready.extend(self.pending.drain(..end));
            return Ok(true);
        }
        // The block's CONTINUATIONs follow at once, on the same stream (RFC 9113 §6.10).
        let mut at = end;
        let mut continued = Vec::new();
        let mut ended = head.flags & END_HEADERS != 0;
        while !ended {
            let Some(raw) = p.get(at..at + 9) else {
                return Ok(false);
            };
            let ch = Head::parse(raw.try_into().expect("nine bytes"));
            if ch.kind != CONTINUATION || ch.stream != head.stream {
                return Err(RelayError::Interleaved {
                    stream: head.stream,
                    kind: ch.kind,
                });
            }
            if continued.len() + ch.len > MAX_BLOCK {
                return Err(RelayError::TooLarge);
            }
            let Some(fragment) = p.get(at + 9..at + 9 + ch.len) else {
                return Ok(false);
            };
            continued.extend_from_slice(fragment);
            at += 9 + ch.len;
            ended = ch.flags & END_HEADERS != 0;
        }
        match self.rw.frames(&head, &p[9..end], &continued)? {
            Some(frames) => {
                self.ready.extend_from_slice(&frames);
                self.pending.drain(..at);
            }
            None => {
                // Nothing to mend in the first block: this client's authority is fine.
                self.ready.extend(self.pending.drain(..at));
                self.mode = Mode::Pass;
            }
        }
        Ok(true)
    }
}

impl tokio::io::AsyncRead for Mended {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let me = self.get_mut();
        loop {
            if me.ready_at < me.ready.len() {
                let n = buf.remaining().min(me.ready.len() - me.ready_at);
                buf.put_slice(&me.ready[me.ready_at..me.ready_at + n]);
                me.ready_at += n;
                if me.ready_at == me.ready.len() {
                    me.ready.clear();
                    me.ready_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if matches!(me.mode, Mode::Pass) && me.pending.is_empty() {
                return std::pin::Pin::new(&mut me.io).poll_read(cx, buf);
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut rb = tokio::io::ReadBuf::new(&mut chunk);
            match std::pin::Pin::new(&mut me.io).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                    // The client closed; a frame it left half-sent is dropped with it.
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(())) => me.pending.extend_from_slice(rb.filled()),
            }
            if let Err(e) = me.advance() {
                tracing::warn!(error = %e, "a client connection was cut");
                return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)));
            }
        }
    }
}

impl tokio::io::AsyncWrite for Mended {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
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
            let out = rw.frames(&head(b.len()), &b, &[]).unwrap().expect("mended");
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
            &rw.frames(&head(b.len()), &b, &[])
                .unwrap()
                .expect("encoded, once begun"),
        );
        assert!(
            h.contains(&(b":authority".to_vec(), b"plugin".to_vec())),
            "{h:?}"
        );
        assert_eq!(rw.replaced, 2);
    }

    #[test]
    fn a_client_whose_first_authority_is_fine_is_passed_through() {
        let mut client_enc = loona_hpack::Encoder::new();
        let mut rw = Rewriter::new();
        let b = block_of(&mut client_enc, b"localhost");
        let head = Head {
            len: b.len(),
            kind: HEADERS,
            flags: END_HEADERS,
            stream: 1,
        };
        assert!(rw.frames(&head, &b, &[]).unwrap().is_none());
        assert_eq!(rw.replaced, 0);
    }

    /// The stream the server reads, over a real socket pair: grpcio's preface, SETTINGS,
    /// a header block naming the socket's path, then DATA; and the server's writes reach
    /// the client untouched.
    #[tokio::test]
    async fn the_server_reads_mended_frames_and_writes_straight_through() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server_side) = UnixStream::pair().unwrap();
        let mut mended = relay(server_side);
        let mut enc = loona_hpack::Encoder::new();
        let block = block_of(&mut enc, b"%2Ftmp%2Fp%2Fplugin.sock");
        let mut sent = PREFACE.to_vec();
        Head {
            len: 0,
            kind: 0x4,
            flags: 0,
            stream: 0,
        }
        .write(&mut sent);
        Head {
            len: block.len(),
            kind: HEADERS,
            flags: END_HEADERS,
            stream: 1,
        }
        .write(&mut sent);
        sent.extend_from_slice(&block);
        Head {
            len: 3,
            kind: 0x0,
            flags: END_STREAM,
            stream: 1,
        }
        .write(&mut sent);
        sent.extend_from_slice(b"abc");
        // In two writes, split inside the header block: the reader waits for all of it.
        let cut = PREFACE.len() + 9 + 12;
        client.write_all(&sent[..cut]).await.unwrap();
        client.write_all(&sent[cut..]).await.unwrap();
        drop(client.shutdown().await);
        let mut got = Vec::new();
        mended.read_to_end(&mut got).await.unwrap();
        assert!(got.starts_with(PREFACE));
        let after = &got[PREFACE.len()..];
        assert_eq!(
            &after[..9],
            &sent[PREFACE.len()..PREFACE.len() + 9],
            "SETTINGS as sent"
        );
        let frames = &after[9..after.len() - 12];
        let h = decoded(&mut loona_hpack::Decoder::new(), frames);
        assert!(
            h.contains(&(b":authority".to_vec(), b"localhost".to_vec())),
            "{h:?}"
        );
        assert!(after.ends_with(b"abc"), "DATA as sent");
        mended.write_all(b"from the server").await.unwrap();
        let mut back = [0u8; 15];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"from the server");
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
        let out = rw.frames(&head, &payload, b).unwrap().expect("mended");
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
