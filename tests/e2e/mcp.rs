//! The MCP server on the shop demo (`canopy demo`'s data, plugin, users and permissions), served
//! over real HTTP. The real clients (the Python `mcp` SDK in `auto` and `legacy` modes, the
//! TypeScript SDK and the MCP Inspector, installed by `.ci/run` under `tests/clients/mcp`) each
//! run the whole OAuth flow with the sign-in page, list the tools and call every one as the demo
//! editor (a non-admin: the Shipping team's scope and the Support role's rights apply), then
//! check refresh rotation and reuse; with `allowedOAuthClients` they are refused. A small
//! scripted client (`Flow`) checks the protocol's edges: metadata, challenges, 405s, `basePath`,
//! PKCE, audience binding, uploads and activity logs.

use std::path::{Path, PathBuf};
use std::process::Command;

use canopy::config::{Config, McpArgs, ServeArgs};
use serde_json::{Value as Json, json};
use sha2::Digest as _;

pub(crate) const AUTH_SECRET: &str = "mcp-demo-test-auth-secret-0123456789";
const ENV_SECRET: &str = "6666666666666666666666666666666666666666666666666666666666666666";
const EDITOR: (&str, &str) = ("editor@canopy.local", "canopy-demo-editor");
const ADMIN: (&str, &str) = ("admin@canopy.local", "canopy-demo-admin");

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The demo served with the MCP server; `mcp` adjusts its settings.
pub(crate) struct Demo {
    pub origin: String,
    pub store: canopy::platform::Store,
    pub database: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: crate::admin::TempDir,
}

impl Demo {
    pub async fn start(mcp: impl FnOnce(&mut McpArgs)) -> Self {
        let dir = crate::admin::TempDir::new();
        let path = dir.0.clone();
        let plugins = path.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::copy(
            Path::new(env!("CANOPY_TEST_PLUGINS")).join("shop_plugin.wasm"),
            plugins.join("shop.wasm"),
        )
        .unwrap();
        let database = path.join("shop.sqlite");
        let database_url = canopy::app::seed_demo(&database).await.unwrap();
        let (data_dir, permissions_file) =
            canopy::app::admin::demo_permissions_file(&path.join("demo-store"), true).unwrap();
        let workflows_dir =
            canopy::app::admin::demo_workflows_dir(&path.join("workflows")).unwrap();
        let mut settings = McpArgs {
            mcp: Some(true),
            ..McpArgs::default()
        };
        mcp(&mut settings);
        let args = ServeArgs {
            database_url: Some(database_url),
            data_dir: Some(data_dir),
            permissions_file: Some(permissions_file),
            auth_secret: Some(AUTH_SECRET.to_owned()),
            env_secret: Some(ENV_SECRET.to_owned()),
            listen: Some("127.0.0.1:0".to_owned()),
            schema_path: Some(path.join(".forestadmin-schema.json")),
            plugin_dir: Some(plugins),
            workflows_dir: Some(workflows_dir),
            mcp: settings,
            ..ServeArgs::default()
        };
        let (config, _warnings) = Config::load(args).unwrap();
        let ready = canopy::app::prepare(config).await.unwrap();
        let store = ready.store().clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            ready
                .serve(
                    listener,
                    async {
                        let _ = stopped.await;
                    },
                    canopy::app::ServeOptions::default(),
                )
                .await
                .unwrap();
        });
        Self {
            origin,
            store,
            database,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// A value read from the demo database.
    pub async fn scalar(&self, sql: &str) -> i64 {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite:{}", self.database.display()))
            .await
            .unwrap();
        let value: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        value
    }
}

// ----- a scripted OAuth client and MCP caller ----------------------------------------------

/// One client's OAuth flow, done by hand with a cookie jar (the sign-in page's CSRF cookie).
pub(crate) struct Flow {
    pub http: reqwest::Client,
    pub mcp: String,
    pub client_id: String,
    pub redirect_uri: String,
}

