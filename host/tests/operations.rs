//! The operator's view of a real `canopy serve` process: `/healthz`, `/readyz` with its checks,
//! `/metrics` behind its token and read by a Prometheus text-format parser, and the drain on
//! SIGTERM: `/readyz` fails while connections are still accepted, then the listener closes, the
//! request in flight gets its answer, and the process exits cleanly; with the trace export built
//! in, the spans a request makes reach a real OTLP/HTTP receiver. Lives in the `canopy` package
//! for `CARGO_BIN_EXE_canopy`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Server, TempDir, serving_address};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const METRICS_TOKEN: &str = "operations-metrics-token";

/// A SQLite database of one table, and a server over it that drains for 2 s on SIGTERM.
async fn start(dir: &std::path::Path) -> (Server, String) {
    start_with(dir, &[], &[]).await
}

/// [`start`] with more arguments and environment variables.
async fn start_with(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Server, String) {
    let database = dir.join("data.db");
    let url = format!("sqlite:{}?mode=rwc", database.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(["--database-url", &format!("sqlite:{}", database.display())])
        .args(["--auth-secret", "operations-auth-secret-of-the-test"])
        .args(["--env-secret", &"5".repeat(64)])
        .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
        .arg("--data-dir")
        .arg(dir.join("state"))
        .arg("--schema-path")
        .arg(dir.join("schema.json"))
        .args(["--drain-delay-in-seconds", "2"])
        .args(["--shutdown-grace-in-seconds", "20"])
        .args(["--metrics-token", METRICS_TOKEN])
        .args(args)
        .envs(env.iter().copied())
        .env("CANOPY_ADMIN_PASSWORD", "first-admin-password")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address = serving_address(&mut child)
        .unwrap_or_else(|line| panic!("the server did not start: {line:?}"));
    (Server(child), address)
}

/// The samples of a scrape, parsed as Prometheus parses the text format.
fn scrape(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no sample {name} {labels:?}"));
    match &found.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => *v,
        other => panic!("{name} is not a single value: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn health_readiness_metrics_and_the_drain_of_a_stopping_instance() {
    let dir = TempDir::new("operations");
    let (mut server, address) = start(&dir.0).await;
    let base = format!("http://{address}");
    let client = reqwest::Client::new();

    // Liveness and readiness.
    let healthz = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
    assert_eq!(
        healthz.json::<serde_json::Value>().await.unwrap(),
        serde_json::json!({"status": "ok"})
    );
    let readyz = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(readyz.status(), 200);
    let readiness: serde_json::Value = readyz.json().await.unwrap();
    assert_eq!(readiness["ready"], true, "{readiness}");
    let checks: Vec<(&str, bool)> = readiness["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        checks,
        [
            ("store", true),
            ("database:sqlite", true),
            ("plugins", true),
            ("lifecycle", true)
        ]
    );

    // Metrics: three healthchecks of the agent's routes, then a scrape.
    for _ in 0..3 {
        let answer = client.get(format!("{base}/forest")).send().await.unwrap();
        assert_eq!(answer.status(), 200);
    }
    let refused = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let wrong = client
        .get(format!("{base}/metrics"))
        .bearer_auth("operations-metrics-tokeN")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert_eq!(
        metrics.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = metrics.text().await.unwrap();
    let parsed = scrape(&text);
    assert_eq!(
        sample(
            &parsed,
            "canopy_http_requests_total",
            &[("family", "forest"), ("status", "200")]
        ),
        3.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &parsed,
            "canopy_http_requests_total",
            &[("family", "metrics"), ("status", "401")]
        ),
        2.0
    );
    assert_eq!(
        sample(
            &parsed,
            "canopy_http_request_duration_seconds_count",
            &[("family", "forest")]
        ),
        3.0
    );
    assert!(
        sample(
            &parsed,
            "canopy_db_pool_connections",
            &[("database", "sqlite"), ("state", "max")]
        ) >= 1.0
    );
    assert_eq!(sample(&parsed, "canopy_workflow_runs_queued", &[]), 0.0);
    assert_eq!(
        sample(&parsed, "canopy_activity_log_dropped_total", &[]),
        0.0
    );
    assert_eq!(sample(&parsed, "canopy_draining", &[]), 0.0);

    // A request in flight: its head and half its body.
    let body = br#"{"renderingId": 1, "padding": "0123456789"}"#;
    let mut in_flight = tokio::net::TcpStream::connect(&address).await.unwrap();
    in_flight
        .write_all(
            format!(
                "POST /forest/authentication HTTP/1.1\r\nHost: x\r\nContent-Type: \
                 application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    in_flight.write_all(&body[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    // Draining: still accepting, but not ready.
    let draining = loop {
        let answer = client.get(format!("{base}/readyz")).send().await.unwrap();
        if answer.status() == 503 {
            break answer.json::<serde_json::Value>().await.unwrap();
        }
        assert!(signalled.elapsed() < Duration::from_secs(1), "still ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(draining["ready"], false);
    assert!(
        draining["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "lifecycle" && c["detail"] == "draining"),
        "{draining}"
    );

    // After the drain delay, the listener is closed.
    loop {
        if tokio::net::TcpStream::connect(&address).await.is_err() {
            break;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(6),
            "still accepting connections"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        signalled.elapsed() >= Duration::from_millis(1900),
        "closed before the drain delay: {:?}",
        signalled.elapsed()
    );

    // The request in flight still gets its answer.
    in_flight.write_all(&body[10..]).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), in_flight.read_to_end(&mut answer))
        .await
        .expect("the request in flight was answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    let status: u16 = answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    assert!(
        status < 500 && status != 408,
        "the request in flight failed: {answer}"
    );

    // And the process ends on its own, cleanly.
    let exited = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(20),
            "still running after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(exited.success(), "{exited:?}");
}

/// What an OTLP/HTTP collector received: the bodies POSTed to `/v1/traces`.
#[cfg(feature = "otel")]
type Received = std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

/// A collector on a free port, as the OpenTelemetry Collector's OTLP/HTTP receiver answers.
#[cfg(feature = "otel")]
async fn collector() -> (String, Received) {
    use axum::routing::post;
    let received = Received::default();
    let kept = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                kept.lock().unwrap().push(body.to_vec());
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), received)
}

/// The spans of every export received so far, decoded as a collector decodes them, with their
/// resource's `service.name`.
#[cfg(feature = "otel")]
fn spans(received: &Received) -> Vec<(String, opentelemetry_proto::tonic::trace::v1::Span)> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use prost::Message as _;
    let mut out = Vec::new();
    for body in received.lock().unwrap().iter() {
        let export = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        for resource in export.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref()?.value.clone());
            let service = match service {
                Some(Value::StringValue(name)) => name,
                _ => String::new(),
            };
            for scope in resource.scope_spans {
                for span in scope.spans {
                    out.push((service.clone(), span));
                }
            }
        }
    }
    out
}

/// A span attribute as text (strings and integers).
#[cfg(feature = "otel")]
fn attribute(span: &opentelemetry_proto::tonic::trace::v1::Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    match span
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?
    {
        Value::StringValue(text) => Some(text.clone()),
        Value::IntValue(number) => Some(number.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// With `--otel-endpoint`, a request's span reaches a real OTLP/HTTP receiver: it continues the
/// caller's `traceparent`, carries the route, status and correlation id, and the SQL read it made
/// is its child, all under the service name `canopy`.
#[cfg(feature = "otel")]
#[tokio::test(flavor = "multi_thread")]
async fn a_requests_spans_reach_the_otlp_collector_in_the_callers_trace() {
    let (endpoint, received) = collector().await;
    let dir = TempDir::new("operations-otel");
    let (_server, address) = start_with(
        &dir.0,
        &["--otel-endpoint", &endpoint],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let minted = Command::new(BIN)
        .args(["token", "--email", "admin@canopy.local"])
        .args(["--auth-secret", "operations-auth-secret-of-the-test"])
        .arg("--data-dir")
        .arg(dir.0.join("state"))
        .output()
        .unwrap();
    assert!(minted.status.success(), "{minted:?}");
    let token = String::from_utf8(minted.stdout).unwrap().trim().to_owned();

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let response = reqwest::Client::new()
        .get(format!("http://{address}/forest/books?timezone=UTC"))
        .bearer_auth(&token)
        .header("traceparent", format!("00-{trace}-{caller_span}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let correlation = response
        .headers()
        .get("x-forest-correlation-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();

    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let deadline = Instant::now() + Duration::from_secs(15);
    let (request, read) = loop {
        let spans = spans(&received);
        let request = spans.iter().find(|(_, s)| {
            hex(&s.trace_id) == trace
                && attribute(s, "url.path").as_deref() == Some("/forest/books")
        });
        let read = request.and_then(|(_, r)| {
            spans
                .iter()
                .find(|(_, s)| s.name == "SELECT books" && s.parent_span_id == r.span_id)
        });
        if let (Some(request), Some(read)) = (request, read) {
            break (request.clone(), read.clone());
        }
        assert!(
            Instant::now() < deadline,
            "no request span with its SQL read in the collector: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (service, request) = request;
    assert_eq!(service, "canopy");
    assert_eq!(request.name, "GET forest");
    assert_eq!(hex(&request.parent_span_id), caller_span);
    assert_eq!(attribute(&request, "http.route").as_deref(), Some("forest"));
    assert_eq!(
        attribute(&request, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(
        attribute(&request, "correlation_id").as_deref(),
        Some(correlation.as_str())
    );
    let (_, read) = read;
    assert_eq!(hex(&read.trace_id), trace);
    assert_eq!(
        attribute(&read, "db.system.name").as_deref(),
        Some("sqlite")
    );
}
