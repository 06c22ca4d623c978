//! The MCP server's edges on the shop demo, with the scripted OAuth client of `mcp`: discovery
//! documents and challenges, the namespaces it owns, `basePath`, PKCE and code reuse, refresh
//! rotation and reuse, audience binding, `enabledTools`, uploads, bad input and `Origin`.

use serde_json::{Value as Json, json};

use crate::mcp::{Demo, Flow};

const EDITOR: (&str, &str) = ("editor@canopy.local", "canopy-demo-editor");
const ADMIN: (&str, &str) = ("admin@canopy.local", "canopy-demo-admin");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_challenges_and_the_namespaces_of_the_root_mode() {
    let demo = Demo::start(|_| {}).await;
    let http = reqwest::Client::new();
    let origin = &demo.origin;
    let get = |path: &str| http.get(format!("{origin}{path}")).send();
    let metadata: Json = get("/.well-known/oauth-authorization-server")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["issuer"], origin.as_str());
    assert_eq!(
        metadata["authorization_endpoint"],
        format!("{origin}/oauth/authorize")
    );
    assert_eq!(metadata["token_endpoint"], format!("{origin}/oauth/token"));
    assert_eq!(
        metadata["registration_endpoint"],
        format!("{origin}/oauth/register")
    );
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(
        metadata["authorization_response_iss_parameter_supported"],
        true
    );
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    let resource: Json = get("/.well-known/oauth-protected-resource/mcp")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resource["resource"], format!("{origin}/mcp"));
    assert_eq!(resource["authorization_servers"], json!([origin]));
    // A 401 points at the metadata.
    let unauthorized = http
        .post(format!("{origin}/mcp"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let challenge = unauthorized.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\""
        )),
        "{challenge}"
    );
    // GET and DELETE: 405 with Allow, before any authentication.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = http
            .request(method, format!("{origin}/mcp"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "POST");
    }
    // What the server does not serve in its namespaces: 404, never the agent's routes.
    for path in [
        "/oauth/revoke",
        "/.well-known/openid-configuration",
        "/.well-known/x/y",
        "/mcp/other",
    ] {
        assert_eq!(get(path).await.unwrap().status(), 404, "{path}");
    }
    assert_eq!(
        http.put(format!("{origin}/oauth/token"))
            .send()
            .await
            .unwrap()
            .status(),
        405
    );
    // The agent's own routes are untouched.
    assert_eq!(get("/forest").await.unwrap().status(), 200);
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_path_moves_the_routes_and_keeps_metadata_at_the_root() {
    let demo = Demo::start(|mcp| mcp.mcp_base_path = Some("ai/".into())).await;
    let origin = &demo.origin;
    let http = reqwest::Client::new();
    let metadata: Json = http
        .get(format!(
            "{origin}/.well-known/oauth-authorization-server/ai"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["issuer"], format!("{origin}/ai"));
    assert_eq!(
        metadata["token_endpoint"],
        format!("{origin}/ai/oauth/token")
    );
    let resource: Json = http
        .get(format!(
            "{origin}/.well-known/oauth-protected-resource/ai/mcp"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resource["resource"], format!("{origin}/ai/mcp"));
    // Root paths are no longer the MCP server's.
    assert_eq!(
        http.post(format!("{origin}/mcp"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        http.get(format!("{origin}/.well-known/oauth-authorization-server"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // The whole flow under the prefix.
    let flow = Flow::new(origin, "/ai").await;
    let tokens = flow.tokens(EDITOR).await;
    let (error, described) = flow
        .call(
            tokens["access_token"].as_str().unwrap(),
            "describeCollection",
            json!({"collectionName": "orders"}),
        )
        .await;
    assert!(!error, "{described}");
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_are_single_use_pkce_bound_and_tokens_audience_bound() {
    let demo = Demo::start(|_| {}).await;
    let flow = Flow::new(&demo.origin, "").await;
    // A wrong verifier, then the right one: the code was spent by the first exchange.
    let verifier = "a".repeat(43);
    let challenge = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()))
    };
    let page = flow
        .authorize_page(&challenge, &[])
        .await
        .text()
        .await
        .unwrap();
    let redirect = flow.sign_in(&page, EDITOR).await;
    let location = reqwest::Url::parse(redirect.headers()["location"].to_str().unwrap()).unwrap();
    let code: String = location
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let wrong = flow.exchange(&code, &"b".repeat(43)).await;
    assert_eq!(wrong.status(), 400);
    assert_eq!(
        wrong.json::<Json>().await.unwrap()["error"],
        "invalid_grant"
    );
    let again = flow.exchange(&code, &verifier).await;
    assert_eq!(
        again.json::<Json>().await.unwrap()["error"],
        "invalid_grant"
    );
    // `plain` PKCE and a foreign resource go back to the client as errors.
    let plain = flow
        .http
        .get(format!("{}/oauth/authorize", demo.origin))
        .query(&[
            ("response_type", "code"),
            ("client_id", flow.client_id.as_str()),
            ("redirect_uri", flow.redirect_uri.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "plain"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 302);
    assert!(
        plain.headers()["location"]
            .to_str()
            .unwrap()
            .contains("error=invalid_request")
    );
    let other = flow
        .http
        .get(format!("{}/oauth/authorize", demo.origin))
        .query(&[
            ("response_type", "code"),
            ("client_id", flow.client_id.as_str()),
            ("redirect_uri", flow.redirect_uri.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("resource", "https://elsewhere.example/mcp"),
        ])
        .send()
        .await
        .unwrap();
    assert!(
        other.headers()["location"]
            .to_str()
            .unwrap()
            .contains("error=invalid_target")
    );
    // A redirect URI that was not registered is shown, never followed.
    let evil = flow
        .http
        .get(format!("{}/oauth/authorize", demo.origin))
        .query(&[
            ("response_type", "code"),
            ("client_id", flow.client_id.as_str()),
            ("redirect_uri", "https://evil.example/cb"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(evil.status(), 400);
    // A client metadata document on this machine is never fetched (SSRF).
    let inside = flow
        .http
        .get(format!("{}/oauth/authorize", demo.origin))
        .query(&[
            ("response_type", "code"),
            ("client_id", "https://127.0.0.1:9/client.json"),
            ("redirect_uri", "https://127.0.0.1:9/cb"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(inside.status(), 400);
    assert!(
        inside
            .text()
            .await
            .unwrap()
            .contains("not a public address")
    );
    // A wrong password shows the form again; no code.
    let page = flow
        .authorize_page(&challenge, &[])
        .await
        .text()
        .await
        .unwrap();
    let failed = flow.sign_in(&page, (EDITOR.0, "wrong-password")).await;
    assert_eq!(failed.status(), 401);
    assert!(
        failed
            .text()
            .await
            .unwrap()
            .contains("Wrong email or password")
    );
    // A session token of `/forest` is not an MCP token.
    let session =
        canopy::app::admin::demo_session_token(&demo.store, "mcp-demo-test-auth-secret-0123456789")
            .await
            .unwrap();
    let refused = flow.rpc(&session, "tools/list", json!({})).await;
    assert_eq!(refused.status(), 401);
    let tokens = flow.tokens(EDITOR).await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(
        flow.rpc(access, "tools/list", json!({})).await.status(),
        200
    );
    // The same token at the `/forest` routes is not a session token either.
    let forest = flow
        .http
        .get(format!("{}/forest/orders", demo.origin))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(forest.status(), 401);
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_tokens_rotate_and_a_reused_one_revokes_the_sign_in() {
    let demo = Demo::start(|mcp| mcp.mcp_access_token_ttl_seconds = Some("120".into())).await;
    let flow = Flow::new(&demo.origin, "").await;
    let first = flow.tokens(EDITOR).await;
    assert_eq!(first["expires_in"], 120);
    assert_eq!(first["token_type"], "Bearer");
    let first_refresh = first["refresh_token"].as_str().unwrap();
    let rotated = flow.refresh(first_refresh).await;
    assert_eq!(rotated.status(), 200);
    assert_eq!(rotated.headers()["cache-control"], "no-store");
    let second: Json = rotated.json().await.unwrap();
    let second_refresh = second["refresh_token"].as_str().unwrap();
    assert_ne!(first_refresh, second_refresh);
    assert_eq!(
        flow.rpc(
            second["access_token"].as_str().unwrap(),
            "tools/list",
            json!({})
        )
        .await
        .status(),
        200
    );
    // The first one again: refused, and the newest one with it.
    let reused = flow.refresh(first_refresh).await;
    assert_eq!(
        reused.json::<Json>().await.unwrap()["error"],
        "invalid_grant"
    );
    let revoked = flow.refresh(second_refresh).await;
    assert_eq!(
        revoked.json::<Json>().await.unwrap()["error"],
        "invalid_grant"
    );
    // The sign-in's access tokens go with it.
    let access = second["access_token"].as_str().unwrap();
    assert_eq!(
        flow.rpc(access, "tools/list", json!({})).await.status(),
        401
    );
    // Another client cannot use a client's refresh token.
    let third = flow.tokens(EDITOR).await;
    let other = Flow::new(&demo.origin, "").await;
    let stolen = other
        .refresh(third["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        stolen.json::<Json>().await.unwrap()["error"],
        "invalid_client"
    );
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_tools_restrict_the_list_and_describe_collection_stays() {
    let demo = Demo::start(|mcp| mcp.mcp_enabled_tools = Some(vec!["list".into()])).await;
    let flow = Flow::new(&demo.origin, "").await;
    let tokens = flow.tokens(EDITOR).await;
    let access = tokens["access_token"].as_str().unwrap();
    let listed: Json = flow
        .rpc(access, "tools/list", json!({}))
        .await
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["describeCollection", "list"]);
    let (error, message) = flow
        .call(
            access,
            "delete",
            json!({"collectionName": "orders", "recordIds": [1]}),
        )
        .await;
    assert!(error);
    assert!(message.as_str().unwrap().contains("not found"), "{message}");
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_file_runs_a_file_action_and_its_url_works_once() {
    let demo = Demo::start(|_| {}).await;
    let flow = Flow::new(&demo.origin, "").await;
    let tokens = flow.tokens(ADMIN).await;
    let access = tokens["access_token"].as_str().unwrap();
    let bytes = b"invoice #42: 12.50 EUR".to_vec();
    let sha = {
        use sha2::Digest as _;
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let (error, upload) = flow
        .call(
            access,
            "requestActionFileUpload",
            json!({"filename": "invoice.txt", "mimeType": "text/plain", "sha256": sha}),
        )
        .await;
    assert!(!error, "{upload}");
    let url = upload["uploadUrl"].as_str().unwrap();
    let put = flow
        .http
        .put(url)
        .header("content-type", "text/plain")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200, "{:?}", put.text().await);
    let again = flow.http.put(url).body(bytes.clone()).send().await.unwrap();
    assert_eq!(again.status(), 409);
    let handle = upload["fileHandle"].as_str().unwrap();
    let (error, form) = flow
        .call(access, "getActionForm", json!({"collectionName": "orders", "actionName": "Attach a document", "recordIds": [2], "values": {"Document": handle}}))
        .await;
    assert!(!error, "{form}");
    assert_eq!(form["canExecute"], true, "{form}");
    let (error, result) = flow
        .call(access, "executeAction", json!({"collectionName": "orders", "actionName": "Attach a document", "recordIds": [2], "values": {"Document": handle}}))
        .await;
    assert!(!error, "{result}");
    assert!(
        result.to_string().contains(&format!(
            "Attached invoice.txt ({} bytes) to order #2",
            bytes.len()
        )),
        "{result}"
    );
    // The handle is the uploader's own.
    let other = Flow::new(&demo.origin, "").await;
    let editor = other.tokens(EDITOR).await;
    let (error, message) = other
        .call(editor["access_token"].as_str().unwrap(), "executeAction", json!({"collectionName": "orders", "actionName": "Attach a document", "recordIds": [2], "values": {"Document": handle}}))
        .await;
    assert!(error);
    assert!(message.to_string().contains("another user"), "{message}");
    // An unknown URL.
    let unknown = flow
        .http
        .put(format!("{}/mcp/uploads/nothing", demo.origin))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_answers_a_model_can_use_and_foreign_origins_are_refused() {
    let demo = Demo::start(|_| {}).await;
    let flow = Flow::new(&demo.origin, "").await;
    let tokens = flow.tokens(EDITOR).await;
    let access = tokens["access_token"].as_str().unwrap();
    for (name, arguments, expected) in [
        (
            "list",
            json!({"collectionName": "nope"}),
            "Unknown collection",
        ),
        (
            "list",
            json!({"collectionName": "orders", "filters": {"field": "status", "operator": "Sorta"}}),
            "is not an operator",
        ),
        (
            "list",
            json!({"collectionName": "orders", "pagination": {"size": 0}}),
            "pagination.size",
        ),
        (
            "listRelated",
            json!({"collectionName": "customers", "relationName": "email", "parentRecordId": 1}),
            "purchases",
        ),
        (
            "executeAction",
            json!({"collectionName": "customers", "actionName": "Nope", "recordIds": [1]}),
            "Offer a coupon",
        ),
        (
            "update",
            json!({"collectionName": "customers", "recordId": 1}),
            "attributes is required",
        ),
        ("nope", json!({}), "not found"),
    ] {
        let (error, message) = flow.call(access, name, arguments).await;
        assert!(error, "{name}: {message}");
        assert!(message.to_string().contains(expected), "{name}: {message}");
    }
    // Not JSON-RPC at all.
    let garbage = flow
        .http
        .post(&flow.mcp)
        .bearer_auth(access)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert!(garbage.status().is_client_error(), "{}", garbage.status());
    // An unknown protocol version is a 400; a notification is accepted with 202 and no body.
    let version = flow
        .http
        .post(&flow.mcp)
        .bearer_auth(access)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "1999-01-01")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 400);
    let notification = flow
        .http
        .post(&flow.mcp)
        .bearer_auth(access)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(notification.status(), 202);
    // A page of another origin may not call.
    let foreign = flow
        .http
        .post(&flow.mcp)
        .bearer_auth(access)
        .header("origin", "https://evil.example")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    // A Host that is not this server's (DNS rebinding) is refused too.
    let rebound = flow
        .http
        .post(&flow.mcp)
        .bearer_auth(access)
        .header("host", "evil.example")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert!(rebound.status().is_client_error(), "{}", rebound.status());
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_is_rate_limited_per_address() {
    let demo = Demo::start(|_| {}).await;
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..51 {
        let response = http
            .post(format!("{}/oauth/token", demo.origin))
            .form(&[("grant_type", "refresh_token"), ("refresh_token", "guess")])
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            assert!(response.headers().contains_key("retry-after"));
        }
    }
    assert!(statuses[..50].iter().all(|s| *s == 400), "{statuses:?}");
    assert_eq!(statuses[50], 429);
    demo.stop().await;
}

/// The workflow tools and the approval request `executeAction` files call the operations
/// themselves (`workflows::operations`, `ops::approvals`), as the MCP user: a run started and
/// read through the tools, a request the approvers' list shows, each with its `mcp` entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_tools_and_filed_approvals_run_the_operations_as_the_mcp_user() {
    let demo = Demo::start(|_| {}).await;
    let flow = Flow::new(&demo.origin, "").await;
    let tokens = flow.tokens(EDITOR).await;
    let token = tokens["access_token"].as_str().unwrap();
    let editor = demo.store.user_by_email(EDITOR.0).await.unwrap().unwrap();

    // The workflows of the collection asked for, and only those.
    let (error, listed) = flow
        .call(token, "listWorkflows", json!({"collectionName": "orders"}))
        .await;
    assert!(!error, "{listed}");
    let workflows = listed["workflows"].as_array().unwrap();
    assert!(
        workflows
            .iter()
            .any(|w| w["name"] == "refund" && w["object"] == "workflow"),
        "{listed}"
    );
    assert!(workflows.iter().all(|w| w["collectionName"] == "orders"));
    let (error, none) = flow
        .call(
            token,
            "listWorkflows",
            json!({"collectionName": "products"}),
        )
        .await;
    assert!(!error, "{none}");
    assert_eq!(none["workflows"], json!([]));

    // A run started by the editor on a shipped order, read back through the tool.
    let (error, started) = flow
        .call(
            token,
            "triggerWorkflow",
            json!({"workflowId": "refund", "recordId": 27}),
        )
        .await;
    assert!(!error, "{started}");
    let run_id = started["runId"].as_str().unwrap();
    let (error, run) = flow
        .call(token, "getWorkflowRun", json!({"runId": run_id}))
        .await;
    assert!(!error, "{run}");
    assert_eq!(run["id"], run_id, "{run}");
    assert_eq!(run["collectionName"], "orders");
    assert_eq!(run["recordId"], "27");
    assert_eq!(run["userId"], editor.id);
    assert_eq!(run["trigger"], "manual");
    assert!(run["steps"].is_array(), "{run}");
    let (error, missing) = flow
        .call(token, "getWorkflowRun", json!({"runId": "no-such-run"}))
        .await;
    assert!(error, "{missing}");
    assert!(
        missing.as_str().unwrap().contains("(HTTP 404)"),
        "{missing}"
    );
    let (error, unknown) = flow
        .call(
            token,
            "triggerWorkflow",
            json!({"workflowId": "no-such-workflow", "recordId": 27}),
        )
        .await;
    assert!(error, "{unknown}");
    assert!(
        unknown.as_str().unwrap().contains("(HTTP 404)"),
        "{unknown}"
    );
    assert!(crate::mcp::logged(&demo, editor.id, "triggerWorkflow", "orders").await > 0);

    // An action that needs an approval: the request is filed as the editor.
    let (error, filed) = flow
        .call(
            token,
            "executeAction",
            json!({"collectionName": "customers", "actionName": "Mark as VIP", "recordIds": [33]}),
        )
        .await;
    assert!(!error, "{filed}");
    assert_eq!(filed["approvalRequested"], true, "{filed}");
    let id = filed["approvalRequestId"].as_i64().unwrap();
    // The approvers' list (`GET /v1/…/approval-requests`, as the admin) shows it.
    let admin = demo.store.user_by_email(ADMIN.0).await.unwrap().unwrap();
    let team = admin.teams.first().unwrap();
    let rendering = demo.store.rendering_id(team.id).await.unwrap();
    let session = canopy::auth::mint(
        crate::mcp::AUTH_SECRET,
        canopy::auth::SessionClaims::for_user(&admin, team, rendering),
        std::time::Duration::from_secs(600),
    )
    .unwrap();
    let list: Json = reqwest::Client::new()
        .get(format!(
            "{}/v1/project/{}/environment/{}/approval-requests?status=pending",
            demo.origin,
            demo.store.project(),
            demo.store.environment()
        ))
        .bearer_auth(session)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let request = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("approval {id} not listed: {list}"));
    assert_eq!(request["requesterId"], editor.id, "{request}");
    assert_eq!(request["collectionName"], "customers");
    assert_eq!(request["actionName"], "Mark as VIP");
    assert_eq!(request["attributes"]["ids"], json!(["33"]), "{request}");
    assert!(crate::mcp::logged(&demo, editor.id, "createApproval", "customers").await > 0);
    demo.stop().await;
}
