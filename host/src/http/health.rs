//! The operator's routes, at the root whatever the mount path (load balancers and Prometheus are
//! configured per host, not per application): `GET /healthz` (liveness), `GET /readyz`
//! (readiness, `crate::health`) and `GET /metrics` (`crate::metrics`, behind `metricsToken` when
//! it is set). None is rate limited, IP-filtered or logged in the activity log: they are read
//! every few seconds by machines.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use serde_json::json;
use subtle::ConstantTimeEq as _;

use super::SharedState;

pub fn router() -> Router<SharedState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// `GET /healthz`: the process answers. Always 200 while it does, draining included (a
/// draining instance must not be restarted before it finishes its requests).
async fn healthz() -> Response {
    super::json(&json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 when every check passes, else 503; the body lists the checks either way.
async fn readyz(State(state): State<SharedState>) -> Response {
    let readiness = crate::health::readiness(
        state.store.as_ref(),
        state.datasource.pools(),
        state.plugins.len(),
        &state.lifecycle,
    )
    .await;
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = super::json_with(status, &readiness);
    // A cached "ready" would hide the drain from the balancer.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `GET /metrics`: the Prometheus text format. With `metricsToken` set, a request without
/// `Authorization: Bearer <it>` is answered 401.
async fn metrics(State(state): State<SharedState>, headers: HeaderMap) -> Response {
    if let Some(token) = &state.metrics_token {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(presented.as_bytes().ct_eq(token.expose().as_bytes())) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"metrics\"")],
                "metrics need `Authorization: Bearer <metricsToken>`\n",
            )
                .into_response();
        }
    }
    let body = crate::metrics::metrics().render(&snapshot(&state).await);
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

/// The served generation's gauges: breakers, pools, the run queue, the lifecycle.
async fn snapshot(state: &crate::state::AppState) -> crate::metrics::Snapshot {
    let queue = match &state.store {
        Some(store) => match store.queue_depth().await {
            Ok((queued, oldest)) => {
                let waited_ms = oldest.map_or(0, |t| crate::platform::store::now_ms() - t);
                Some((
                    queued,
                    std::time::Duration::from_millis(u64::try_from(waited_ms).unwrap_or(0)),
                ))
            }
            // The other figures are still worth a scrape.
            Err(error) => {
                tracing::warn!(%error, "metrics: cannot read the run queue");
                None
            }
        },
        None => None,
    };
    crate::metrics::Snapshot {
        breakers: state
            .plugins
            .iter()
            .map(|p| (p.info.name.clone(), p.breaker_open()))
            .collect(),
        pools: state
            .datasource
            .pools()
            .into_iter()
            .map(|named| {
                let (size, idle, max) = named.pool.usage();
                crate::metrics::PoolUse {
                    name: named.name,
                    size,
                    idle,
                    max,
                }
            })
            .collect(),
        queue,
        draining: state.lifecycle.is_draining(),
    }
}
