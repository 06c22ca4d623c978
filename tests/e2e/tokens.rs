//! Application tokens and the `/v1` rate limits (issue 12 §1, §5, §8) on a served stack, with
//! Canopy's store on SQLite and on PostgreSQL: the token lifecycle (created, shown once, used,
//! last use recorded, expired, revoked), each scope allowed and refused on a real endpoint, the
//! token's user's rights read at each call, malformed and unknown tokens, rate-limit headers on
//! every answer and 429 under a burst, and the one error shape of `/v1`; the admin log entries
//! of tokens made and revoked, and the token's id on the activity entries of its calls.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use canopy::app::Served;
use canopy::config::RateLimitConfig;
use canopy::datasource::{DataSource, PermissionLevel};
use canopy::platform::{Actor, NewToken, NewUser, Scope, Store, UserChange};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};
use tower::ServiceExt as _;

use crate::admin::{TempDir, config, on_store_backends, token_for};

const BASE: &str = "/v1/project/acme";
const INVALID: &str = "Invalid or missing API token";

/// A served stack over the shop fixture, its store, and what keeps them alive.
struct Env {
    router: Router,
    store: Store,
    _dir: TempDir,
    served: Arc<Served>,
    _data: TestDb,
    _state: TestDb,
}

/// Serves the shop fixture with Canopy's store on `backend` and these rate limits (the
/// defaults when `None`).
async fn serve(backend: Backend, limits: Option<RateLimitConfig>) -> Env {
    let (data, datasource) = crate::list::shop(Backend::Sqlite).await;
    let state = TestDb::new(backend).await;
    let dir = TempDir::new();
    let mut config = config(&data, &state, &dir.0, None);
    if let Some(limits) = limits {
        config.rate_limit = limits;
    }
    let base: Arc<dyn DataSource> = Arc::new(datasource);
    let served = Arc::new(Served::start(config, base).await.unwrap());
    Env {
        router: served.router(),
        store: served.platform().store.clone(),
        _dir: dir,
        served,
        _data: data,
        _state: state,
    }
}

/// One request with an optional bearer credential: status, headers and JSON body.
async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    bearer: Option<&str>,
    body: Option<&Json>,
) -> (StatusCode, HeaderMap, Json) {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(bearer) = bearer {
        request = request.header(header::AUTHORIZATION, format!("Bearer {bearer}"));
    }
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = if bytes.is_empty() {
        Json::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("not JSON: {bytes:?}"))
    };
    (status, headers, body)
}

/// Asserts the one `/v1` error shape, this status and code; returns the message.
fn refused(got: &(StatusCode, HeaderMap, Json), status: StatusCode, code: &str) -> String {
    let (got_status, _, body) = got;
    assert_eq!(*got_status, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["error"], status.canonical_reason().unwrap(), "{body}");
    let message = body["message"].as_str().unwrap_or_else(|| panic!("{body}"));
    assert!(!message.is_empty());
    message.to_owned()
}

/// A token of `email` with these scopes, made in the store (as the CLI does).
async fn token_of(store: &Store, email: &str, scopes: &[Scope]) -> String {
    let user = store.user_by_email(email).await.unwrap().unwrap();
    let (_, secret) = store
        .create_token(
            &Actor::System,
            user.id,
            NewToken {
                name: format!("{scopes:?}"),
                scopes: scopes.to_vec(),
                expires_at: None,
            },
        )
        .await
        .unwrap();
    secret.expose().to_owned()
}

async fn add_user(store: &Store, email: &str, level: PermissionLevel) -> i64 {
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: email.to_owned(),
                permission_level: level,
                ..NewUser::default()
            },
        )
        .await
        .unwrap()
        .id
}

