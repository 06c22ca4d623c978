//! Process logging: one line per event on stderr, as text or as JSON (`logFormat`), filtered by
//! `loggerLevel`, and written in batches so that a request never makes a syscall to log.
//!
//! Why batches: with `fmt()`'s default writer every event takes the stderr lock and makes one
//! `write(2)` on the thread that logged it, a tokio worker in the middle of a request. Here the
//! formatted line is appended to a buffer in memory and a `canopy-log` thread writes the buffer
//! out every 50 ms (a full 64 KiB batch is written at once). See [`batch`] for why this is not a
//! channel to a writer thread, and `benches/log_lines.rs` for the measurements.

mod batch;
#[cfg(feature = "otel")]
pub mod otel;

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};

pub use batch::{BatchGuard, BatchWriter};
use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::LogFormat;

/// Keeps the flush thread running; dropping it writes out every pending line (and sends the
/// spans still queued for export). Hold it for the life of the process (`main` drops it last,
/// after the server has shut down).
#[must_use = "dropping the guard stops the flush thread"]
#[derive(Debug)]
pub struct LogGuard {
    #[cfg(feature = "otel")]
    _export: Option<otel::Export>,
    _batch: BatchGuard,
}

/// Whether spans are exported (`--otel-endpoint`): the request, plugin and SQL spans are only
/// opened then, so a build or a run without the export pays nothing for them.
static SPANS: AtomicBool = AtomicBool::new(false);

/// Whether to open spans for the trace export.
pub fn spans() -> bool {
    SPANS.load(Ordering::Relaxed)
}

/// Starts logging for the process: `filter` is an `EnvFilter` directive (`info`,
/// `info,canopy=debug`), `format` the line format, `traces` the OTLP endpoint spans are exported
/// to (a build without the `otel` feature refuses one; `Config::load` says so first). Also routes
/// the `log` crate's records (sqlx emits some) into the same output.
pub fn init(filter: &str, format: LogFormat, traces: Option<&str>) -> anyhow::Result<LogGuard> {
    let (writer, guard) = stderr_writer()?;
    // Colours only for a person watching a terminal: escape codes in a log file or a collector
    // are noise (and JSON lines never carry them).
    let ansi = format == LogFormat::Text && std::io::stderr().is_terminal();
    // `mut` is only used by the trace export's layer.
    #[cfg_attr(
        not(feature = "otel"),
        allow(unused_mut, reason = "only the otel build adds a layer to it")
    )]
    let mut layers = vec![
        lines(format, writer, ansi)
            .with_filter(EnvFilter::try_new(filter)?)
            .boxed(),
    ];
    #[cfg(feature = "otel")]
    let export = match traces {
        Some(endpoint) => {
            // Spans at info and above, whatever `loggerLevel` keeps of the lines: a quiet log
            // (`warn`) must not empty the traces.
            let (layer, export) = otel::layer(endpoint)?;
            layers.push(
                layer
                    .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
                    .boxed(),
            );
            SPANS.store(true, Ordering::Relaxed);
            Some(export)
        }
        None => None,
    };
    #[cfg(not(feature = "otel"))]
    if traces.is_some() {
        anyhow::bail!(TRACES_NOT_BUILT);
    }
    Registry::default().with(layers).try_init()?;
    Ok(LogGuard {
        #[cfg(feature = "otel")]
        _export: export,
        _batch: guard,
    })
}

/// Why `--otel-endpoint` is refused by a build without the export.
pub const TRACES_NOT_BUILT: &str = "this canopy was built without OpenTelemetry export: build it \
     with `cargo build --release --features otel` to use --otel-endpoint";

/// Whether this build can export traces (the `otel` feature).
pub const TRACES_BUILT: bool = cfg!(feature = "otel");

/// The batched stderr writer and the guard of its flush thread.
pub fn stderr_writer() -> std::io::Result<(BatchWriter<std::io::Stderr>, BatchGuard)> {
    batch::batch_writer(std::io::stderr())
}

