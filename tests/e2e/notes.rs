//! Notes through HTTP (`/v1/project/acme/environment/{env}/notes`) on SQLite and PostgreSQL
//! stores: the write lifecycle (create, message, rename, archive, unarchive, delete), every
//! filter of the listing alone and combined (checked against the notes' own fields), bad
//! parameters naming themselves, who may call, paging by a `createdAt.lt` bound over 1,000 notes,
//! and concurrent writers keeping creation times in id order. Sanitisation: `notes_sanitize`.

use std::collections::BTreeSet;

use axum::Router;
use axum::http::StatusCode;
use canopy::datasource::PermissionLevel;
use canopy::platform::notes::NewNote;
use canopy::platform::{Actor, NewUser, Store, User};
use canopy_e2e::Backend;
use serde_json::{Value as Json, json};

use crate::admin::{call, error, on_store_backends, serve, token_for, token_of};

/// The notes path of the served environment.
pub(crate) fn base(store: &Store) -> String {
    format!("/v1/project/acme/environment/{}/notes", store.environment())
}

/// The keys a note may have: the spec's, no more.
const NOTE_KEYS: [&str; 12] = [
    "object",
    "id",
    "title",
    "recordId",
    "createdAt",
    "updatedAt",
    "archivedAt",
    "user",
    "environment",
    "team",
    "collection",
    "messages",
];

/// Asserts a note has only the spec's fields, with the right discriminators.
fn assert_note_shape(note: &Json) {
    let object = note.as_object().unwrap_or_else(|| panic!("{note}"));
    for key in object.keys() {
        assert!(
            NOTE_KEYS.contains(&key.as_str()),
            "unexpected {key} in {note}"
        );
    }
    assert_eq!(note["object"], "note");
    assert!(note["id"].is_i64());
    for user in std::iter::once(&note["user"]).chain(
        note["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["user"]),
    ) {
        let keys: BTreeSet<&str> = user
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["object", "id", "username", "email"]),
            "{user}"
        );
        assert_eq!(user["object"], "user");
    }
    for message in note["messages"].as_array().unwrap() {
        let keys: BTreeSet<&str> = message
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["object", "content", "createdAt", "user"])
        );
        assert_eq!(message["object"], "note-message");
    }
    assert_eq!(note["environment"]["object"], "environment");
    assert_eq!(note["team"]["object"], "team");
    if let Some(collection) = note.get("collection") {
        assert_eq!(collection["object"], "collection");
    }
}

/// Another admin, in team `Sales`.
async fn second_admin(store: &Store) -> User {
    store.create_team(&Actor::System, "Sales").await.unwrap();
    store
        .create_user(
            &Actor::System,
            NewUser {
                email: "bo@acme.io".into(),
                first_name: "Bo".into(),
                last_name: "Lind".into(),
                permission_level: PermissionLevel::Admin,
                teams: vec!["Sales".into()],
                ..NewUser::default()
            },
        )
        .await
        .unwrap()
}

fn ids(page: &Json) -> Vec<i64> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect()
}

