//! The admin HTTP API (`/v1/project/{project}/…`) of a served stack, on SQLite and PostgreSQL
//! stores: an admin manages users, teams, roles and the permission documents, every change is in
//! the admin log with the admin as initiator and its previous and new values; an editor is
//! refused; every error has the public API's `{code, message}` shape.

use axum::http::StatusCode;
use canopy::platform::{Actor, NewUser};
use canopy_e2e::Backend;
use serde_json::{Value as Json, json};

use crate::admin::{call, error, on_store_backends, serve, token_for};

const BASE: &str = "/v1/project/acme";

async fn admin_manages_users_teams_and_roles_with_logged_changes(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let admin_user = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let t = Some(admin.as_str());

    let (status, role) = call(
        app,
        "POST",
        &format!("{BASE}/roles"),
        t,
        Some(&json!({"name": "Support"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{role}");
    assert_eq!(role["object"], "role");
    let (status, team) = call(
        app,
        "POST",
        &format!("{BASE}/teams"),
        t,
        Some(&json!({"name": "Ops"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{team}");
    let team_id = team["id"].as_i64().unwrap();
    // The team's rendering exists from its creation, its id in the answer (issue 21 §5).
    let renderings = store.rendering_ids_by_team().await.unwrap();
    assert_eq!(team["renderingId"], json!(renderings[&team_id]), "{team}");
    let (status, listed) = call(app, "GET", &format!("{BASE}/teams"), t, None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let listed_ops = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == team_id)
        .unwrap();
    assert_eq!(listed_ops["renderingId"], team["renderingId"]);
    let (status, read) = call(app, "GET", &format!("{BASE}/teams/{team_id}"), t, None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["renderingId"], team["renderingId"]);

    let (status, user) = call(
        app,
        "POST",
        &format!("{BASE}/users"),
        t,
        Some(&json!({
            "email": "sam@acme.io", "firstName": "Sam", "lastName": "Lee",
            "permissionLevel": "editor", "role": "Support", "teams": ["Ops"],
            "tags": {"region": "EU"}, "password": "sam-password-1",
        })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{user}");
    assert_eq!(user["role"]["name"], "Support");
    assert_eq!(user["teams"][0]["name"], "Ops");
    assert_eq!(user["hasPassword"], true);
    assert!(user.get("passwordHash").is_none() && user.get("password").is_none());
    let id = user["id"].as_i64().unwrap();

    let (status, changed) = call(
        app,
        "PATCH",
        &format!("{BASE}/users/{id}"),
        t,
        Some(&json!({"permissionLevel": "user", "role": null, "tags": {"region": "US"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["permissionLevel"], "user");
    assert_eq!(changed["role"], Json::Null);

    let (status, list) = call(app, "GET", &format!("{BASE}/users"), t, None).await;
    assert_eq!(status, StatusCode::OK);
    let emails: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["admin@canopy.local", "sam@acme.io"]);

    let (status, renamed) = call(
        app,
        "PATCH",
        &format!("{BASE}/teams/{team_id}"),
        t,
        Some(&json!({"name": "Ops EU"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["name"], "Ops EU");

    let (status, body) = call(app, "DELETE", &format!("{BASE}/users/{id}"), t, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert!(store.user(id).await.unwrap().is_none());
    let (status, _) = call(
        app,
        "DELETE",
        &format!("{BASE}/roles/{}", role["id"]),
        t,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // The admin log: newest first, the admin as initiator, previous and new values.
    let (status, logs) = call(app, "GET", &format!("{BASE}/admin-logs?limit=6"), t, None).await;
    assert_eq!(status, StatusCode::OK, "{logs}");
    assert_eq!(
        logs["parameters"],
        json!({"projectName": "acme", "limit": 6})
    );
    assert_eq!(logs["hasMore"], true, "the bootstrap's entries are older");
    let data = logs["data"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = data
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["resource"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("remove", "role"),
            ("remove", "user-project"),
            ("update", "team"),
            ("update", "user-project"),
            ("add", "user-project"),
            ("add", "team"),
        ]
    );
    for entry in data {
        assert_eq!(entry["object"], "adminLog");
        assert_eq!(entry["initiator"], "administrator");
        assert_eq!(
            entry["user"],
            json!({"object": "user", "id": admin_user.id, "username": "Admin", "email": "admin@canopy.local"})
        );
        let created = entry["createdAt"].as_str().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(created).is_ok() && created.ends_with('Z'),
            "{created}"
        );
    }
    assert_eq!(data[2]["previousValue"], json!({"name": "Ops"}));
    assert_eq!(data[2]["newValue"], json!({"name": "Ops EU"}));
    let update = &data[3];
    assert_eq!(update["previousValue"]["permissionLevel"], "editor");
    assert_eq!(update["previousValue"]["role"]["name"], "Support");
    assert_eq!(
        update["previousValue"]["tags"],
        json!([{"key": "region", "value": "EU"}])
    );
    assert_eq!(update["newValue"]["permissionLevel"], "user");
    assert_eq!(update["newValue"]["role"], Json::Null);
    assert!(
        data[1].get("newValue").is_none(),
        "a removal has no new value"
    );
    assert_eq!(data[1]["previousValue"]["user"]["email"], "sam@acme.io");
    assert!(
        data[4].get("previousValue").is_none(),
        "an addition has no previous value"
    );
}

async fn non_admins_are_refused_and_errors_have_the_public_shape(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    store.create_role(&Actor::System, "Support").await.unwrap();
    let editor = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "ed@acme.io".into(),
                permission_level: canopy::datasource::PermissionLevel::Editor,
                role: Some("Support".into()),
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let editor_token = crate::admin::token_of(&editor);
    let admin = token_for(store, "admin@canopy.local").await;
    let t = Some(admin.as_str());

    // No token, a bad token: 401.
    let (status, body) = call(app, "GET", &format!("{BASE}/users"), None, None).await;
    error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(body["error"], "Unauthorized");
    let (status, body) = call(app, "GET", &format!("{BASE}/users"), Some("nope"), None).await;
    error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");

    // An editor with a valid session: 403 on reads and writes, and nothing changes.
    for (method, path, body) in [
        ("GET", format!("{BASE}/users"), None),
        (
            "POST",
            format!("{BASE}/roles"),
            Some(json!({"name": "Sneaky"})),
        ),
        ("GET", format!("{BASE}/admin-logs"), None),
        (
            "GET",
            format!("{BASE}/environment/production/permissions"),
            None,
        ),
        (
            "PATCH",
            format!("{BASE}/users/{}", editor.id),
            Some(json!({"permissionLevel": "admin"})),
        ),
    ] {
        let (status, answer) = call(app, method, &path, Some(&editor_token), body.as_ref()).await;
        error(status, &answer, StatusCode::FORBIDDEN, "forbidden");
    }
    assert!(store.role_by_name("Sneaky").await.unwrap().is_none());
    assert_eq!(
        store
            .user(editor.id)
            .await
            .unwrap()
            .unwrap()
            .permission_level,
        canopy::datasource::PermissionLevel::Editor
    );

    // A demoted admin's live token stops working at once.
    let second = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "root@acme.io".into(),
                permission_level: canopy::datasource::PermissionLevel::Admin,
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let second_token = crate::admin::token_of(&second);
    let (status, _) = call(
        app,
        "GET",
        &format!("{BASE}/users"),
        Some(&second_token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        app,
        "PATCH",
        &format!("{BASE}/users/{}", second.id),
        t,
        Some(&json!({"disabled": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(
        app,
        "GET",
        &format!("{BASE}/users"),
        Some(&second_token),
        None,
    )
    .await;
    error(status, &body, StatusCode::FORBIDDEN, "forbidden");

    // Unknown project, environment, user, route: 404.
    let (status, body) = call(app, "GET", "/v1/project/other/users", t, None).await;
    let message = error(status, &body, StatusCode::NOT_FOUND, "not_found");
    assert!(message.contains("other"), "{message}");
    let (status, body) = call(
        app,
        "GET",
        &format!("{BASE}/environment/staging/permissions"),
        t,
        None,
    )
    .await;
    let message = error(status, &body, StatusCode::NOT_FOUND, "not_found");
    assert!(message.contains("staging"), "{message}");
    let (status, body) = call(app, "GET", &format!("{BASE}/users/999"), t, None).await;
    error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = call(app, "GET", &format!("{BASE}/nothing"), t, None).await;
    error(status, &body, StatusCode::NOT_FOUND, "not_found");

    // Bad input: 400 naming the field, and nothing is created.
    for (body, field) in [
        (json!({"firstName": "No email"}), "email"),
        (json!({"email": "not-an-email"}), "email"),
        (
            json!({"email": "a@acme.io", "permissionLevel": "boss"}),
            "permissionLevel",
        ),
        (json!({"email": "a@acme.io", "role": "Nope"}), "role"),
        (json!({"email": "a@acme.io", "teams": ["Nope"]}), "teams[0]"),
        (
            json!({"email": "a@acme.io", "tags": {"region": 3}}),
            "tags.region",
        ),
        (
            json!({"email": "a@acme.io", "password": "short"}),
            "password",
        ),
        (json!({"email": "a@acme.io", "colour": "blue"}), "colour"),
    ] {
        let (status, answer) = call(app, "POST", &format!("{BASE}/users"), t, Some(&body)).await;
        let message = error(
            status,
            &answer,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        );
        assert!(message.starts_with(field), "{field}: {message}");
    }
    assert!(store.user_by_email("a@acme.io").await.unwrap().is_none());
    let (status, body) = call(app, "GET", &format!("{BASE}/admin-logs?limit=0"), t, None).await;
    let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
    assert!(message.starts_with("limit"), "{message}");

    // A duplicate: 409.
    let (status, body) = call(
        app,
        "POST",
        &format!("{BASE}/users"),
        t,
        Some(&json!({"email": "ed@acme.io"})),
    )
    .await;
    error(status, &body, StatusCode::CONFLICT, "conflict");
    let (status, body) = call(
        app,
        "POST",
        &format!("{BASE}/roles"),
        t,
        Some(&json!({"name": "Support"})),
    )
    .await;
    error(status, &body, StatusCode::CONFLICT, "conflict");
    // A role still held: 409.
    let role = store.role_by_name("Support").await.unwrap().unwrap();
    let (status, body) = call(app, "DELETE", &format!("{BASE}/roles/{}", role.id), t, None).await;
    error(status, &body, StatusCode::CONFLICT, "conflict");
}

async fn documents_are_checked_against_the_served_schema(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let t = Some(admin.as_str());
    let support = store.create_role(&Actor::System, "Support").await.unwrap();
    let ops = store.create_team(&Actor::System, "Ops").await.unwrap();
    let path = format!("{BASE}/environment/production/permissions");

    // The bootstrap gave the Admin role every right on every collection and action, as the
    // `"*"` wildcard (collections and actions served later are covered too).
    let (status, before) = call(app, "GET", &path, t, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(before["collections"]["*"]["collection"]["browseEnabled"]["roles"].is_array());
    assert!(before["collections"]["*"]["actions"]["*"]["triggerEnabled"]["roles"].is_array());
    assert!(before["collections"].get("orders").is_none(), "{before}");

    for (body, field) in [
        (json!({"collections": {"nope": {}}}), "collections.nope"),
        (
            json!({"collections": {"orders": {"collection": {"browseEnabled": {"roles": [999]}}}}}),
            "collections.orders.collection.browseEnabled.roles",
        ),
        (
            json!({"collections": {"orders": {"collection": {"readEnabled": "yes"}}}}),
            "collections.orders.collection.readEnabled",
        ),
        (
            json!({"collections": {"orders": {"actions": {"Launch": {"triggerEnabled": true}}}}}),
            "collections.orders.actions.Launch",
        ),
        (json!({"colections": {}}), "colections"),
        // `"*"` takes only the `"*"` action, and no condition (fields are a collection's).
        (
            json!({"collections": {"*": {"actions": {"Launch": {"triggerEnabled": true}}}}}),
            "collections.*.actions.Launch",
        ),
        (
            json!({"collections": {"*": {"actions": {"*": {
                "triggerEnabled": {"roles": [support.id]},
                "triggerConditions": [{"roleId": support.id,
                    "filter": {"field": "id", "operator": "equal", "value": 1}}]}}}}}),
            "collections.*.actions.*.triggerConditions[0]",
        ),
    ] {
        let (status, answer) = call(app, "PUT", &path, t, Some(&body)).await;
        let message = error(
            status,
            &answer,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        );
        assert!(message.starts_with(field), "{field}: {message}");
    }
    let (_, unchanged) = call(app, "GET", &path, t, None).await;
    assert_eq!(unchanged, before, "a refused document changes nothing");

    let document = json!({"collections": {"orders": {
        "collection": {"browseEnabled": {"roles": [support.id]}, "readEnabled": {"roles": [support.id]},
            "editEnabled": false, "addEnabled": false, "deleteEnabled": false, "exportEnabled": true},
        "actions": {}}}});
    let (status, saved) = call(app, "PUT", &path, t, Some(&document)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    let (_, read) = call(app, "GET", &path, t, None).await;
    assert_eq!(read, document);
    // The wildcard is accepted, and kept as written.
    let mut wildcard = document.clone();
    wildcard["collections"]["*"] = json!({"collection": {"browseEnabled": {"roles": [support.id]}},
        "actions": {"*": {"triggerEnabled": {"roles": [support.id]}}}});
    wildcard["collections"]["orders"]["actions"]["*"] =
        json!({"triggerEnabled": {"roles": [support.id]}});
    let (status, saved) = call(app, "PUT", &path, t, Some(&wildcard)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(
        saved["collections"]["*"]["actions"]["*"]["triggerEnabled"],
        json!({"roles": [support.id]})
    );
    let (status, saved) = call(app, "PUT", &path, t, Some(&document)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");

    // A team's rendering: the scope's field must exist.
    let rendering = format!("{BASE}/environment/production/teams/{}/rendering", ops.id);
    let bad = json!({"collections": {"orders": {"scope": {"field": "regio", "operator": "equal", "value": "EU"}}}});
    let (status, answer) = call(app, "PUT", &rendering, t, Some(&bad)).await;
    let message = error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert!(
        message.starts_with("collections.orders.scope") && message.contains("regio"),
        "{message}"
    );
    let bad = json!({"collections": {"orders": {"scope": {"field": "amount", "operator": "equal", "value": "many"}}}});
    let (status, answer) = call(app, "PUT", &rendering, t, Some(&bad)).await;
    error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let bad = json!({"collections": {"orders": {"segments": ["DELETE FROM orders"]}}});
    let (status, answer) = call(app, "PUT", &rendering, t, Some(&bad)).await;
    error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let good = json!({"collections": {"orders": {
        "scope": {"aggregator": "And", "conditions": [
            {"field": "status", "operator": "equal", "value": "{{currentUser.tags.status}}"},
            {"field": "customer:name", "operator": "present"}]},
        "segments": ["SELECT id FROM orders WHERE amount > 10"]}},
        "stats": [{"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"}]});
    let (status, saved) = call(app, "PUT", &rendering, t, Some(&good)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["team"]["name"], "Ops");
    assert_eq!(
        saved["collections"]["orders"]["segments"][0],
        "SELECT id FROM orders WHERE amount > 10"
    );
    let (status, all) = call(
        app,
        "GET",
        &format!("{BASE}/environment/production/renderings"),
        t,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        all["data"].as_array().unwrap().len(),
        2,
        "Operations and Ops"
    );

    // The IP whitelist.
    let ip = format!("{BASE}/environment/production/ip-whitelist");
    let (status, answer) = call(
        app,
        "PUT",
        &ip,
        t,
        Some(&json!({"use_ip_whitelist": true, "rules": []})),
    )
    .await;
    error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let (status, answer) = call(
        app,
        "PUT",
        &ip,
        t,
        Some(&json!({"use_ip_whitelist": true, "rules": [{"type": 2, "range": "10.0.0.0/33"}]})),
    )
    .await;
    error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let whitelist = json!({"use_ip_whitelist": true, "rules": [{"type": 0, "ip": "10.0.0.1"}, {"type": 2, "range": "10.1.0.0/16"}]});
    let (status, saved) = call(app, "PUT", &ip, t, Some(&whitelist)).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(store.ip_whitelist_document().await.unwrap().rules.len(), 2);

    // Each change is in the log with its values.
    let (_, logs) = call(app, "GET", &format!("{BASE}/admin-logs?limit=3"), t, None).await;
    let data = logs["data"].as_array().unwrap();
    assert_eq!(data[0]["resource"], "environment");
    assert_eq!(data[0]["newValue"]["ipWhitelist"], whitelist);
    assert_eq!(data[1]["resource"], "team");
    assert_eq!(data[1]["newValue"]["name"], "Ops");
    assert_eq!(data[2]["resource"], "environment");
    assert_eq!(data[2]["newValue"]["permissions"], document);
    assert_eq!(
        data[2]["previousValue"]["permissions"]["collections"]["orders"]["collection"]["deleteEnabled"]
            ["roles"],
        before["collections"]["orders"]["collection"]["deleteEnabled"]["roles"]
    );
}

async fn managed_parts_are_refused_with_409(backend: Backend) {
    let file = r#"
mode = "managed"

[roles.Admin]
collections = { "*" = "all" }

[[users]]
email = "admin@canopy.local"
first_name = "Admin"
level = "admin"
role = "Admin"
"#;
    let env = serve(backend, Some(file)).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let t = Some(admin.as_str());
    let (status, body) = call(
        app,
        "POST",
        &format!("{BASE}/roles"),
        t,
        Some(&json!({"name": "Support"})),
    )
    .await;
    let message = error(status, &body, StatusCode::CONFLICT, "conflict");
    assert!(
        message.contains("permissions.toml") && message.contains("managed"),
        "{message}"
    );
    let (status, body) = call(
        app,
        "POST",
        &format!("{BASE}/users"),
        t,
        Some(&json!({"email": "x@acme.io"})),
    )
    .await;
    error(status, &body, StatusCode::CONFLICT, "conflict");
    let path = format!("{BASE}/environment/production/permissions");
    let (status, body) = call(app, "PUT", &path, t, Some(&json!({"collections": {}}))).await;
    error(status, &body, StatusCode::CONFLICT, "conflict");
    // Teams are not in the file: they stay the store's.
    let (status, body) = call(
        app,
        "POST",
        &format!("{BASE}/teams"),
        t,
        Some(&json!({"name": "Ops"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The admin's password is not in the file: they may change it.
    let me = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let (status, body) = call(
        app,
        "PATCH",
        &format!("{BASE}/users/{}", me.id),
        t,
        Some(&json!({"password": "a-new-password"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

on_store_backends!(
    admin_manages_users_teams_and_roles_with_logged_changes,
    non_admins_are_refused_and_errors_have_the_public_shape,
    documents_are_checked_against_the_served_schema,
    managed_parts_are_refused_with_409,
);