/// The layer that writes one line per event to `writer` (filtered by `loggerLevel` where it is
/// added: the trace export has its own level).
fn lines<W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Layer<Registry> + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => layer.boxed(),
        LogFormat::Json => layer
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .boxed(),
    }
}

/// The subscriber `init` installs (without the trace export), writing to `writer`; public so
/// that tests and benchmarks can capture exactly what the binary writes.
///
/// A JSON line is one flat object: `timestamp`, `level`, `target`, then the event's fields at top
/// level (`message` and, for the request line, `method`, `path`, `route` (the route family of
/// `/metrics`), `user` (the id the request acted as, `-` for none), `status`, `duration_ms`,
/// `correlation_id`), so that collectors index them without unpacking a nested `fields`.
pub fn subscriber<W>(
    filter: &str,
    format: LogFormat,
    writer: W,
    ansi: bool,
) -> anyhow::Result<Box<dyn Subscriber + Send + Sync>>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    Ok(Box::new(Registry::default().with(
        lines(format, writer, ansi).with_filter(EnvFilter::try_new(filter)?),
    )))
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use serde_json::Value as Json;

    use super::*;

    /// A writer that keeps every byte, for reading the lines back.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("not poisoned").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Capture {
        type Writer = Self;
        fn make_writer(&'w self) -> Self {
            self.clone()
        }
    }

    impl Capture {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("not poisoned").clone()).expect("utf-8")
        }
    }

    fn request_line() {
        tracing::info!(
            target: "canopy::http",
            method = %"GET",
            path = %"/forest/orders",
            status = 200_u16,
            duration_ms = 1.5,
            correlation_id = "c0ffee",
            "request"
        );
    }

    #[test]
    fn json_lines_are_flat_objects_with_the_event_fields() {
        let capture = Capture::default();
        let sub = subscriber("info", LogFormat::Json, capture.clone(), false).expect("valid");
        tracing::subscriber::with_default(sub, request_line);
        let text = capture.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let line: Json = serde_json::from_str(lines[0]).expect("one JSON object per line");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["target"], "canopy::http");
        assert_eq!(line["message"], "request");
        assert_eq!(line["method"], "GET");
        assert_eq!(line["path"], "/forest/orders");
        assert_eq!(line["status"], 200);
        assert_eq!(line["duration_ms"], 1.5);
        assert_eq!(line["correlation_id"], "c0ffee");
        assert!(line["timestamp"].is_string());
        assert!(line.get("fields").is_none() && line.get("span").is_none());
    }

    #[test]
    fn text_lines_carry_the_fields_without_escape_codes() {
        let capture = Capture::default();
        let sub = subscriber("info", LogFormat::Text, capture.clone(), false).expect("valid");
        tracing::subscriber::with_default(sub, request_line);
        let text = capture.text();
        assert!(text.contains(" INFO canopy::http: request method=GET path=/forest/orders status=200 duration_ms=1.5 correlation_id=\"c0ffee\""), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn the_filter_drops_lines_below_the_level() {
        let capture = Capture::default();
        let sub = subscriber("warn", LogFormat::Json, capture.clone(), false).expect("valid");
        tracing::subscriber::with_default(sub, request_line);
        assert_eq!(capture.text(), "");
    }

    #[test]
    fn an_invalid_filter_is_refused() {
        assert!(subscriber("canopy=loud", LogFormat::Text, Capture::default(), false).is_err());
    }

    #[test]
    fn the_batch_writer_delivers_every_line_when_its_guard_drops() {
        let capture = Capture::default();
        let (writer, guard) = batch::batch_writer(capture.clone()).expect("thread");
        let sub = subscriber("info", LogFormat::Json, writer, false).expect("valid");
        tracing::subscriber::with_default(sub, || {
            for _ in 0..10_000 {
                request_line();
            }
        });
        drop(guard);
        let text = capture.text();
        assert_eq!(text.lines().count(), 10_000);
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<Json>(l).is_ok())
        );
    }
}