async fn get(app: &Router, uri: &str, token: &str) -> Json {
    let (status, body) = call(app, "GET", uri, Some(token), None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body
}

async fn notes_are_created_threaded_archived_and_deleted(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let t = Some(admin.as_str());
    let base = base(store);

    let (status, note) = call(
        app,
        "POST",
        &base,
        t,
        Some(
            &json!({"collectionName": "customers", "recordId": "7", "title": "Refund?",
            "content": "<p>Asked for a <em>refund</em></p>"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_note_shape(&note);
    let id = note["id"].as_i64().unwrap();
    assert_eq!(note["title"], "Refund?");
    assert_eq!(note["recordId"], "7");
    assert_eq!(
        note["collection"],
        json!({"object": "collection", "name": "customers"})
    );
    assert_eq!(
        note["team"],
        json!({"object": "team", "name": "Operations"})
    );
    assert_eq!(
        note["environment"],
        json!({"object": "environment", "name": store.environment()})
    );
    assert_eq!(note["user"]["email"], "admin@canopy.local");
    assert_eq!(note["createdAt"], note["updatedAt"]);
    assert!(note.get("archivedAt").is_none());
    assert_eq!(
        note["messages"][0]["content"],
        "<p>Asked for a <em>refund</em></p>"
    );

    // A message from another admin: appended after the first, and updatedAt moves.
    let bo = second_admin(store).await;
    let (status, threaded) = call(
        app,
        "POST",
        &format!("{base}/{id}/messages"),
        Some(&token_of(&bo)),
        Some(&json!({"content": "<p>Done</p>"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{threaded}");
    assert_note_shape(&threaded);
    let messages = threaded["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1]["content"], "<p>Done</p>");
    assert_eq!(messages[1]["user"]["email"], "bo@acme.io");
    assert_eq!(messages[1]["user"]["username"], "Bo Lind");
    assert!(messages[0]["createdAt"].as_str() < messages[1]["createdAt"].as_str());
    assert!(threaded["updatedAt"].as_str() > note["updatedAt"].as_str());
    assert_eq!(threaded["createdAt"], note["createdAt"]);
    assert_eq!(
        threaded["user"]["email"], "admin@canopy.local",
        "the creator stays"
    );

    // Rename, archive, archive again (the first date stays), unarchive.
    let (status, renamed) = call(
        app,
        "PATCH",
        &format!("{base}/{id}"),
        t,
        Some(&json!({"title": "Refund done"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["title"], "Refund done");
    assert!(renamed["updatedAt"].as_str() > threaded["updatedAt"].as_str());
    let (_, archived) = call(
        app,
        "PATCH",
        &format!("{base}/{id}"),
        t,
        Some(&json!({"archived": true})),
    )
    .await;
    assert_note_shape(&archived);
    let archived_at = archived["archivedAt"].as_str().unwrap().to_owned();
    let (_, again) = call(
        app,
        "PATCH",
        &format!("{base}/{id}"),
        t,
        Some(&json!({"archived": true})),
    )
    .await;
    assert_eq!(again["archivedAt"], archived_at.as_str());
    let listed = get(app, &format!("{base}?archivedAt.gte=2000-01-01"), &admin).await;
    assert_eq!(ids(&listed), [id]);
    let (_, unarchived) = call(
        app,
        "PATCH",
        &format!("{base}/{id}"),
        t,
        Some(&json!({"archived": false})),
    )
    .await;
    assert!(unarchived.get("archivedAt").is_none(), "{unarchived}");
    let listed = get(app, &format!("{base}?archivedAt.gte=2000-01-01"), &admin).await;
    assert_eq!(ids(&listed), Vec::<i64>::new());

    let read = get(app, &format!("{base}/{id}"), &admin).await;
    assert_eq!(read, unarchived);

    // Delete: 204, then 404 everywhere, gone from the list; a second delete is a 404.
    let (status, body) = call(app, "DELETE", &format!("{base}/{id}"), t, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    for (method, path, body) in [
        ("GET", format!("{base}/{id}"), None),
        ("DELETE", format!("{base}/{id}"), None),
        ("PATCH", format!("{base}/{id}"), Some(json!({"title": "x"}))),
        (
            "POST",
            format!("{base}/{id}/messages"),
            Some(json!({"content": "x"})),
        ),
    ] {
        let (status, answer) = call(app, method, &path, t, body.as_ref()).await;
        error(status, &answer, StatusCode::NOT_FOUND, "not_found");
    }
    assert_eq!(ids(&get(app, &base, &admin).await), Vec::<i64>::new());
}

async fn bad_writes_are_400s_naming_the_field_and_change_nothing(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let t = Some(admin.as_str());
    let base = base(store);
    let good = json!({"collectionName": "orders", "recordId": "1", "title": "T",
        "content": "<p>x</p>"});
    let with = |key: &str, value: Json| {
        let mut body = good.clone();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = good.clone();
        body.as_object_mut().unwrap().remove(key);
        body
    };
    for (body, field) in [
        (with("colour", json!("red")), "colour"),
        (without("collectionName"), "collectionName"),
        (without("recordId"), "recordId"),
        (without("title"), "title"),
        (without("content"), "content"),
        (with("collectionName", json!("nope")), "collectionName"),
        (with("collectionName", json!(3)), "collectionName"),
        (with("title", json!("  ")), "title"),
        (with("title", json!("x".repeat(256))), "title"),
        (with("recordId", json!("")), "recordId"),
        (with("teamName", json!("Nobody")), "teamName"),
        (
            with("content", json!("<script>alert(1)</script>")),
            "content",
        ),
        (with("content", json!("x".repeat(70_000))), "content"),
    ] {
        let (status, answer) = call(app, "POST", &base, t, Some(&body)).await;
        let message = error(
            status,
            &answer,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        );
        assert!(message.starts_with(field), "{field}: {message}");
    }
    let (status, answer) = call(app, "POST", &base, t, Some(&json!([1]))).await;
    error(
        status,
        &answer,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_eq!(ids(&get(app, &base, &admin).await), Vec::<i64>::new());

    let (_, note) = call(app, "POST", &base, t, Some(&good)).await;
    let id = note["id"].as_i64().unwrap();
    for (method, path, body, field) in [
        (
            "PATCH",
            format!("{base}/{id}"),
            json!({"archived": "yes"}),
            "archived",
        ),
        (
            "PATCH",
            format!("{base}/{id}"),
            json!({"title": ""}),
            "title",
        ),
        (
            "PATCH",
            format!("{base}/{id}"),
            json!({"pinned": true}),
            "pinned",
        ),
        (
            "PATCH",
            format!("{base}/{id}"),
            json!({}),
            "nothing to change",
        ),
        (
            "POST",
            format!("{base}/{id}/messages"),
            json!({}),
            "content",
        ),
        (
            "POST",
            format!("{base}/{id}/messages"),
            json!({"content": "<p></p>"}),
            "content",
        ),
        (
            "POST",
            format!("{base}/{id}/messages"),
            json!({"content": "x", "at": 1}),
            "at",
        ),
        ("GET", format!("{base}/abc"), Json::Null, "id"),
        ("GET", format!("{base}/0"), Json::Null, "id"),
    ] {
        let body = (!body.is_null()).then_some(body);
        let (status, answer) = call(app, method, &path, t, body.as_ref()).await;
        let message = error(
            status,
            &answer,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        );
        assert!(message.starts_with(field), "{path} {field}: {message}");
    }
    assert_eq!(get(app, &format!("{base}/{id}"), &admin).await, note);
}

async fn only_admins_of_the_project_may_call(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    store.create_role(&Actor::System, "Support").await.unwrap();
    let editor = store
        .create_user(
            &Actor::System,
            NewUser {
                email: "ed@acme.io".into(),
                permission_level: PermissionLevel::Editor,
                role: Some("Support".into()),
                teams: vec!["Operations".into()],
                ..NewUser::default()
            },
        )
        .await
        .unwrap();
    let admin_user = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let note = store
        .create_note(
            &admin_user,
            NewNote {
                collection_name: "orders".into(),
                record_id: "1".into(),
                title: "T".into(),
                content: "<p>x</p>".into(),
                team_name: None,
            },
        )
        .await
        .unwrap();
    let base = base(store);
    let id = note.id;
    let editor_token = token_of(&editor);
    let requests = [
        ("GET", base.clone(), None),
        ("GET", format!("{base}/{id}"), None),
        (
            "POST",
            base.clone(),
            Some(
                json!({"collectionName": "orders", "recordId": "2", "title": "T",
                "content": "x"}),
            ),
        ),
        (
            "POST",
            format!("{base}/{id}/messages"),
            Some(json!({"content": "x"})),
        ),
        (
            "PATCH",
            format!("{base}/{id}"),
            Some(json!({"archived": true})),
        ),
        ("DELETE", format!("{base}/{id}"), None),
    ];
    for (method, path, body) in &requests {
        let (status, answer) = call(app, method, path, None, body.as_ref()).await;
        error(status, &answer, StatusCode::UNAUTHORIZED, "unauthorized");
        let (status, answer) = call(app, method, path, Some(&editor_token), body.as_ref()).await;
        error(status, &answer, StatusCode::FORBIDDEN, "forbidden");
    }
    // Nothing changed.
    let unchanged = store.note(id).await.unwrap().unwrap();
    assert_eq!(unchanged, note);
    assert_eq!(store.notes(&Default::default(), 10).await.unwrap().len(), 1);

    // Another project or an environment this store does not hold: 404.
    let admin = token_of(&admin_user);
    for path in [
        "/v1/project/other/environment/production/notes".to_owned(),
        "/v1/project/acme/environment/nowhere/notes".to_owned(),
    ] {
        let (status, answer) = call(app, "GET", &path, Some(&admin), None).await;
        error(status, &answer, StatusCode::NOT_FOUND, "not_found");
    }
}

/// A note as the filters see it.
struct Seen {
    id: i64,
    email: String,
    user_id: i64,
    team: String,
    collection: String,
    record: String,
    created: String,
    updated: String,
    archived: Option<String>,
}

impl Seen {
    fn of(note: &Json) -> Self {
        let s = |v: &Json| v.as_str().unwrap().to_owned();
        Self {
            id: note["id"].as_i64().unwrap(),
            email: s(&note["user"]["email"]),
            user_id: note["user"]["id"].as_i64().unwrap(),
            team: s(&note["team"]["name"]),
            collection: s(&note["collection"]["name"]),
            record: s(&note["recordId"]),
            created: s(&note["createdAt"]),
            updated: s(&note["updatedAt"]),
            archived: note.get("archivedAt").map(s),
        }
    }
}

async fn every_filter_alone_and_combined_matches_the_notes_fields(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin_user = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let bo = second_admin(store).await;
    let admin = token_of(&admin_user);
    let base = base(store);

    // 24 notes: two authors, two teams (one given explicitly), two collections, three records;
    // a few archived, a few with a later message.
    for i in 0..24_i64 {
        let author = if i % 2 == 0 { &admin_user } else { &bo };
        let note = store
            .create_note(
                author,
                NewNote {
                    collection_name: if i % 3 == 0 { "orders" } else { "customers" }.into(),
                    record_id: (i % 4).to_string(),
                    title: format!("note {i}"),
                    content: format!("<p>{i}</p>"),
                    team_name: (i % 5 == 0).then(|| "Sales".to_owned()),
                },
            )
            .await
            .unwrap();
        if i % 7 == 0 {
            store
                .update_note(
                    author,
                    note.id,
                    canopy::platform::notes::NoteChange {
                        archived: Some(true),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
        }
        if i % 6 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        }
    }
    for i in [1_i64, 4, 9] {
        let id = store.notes(&Default::default(), 100).await.unwrap()[23 - i as usize].id;
        store
            .add_note_message(&bo, id, "<p>later</p>")
            .await
            .unwrap();
    }

    let all_page = get(app, &format!("{base}?limit=100"), &admin).await;
    assert_eq!(all_page["hasMore"], false);
    let all: Vec<Seen> = all_page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert_note_shape(n);
            Seen::of(n)
        })
        .collect();
    assert_eq!(all.len(), 24);
    assert!(all.windows(2).all(|w| w[0].id > w[1].id), "id descending");
    assert!(
        all.windows(2).all(|w| w[0].created > w[1].created),
        "creation times strictly follow ids"
    );

    // Bounds taken from the notes themselves.
    let mid_created = all[12].created.clone();
    let mid_updated = {
        let mut updated: Vec<&str> = all.iter().map(|n| n.updated.as_str()).collect();
        updated.sort_unstable();
        updated[12].to_owned()
    };
    let first_archived = all.iter().filter_map(|n| n.archived.clone()).min().unwrap();
    let (bo_id, admin_id) = (bo.id, admin_user.id);
    type Check = Box<dyn Fn(&Seen) -> bool>;
    let cases: Vec<(String, Check)> = vec![
        (
            "userEmail=bo@acme.io".into(),
            Box::new(|n: &Seen| n.email == "bo@acme.io"),
        ),
        (
            format!("userId={bo_id}"),
            Box::new(move |n: &Seen| n.user_id == bo_id),
        ),
        (
            format!("userId={admin_id}"),
            Box::new(move |n: &Seen| n.user_id == admin_id),
        ),
        (
            "teamName=Sales".into(),
            Box::new(|n: &Seen| n.team == "Sales"),
        ),
        (
            "teamName=Operations".into(),
            Box::new(|n: &Seen| n.team == "Operations"),
        ),
        (
            "collectionName=orders".into(),
            Box::new(|n: &Seen| n.collection == "orders"),
        ),
        ("recordId=2".into(), Box::new(|n: &Seen| n.record == "2")),
        (format!("createdAt.lt={mid_created}"), {
            let b = mid_created.clone();
            Box::new(move |n: &Seen| n.created < b)
        }),
        (format!("createdAt.lte={mid_created}"), {
            let b = mid_created.clone();
            Box::new(move |n: &Seen| n.created <= b)
        }),
        (format!("createdAt.gt={mid_created}"), {
            let b = mid_created.clone();
            Box::new(move |n: &Seen| n.created > b)
        }),
        (format!("createdAt.gte={mid_created}"), {
            let b = mid_created.clone();
            Box::new(move |n: &Seen| n.created >= b)
        }),
        (format!("createdAt.eq={mid_created}"), {
            let b = mid_created.clone();
            Box::new(move |n: &Seen| n.created == b)
        }),
        (format!("updatedAt.gte={mid_updated}"), {
            let b = mid_updated.clone();
            Box::new(move |n: &Seen| n.updated >= b)
        }),
        (format!("updatedAt.lt={mid_updated}"), {
            let b = mid_updated.clone();
            Box::new(move |n: &Seen| n.updated < b)
        }),
        (format!("updatedAt.eq={mid_updated}"), {
            let b = mid_updated.clone();
            Box::new(move |n: &Seen| n.updated == b)
        }),
        (format!("archivedAt.gte={first_archived}"), {
            Box::new(|n: &Seen| n.archived.is_some())
        }),
        (format!("archivedAt.gt={first_archived}"), {
            let b = first_archived.clone();
            Box::new(move |n: &Seen| n.archived.as_deref().is_some_and(|a| a > b.as_str()))
        }),
        (format!("archivedAt.lte={first_archived}"), {
            let b = first_archived.clone();
            Box::new(move |n: &Seen| n.archived.as_deref().is_some_and(|a| a <= b.as_str()))
        }),
        // Combinations: AND.
        (
            "userEmail=bo@acme.io&collectionName=customers".into(),
            Box::new(|n: &Seen| n.email == "bo@acme.io" && n.collection == "customers"),
        ),
        (
            "collectionName=customers&recordId=1&teamName=Operations".into(),
            Box::new(|n: &Seen| {
                n.collection == "customers" && n.record == "1" && n.team == "Operations"
            }),
        ),
        (format!("teamName=Sales&createdAt.gte={mid_created}"), {
            let b = mid_created.clone();
            Box::new(move |n: &Seen| n.team == "Sales" && n.created >= b)
        }),
        (
            format!(
                "createdAt.gt={}&createdAt.lte={}",
                all[20].created, all[3].created
            ),
            {
                let (lo, hi) = (all[20].created.clone(), all[3].created.clone());
                Box::new(move |n: &Seen| n.created > lo && n.created <= hi)
            },
        ),
        (
            format!("userId={bo_id}&updatedAt.gte={mid_updated}&archivedAt.gte=2000-01-01"),
            {
                let b = mid_updated.clone();
                Box::new(move |n: &Seen| {
                    n.user_id == bo_id && n.updated >= b && n.archived.is_some()
                })
            },
        ),
        // Names nobody has: an empty page, not an error.
        ("userEmail=ghost@acme.io".into(), Box::new(|_: &Seen| false)),
        ("teamName=Ghosts".into(), Box::new(|_: &Seen| false)),
        ("collectionName=ghosts".into(), Box::new(|_: &Seen| false)),
        ("createdAt.gt=2999-01-01".into(), Box::new(|_: &Seen| false)),
        ("createdAt.lt=2000-01-01".into(), Box::new(|_: &Seen| false)),
        ("createdAt.lt=2999-01-01".into(), Box::new(|_: &Seen| true)),
        ("createdAt.gte=2000-01-01".into(), Box::new(|_: &Seen| true)),
    ];
    for (query, keep) in &cases {
        let expected: Vec<i64> = all.iter().filter(|n| keep(n)).map(|n| n.id).collect();
        let page = get(app, &format!("{base}?limit=100&{query}"), &admin).await;
        assert_eq!(ids(&page), expected, "{query}");
        assert_eq!(page["hasMore"], false, "{query}");
        // Each parameter is echoed under its own key (dates as given).
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap();
            let echoed = &page["parameters"][key];
            assert!(
                echoed == value || echoed.as_i64().map(|v| v.to_string()).as_deref() == Some(value),
                "{query}: {key} echoed as {echoed}"
            );
        }
        if !expected.is_empty() {
            // A smaller limit: the newest ones, and hasMore when more remain.
            let page = get(app, &format!("{base}?limit=1&{query}"), &admin).await;
            assert_eq!(ids(&page), expected[..1], "{query}");
            assert_eq!(page["hasMore"], expected.len() > 1, "{query}");
        }
    }
    let page = get(app, &base, &admin).await;
    assert_eq!(ids(&page).len(), 10, "limit defaults to 10");
    assert_eq!(
        page["parameters"],
        json!({"projectName": "acme", "environmentName": store.environment(), "limit": 10})
    );
    assert_eq!(page["hasMore"], true);
}

async fn bad_parameters_are_400s_naming_them(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let base = base(store);
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("userId=0", "userId"),
        ("userId=x", "userId"),
        ("userId=99999999999999999999", "userId"),
        ("userEmail=nobody", "userEmail"),
        ("teamName=", "teamName"),
        ("collectionName=", "collectionName"),
        ("recordId=", "recordId"),
        ("createdAt.lt=soon", "createdAt.lt"),
        ("createdAt.eq=2026-13-01", "createdAt.eq"),
        ("updatedAt.gte=yesterday", "updatedAt.gte"),
        ("archivedAt.lte=1700000000", "archivedAt.lte"),
        ("recordId=1&recordId=2", "recordId"),
    ] {
        let (status, body) = call(app, "GET", &format!("{base}?{query}"), Some(&admin), None).await;
        let message = error(status, &body, StatusCode::BAD_REQUEST, "invalid_parameter");
        assert!(message.starts_with(name), "{query}: {message}");
        assert_eq!(body["error"], "Bad Request");
    }
    // Unknown parameters are ignored.
    let page = get(app, &format!("{base}?sort=id&foo=1"), &admin).await;
    assert_eq!(page["data"], json!([]));
}

async fn paging_by_a_created_at_bound_returns_each_of_1000_notes_once(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin_user = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let admin = token_of(&admin_user);
    let base = base(store);
    // Made as fast as the store goes: many share a millisecond of the wall clock.
    let mut made = BTreeSet::new();
    for i in 0..1000 {
        let note = store
            .create_note(
                &admin_user,
                NewNote {
                    collection_name: "orders".into(),
                    record_id: (i % 10).to_string(),
                    title: format!("n{i}"),
                    content: "<p>x</p>".into(),
                    team_name: None,
                },
            )
            .await
            .unwrap();
        made.insert(note.id);
    }
    let mut seen = Vec::new();
    let mut bound: Option<String> = None;
    let mut pages = 0;
    loop {
        let uri = match &bound {
            Some(at) => format!("{base}?limit=100&createdAt.lt={at}"),
            None => format!("{base}?limit=100"),
        };
        let page = get(app, &uri, &admin).await;
        let data = page["data"].as_array().unwrap();
        seen.extend(data.iter().map(|n| n["id"].as_i64().unwrap()));
        pages += 1;
        if page["hasMore"] == false {
            break;
        }
        assert_eq!(data.len(), 100);
        bound = Some(
            data.last().unwrap()["createdAt"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        assert!(pages <= 10, "paging does not end");
    }
    assert_eq!(pages, 10);
    assert_eq!(seen.len(), 1000, "each note exactly once");
    assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>(), made);
    assert!(seen.windows(2).all(|w| w[0] > w[1]));
}

async fn concurrent_writers_keep_creation_times_in_id_order(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let store = &env.store;
    let admin_user = store
        .user_by_email("admin@canopy.local")
        .await
        .unwrap()
        .unwrap();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (store, user) = (store.clone(), admin_user.clone());
            tokio::spawn(async move {
                store
                    .create_note(
                        &user,
                        NewNote {
                            collection_name: "orders".into(),
                            record_id: i.to_string(),
                            title: "t".into(),
                            content: "<p>x</p>".into(),
                            team_name: None,
                        },
                    )
                    .await
                    .unwrap()
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let notes = store.notes(&Default::default(), 100).await.unwrap();
    assert_eq!(notes.len(), 40);
    for pair in notes.windows(2) {
        assert!(pair[0].id > pair[1].id);
        assert!(
            pair[0].created_at > pair[1].created_at,
            "note {} at {} vs note {} at {}",
            pair[0].id,
            pair[0].created_at,
            pair[1].id,
            pair[1].created_at
        );
    }
}

async fn names_follow_renames_and_survive_removals(backend: Backend) {
    let env = serve(backend, None).await.unwrap();
    let (app, store) = (&env.router, &env.store);
    let admin = token_for(store, "admin@canopy.local").await;
    let bo = second_admin(store).await;
    let note = store
        .create_note(
            &bo,
            NewNote {
                collection_name: "orders".into(),
                record_id: "1".into(),
                title: "T".into(),
                content: "<p>x</p>".into(),
                team_name: None,
            },
        )
        .await
        .unwrap();
    let base = base(store);
    store
        .rename_team(&Actor::System, "Sales", "Sales EU")
        .await
        .unwrap();
    let read = get(app, &format!("{base}/{}", note.id), &admin).await;
    assert_eq!(read["team"]["name"], "Sales EU");
    assert_eq!(
        ids(&get(app, &format!("{base}?teamName=Sales%20EU"), &admin).await),
        [note.id]
    );
    assert_eq!(
        ids(&get(app, &format!("{base}?teamName=Sales"), &admin).await),
        Vec::<i64>::new()
    );

    store.remove_user(&Actor::System, bo.id).await.unwrap();
    store.remove_team(&Actor::System, "Sales EU").await.unwrap();
    let read = get(app, &format!("{base}/{}", note.id), &admin).await;
    assert_note_shape(&read);
    assert_eq!(
        read["user"],
        json!({"object": "user", "id": bo.id, "username": "Bo Lind", "email": "bo@acme.io"})
    );
    assert_eq!(read["messages"][0]["user"], read["user"]);
    assert_eq!(
        read["team"]["name"], "Sales",
        "the name it was written with"
    );
    assert_eq!(
        ids(&get(app, &format!("{base}?userId={}", bo.id), &admin).await),
        [note.id]
    );
}

on_store_backends!(
    notes_are_created_threaded_archived_and_deleted,
    bad_writes_are_400s_naming_the_field_and_change_nothing,
    only_admins_of_the_project_may_call,
    every_filter_alone_and_combined_matches_the_notes_fields,
    bad_parameters_are_400s_naming_them,
    paging_by_a_created_at_bound_returns_each_of_1000_notes_once,
    concurrent_writers_keep_creation_times_in_id_order,
    names_follow_renames_and_survive_removals,
);
