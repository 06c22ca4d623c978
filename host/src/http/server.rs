//! The HTTP/1 server of `canopy serve`: accepts connections and serves the router on each, with
//! the limits that keep one client from holding the server's resources. `axum::serve` takes no
//! settings, so this is its loop with three additions:
//!
//! - **Request head size.** A request line plus headers larger than [`ServerLimits::max_header_size`]
//!   is answered `431 Request Header Fields Too Large` and the connection closed, as Node does past
//!   its 16 KiB default. The URL is part of the head, so this is also the URL limit.
//! - **Header read timeout.** A connection must deliver a complete request head within
//!   [`ServerLimits::headers_timeout`] of being opened (or of its previous response): a client that
//!   connects and sends nothing, or dribbles its headers, is closed.
//! - **Body timeout.** A request must deliver its whole body within
//!   [`ServerLimits::body_timeout`] of its head, as Node's `requestTimeout` bounds a whole request:
//!   a client that dribbles a body is answered `408 Request Timeout` and its connection closed,
//!   instead of holding a handler (and a database connection behind it) for as long as it likes.
//! - **Keep-alive timeout.** A connection with no request in progress for
//!   [`ServerLimits::keep_alive_timeout`] after its last response is closed, as Node's
//!   `keepAliveTimeout` does.
//!
//! Shutdown is graceful: once the `shutdown` future resolves, no connection is accepted, idle
//! connections close, and requests in flight finish before [`serve`] returns.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt as _;

use crate::config::HttpConfig;

/// The connection limits of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Largest request head (request line, URL and headers), in bytes.
    pub max_header_size: usize,
    /// Time a connection has to deliver a complete request head.
    pub headers_timeout: Duration,
    /// Time an idle connection stays open after its last response.
    pub keep_alive_timeout: Duration,
    /// Time a request has to deliver its whole body, from its head.
    pub body_timeout: Duration,
}

impl ServerLimits {
    /// The limits of `maxHeaderSize`, `headersTimeoutInSeconds` and `keepAliveTimeoutInSeconds`.
    pub fn new(http: &HttpConfig) -> Self {
        Self {
            max_header_size: http.max_header_size,
            headers_timeout: http.headers_timeout,
            keep_alive_timeout: http.keep_alive_timeout,
            body_timeout: http.body_timeout,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits for the requests in
/// flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Each connection task holds a receiver: `closed()` resolves when the last one is gone.
    let (open_tx, open_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::error!(target: "canopy::http", %error, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            stop_rx.clone(),
            open_rx.clone(),
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_rx);
    open_tx.closed().await;
}

/// Serves one connection until it closes, a timeout closes it, or the server stops.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ServerLimits,
    mut stop: watch::Receiver<bool>,
    _open: watch::Receiver<()>,
) {
    let activity = Arc::new(Activity::default());
    let service = Tracked {
        router,
        activity: Arc::clone(&activity),
        peer,
        body_timeout: limits.body_timeout,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.headers_timeout)
        .max_header_size(limits.max_header_size);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let mut closing = false;
    loop {
        let idle_until = activity.idle_until(limits.keep_alive_timeout);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(target: "canopy::http", %error, "connection ended");
                }
                return;
            }
            _ = stop.changed(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            () = sleep_until(idle_until), if !closing && idle_until.is_some() => {
                if activity.idle_until(limits.keep_alive_timeout).is_some_and(|t| t <= Instant::now()) {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
            // A request started or ended: the idle deadline moved.
            () = activity.changed.notified(), if !closing => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The requests of one connection: how many are in progress, and when the last one ended.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    /// `None` until a first response: before it, the header read timeout bounds the wait.
    last_end: Mutex<Option<Instant>>,
    changed: Notify,
}

impl Activity {
    /// When the connection becomes idle for too long, if it is idle now.
    fn idle_until(&self, keep_alive: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last_end = *self.last_end.lock().unwrap_or_else(|e| e.into_inner());
        last_end.map(|t| t + keep_alive)
    }

    fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_one();
        InFlight(Arc::clone(self))
    }
}

/// One request in progress, until its response body is sent (or dropped: a cancelled request
/// ends too).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.last_end.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

/// The router as a hyper service that records each request's activity, and gives each request
/// its peer's address (`ConnectInfo`, read by the IP whitelist).
struct Tracked {
    router: Router,
    activity: Arc<Activity>,
    /// The client's address, handed to handlers as axum's `ConnectInfo` (IP whitelist, sign-in
    /// rate limits).
    peer: SocketAddr,
    /// Time each request has to deliver its body.
    body_timeout: Duration,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.start();
        let router = self.router.clone();
        let expired = Arc::new(AtomicBool::new(false));
        let read = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + self.body_timeout;
        let mut request = request.map(|body| {
            read.store(body.is_end_stream(), Ordering::Release);
            Body::new(Deadline {
                body,
                deadline,
                sleep: None,
                expired: Arc::clone(&expired),
                read: Arc::clone(&read),
            })
        });
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(self.peer));
        let timeout = self.body_timeout;
        Box::pin(async move {
            let response = router.oneshot(request).await;
            // Whatever the handler made of the failed read (each extractor answers its own 400),
            // the client is told the real reason, and the connection is not reused.
            if expired.load(Ordering::Acquire) {
                let mut response = crate::http::json_with(
                    axum::http::StatusCode::REQUEST_TIMEOUT,
                    &serde_json::json!({"errors": [{
                        "name": "RequestTimeoutError",
                        "detail": format!(
                            "The request body did not arrive within {} s",
                            timeout.as_secs()
                        ),
                        "status": 408,
                    }]}),
                );
                response.headers_mut().insert(
                    axum::http::header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
                return Ok(response);
            }
            // A route that answered without reading the body (a 401 before a POST's JSON is
            // read) leaves its bytes on the connection, and hyper then closes it after the
            // response: say so, or a client that reuses the connection for its next request
            // finds it closed under it (a third of such requests failed in the soak test).
            let mut response = response?;
            if !read.load(Ordering::Acquire) {
                response.headers_mut().insert(
                    axum::http::header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
            }
            // A streamed body (a CSV export) may take long after the head: the request stays in
            // progress until its last frame.
            Ok(response.map(|body| {
                Body::new(Guarded {
                    body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A request body that must arrive whole by `deadline`: past it, the next read fails and
/// `expired` says why. The timer is armed only when a read has to wait (a body already received,
/// or none, costs nothing).
struct Deadline {
    body: Incoming,
    deadline: Instant,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
    /// Set once the body has been read to its end.
    read: Arc<AtomicBool>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, axum::BoxError>>> {
        use std::task::Poll;
        let this = self.get_mut();
        match std::pin::Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                if frame.is_none() || this.body.is_end_stream() {
                    this.read.store(true, Ordering::Release);
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let deadline = this.deadline;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.expired.store(true, Ordering::Release);
                        Poll::Ready(Some(Err("the request body timed out".into())))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A response body that holds its request's [`InFlight`].
struct Guarded {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
