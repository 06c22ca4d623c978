//! The store of the MCP endpoint's OAuth authorization server (`platform::oauth`), on SQLite and
//! on PostgreSQL: registered clients read back as registered, an authorization code is redeemed
//! once (by exactly one of twenty racing exchanges), refresh tokens rotate, a spent one presented
//! again revokes its whole family, and nothing crosses environments. On PostgreSQL, with two
//! instances on one store: a revoked sign-in reaches the other at once, and uploaded MCP action
//! files are shared.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::future::Future;
use std::time::Duration;

use canopy::auth::login::{code_hash, random_token};
use canopy::platform::oauth::{CodeGrant, NewOAuthClient, OAuthClient, RefreshGrant, RefreshUse};
use canopy::platform::{Actor, Error, NewUser, Store};
use serde_json::json;

#[allow(
    dead_code,
    reason = "the shared support also serves the tests that run the binary"
)]
mod support;
use support::{TempDir, drop_postgres, fresh_postgres};

/// Runs `test` on a fresh SQLite store, then on a fresh PostgreSQL one, each scoped to project
/// `acme`, environment `production`. The PostgreSQL database is dropped even when the test fails.
async fn on_both<F, Fut>(purpose: &str, test: F)
where
    F: Fn(Store) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let dir = TempDir::new(purpose);
    let sqlite = format!("sqlite:{}?mode=rwc", dir.0.join("state.sqlite").display());
    let store = Store::open(&sqlite, "acme", "production").await.unwrap();
    let outcome = tokio::spawn(test(store.clone())).await;
    store.close().await;
    if let Err(error) = outcome {
        eprintln!("{purpose}: failed on SQLite");
        std::panic::resume_unwind(error.into_panic());
    }

    let postgres = fresh_postgres(&purpose.replace('-', "_")).await;
    let store = Store::open(&postgres, "acme", "production").await.unwrap();
    let outcome = tokio::spawn(test(store.clone())).await;
    store.close().await;
    drop_postgres(&postgres).await;
    if let Err(error) = outcome {
        eprintln!("{purpose}: failed on PostgreSQL");
        std::panic::resume_unwind(error.into_panic());
    }
}

async fn user(store: &Store, email: &str) -> i64 {
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: email.to_owned(),
                ..NewUser::default()
            },
        )
        .await
        .unwrap()
        .id
}

async fn client(store: &Store) -> OAuthClient {
    store
        .register_oauth_client(NewOAuthClient {
            client_name: Some("Claude".to_owned()),
            redirect_uris: vec!["https://claude.ai/api/mcp/auth_callback".to_owned()],
            metadata: json!({"client_name": "Claude"}),
        })
        .await
        .unwrap()
}

fn code_grant(client_id: &str, user_id: i64) -> CodeGrant {
    CodeGrant {
        client_id: client_id.to_owned(),
        user_id,
        redirect_uri: "https://claude.ai/api/mcp/auth_callback".to_owned(),
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".to_owned(),
        resource: "https://canopy.example.com/mcp".to_owned(),
        scope: "mcp".to_owned(),
    }
}

/// A new refresh-token family of this client and user.
async fn family(store: &Store, client_id: &str, user_id: i64) -> RefreshGrant {
    store
        .start_oauth_grant(client_id, user_id, "https://canopy.example.com/mcp", "mcp")
        .await
        .unwrap()
}

