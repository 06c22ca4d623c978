//! The server's limits over a real socket: head size, header read timeout, body timeout,
//! keep-alive timeout, and graceful shutdown with a request in flight.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{ServerLimits, serve};

fn limits(headers: u64, keep_alive: u64) -> ServerLimits {
    ServerLimits {
        max_header_size: 1024,
        headers_timeout: Duration::from_millis(headers),
        keep_alive_timeout: Duration::from_millis(keep_alive),
        body_timeout: Duration::from_millis(400),
    }
}

/// A server on a free port: `/` answers at once, `/slow` after 600 ms. Returns its address and
/// the sender that stops it, and the task that ends when it has stopped.
async fn start(limits: ServerLimits) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let router = Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(600)).await;
                "slow"
            }),
        )
        // Answers without reading the body, as a route refusing a request's credentials does.
        .route("/refuse", axum::routing::post(|| async { "refused" }))
        // Reads the whole body, as every JSON route does.
        .route(
            "/echo",
            axum::routing::post(|body: axum::body::Bytes| async move { body.len().to_string() }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, router, limits, async {
        let _ = stopped.await;
    }));
    (address, stop, task)
}

/// Reads one response with a Content-Length body; `None` when the server closed first.
async fn response(stream: &mut TcpStream) -> Option<String> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return Some(text);
            }
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                return (!raw.is_empty()).then(|| String::from_utf8_lossy(&raw).into_owned());
            }
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
        }
    }
}

/// How long the server takes to close `stream`, reading (and ignoring) anything it sends.
async fn closed_after(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut buffer = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was never closed");
    started.elapsed()
}

#[tokio::test]
async fn a_request_head_over_the_limit_is_answered_431() {
    let (address, _stop, _task) = start(limits(10_000, 10_000)).await;
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    let path = format!("/?q={}", "a".repeat(2000));
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let answer = response(&mut stream).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");

    // A head under the limit is served.
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    stream
        .write_all(b"GET /?q=aaaa HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let answer = response(&mut stream).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_connection_that_sends_no_complete_head_is_closed_after_the_headers_timeout() {
    let (address, _stop, _task) = start(limits(300, 10_000)).await;
    // Nothing at all (a half-open or idle client).
    let mut silent = TcpStream::connect(&address).await.expect("connect");
    // Part of a head, then nothing (slowloris).
    let mut partial = TcpStream::connect(&address).await.expect("connect");
    partial
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    for stream in [&mut silent, &mut partial] {
        let waited = closed_after(stream).await;
        assert!(waited < Duration::from_secs(3), "{waited:?}");
    }
}

#[tokio::test]
async fn a_body_that_does_not_arrive_within_the_body_timeout_is_answered_408() {
    let (address, _stop, _task) = start(limits(10_000, 10_000)).await;
    // A complete head announcing 100 bytes, then 10 of them, then nothing.
    let mut slow = TcpStream::connect(&address).await.expect("connect");
    slow.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        .await
        .expect("write");
    let started = Instant::now();
    let answer = response(&mut slow).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(answer.contains("did not arrive within"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // A body sent at once is read whole.
    let mut fast = TcpStream::connect(&address).await.expect("connect");
    fast.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        .await
        .expect("write");
    let answer = response(&mut fast).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n5"), "{answer}");
}

#[tokio::test]
async fn an_answer_that_left_the_body_unread_says_the_connection_closes() {
    let (address, _stop, _task) = start(limits(10_000, 10_000)).await;
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    stream
        .write_all(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        .await
        .expect("write");
    let answer = response(&mut stream).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );

    // A body read to its end, or no body at all, keeps the connection.
    for request in [
        &b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"[..],
        b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let mut stream = TcpStream::connect(&address).await.expect("connect");
        stream.write_all(request).await.expect("write");
        let answer = response(&mut stream).await.expect("an answer");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            !answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let (address, _stop, _task) = start(limits(10_000, 300)).await;
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    for _ in 0..2 {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let answer = response(&mut stream).await.expect("an answer");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // Within the timeout, the connection is kept for the next request.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then closed long before the 10 s headers timeout.
    let waited = closed_after(&mut stream).await;
    assert!(waited < Duration::from_secs(3), "{waited:?}");
}

#[tokio::test]
async fn a_slow_response_is_not_cut_by_the_keep_alive_timeout() {
    let (address, _stop, _task) = start(limits(10_000, 100)).await;
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    for _ in 0..2 {
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let answer = response(&mut stream).await.expect("an answer");
        assert!(answer.ends_with("slow"), "{answer}");
    }
}

#[tokio::test]
async fn shutdown_lets_the_request_in_flight_finish() {
    let (address, stop, task) = start(limits(10_000, 10_000)).await;
    let mut stream = TcpStream::connect(&address).await.expect("connect");
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(()).expect("the server runs");
    let answer = response(&mut stream).await.expect("an answer");
    assert!(answer.ends_with("slow"), "{answer}");
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the server stops once the request is answered")
        .expect("no panic");
    assert!(
        TcpStream::connect(&address).await.is_err(),
        "still accepting"
    );
}