/// The PKCE pair of a flow.
pub(crate) fn pkce() -> (String, String) {
    let verifier = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let challenge = base64_url(&sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The hidden inputs of the first form of a page.
fn hidden_inputs(page: &str) -> Vec<(String, String)> {
    let re = regex::Regex::new(r#"<input type="hidden" name="([^"]+)" value="([^"]*)">"#).unwrap();
    re.captures_iter(page)
        .map(|c| {
            (
                c[1].to_owned(),
                c[2].replace("&amp;", "&").replace("&quot;", "\""),
            )
        })
        .collect()
}

impl Flow {
    /// Registers a client with this redirect URI at the server of `origin` (`base` = basePath).
    pub async fn register(
        origin: &str,
        base: &str,
        redirect_uri: &str,
    ) -> (Self, reqwest::Response) {
        let http = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Self::register_with(http, origin, base, redirect_uri).await
    }

    /// [`Flow::register`] with this HTTP client (a browser that follows redirects, say).
    pub async fn register_with(
        http: reqwest::Client,
        origin: &str,
        base: &str,
        redirect_uri: &str,
    ) -> (Self, reqwest::Response) {
        let response = http
            .post(format!("{origin}{base}/oauth/register"))
            .json(&json!({"redirect_uris": [redirect_uri], "client_name": "e2e", "token_endpoint_auth_method": "none"}))
            .send()
            .await
            .unwrap();
        let flow = Self {
            http,
            mcp: format!("{origin}{base}/mcp"),
            client_id: String::new(),
            redirect_uri: redirect_uri.to_owned(),
        };
        (flow, response)
    }

    pub async fn new(origin: &str, base: &str) -> Self {
        let (mut flow, response) =
            Self::register(origin, base, "http://127.0.0.1:9/callback").await;
        assert_eq!(response.status(), 201);
        let body: Json = response.json().await.unwrap();
        flow.client_id = body["client_id"].as_str().unwrap().to_owned();
        flow
    }

    fn base(&self) -> String {
        self.mcp.strip_suffix("/mcp").unwrap().to_owned()
    }

    /// The authorization page for a PKCE challenge; the response as is.
    pub async fn authorize_page(
        &self,
        challenge: &str,
        extra: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut query = vec![
            ("response_type", "code"),
            ("client_id", self.client_id.as_str()),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("state", "st4te"),
            ("resource", self.mcp.as_str()),
        ];
        query.extend_from_slice(extra);
        self.http
            .get(format!("{}/oauth/authorize", self.base()))
            .query(&query)
            .send()
            .await
            .unwrap()
    }

    /// Signs in on the page and returns the redirect's query parameters.
    pub async fn sign_in(&self, page: &str, (email, password): (&str, &str)) -> reqwest::Response {
        let mut form = hidden_inputs(page);
        form.push(("email".into(), email.into()));
        form.push(("password".into(), password.into()));
        form.push(("decision".into(), "allow".into()));
        self.http
            .post(format!("{}/oauth/authorize", self.base()))
            .form(&form)
            .send()
            .await
            .unwrap()
    }

    /// The whole flow for a user: `{access_token, refresh_token, …}`.
    pub async fn tokens(&self, user: (&str, &str)) -> Json {
        let (verifier, challenge) = pkce();
        let page = self.authorize_page(&challenge, &[]).await;
        assert_eq!(page.status(), 200);
        let page = page.text().await.unwrap();
        let redirect = self.sign_in(&page, user).await;
        assert_eq!(redirect.status(), 302, "{:?}", redirect.text().await);
        let location = redirect.headers()["location"].to_str().unwrap().to_owned();
        let url = reqwest::Url::parse(&location).unwrap();
        let params: std::collections::HashMap<String, String> =
            url.query_pairs().into_owned().collect();
        assert_eq!(params["state"], "st4te");
        assert_eq!(params["iss"], self.base());
        let response = self.exchange(&params["code"], &verifier).await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    pub async fn exchange(&self, code: &str, verifier: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/oauth/token", self.base()))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("code_verifier", verifier),
                ("client_id", &self.client_id),
                ("redirect_uri", &self.redirect_uri),
                ("resource", &self.mcp),
            ])
            .send()
            .await
            .unwrap()
    }

    pub async fn refresh(&self, refresh_token: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/oauth/token", self.base()))
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("client_id", &self.client_id),
            ])
            .send()
            .await
            .unwrap()
    }

    /// A JSON-RPC request to `/mcp` with this token; the HTTP response.
    pub async fn rpc(&self, token: &str, method: &str, params: Json) -> reqwest::Response {
        self.http
            .post(&self.mcp)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap()
    }

    /// Calls a tool: `(isError, the JSON of its text)`.
    pub async fn call(&self, token: &str, name: &str, arguments: Json) -> (bool, Json) {
        let response = self
            .rpc(
                token,
                "tools/call",
                json!({"name": name, "arguments": arguments}),
            )
            .await;
        assert_eq!(response.status(), 200);
        let body: Json = response.json().await.unwrap();
        let result = &body["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let parsed = serde_json::from_str(&text).unwrap_or(Json::String(text));
        (result["isError"] == json!(true), parsed)
    }
}

// ----- the real clients --------------------------------------------------------------------

/// Runs one real client program; its JSON report.
fn run_client(client: &str, url: &str, user: (&str, &str), plan: &Json, flags: &[&str]) -> Json {
    let root = root();
    let clients = root.join("tests/clients/mcp");
    let plan_file = std::env::temp_dir().join(format!("mcp-plan-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let mut command = match client {
        "python-auto" | "python-legacy" => {
            let mut c = Command::new(root.join("target/mcp-python/bin/python"));
            c.arg(clients.join("python_client.py"))
                .args(["--mode", client.strip_prefix("python-").unwrap()]);
            c
        }
        "typescript" => {
            let mut c = Command::new("node");
            c.arg(clients.join("ts_client.mjs"));
            c
        }
        "inspector" => {
            let mut c = Command::new("node");
            c.arg(clients.join("inspector_client.mjs"));
            c
        }
        other => panic!("no client {other}"),
    };
    command
        .args(["--url", url, "--email", user.0, "--password", user.1])
        .arg("--plan")
        .arg(&plan_file)
        .args(flags);
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{client} could not start (run .ci/run's set-up): {e}"));
    let _ = std::fs::remove_file(&plan_file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{client} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{client} printed no JSON report ({e}):\n{stdout}\n{stderr}"))
}

/// The plan every client runs as the editor: each tool at least once, with what the editor
/// may and may not do. `product` is a product whose tag `tag` is not linked yet; `order` a
/// shipped order for the workflow; `run` a run the editor may read.
fn plan(product: i64, tag: i64, order: i64, run: &str, email: &str) -> Json {
    json!([
        {"name": "describeCollection", "arguments": {"collectionName": "orders"}},
        {"name": "list", "arguments": {"collectionName": "orders", "fields": ["id", "status", "customer@@@email"],
            "sort": {"field": "id", "ascending": true}, "pagination": {"size": 5, "number": 1}, "enableCount": true}},
        {"name": "list", "arguments": {"collectionName": "orders",
            "filters": {"field": "status", "operator": "Equal", "value": "cancelled"}}},
        {"name": "list", "arguments": {"collectionName": "orders", "sort": {"field": "nope"}}},
        {"name": "listRelated", "arguments": {"collectionName": "customers", "relationName": "purchases",
            "parentRecordId": 32, "fields": ["id", "status"]}},
        {"name": "create", "arguments": {"collectionName": "customers",
            "attributes": {"first_name": "Mona", "last_name": "Cp", "email": email, "created_at": "2026-01-01T00:00:00Z"}}},
        {"name": "update", "arguments": {"collectionName": "customers", "recordId": 32, "attributes": {"last_name": "Updated"}}},
        {"name": "delete", "arguments": {"collectionName": "customers", "recordIds": [1]}},
        {"name": "associate", "arguments": {"collectionName": "products", "relationName": "labels",
            "parentRecordId": product, "targetRecordId": tag}},
        {"name": "dissociate", "arguments": {"collectionName": "products", "relationName": "labels",
            "parentRecordId": product, "targetRecordIds": [tag]}},
        {"name": "getActionForm", "arguments": {"collectionName": "customers", "actionName": "Offer a coupon",
            "recordIds": [32], "values": {"Amount": 5}}},
        {"name": "executeAction", "arguments": {"collectionName": "customers", "actionName": "Offer a coupon",
            "recordIds": [32], "values": {"Amount": 5, "Kind": "Fixed"}}},
        {"name": "executeAction", "arguments": {"collectionName": "customers", "actionName": "Mark as VIP",
            "recordIds": [33], "reasoning": "a loyal customer"}},
        {"name": "executeAction", "arguments": {"collectionName": "orders", "actionName": "Refund", "recordIds": [1]}},
        {"name": "requestActionFileUpload", "arguments": {"filename": "invoice.txt", "mimeType": "text/plain"}},
        {"name": "listWorkflows", "arguments": {"collectionName": "orders"}},
        {"name": "triggerWorkflow", "arguments": {"workflowId": "refund", "recordId": order.to_string()}},
        {"name": "getWorkflowRun", "arguments": {"runId": run}},
    ])
}

/// The text of call `i` of a report, parsed as JSON when it is.
fn answer(report: &Json, i: usize) -> (bool, Json) {
    let call = &report["calls"][i];
    let text = call["text"].as_str().unwrap_or("");
    (
        call["isError"] == json!(true),
        serde_json::from_str(text).unwrap_or(Json::String(text.to_owned())),
    )
}

/// What every client must have seen, call by call.
fn check_report(client: &str, report: &Json) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, canopy::config::MCP_TOOLS, "{client}");
    let collection = &report["tools"][1]["inputSchema"]["properties"]["collectionName"]["enum"];
    assert!(
        collection.as_array().unwrap().contains(&json!("orders")),
        "{client}: {collection}"
    );
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 18, "{client}: {report}");
    let ok = |i: usize| {
        let (error, value) = answer(report, i);
        assert!(
            !error,
            "{client}: call {i} ({}) failed: {value}",
            calls[i]["name"]
        );
        value
    };
    let refused = |i: usize| {
        let (error, value) = answer(report, i);
        assert!(
            error,
            "{client}: call {i} ({}) should be refused: {value}",
            calls[i]["name"]
        );
        value.as_str().unwrap_or_default().to_owned()
    };
    let described = ok(0);
    assert!(
        described["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "status")
    );
    assert!(
        described["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "Refund")
    );
    // The Shipping team's scope: paid and shipped orders only.
    let listed = ok(1);
    let records = listed["records"].as_array().unwrap();
    assert_eq!(records.len(), 5, "{client}: {listed}");
    assert!(
        records
            .iter()
            .all(|r| ["paid", "shipped"].contains(&r["status"].as_str().unwrap())),
        "{client}: {listed}"
    );
    assert!(
        records[0]["customer"]["email"].is_string(),
        "{client}: {listed}"
    );
    assert!(listed["totalCount"].as_i64().unwrap() > 5);
    assert_eq!(
        ok(2)["records"],
        json!([]),
        "{client}: the scope hides cancelled orders"
    );
    let sort = refused(3);
    assert!(sort.contains("sortable fields"), "{client}: {sort}");
    let related = ok(4);
    assert!(
        related["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| ["paid", "shipped"].contains(&r["status"].as_str().unwrap()))
    );
    assert!(ok(5)["record"]["id"].is_number(), "{client}");
    assert_eq!(ok(6)["record"]["last_name"], "Updated");
    let delete = refused(7);
    assert!(delete.contains("403"), "{client}: {delete}");
    assert_eq!(ok(8)["success"], true);
    assert_eq!(ok(9)["success"], true);
    let form = ok(10);
    assert_eq!(form["canExecute"], true, "{client}: {form}");
    assert!(
        form["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "Amount" && f["value"] == 5)
    );
    let coupon = ok(11);
    assert!(
        coupon.to_string().contains("Coupon of 5"),
        "{client}: {coupon}"
    );
    let vip = ok(12);
    assert_eq!(vip["approvalRequested"], true, "{client}: {vip}");
    let refund = refused(13);
    assert!(refund.contains("403"), "{client}: {refund}");
    let upload = ok(14);
    assert!(
        upload["fileHandle"]
            .as_str()
            .unwrap()
            .starts_with("$uploadedFile:")
    );
    let workflows = ok(15);
    assert!(
        workflows.to_string().contains("refund"),
        "{client}: {workflows}"
    );
    assert!(ok(16)["runId"].is_string(), "{client}");
    assert!(ok(17).to_string().contains("refund"), "{client}");
}

/// The ids a client's plan works on, different for each client (one run per order, one link per
/// product).
async fn plan_for(demo: &Demo, index: i64, run: &str, client: &str) -> Json {
    // Products 1, 2, 4, 5 (not multiples of 3) have one tag, 1 + p % 5; 1 + (p + 1) % 5 is free.
    let product = [1, 2, 4, 5][usize::try_from(index).unwrap()];
    let tag = 1 + (product + 1) % 5;
    let linked = demo
        .scalar(&format!(
            "SELECT count(*) FROM product_tags WHERE product_id = {product} AND tag_id = {tag}"
        ))
        .await;
    assert_eq!(linked, 0);
    // Shipped orders are 5k + 2: one per client, none the shared run's.
    let order = 7 + 5 * index;
    plan(
        product,
        tag,
        order,
        run,
        &format!("mona.{client}@example.com"),
    )
}

/// A run of the refund workflow on order 2, started by the admin: the editor may read it.
pub(crate) async fn admin_run(demo: &Demo) -> String {
    let flow = Flow::new(&demo.origin, "").await;
    let tokens = flow.tokens(ADMIN).await;
    let (error, run) = flow
        .call(
            tokens["access_token"].as_str().unwrap(),
            "triggerWorkflow",
            json!({"workflowId": "refund", "recordId": "2"}),
        )
        .await;
    assert!(!error, "{run}");
    run["runId"].as_str().unwrap().to_owned()
}

async fn every_tool_through(client: &'static str, index: i64) {
    let demo = Demo::start(|_| {}).await;
    let run = admin_run(&demo).await;
    let plan = plan_for(&demo, index, &run, client).await;
    let url = format!("{}/mcp", demo.origin);
    // The Inspector signs in once and reuses its stored tokens (one sign-in per call would spend
    // the authorization endpoint's rate limit).
    let flags: &[&str] = if client == "inspector" {
        &["--check-refresh", "--auth", "stored"]
    } else {
        &["--check-refresh"]
    };
    let report =
        tokio::task::spawn_blocking(move || run_client(client, &url, EDITOR, &plan, flags))
            .await
            .unwrap();
    check_report(client, &report);
    // Refresh: rotated, the old one refused, then the new one too (the family is revoked).
    let refresh = &report["oauth"]["refresh"];
    assert_eq!(refresh["rotate"]["status"], 200, "{client}: {refresh}");
    assert_eq!(refresh["reuseOld"]["status"], 400, "{client}: {refresh}");
    assert!(
        refresh["reuseOld"]["body"]
            .to_string()
            .contains("invalid_grant"),
        "{client}: {refresh}"
    );
    assert_eq!(refresh["reuseNew"]["status"], 400, "{client}: {refresh}");
    assert_eq!(refresh["ok"], true, "{client}: {refresh}");
    // Every call went through the routes as the editor, logged with origin `mcp`.
    let editor = demo.store.user_by_email(EDITOR.0).await.unwrap().unwrap();
    for (action, collection) in [
        ("describeCollection", "orders"),
        ("index", "orders"),
        ("filter", "orders"),
        ("listRelatedData", "customers"),
        ("create", "customers"),
        ("update", "customers"),
        ("update", "products"),
        ("action", "customers"),
        ("createApproval", "customers"),
        ("triggerWorkflow", "orders"),
    ] {
        let logged = logged(&demo, editor.id, action, collection).await;
        assert!(
            logged > 0,
            "{client}: no `mcp` entry {action} on {collection}"
        );
    }
    demo.stop().await;
}

/// Activity entries of `user` with origin `mcp`, waiting a little for the batched writer.
pub(crate) async fn logged(demo: &Demo, user: i64, action: &str, collection: &str) -> i64 {
    for _ in 0..50 {
        let count: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM activity_logs WHERE origin = 'mcp' AND user_id = $1 AND action = $2 AND collection_name = $3",
        )
        .bind(user)
        .bind(action)
        .bind(collection)
        .fetch_one(demo.store.pool())
        .await
        .unwrap();
        if count > 0 {
            return count;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_in_auto_mode_signs_in_and_uses_every_tool_as_the_editor() {
    every_tool_through("python-auto", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_in_legacy_mode_signs_in_and_uses_every_tool_as_the_editor() {
    every_tool_through("python-legacy", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_signs_in_and_uses_every_tool_as_the_editor() {
    every_tool_through("typescript", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_signs_in_and_uses_every_tool_as_the_editor() {
    every_tool_through("inspector", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_client_is_refused_outside_the_allowed_oauth_clients() {
    let demo = Demo::start(|mcp| mcp.mcp_allowed_oauth_clients = Some("claude.ai".into())).await;
    let url = format!("{}/mcp", demo.origin);
    for client in ["python-auto", "python-legacy", "typescript", "inspector"] {
        let url = url.clone();
        let report = tokio::task::spawn_blocking(move || {
            run_client(client, &url, EDITOR, &json!([]), &["--expect-refused"])
        })
        .await
        .unwrap();
        assert!(report["refused"].is_object(), "{client}: {report}");
        assert!(
            report["refused"].to_string().contains("invalid_client")
                || report["refused"].to_string().contains("approved client"),
            "{client}: {report}"
        );
    }
    demo.stop().await;
}
