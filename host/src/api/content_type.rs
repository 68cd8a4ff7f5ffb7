//! A file's `ContentType` as Nomad's file stat answers it: Go's `http.DetectContentType`
//! (the WHATWG MIME sniffing algorithm) over the first 512 bytes, `application/json` for
//! a name ending `.json`, `application/octet-stream` for a directory, an empty file or one
//! that could not be read.

/// The content type of a file whose first bytes are `head` (at most 512 are looked at).
/// `None` for `head` stands for "not read" (a directory, an empty or unreadable file).
pub(super) fn detect(name: &str, head: Option<&[u8]>) -> String {
    if name.ends_with(".json") {
        return "application/json".into();
    }
    match head {
        Some(h) if !h.is_empty() => sniff(&h[..h.len().min(512)]).into(),
        _ => "application/octet-stream".into(),
    }
}

/// Exact signatures: (prefix, content type).
const EXACT: &[(&[u8], &str)] = &[
    (b"%PDF-", "application/pdf"),
    (b"%!PS-Adobe-", "application/postscript"),
    (b"\xFE\xFF", "text/plain; charset=utf-16be"),
    (b"\xFF\xFE", "text/plain; charset=utf-16le"),
    (b"\xEF\xBB\xBF", "text/plain; charset=utf-8"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
    (b"\x00\x00\x02\x00", "image/x-icon"),
    (b"BM", "image/bmp"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\x89PNG\x0D\x0A\x1A\x0A", "image/png"),
    (b"\xFF\xD8\xFF", "image/jpeg"),
    (b".snd", "audio/basic"),
    (b"OggS\x00", "application/ogg"),
    (b"MThd\x00\x00\x00\x06", "audio/midi"),
    (b"ID3", "audio/mpeg"),
    (b"\x1A\x45\xDF\xA3", "video/webm"),
    (b"\x00\x01\x00\x00", "font/ttf"),
    (b"OTTO", "font/otf"),
    (b"ttcf", "font/collection"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
    (b"\x1F\x8B\x08", "application/x-gzip"),
    (b"PK\x03\x04", "application/zip"),
    (b"Rar!\x1A\x07\x00", "application/x-rar-compressed"),
    (b"Rar!\x1A\x07\x01\x00", "application/x-rar-compressed"),
    (b"\x00\x61\x73\x6D", "application/wasm"),
];

/// Tags that make a document HTML when they open it (after white space), followed by a
/// space or `>`; matched without regard to case.
const HTML_TAGS: &[&str] = &[
    "<!DOCTYPE HTML",
    "<HTML",
    "<HEAD",
    "<SCRIPT",
    "<IFRAME",
    "<H1",
    "<DIV",
    "<FONT",
    "<TABLE",
    "<A",
    "<STYLE",
    "<TITLE",
    "<B",
    "<BODY",
    "<BR",
    "<P",
    "<!--",
];

fn sniff(data: &[u8]) -> &'static str {
    let first = data
        .iter()
        .position(|b| !matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' '))
        .unwrap_or(data.len());
    let trimmed = &data[first..];
    for tag in HTML_TAGS {
        let t = tag.as_bytes();
        if trimmed.len() > t.len()
            && trimmed[..t.len()].eq_ignore_ascii_case(t)
            && matches!(trimmed[t.len()], b' ' | b'>')
        {
            return "text/html; charset=utf-8";
        }
    }
    if trimmed.starts_with(b"<?xml") {
        return "text/xml; charset=utf-8";
    }
    if let Some((_, ct)) = EXACT.iter().find(|(sig, _)| data.starts_with(sig)) {
        return ct;
    }
    if data.len() >= 12 && &data[..4] == b"RIFF" {
        match &data[8..12] {
            b"WAVE" => return "audio/wave",
            b"AVI " => return "video/avi",
            b"WEBP" if data.len() >= 14 && &data[12..14] == b"VP" => return "image/webp",
            _ => {}
        }
    }
    if data.len() >= 12 && &data[4..8] == b"ftyp" {
        let boxes = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let mp4 = boxes <= data.len()
            && boxes.is_multiple_of(4)
            && (8..boxes)
                .step_by(4)
                .filter(|i| *i != 12 && i + 3 <= data.len())
                .any(|i| &data[i..i + 3] == b"mp4");
        if mp4 {
            return "video/mp4";
        }
    }
    let binary = data
        .iter()
        .any(|b| matches!(b, 0x00..=0x08 | 0x0B | 0x0E..=0x1A | 0x1C..=0x1F));
    if binary {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

#[cfg(test)]
mod tests {
    use super::detect;

    #[test]
    fn as_gos_detect_content_type() {
        let cases: &[(&str, &[u8], &str)] = &[
            ("log", b"hello\n", "text/plain; charset=utf-8"),
            ("x", b"  <html><body>", "text/html; charset=utf-8"),
            ("x", b"<!-- c -->", "text/html; charset=utf-8"),
            ("x", b"<?xml version=\"1.0\"?>", "text/xml; charset=utf-8"),
            ("x", b"%PDF-1.7", "application/pdf"),
            ("x", b"\x89PNG\r\n\x1a\n....", "image/png"),
            ("x", b"\x1f\x8b\x08\x00", "application/x-gzip"),
            ("x", b"PK\x03\x04zz", "application/zip"),
            ("x", b"\x00asm\x01\x00\x00\x00", "application/wasm"),
            ("x", b"\x7fELF\x02\x01\x01\x00", "application/octet-stream"),
            ("x", b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wave"),
            ("data.json", b"\x00binary", "application/json"),
        ];
        for (name, head, want) in cases {
            assert_eq!(detect(name, Some(head)), *want, "{head:?}");
        }
        assert_eq!(detect("empty", Some(b"")), "application/octet-stream");
        assert_eq!(detect("dir", None), "application/octet-stream");
    }
}