/// Created through the API with a session, shown once, used, its last use recorded, revoked:
/// the very next request with it is refused.
async fn a_token_lives_from_creation_to_revocation(backend: Backend) {
    let env = serve(backend, None).await;
    let session = token_for(&env.store, "admin@canopy.local").await;
    let app = &env.router;
    let (status, _, created) = send(
        app,
        "POST",
        &format!("{BASE}/tokens"),
        Some(&session),
        Some(&json!({"name": "SIEM export", "scopes": ["admin_logs:read", "admin_logs:read"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let secret = created["token"].as_str().unwrap().to_owned();
    assert!(canopy::platform::tokens::well_formed(&secret), "{secret}");
    assert_eq!(created["object"], "token");
    assert_eq!(created["name"], "SIEM export");
    assert_eq!(created["scopes"], json!(["admin_logs:read"]));
    assert_eq!(created["lastUsedAt"], Json::Null);
    assert_eq!(created["expiresAt"], Json::Null);
    assert_eq!(
        created["hint"],
        format!("cnp_…{}", &secret[secret.len() - 4..])
    );
    let id = created["id"].as_str().unwrap().to_owned();

    // Listed without its secret, never to be read again.
    let (status, _, listed) =
        send(app, "GET", &format!("{BASE}/tokens"), Some(&session), None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let data = listed["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["id"], id);
    assert!(data[0].get("token").is_none(), "{listed}");
    assert!(!listed.to_string().contains(&secret[4..]), "{listed}");
    assert_eq!(data[0]["lastUsedAt"], Json::Null);

    // Used: it reads the admin log, and its last use is recorded.
    let (status, _, logs) = send(
        app,
        "GET",
        &format!("{BASE}/admin-logs"),
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{logs}");
    assert!(logs["data"].as_array().is_some_and(|d| !d.is_empty()));
    let (_, _, listed) = send(app, "GET", &format!("{BASE}/tokens"), Some(&session), None).await;
    let used = listed["data"][0]["lastUsedAt"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(chrono::DateTime::parse_from_rfc3339(used).is_ok(), "{used}");

    // Revoked: refused at once, gone from the list; a second revocation finds nothing.
    let (status, _, body) = send(
        app,
        "DELETE",
        &format!("{BASE}/tokens/{id}"),
        Some(&session),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let after = send(
        app,
        "GET",
        &format!("{BASE}/admin-logs"),
        Some(&secret),
        None,
    )
    .await;
    assert_eq!(
        refused(&after, StatusCode::UNAUTHORIZED, "unauthorized"),
        INVALID
    );
    let (_, _, listed) = send(app, "GET", &format!("{BASE}/tokens"), Some(&session), None).await;
    assert_eq!(listed["data"], json!([]));
    let again = send(
        app,
        "DELETE",
        &format!("{BASE}/tokens/{id}"),
        Some(&session),
        None,
    )
    .await;
    refused(&again, StatusCode::NOT_FOUND, "not_found");
}

/// Past its expiry, a token is refused with the spec's expired message; an expiry in the past
/// cannot be set.
async fn an_expired_token_is_refused_as_expired(backend: Backend) {
    let env = serve(backend, None).await;
    let session = token_for(&env.store, "admin@canopy.local").await;
    let admin = env
        .store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let soon = chrono::Utc::now().timestamp_millis() + 1_500;
    let (_, secret) = env
        .store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "short".into(),
                scopes: vec![Scope::All],
                expires_at: Some(soon),
            },
        )
        .await
        .unwrap();
    let uri = format!("{BASE}/admin-logs");
    let (status, _, body) = send(&env.router, "GET", &uri, Some(secret.expose()), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let expired = send(&env.router, "GET", &uri, Some(secret.expose()), None).await;
    assert_eq!(
        refused(&expired, StatusCode::UNAUTHORIZED, "unauthorized"),
        "API token has expired"
    );
    let past = send(
        &env.router,
        "POST",
        &format!("{BASE}/tokens"),
        Some(&session),
        Some(&json!({"name": "x", "scopes": ["all"], "expiresAt": "2020-01-01T00:00:00Z"})),
    )
    .await;
    let message = refused(&past, StatusCode::BAD_REQUEST, "invalid_parameter");
    assert!(message.contains("expiresAt"), "{message}");
    assert!(env.store.tokens(None).await.unwrap().len() == 1);
}

/// Each scope opens what it names and nothing else; `all` opens everything, including the
/// endpoints no narrower scope names (users, roles, tokens).
async fn each_scope_is_allowed_and_refused_on_real_endpoints(backend: Backend) {
    let env = serve(backend, None).await;
    let app = &env.router;
    let admin = "admin@canopy.local";
    let logs = format!("{BASE}/admin-logs");
    let users = format!("{BASE}/users");
    let tokens = format!("{BASE}/tokens");
    let all = token_of(&env.store, admin, &[Scope::All]).await;
    for uri in [&logs, &users, &tokens] {
        let (status, _, body) = send(app, "GET", uri, Some(&all), None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    }
    let reader = token_of(&env.store, admin, &[Scope::AdminLogsRead]).await;
    let (status, _, body) = send(app, "GET", &logs, Some(&reader), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for uri in [&users, &tokens] {
        let got = send(app, "GET", uri, Some(&reader), None).await;
        let message = refused(&got, StatusCode::FORBIDDEN, "forbidden");
        assert!(
            message.starts_with("Insufficient permissions for this operation"),
            "{message}"
        );
    }
    // A token cannot mint itself a wider one.
    let got = send(
        app,
        "POST",
        &tokens,
        Some(&reader),
        Some(&json!({"name": "wider", "scopes": ["all"]})),
    )
    .await;
    refused(&got, StatusCode::FORBIDDEN, "forbidden");
    for narrow in [Scope::ActivityLogsRead, Scope::NotesRead, Scope::NotesWrite] {
        let token = token_of(&env.store, admin, &[narrow]).await;
        let got = send(app, "GET", &logs, Some(&token), None).await;
        let message = refused(&got, StatusCode::FORBIDDEN, "forbidden");
        assert!(message.contains("admin_logs:read"), "{narrow}: {message}");
    }
    assert_eq!(env.store.tokens(None).await.unwrap().len(), 5);
}

/// A token acts as its user with the user's rights now: a non-admin's token is refused on admin
/// endpoints, a demoted admin's token at once, a disabled user's too, a removed user's is invalid.
async fn a_token_has_its_users_rights_at_each_call(backend: Backend) {
    let env = serve(backend, None).await;
    let app = &env.router;
    let logs = format!("{BASE}/admin-logs");
    add_user(&env.store, "ed@acme.io", PermissionLevel::Editor).await;
    let session = token_for(&env.store, "ed@acme.io").await;
    // Any signed-in user manages their own tokens.
    let (status, _, created) = send(
        app,
        "POST",
        &format!("{BASE}/tokens"),
        Some(&session),
        Some(&json!({"name": "mine", "scopes": ["all"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let editor_token = created["token"].as_str().unwrap().to_owned();
    let got = send(app, "GET", &logs, Some(&editor_token), None).await;
    let message = refused(&got, StatusCode::FORBIDDEN, "forbidden");
    assert!(message.contains("admins"), "{message}");

    let boss = add_user(&env.store, "boss@acme.io", PermissionLevel::Admin).await;
    let boss_token = token_of(&env.store, "boss@acme.io", &[Scope::All]).await;
    let (status, _, _) = send(app, "GET", &logs, Some(&boss_token), None).await;
    assert_eq!(status, StatusCode::OK);
    // The editor cannot revoke the admin's token (nor learn it exists); an admin can revoke
    // the editor's.
    let boss_id = env.store.tokens(Some(boss)).await.unwrap()[0].id.clone();
    let got = send(
        app,
        "DELETE",
        &format!("{BASE}/tokens/{boss_id}"),
        Some(&session),
        None,
    )
    .await;
    refused(&got, StatusCode::NOT_FOUND, "not_found");
    let editor_id = created["id"].as_str().unwrap();
    let (status, _, _) = send(
        app,
        "DELETE",
        &format!("{BASE}/tokens/{editor_id}"),
        Some(&boss_token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let got = send(
        app,
        "GET",
        &format!("{BASE}/tokens"),
        Some(&editor_token),
        None,
    )
    .await;
    refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");

    let demote = UserChange {
        permission_level: Some(PermissionLevel::Editor),
        ..UserChange::default()
    };
    env.store
        .update_user(&Actor::System, boss, demote)
        .await
        .unwrap();
    let got = send(app, "GET", &logs, Some(&boss_token), None).await;
    refused(&got, StatusCode::FORBIDDEN, "forbidden");
    let disable = UserChange {
        disabled: Some(true),
        ..UserChange::default()
    };
    env.store
        .update_user(&Actor::System, boss, disable)
        .await
        .unwrap();
    let got = send(
        app,
        "GET",
        &format!("{BASE}/tokens"),
        Some(&boss_token),
        None,
    )
    .await;
    let message = refused(&got, StatusCode::FORBIDDEN, "forbidden");
    assert!(message.contains("disabled"), "{message}");
    // Removed: the token is worth nothing.
    env.store.remove_user(&Actor::System, boss).await.unwrap();
    let got = send(
        app,
        "GET",
        &format!("{BASE}/tokens"),
        Some(&boss_token),
        None,
    )
    .await;
    assert_eq!(
        refused(&got, StatusCode::UNAUTHORIZED, "unauthorized"),
        INVALID
    );
}

/// Missing, malformed, wrong-checksum and unknown credentials are all the same 401.
async fn bad_credentials_are_refused_alike(backend: Backend) {
    let env = serve(backend, None).await;
    let real = token_of(&env.store, "admin@canopy.local", &[Scope::All]).await;
    let mut wrong_checksum = real.clone().into_bytes();
    let last = wrong_checksum.len() - 1;
    wrong_checksum[last] = if wrong_checksum[last] == b'0' {
        b'1'
    } else {
        b'0'
    };
    let wrong_checksum = String::from_utf8(wrong_checksum).unwrap();
    let unknown = canopy::platform::tokens::generate();
    let uri = format!("{BASE}/admin-logs");
    for bearer in [
        None,
        Some("cnp_short"),
        Some(wrong_checksum.as_str()),
        Some(unknown.expose()),
        Some("not-a-jwt-either"),
    ] {
        let got = send(&env.router, "GET", &uri, bearer, None).await;
        assert_eq!(
            refused(&got, StatusCode::UNAUTHORIZED, "unauthorized"),
            INVALID,
            "{bearer:?}"
        );
    }
    // A header that is not text: the same 401, saying what the header must be.
    let got = send(&env.router, "GET", &uri, Some("cnp_ＡＡ"), None).await;
    let message = refused(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    assert!(message.contains("Bearer"), "{message}");
    let (status, _, _) = send(&env.router, "GET", &uri, Some(&real), None).await;
    assert_eq!(status, StatusCode::OK);
}

/// Every `/v1` answer carries the rate-limit headers; a burst beyond the token's quota is
/// answered 429 with `Retry-After`, and so are unauthenticated calls beyond the address's.
async fn rate_limits_show_in_headers_and_refuse_a_burst(backend: Backend) {
    let n = |v| std::num::NonZeroU32::new(v).unwrap();
    let env = serve(
        backend,
        Some(RateLimitConfig {
            per_minute: n(3),
            burst: n(3),
            per_minute_per_ip: n(2),
        }),
    )
    .await;
    let app = &env.router;
    let token = token_of(&env.store, "admin@canopy.local", &[Scope::All]).await;
    let uri = format!("{BASE}/admin-logs");
    for remaining in ["2", "1", "0"] {
        let (status, headers, body) = send(app, "GET", &uri, Some(&token), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(headers["x-ratelimit-limit"], "3");
        assert_eq!(headers["x-ratelimit-remaining"], remaining);
        let reset: i64 = headers["x-ratelimit-reset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(reset >= chrono::Utc::now().timestamp(), "{reset}");
        assert_eq!(headers["ratelimit-policy"], "\"token\";q=3;w=60");
        assert!(headers.contains_key("ratelimit"));
    }
    let burst = send(app, "GET", &uri, Some(&token), None).await;
    refused(&burst, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    let (_, headers, body) = &burst;
    let retry: u64 = headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    assert_eq!(body["retry_after"], retry);
    assert_eq!(headers["x-ratelimit-remaining"], "0");

    // Unauthenticated: per address, 404 and 401 answers included.
    let (status, headers, _) = send(app, "GET", "/v1/nowhere", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers["x-ratelimit-limit"], "2");
    assert_eq!(headers["ratelimit-policy"], "\"ip\";q=2;w=60");
    let (status, headers, _) = send(app, "GET", &uri, Some("cnp_guess"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    let guessing = send(app, "GET", &uri, Some("cnp_guess"), None).await;
    refused(&guessing, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
}

/// 404, 405 and 400 answers of `/v1`, approvals included, all have the one shape.
async fn every_v1_error_has_one_shape(backend: Backend) {
    let env = serve(backend, None).await;
    let app = &env.router;
    let session = token_for(&env.store, "admin@canopy.local").await;
    let got = send(
        app,
        "GET",
        "/v1/project/acme/nothing-here",
        Some(&session),
        None,
    )
    .await;
    refused(&got, StatusCode::NOT_FOUND, "not_found");
    let got = send(
        app,
        "PUT",
        &format!("{BASE}/admin-logs"),
        Some(&session),
        None,
    )
    .await;
    refused(&got, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let got = send(
        app,
        "PUT",
        "/v1/project/acme/environment/production/approval-requests",
        Some(&session),
        None,
    )
    .await;
    refused(&got, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let got = send(
        app,
        "POST",
        &format!("{BASE}/tokens"),
        Some(&session),
        Some(&json!({"name": "x", "scopes": ["notes:delete"]})),
    )
    .await;
    let message = refused(&got, StatusCode::BAD_REQUEST, "invalid_parameter");
    assert!(
        message.contains("scopes") && message.contains("notes:delete"),
        "{message}"
    );
    let got = send(
        app,
        "POST",
        &format!("{BASE}/tokens"),
        Some(&session),
        Some(&json!({"name": "x", "scopes": []})),
    )
    .await;
    refused(&got, StatusCode::BAD_REQUEST, "invalid_parameter");
    let got = send(app, "GET", "/v1/project/other/tokens", Some(&session), None).await;
    refused(&got, StatusCode::NOT_FOUND, "not_found");
    assert!(env.store.tokens(None).await.unwrap().is_empty());
}

/// Making and revoking a token leaves one admin log entry each (resource `token`), written by
/// whoever did it: the owner through the API (`administrator`, with the user), the command line
/// (`forestAdmin`). The entries name the token (id, name, owner, scopes, expiry), never its
/// secret or the hash the store keeps.
async fn tokens_made_and_revoked_leave_admin_log_entries(backend: Backend) {
    let env = serve(backend, None).await;
    let app = &env.router;
    let session = token_for(&env.store, "admin@canopy.local").await;
    let admin = env
        .store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let (status, _, created) = send(
        app,
        "POST",
        &format!("{BASE}/tokens"),
        Some(&session),
        Some(
            &json!({"name": "SIEM export", "scopes": ["admin_logs:read", "notes:read"],
            "expiresAt": "2999-01-01T00:00:00.000Z"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let api_secret = created["token"].as_str().unwrap().to_owned();
    let api_id = created["id"].as_str().unwrap().to_owned();
    let (status, _, body) = send(
        app,
        "DELETE",
        &format!("{BASE}/tokens/{api_id}"),
        Some(&session),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // As `canopy tokens create` and `canopy tokens revoke` do.
    let (cli_token, cli_secret) = env
        .store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "backup".into(),
                scopes: vec![Scope::All],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    assert!(
        env.store
            .revoke_token(&Actor::System, &cli_token.id)
            .await
            .unwrap()
    );
    // A refused revocation (already revoked) logs nothing.
    assert!(
        !env.store
            .revoke_token(&Actor::System, &cli_token.id)
            .await
            .unwrap()
    );

    let (status, _, logs) = send(
        app,
        "GET",
        &format!("{BASE}/admin-logs?resource=token"),
        Some(&session),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{logs}");
    let data = logs["data"].as_array().unwrap();
    let made: Vec<(&str, &str)> = data
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["initiator"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        made,
        [
            ("remove", "forestAdmin"),
            ("add", "forestAdmin"),
            ("remove", "administrator"),
            ("add", "administrator"),
        ],
        "{logs}"
    );
    let user = json!({"object": "user", "id": admin.id, "email": "admin@canopy.local"});
    let api_value = json!({
        "object": "token", "id": api_id, "name": "SIEM export", "user": user,
        "scopes": ["admin_logs:read", "notes:read"], "expiresAt": 32_472_144_000_000_i64,
    });
    assert_eq!(data[3]["resource"], "token");
    assert_eq!(data[3]["newValue"], api_value, "{logs}");
    assert!(data[3].get("previousValue").is_none(), "{logs}");
    assert_eq!(data[3]["user"]["id"], admin.id);
    assert_eq!(data[3]["user"]["email"], "admin@canopy.local");
    assert_eq!(data[2]["previousValue"], api_value, "{logs}");
    assert!(data[2].get("newValue").is_none(), "{logs}");
    assert_eq!(data[2]["user"]["id"], admin.id);
    let cli_value = json!({
        "object": "token", "id": cli_token.id, "name": "backup", "user": user,
        "scopes": ["all"], "expiresAt": null,
    });
    assert_eq!(data[1]["newValue"], cli_value, "{logs}");
    assert!(data[1].get("user").is_none(), "{logs}");
    assert_eq!(data[0]["previousValue"], cli_value, "{logs}");

    // Nothing of either secret, in the API's answer or in the store's rows.
    let rows: Vec<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT target_ref, previous_value, new_value FROM admin_logs WHERE resource = 'token'",
    )
    .fetch_all(env.store.pool())
    .await
    .unwrap();
    assert_eq!(rows.len(), 4);
    let stored = format!("{rows:?} {logs}");
    for secret in [api_secret.as_str(), cli_secret.expose()] {
        let hash = canopy::platform::tokens::hex(&canopy::platform::tokens::secret_hash(secret));
        assert!(!stored.contains(&secret[4..]), "{stored}");
        assert!(!stored.contains(&hash), "{stored}");
    }
}

/// A call made with an application token leaves an activity entry carrying the token's id; the
/// same call with a session leaves one without.
async fn activity_entries_of_a_tokens_calls_carry_its_id(backend: Backend) {
    let env = serve(backend, None).await;
    let app = &env.router;
    let session = token_for(&env.store, "admin@canopy.local").await;
    let admin = env
        .store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let (token, secret) = env
        .store
        .create_token(
            &Actor::System,
            admin.id,
            NewToken {
                name: "notes bot".into(),
                scopes: vec![Scope::NotesWrite],
                expires_at: None,
            },
        )
        .await
        .unwrap();
    let notes = "/v1/project/acme/environment/production/notes";
    for (bearer, record) in [(secret.expose(), "1"), (session.as_str(), "2")] {
        let note = json!({"collectionName": "orders", "recordId": record, "title": "Refund",
            "content": "<p>Customer asked twice.</p>"});
        let (status, _, body) = send(app, "POST", notes, Some(bearer), Some(&note)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    env.served.platform().activity.flush().await;
    let entries: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT record_ids, origin, token_id FROM activity_logs WHERE action = 'createNote' \
         ORDER BY record_ids",
    )
    .fetch_all(env.store.pool())
    .await
    .unwrap();
    assert_eq!(
        entries,
        [
            (
                r#"["1"]"#.to_owned(),
                "api".to_owned(),
                Some(token.id.clone())
            ),
            (r#"["2"]"#.to_owned(), "api".to_owned(), None),
        ]
    );
}

on_store_backends!(
    a_token_lives_from_creation_to_revocation,
    an_expired_token_is_refused_as_expired,
    each_scope_is_allowed_and_refused_on_real_endpoints,
    a_token_has_its_users_rights_at_each_call,
    bad_credentials_are_refused_alike,
    rate_limits_show_in_headers_and_refuse_a_burst,
    every_v1_error_has_one_shape,
    tokens_made_and_revoked_leave_admin_log_entries,
    activity_entries_of_a_tokens_calls_carry_its_id,
);
