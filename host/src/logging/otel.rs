//! OpenTelemetry trace export (`--otel-endpoint`), in builds with the `otel` feature: the spans
//! Canopy opens (one per request, one per plugin call, one per SQL read) go to an OTLP/HTTP
//! collector (the OpenTelemetry Collector, Jaeger, Tempo, Honeycomb…) as protobuf, in batches,
//! from the batch processor's own thread, so a request never waits for the collector.
//!
//! A request that arrives with a W3C `traceparent` header (from a balancer or a calling
//! service) continues that trace. The standard `OTEL_*` variables of the SDK apply
//! (`OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_SCHEDULE_DELAY`, …).

use anyhow::Context as _;
use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The OTLP/HTTP path of traces, appended to the endpoint as the SDK does for
/// `OTEL_EXPORTER_OTLP_ENDPOINT`.
const TRACES_PATH: &str = "/v1/traces";

/// The exporter's provider: flushed and stopped when the log guard drops.
pub struct Export {
    provider: SdkTracerProvider,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export").finish_non_exhaustive()
    }
}

impl Drop for Export {
    fn drop(&mut self) {
        // Sends the spans still queued: a stopping instance's last requests are in its trace.
        if let Err(error) = self.provider.shutdown() {
            eprintln!("OpenTelemetry: the last spans could not be sent: {error}");
        }
    }
}

/// The traces URL of `endpoint` (`http://collector:4318` → `http://collector:4318/v1/traces`;
/// a URL that already ends with the path is kept).
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        base.to_owned()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

/// The layer that turns spans into OpenTelemetry spans sent to `endpoint`, and the export to keep
/// alive beside it.
pub fn layer<S>(endpoint: &str) -> anyhow::Result<(impl tracing_subscriber::Layer<S>, Export)>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint))
        .build()
        .context("starting the OpenTelemetry exporter (--otel-endpoint)")?;
    // `OTEL_SERVICE_NAME` wins over the default name when set (the SDK's own detector).
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "canopy".to_owned());
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service)
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        )
        .build();
    let tracer = provider.tracer("canopy");
    let layer = tracing_opentelemetry::layer().with_tracer(tracer);
    Ok((layer, Export { provider }))
}

/// Makes `span` continue the trace of the request's `traceparent` header, when it has one.
pub fn continue_trace(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    let context = TraceContextPropagator::new().extract(&Headers(headers));
    // A request without the header gets an empty context: the span starts a trace of its own.
    let _ = span.set_parent(context);
}

/// A request's headers, as the propagator reads them.
struct Headers<'a>(&'a axum::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(axum::http::HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_appended_once() {
        assert_eq!(
            traces_url("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://otel.example.com/v1/traces"),
            "https://otel.example.com/v1/traces"
        );
    }
}
