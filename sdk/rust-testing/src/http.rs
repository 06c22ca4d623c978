//! One HTTP/1.1 request per connection over `TcpStream`: the test server is local and speaks
//! plain HTTP/1, so the request is written whole, the connection is closed by the server after
//! the answer (`Connection: close`), and the answer is read to its end.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value as Json;

use crate::error::{Error, Result};

/// A server's address, from `http://host:port/base`.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// `host:port`, as connected to and sent as `Host`.
    authority: String,
    /// The path before every route (`/forest`), without a trailing `/`.
    pub(crate) base: String,
}

impl Origin {
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            Error::Unexpected(format!(
                "{url}: the testing client speaks plain http:// to a local server"
            ))
        })?;
        let (authority, base) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let authority = if authority.contains(':') {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(Self {
            authority,
            base: base.trim_end_matches('/').to_owned(),
        })
    }
}

/// An answer: its status and body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// The longest a request may take: an action of a plugin may run for seconds (its limit is
/// 10 s by default), a first call may wait on a compiled plugin.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Sends `method path` with the bearer `token` and a JSON `body`, and reads the whole answer.
pub(crate) fn send(
    origin: &Origin,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Json>,
) -> Result<Answer> {
    let context = || format!("{method} http://{}{path}", origin.authority);
    let mut stream = TcpStream::connect(&origin.authority).map_err(|e| Error::io(context(), e))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| Error::io(context(), e))?;
    let body = body.map(Json::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json\r\nConnection: close\r\n",
        origin.authority
    );
    if !body.is_empty() || method != "GET" {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(|e| Error::io(context(), e))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| Error::io(context(), e))?;
    parse(&raw).ok_or_else(|| {
        Error::Unexpected(format!(
            "{}: not an HTTP answer: {}",
            context(),
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        ))
    })
}

/// The status and body of a whole HTTP/1.1 answer, its body de-chunked when it was sent in
/// chunks (a streamed answer has no length).
fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Some(Answer { status, body })
}

/// The data of a chunked body: each chunk is its size in hex, CRLF, the bytes, CRLF; a size of
/// zero ends it.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).ok()?;
        // Chunk extensions (`;name=value`) carry nothing the kit needs.
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// `text` percent-encoded for a path segment or a query value: everything but the unreserved
/// characters of RFC 3986.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_answer_is_read_as_its_data() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n";
        let answer = parse(raw).expect("an answer");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, b"Wikipedia");
    }

    #[test]
    fn an_answer_with_a_length_keeps_its_body() {
        let raw = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}";
        let answer = parse(raw).expect("an answer");
        assert_eq!(answer.status, 404);
        assert_eq!(answer.body, b"{}");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode(r#"{"a": 1}"#), "%7B%22a%22%3A%201%7D");
        assert_eq!(encode("Say hello"), "Say%20hello");
    }

    #[test]
    fn an_origin_keeps_its_base_path() {
        let origin = Origin::parse("http://127.0.0.1:4000/admin/forest/").expect("an origin");
        assert_eq!(origin.authority, "127.0.0.1:4000");
        assert_eq!(origin.base, "/admin/forest");
    }
}