/// A fresh refresh token's hash.
fn fresh_hash() -> String {
    code_hash(&random_token(32))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_client_reads_back_as_registered() {
    on_both("oauth-clients", |store| async move {
        let metadata = json!({
            "client_name": "Inspector",
            "redirect_uris": ["http://127.0.0.1:6274/oauth/callback", "https://x.example/cb?a=1"],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
            "zeta": {"nested": [1, 2.5, null, "é"]},
            "alpha": true
        });
        let registered = store
            .register_oauth_client(NewOAuthClient {
                client_name: Some("Inspector".to_owned()),
                redirect_uris: vec![
                    "http://127.0.0.1:6274/oauth/callback".to_owned(),
                    "https://x.example/cb?a=1".to_owned(),
                ],
                metadata: metadata.clone(),
            })
            .await
            .unwrap();
        let id = &registered.client_id;
        assert!(id.starts_with("mcp_"), "{id}");
        assert_eq!(id.len(), 4 + 32, "{id}");
        assert!(
            id[4..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{id}"
        );
        assert_eq!(registered.client_name.as_deref(), Some("Inspector"));
        assert_eq!(registered.metadata, metadata);
        assert!(registered.created_at > 0);

        let read = store.oauth_client(id).await.unwrap().unwrap();
        assert_eq!(read, registered);
        // The document comes back in the order it was registered in.
        assert_eq!(
            serde_json::to_string(&read.metadata).unwrap(),
            serde_json::to_string(&metadata).unwrap()
        );

        let anonymous = store
            .register_oauth_client(NewOAuthClient {
                client_name: None,
                redirect_uris: vec!["http://localhost:3000/cb".to_owned()],
                metadata: json!({}),
            })
            .await
            .unwrap();
        assert_ne!(anonymous.client_id, registered.client_id);
        assert_eq!(
            store.oauth_client(&anonymous.client_id).await.unwrap(),
            Some(anonymous)
        );

        assert_eq!(store.oauth_client("mcp_unknown").await.unwrap(), None);
        let staging = store.for_environment("staging");
        assert_eq!(staging.oauth_client(id).await.unwrap(), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_redeemed_once_and_only_before_it_expires() {
    on_both("oauth-codes", |store| async move {
        let user_id = user(&store, "ada@canopy.local").await;
        let client = client(&store).await;
        let grant = code_grant(&client.client_id, user_id);

        let code = code_hash("the-code");
        store
            .create_oauth_code(&code, &grant, Duration::from_secs(60))
            .await
            .unwrap();
        // Another environment neither redeems nor spends it.
        let staging = store.for_environment("staging");
        assert_eq!(staging.redeem_oauth_code(&code).await.unwrap(), None);
        assert_eq!(
            store.redeem_oauth_code(&code).await.unwrap(),
            Some(grant.clone())
        );
        assert_eq!(store.redeem_oauth_code(&code).await.unwrap(), None);
        assert_eq!(
            store.redeem_oauth_code(&code_hash("other")).await.unwrap(),
            None
        );

        let expired = code_hash("expired");
        store
            .create_oauth_code(&expired, &grant, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(store.redeem_oauth_code(&expired).await.unwrap(), None);

        // Expired codes are forgotten when the next one is created.
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .create_oauth_code(&code_hash("next"), &grant, Duration::from_secs(60))
            .await
            .unwrap();
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM oauth_codes WHERE code_hash = $1")
            .bind(&expired)
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(left, 0);

        // A code dies with its user.
        let gone = code_hash("gone");
        store
            .create_oauth_code(&gone, &grant, Duration::from_secs(60))
            .await
            .unwrap();
        store.remove_user(&Actor::System, user_id).await.unwrap();
        assert_eq!(store.redeem_oauth_code(&gone).await.unwrap(), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_twenty_racing_exchanges_exactly_one_wins() {
    on_both("oauth-code-race", |store| async move {
        let user_id = user(&store, "ada@canopy.local").await;
        let client = client(&store).await;
        let grant = code_grant(&client.client_id, user_id);
        let code = code_hash("raced");
        store
            .create_oauth_code(&code, &grant, Duration::from_secs(60))
            .await
            .unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let store = store.clone();
                let code = code.clone();
                tokio::spawn(async move { store.redeem_oauth_code(&code).await.unwrap() })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            if let Some(won) = task.await.unwrap() {
                winners.push(won);
            }
        }
        assert_eq!(winners, [grant]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_presented_again_revokes_its_family() {
    on_both("oauth-rotation", |store| async move {
        let user_id = user(&store, "ada@canopy.local").await;
        let client = client(&store).await;
        let grant = family(&store, &client.client_id, user_id).await;
        assert_eq!(grant.client_id, client.client_id);
        assert_eq!(grant.user_id, user_id);
        assert!(grant.session_started_at > 0);
        assert!(!store.oauth_grant_revoked(&grant.family_id).await.unwrap());

        // An unrelated family of the same user stays untouched throughout.
        let other = family(&store, &client.client_id, user_id).await;
        let other_token = fresh_hash();
        store
            .add_refresh_token(&other_token, &other.family_id, None)
            .await
            .unwrap();

        let first = fresh_hash();
        store
            .add_refresh_token(&first, &grant.family_id, None)
            .await
            .unwrap();
        assert_eq!(
            store.use_refresh_token(&first).await.unwrap(),
            RefreshUse::Valid(grant.clone())
        );
        let second = fresh_hash();
        let in_a_day = chrono::Utc::now().timestamp_millis() + 86_400_000;
        store
            .add_refresh_token(&second, &grant.family_id, Some(in_a_day))
            .await
            .unwrap();

        // The spent one again: a replay. The family is revoked, its latest token with it.
        assert_eq!(
            store.use_refresh_token(&first).await.unwrap(),
            RefreshUse::Reused(grant.clone())
        );
        assert!(store.oauth_grant_revoked(&grant.family_id).await.unwrap());
        assert_eq!(
            store.use_refresh_token(&second).await.unwrap(),
            RefreshUse::Reused(grant.clone())
        );
        // A rotation that raced the detection adds a token that is never valid.
        let late = fresh_hash();
        store
            .add_refresh_token(&late, &grant.family_id, None)
            .await
            .unwrap();
        assert_eq!(
            store.use_refresh_token(&late).await.unwrap(),
            RefreshUse::Reused(grant.clone())
        );

        assert!(!store.oauth_grant_revoked(&other.family_id).await.unwrap());
        assert!(matches!(
            store.use_refresh_token(&other_token).await.unwrap(),
            RefreshUse::Valid(found) if found == other
        ));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_twenty_racing_refreshes_one_wins_and_the_family_is_revoked() {
    on_both("oauth-refresh-race", |store| async move {
        let user_id = user(&store, "ada@canopy.local").await;
        let client = client(&store).await;
        let grant = family(&store, &client.client_id, user_id).await;
        let token = fresh_hash();
        store
            .add_refresh_token(&token, &grant.family_id, None)
            .await
            .unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let store = store.clone();
                let token = token.clone();
                tokio::spawn(async move { store.use_refresh_token(&token).await.unwrap() })
            })
            .collect();
        let (mut valid, mut reused) = (0, 0);
        for task in tasks {
            match task.await.unwrap() {
                RefreshUse::Valid(found) => {
                    assert_eq!(found, grant);
                    valid += 1;
                }
                RefreshUse::Reused(found) => {
                    assert_eq!(found, grant);
                    reused += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((valid, reused), (1, 19));
        assert!(store.oauth_grant_revoked(&grant.family_id).await.unwrap());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_unknown_and_foreign_tokens_are_refused() {
    on_both("oauth-refused", |store| async move {
        let user_id = user(&store, "ada@canopy.local").await;
        let client = client(&store).await;
        let grant = family(&store, &client.client_id, user_id).await;

        let expired = fresh_hash();
        let a_second_ago = chrono::Utc::now().timestamp_millis() - 1_000;
        store
            .add_refresh_token(&expired, &grant.family_id, Some(a_second_ago))
            .await
            .unwrap();
        assert_eq!(
            store.use_refresh_token(&expired).await.unwrap(),
            RefreshUse::Expired
        );
        // An expired token is no replay: the family lives on.
        assert!(!store.oauth_grant_revoked(&grant.family_id).await.unwrap());

        assert_eq!(
            store.use_refresh_token(&fresh_hash()).await.unwrap(),
            RefreshUse::Unknown
        );

        // A token of production, presented to staging: unknown there, and not spent.
        let live = fresh_hash();
        store
            .add_refresh_token(&live, &grant.family_id, None)
            .await
            .unwrap();
        let staging = store.for_environment("staging");
        assert_eq!(
            staging.use_refresh_token(&live).await.unwrap(),
            RefreshUse::Unknown
        );
        assert!(staging.oauth_grant_revoked(&grant.family_id).await.unwrap());
        staging.revoke_oauth_grant(&grant.family_id).await.unwrap();
        assert!(matches!(
            staging
                .add_refresh_token(&fresh_hash(), &grant.family_id, None)
                .await,
            Err(Error::NotFound(_))
        ));
        assert!(!store.oauth_grant_revoked(&grant.family_id).await.unwrap());
        assert_eq!(
            store.use_refresh_token(&live).await.unwrap(),
            RefreshUse::Valid(grant.clone())
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_refuses_its_tokens_and_old_history_is_forgotten() {
    on_both("oauth-revoke", |store| async move {
        let user_id = user(&store, "ada@canopy.local").await;
        let client = client(&store).await;
        let grant = family(&store, &client.client_id, user_id).await;
        let token = fresh_hash();
        store
            .add_refresh_token(&token, &grant.family_id, None)
            .await
            .unwrap();
        store.revoke_oauth_grant(&grant.family_id).await.unwrap();
        store.revoke_oauth_grant(&grant.family_id).await.unwrap();
        assert!(store.oauth_grant_revoked(&grant.family_id).await.unwrap());
        assert!(matches!(
            store.use_refresh_token(&token).await.unwrap(),
            RefreshUse::Reused(_)
        ));
        assert!(store.oauth_grant_revoked("no-such-family").await.unwrap());
        assert!(matches!(
            store
                .add_refresh_token(&fresh_hash(), "no-such-family", None)
                .await,
            Err(Error::NotFound(_))
        ));

        // A token spent two days ago is forgotten at the next rotation of any family; so is a
        // family revoked two days ago.
        let live = family(&store, &client.client_id, user_id).await;
        let old = fresh_hash();
        store
            .add_refresh_token(&old, &live.family_id, None)
            .await
            .unwrap();
        assert!(matches!(
            store.use_refresh_token(&old).await.unwrap(),
            RefreshUse::Valid(_)
        ));
        let two_days_ago = chrono::Utc::now().timestamp_millis() - 2 * 86_400_000;
        sqlx::query("UPDATE oauth_refresh_tokens SET used_at = $1 WHERE token_hash = $2")
            .bind(two_days_ago)
            .bind(&old)
            .execute(store.pool())
            .await
            .unwrap();
        sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE family_id = $2")
            .bind(two_days_ago)
            .bind(&grant.family_id)
            .execute(store.pool())
            .await
            .unwrap();
        store
            .add_refresh_token(&fresh_hash(), &live.family_id, None)
            .await
            .unwrap();
        assert_eq!(
            store.use_refresh_token(&old).await.unwrap(),
            RefreshUse::Unknown
        );
        assert_eq!(
            store.use_refresh_token(&token).await.unwrap(),
            RefreshUse::Unknown
        );
        assert!(store.oauth_grant_revoked(&grant.family_id).await.unwrap());
        assert!(!store.oauth_grant_revoked(&live.family_id).await.unwrap());

        // A family dies with its user.
        store.remove_user(&Actor::System, user_id).await.unwrap();
        assert!(store.oauth_grant_revoked(&live.family_id).await.unwrap());
    })
    .await;
}

/// Two instances on one PostgreSQL store: a refresh token replayed on the first revokes the
/// sign-in, and the second, which had read the sign-in as live a moment before (and would trust
/// that for `FAMILY_RECHECK`, 30 s), refuses it within a second: the revocation's notification
/// (migration 0022) makes it read the sign-in again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_revoked_on_one_instance_is_refused_by_another_within_a_second() {
    use canopy::config::McpConfig;
    use canopy::mcp::Mcp;

    let url = fresh_postgres("oauth_notify").await;
    let first = Store::open(&url, "acme", "production").await.unwrap();
    let second = Store::open(&url, "acme", "production").await.unwrap();
    second.listen_changes(&url);
    let mcp = Mcp::new(
        McpConfig {
            base_path: None,
            enabled_tools: Vec::new(),
            allowed_oauth_clients: None,
            access_token_ttl: Duration::from_secs(3600),
            refresh_token_ttl: None,
            uploads: None,
            only: false,
        },
        None,
        "secret-secret-secret-secret-secret",
        second.clone(),
    );
    let user_id = user(&first, "ada@canopy.local").await;
    let client = client(&first).await;

    // The second instance's listener connects in the background: revoke throwaway sign-ins
    // until it hears one, so the real revocation below cannot be announced before it listens.
    let heard = second.grants_generation();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while second.grants_generation() == heard {
        assert!(
            std::time::Instant::now() < deadline,
            "no revocation was heard"
        );
        let throwaway = family(&first, &client.client_id, user_id).await;
        first
            .revoke_oauth_grant(&throwaway.family_id)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let grant = family(&first, &client.client_id, user_id).await;
    let token = fresh_hash();
    first
        .add_refresh_token(&token, &grant.family_id, None)
        .await
        .unwrap();
    assert!(matches!(
        first.use_refresh_token(&token).await.unwrap(),
        RefreshUse::Valid(_)
    ));
    assert!(!mcp.family_revoked(&grant.family_id).await, "live sign-in");

    // The replay, on the first instance.
    let revoked_at = std::time::Instant::now();
    assert!(matches!(
        first.use_refresh_token(&token).await.unwrap(),
        RefreshUse::Reused(_)
    ));
    while !mcp.family_revoked(&grant.family_id).await {
        assert!(
            revoked_at.elapsed() < Duration::from_secs(1),
            "the second instance still honours the revoked sign-in after 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    first.close().await;
    second.close().await;
    drop_postgres(&url).await;
}

/// MCP action files on a PostgreSQL store, the default there: two instances share them. The
/// URL one instance hands out takes the bytes on another, once; the handle gives the file back
/// on either; sizes, totals, unknown and expired URLs are refused as with the other stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_files_are_shared_by_the_instances_of_a_postgresql_store() {
    use canopy::config::UploadConfig;
    use canopy::mcp::uploads::{UploadError, Uploads};

    let url = fresh_postgres("mcp_uploads").await;
    let first_store = Store::open(&url, "acme", "production").await.unwrap();
    let second_store = Store::open(&url, "acme", "production").await.unwrap();
    let settings = UploadConfig {
        max_bytes: 16,
        max_total_bytes: 24,
        ..UploadConfig::default()
    };
    let secret = "secret-secret-secret-secret-secret";
    let first = Uploads::new(settings.clone(), secret, &first_store);
    let second = Uploads::new(settings.clone(), secret, &second_store);
    assert_eq!(first.kept_in(), "store");
    assert!(!first.in_memory());

    let (key, handle) = first
        .reserve(7, "report.pdf", "application/pdf", None)
        .await
        .unwrap();
    second.put(&key, b"hello".to_vec()).await.unwrap();
    assert_eq!(
        first.put(&key, b"again".to_vec()).await,
        Err(UploadError::Used)
    );
    let claims = first.handle(&handle, 7).unwrap();
    assert_eq!(
        first.data_uri(&claims).await.unwrap(),
        "data:application/pdf;name=report.pdf;base64,aGVsbG8="
    );
    assert_eq!(
        second.data_uri(&claims).await.unwrap(),
        first.data_uri(&claims).await.unwrap()
    );

    // Too large for one file; unknown; past the total the store may hold.
    let (key, _) = second.reserve(7, "a.bin", "", None).await.unwrap();
    assert_eq!(
        first.put(&key, vec![0; 17]).await,
        Err(UploadError::TooLarge(16))
    );
    assert_eq!(
        first
            .put(
                "mcp-uploads/00000000000000000000000000000000/a.bin",
                vec![1]
            )
            .await,
        Err(UploadError::Unknown)
    );
    first.put(&key, vec![0; 16]).await.unwrap();
    let (key, handle) = first.reserve(7, "b.bin", "", None).await.unwrap();
    assert_eq!(first.put(&key, vec![0; 4]).await, Err(UploadError::Full));
    let claims = first.handle(&handle, 7).unwrap();
    assert!(matches!(
        second.data_uri(&claims).await,
        Err(UploadError::Handle(message)) if message.contains("PUT it")
    ));

    // A URL past its time takes nothing.
    let expired = Uploads::new(
        UploadConfig {
            url_ttl: Duration::ZERO,
            ..settings
        },
        secret,
        &first_store,
    );
    let (key, _) = expired.reserve(7, "c.bin", "", None).await.unwrap();
    assert_eq!(second.put(&key, vec![1]).await, Err(UploadError::Unknown));

    first_store.close().await;
    second_store.close().await;
    drop_postgres(&url).await;
}
