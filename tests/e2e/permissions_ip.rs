//! The IP whitelist (protocol §5.7) and the permission caches (§5.2) through HTTP, with a real
//! store: exact, range and CIDR rules, unreadable rules ignored, the raw `x-forwarded-for` or
//! the socket address (given by the real server), the loopback exemption, 401 before 403;
//! with `instantCacheRefresh = false`, a right granted by another instance is seen at once (one
//! refetch on a denial), a revoked one within the time to live, and a scope change after
//! `POST /forest/scope-cache-invalidation`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use canopy::auth::CachePolicy;
use canopy::platform::documents::EnvironmentPermissions;
use canopy::platform::{Actor, Store};
use serde_json::{Value as Json, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::http::send;
use crate::permissions::{
    Options, Who, call, environment, forbidden, ids, on_stores, request, token, world, world_with,
};

const TZ: &str = "timezone=UTC";

fn rejected(ip: &str) -> Json {
    json!({"errors": [{"name": "ForbiddenError", "detail": format!("IP address rejected ({ip})"), "status": 403}]})
}

/// A GET of `who` as if sent by `socket` with this `x-forwarded-for`.
fn from(who: Who, uri: &str, forwarded: Option<&str>, socket: Option<&str>) -> Request<Body> {
    let mut request = request(who, "GET", uri, None);
    if let Some(forwarded) = forwarded {
        request
            .headers_mut()
            .insert("x-forwarded-for", forwarded.parse().unwrap());
    }
    if let Some(socket) = socket {
        let address = SocketAddr::new(socket.parse().unwrap(), 40000);
        request.extensions_mut().insert(ConnectInfo(address));
    }
    request
}

async fn ip_rules_let_in_exact_ranges_and_blocks(
    store: canopy_e2e::Backend,
    data: canopy_e2e::Backend,
) {
    let w = world(store, data).await;
    let orders = format!("/forest/orders/count?{TZ}");
    // Off: anyone.
    let (status, _, _) = send(&w.app, from(w.sam, &orders, Some("8.8.8.8"), None)).await;
    assert_eq!(status, StatusCode::OK);
    w.ip_whitelist(json!({"use_ip_whitelist": true, "rules": [
        {"type": 0, "ip": "10.0.0.1"},
        {"type": 1, "ipMinimum": "192.168.1.10", "ipMaximum": "192.168.1.20"},
        {"type": 2, "range": "172.16.0.0/12"},
        {"type": 2, "range": "2001:db8::/32"},
        {"type": 0, "ip": "not-an-ip"},
        {"type": 2, "range": "10.9.0.0/33"},
    ]}))
    .await;
    for allowed in [
        "10.0.0.1",
        "192.168.1.10",
        "192.168.1.20",
        "172.31.0.9",
        "2001:db8::42",
        "::ffff:10.0.0.1",
    ] {
        let (status, _, body) = send(&w.app, from(w.sam, &orders, Some(allowed), None)).await;
        assert_eq!(status, StatusCode::OK, "{allowed}: {body}");
    }
    for refused in [
        "10.0.0.2",
        "192.168.1.21",
        "172.32.0.1",
        "2001:db9::1",
        "10.9.0.1",
        "10.0.0.1, 10.0.0.2",
        "",
    ] {
        let (status, _, body) = send(&w.app, from(w.sam, &orders, Some(refused), None)).await;
        assert_eq!(
            (status, body),
            (StatusCode::FORBIDDEN, rejected(refused)),
            "{refused:?}"
        );
    }
    // Without the header, the socket's address.
    let (status, _, body) = send(&w.app, from(w.sam, &orders, None, Some("10.7.7.7"))).await;
    assert_eq!(
        (status, body),
        (StatusCode::FORBIDDEN, rejected("10.7.7.7"))
    );
    let (status, _, _) = send(&w.app, from(w.sam, &orders, None, Some("10.0.0.1"))).await;
    assert_eq!(status, StatusCode::OK);
    // A caller on this host without a proxy hop is exempt; with one, the header is checked.
    let (status, _, _) = send(&w.app, from(w.sam, &orders, None, Some("127.0.0.1"))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(&w.app, from(w.sam, &orders, None, Some("::1"))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = send(
        &w.app,
        from(w.sam, &orders, Some("8.8.8.8"), Some("127.0.0.1")),
    )
    .await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, rejected("8.8.8.8")));
    // Every private route, a path without a route too; the admin is no exception.
    for uri in [
        format!("/forest/orders/1?{TZ}"),
        "/forest/no/such/route".to_owned(),
    ] {
        let (status, _, body) = send(&w.app, from(w.admin, &uri, Some("8.8.8.8"), None)).await;
        assert_eq!(
            (status, body),
            (StatusCode::FORBIDDEN, rejected("8.8.8.8")),
            "{uri}"
        );
    }
    // Authentication first: no token is a 401 whatever the address.
    let anonymous = Request::get(&orders)
        .header("x-forwarded-for", "8.8.8.8")
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = send(&w.app, anonymous).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The healthcheck and the login routes are not IP-checked.
    let (status, _, _) = send(&w.app, from(w.sam, "/forest", Some("8.8.8.8"), None)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(
        &w.app,
        from(
            w.sam,
            "/forest/authentication/callback",
            Some("8.8.8.8"),
            None,
        ),
    )
    .await;
    assert_ne!(status, StatusCode::FORBIDDEN);
    // Turned off through the store: seen on the next request.
    w.ip_whitelist(json!({"use_ip_whitelist": false, "rules": []}))
        .await;
    let (status, _, _) = send(&w.app, from(w.sam, &orders, Some("8.8.8.8"), None)).await;
    assert_eq!(status, StatusCode::OK);
}

/// One raw HTTP/1.1 GET to `address`; the status code.
async fn raw_get(address: SocketAddr, path: &str, token: &str, forwarded: Option<&str>) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let forwarded = forwarded
        .map(|f| format!("X-Forwarded-For: {f}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         {forwarded}Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8_lossy(&response);
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Through the real server, the socket address reaches the whitelist: a loopback client without
/// `x-forwarded-for` is exempt, the same client naming another address is not.
async fn the_server_gives_the_socket_address(
    store: canopy_e2e::Backend,
    data: canopy_e2e::Backend,
) {
    let w = world(store, data).await;
    w.ip_whitelist(json!({"use_ip_whitelist": true, "rules": [{"type": 0, "ip": "10.0.0.1"}]}))
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(canopy::http::server::serve(
        listener,
        w.app.clone(),
        canopy::http::server::ServerLimits::new(&crate::harness::http_config()),
        async move {
            let _ = stopped.await;
        },
    ));
    let path = format!("/forest/orders/count?{TZ}");
    let token = token(w.sam);
    assert_eq!(raw_get(address, &path, &token, None).await, 200);
    assert_eq!(raw_get(address, &path, &token, Some("8.8.8.8")).await, 403);
    assert_eq!(raw_get(address, &path, &token, Some("10.0.0.1")).await, 200);
    let _ = stop.send(());
    server.await.unwrap();
}

/// `instantCacheRefresh = false`: another instance (a second handle on the same store, whose
/// writes this one's generation does not see) grants a right: seen at once, as the denied check
/// refetches once; it revokes it: still cached until the time to live; it changes a scope: seen
/// after `POST /forest/scope-cache-invalidation` of that rendering.
async fn with_a_time_to_live_denials_refetch_and_invalidation_drops_scopes(
    store: canopy_e2e::Backend,
    data: canopy_e2e::Backend,
) {
    let w = world_with(
        store,
        data,
        Options {
            policy: CachePolicy::new(false, Duration::from_secs(60)),
            ..Options::default()
        },
    )
    .await;
    let other = Store::open(&w.state_url(), "acme", "production")
        .await
        .unwrap();
    let sam = w.sam;
    let countries = format!("/forest/countries?{TZ}&fields[countries]=id");
    let (status, _) = call(&w.app, sam, "GET", &countries, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut document = environment(w.admin_role, w.support_role);
    document["collections"]["countries"]["collection"]["browseEnabled"] = json!(true);
    let granted: EnvironmentPermissions = serde_json::from_value(document).unwrap();
    other
        .set_environment_document(&Actor::System, &granted)
        .await
        .unwrap();
    let (status, body) = call(&w.app, sam, "GET", &countries, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let revoked: EnvironmentPermissions =
        serde_json::from_value(environment(w.admin_role, w.support_role)).unwrap();
    other
        .set_environment_document(&Actor::System, &revoked)
        .await
        .unwrap();
    let (status, _) = call(&w.app, sam, "GET", &countries, None).await;
    assert_eq!(status, StatusCode::OK, "an allowed check does not refetch");
    // The cache is this instance's: dropping it shows the revocation.
    w.permissions.invalidate_all();
    let (status, _) = call(&w.app, sam, "GET", &countries, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let scope = |customer: &str| json!({"orders": {"scope": {"field": "customer_id", "operator": "equal", "value": customer}}});
    let set = |store: &Store, collections: Json| {
        let store = store.clone();
        async move {
            store
                .set_rendering(
                    &Actor::System,
                    "Ops",
                    serde_json::from_value(collections).unwrap(),
                    Vec::new(),
                )
                .await
                .unwrap();
        }
    };
    set(&other, scope("1")).await;
    let orders = format!("/forest/orders?{TZ}&fields[orders]=id");
    let (_, body) = call(&w.app, sam, "GET", &orders, None).await;
    assert_eq!(ids(&body), [1, 2]);
    set(&other, scope("2")).await;
    let (_, body) = call(&w.app, sam, "GET", &orders, None).await;
    assert_eq!(ids(&body), [1, 2], "the rendering is cached");
    let invalidation = "/forest/scope-cache-invalidation";
    let (status, body) = call(
        &w.app,
        sam,
        "POST",
        invalidation,
        Some(&json!({"renderingId": sam.rendering.to_string()})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, body) = call(&w.app, sam, "GET", &orders, None).await;
    assert_eq!(ids(&body), [3]);
    for malformed in [
        json!({}),
        json!({"renderingId": "abc"}),
        json!({"renderingId": {}}),
    ] {
        let (status, body) = call(&w.app, sam, "POST", invalidation, Some(&malformed)).await;
        assert_eq!(
            (status, body),
            (
                StatusCode::BAD_REQUEST,
                json!({"errors": [{"name": "ValidationError", "detail": "Malformed body", "status": 400}]})
            ),
            "{malformed}"
        );
    }
    // Authenticated.
    let anonymous = Request::post(invalidation)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(r#"{"renderingId":1}"#))
        .unwrap();
    let (status, _, _) = send(&w.app, anonymous).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let _ = (forbidden(), Arc::clone(&w.permissions));
}

on_stores!(
    ip_rules_let_in_exact_ranges_and_blocks,
    the_server_gives_the_socket_address,
    with_a_time_to_live_denials_refetch_and_invalidation_drops_scopes,
);
