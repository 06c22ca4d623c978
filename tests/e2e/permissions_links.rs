//! The rights of the link routes through HTTP, with a real store: associating and unlinking
//! records of a to-many relation need `edit` on the parent (a user who may edit products may tag
//! them without editing tags); a one-to-many link, written in the foreign records, needs `edit`
//! on the foreign collection as well; `?delete=true` needs `delete` on the foreign collection.
//!
//! The data: products ↔ tags through product_tags, products ← reviews (`reviews.product_id`).
//! Product 1 has tag 1 and review 1; tag 2, tag 3 and review 2 are linked to nothing.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use canopy::auth::{CachePolicy, Permissions, SessionKey};
use canopy::datasource::PermissionLevel;
use canopy::datasource::sql::Options;
use canopy::http::{AppState, router};
use canopy::platform::documents::EnvironmentPermissions;
use canopy::platform::{Actor, NewUser, Store};
use canopy_e2e::{Backend, TestDb, on_all_backends};
use serde_json::{Value as Json, json};

use crate::harness::{AUTH_SECRET, http_config};
use crate::list::portable;
use crate::permissions::{Who, call, forbidden, ids};

const TZ: &str = "timezone=UTC";

struct World {
    app: Router,
    admin: Who,
    /// Edits products only.
    products: Who,
    /// Edits tags and reviews, not products.
    tags: Who,
    /// Edits products and reviews, deletes tags.
    curator: Who,
    _data: TestDb,
    _state: TestDb,
}

/// A role: its id, the collections it may edit, the collections it may delete from.
type RoleRights<'a> = (i64, &'a [&'a str], &'a [&'a str]);

/// The rights of each role: browse and read everywhere; `edit` and `delete` as named.
fn environment(roles: &[RoleRights]) -> Json {
    let mut collections = serde_json::Map::new();
    for collection in ["products", "tags", "product_tags", "reviews"] {
        let with = |pick: &dyn Fn(&RoleRights) -> bool| json!({"roles": roles.iter().filter(|r| pick(r)).map(|r| r.0).collect::<Vec<_>>()});
        let every = with(&|_| true);
        collections.insert(
            collection.to_owned(),
            json!({"collection": {
                "browseEnabled": every, "readEnabled": every, "addEnabled": every,
                "exportEnabled": every,
                "editEnabled": with(&|r| r.1.contains(&collection)),
                "deleteEnabled": with(&|r| r.2.contains(&collection)),
            }}),
        );
    }
    json!({ "collections": collections })
}

async fn world(data: Backend) -> World {
    let data_db = TestDb::new(data).await;
    data_db
        .execute(&portable(
            data,
            "CREATE TABLE products (id {pk}, name VARCHAR(255));
             CREATE TABLE tags (id {pk}, name VARCHAR(255));
             CREATE TABLE product_tags (product_id INT NOT NULL, tag_id INT NOT NULL,
                PRIMARY KEY (product_id, tag_id), FOREIGN KEY (product_id) REFERENCES products(id),
                FOREIGN KEY (tag_id) REFERENCES tags(id));
             CREATE TABLE reviews (id {pk}, product_id INT, body VARCHAR(255),
                FOREIGN KEY (product_id) REFERENCES products(id));
             INSERT INTO products (name) VALUES ('lamp');
             INSERT INTO tags (name) VALUES ('red');
             INSERT INTO tags (name) VALUES ('blue');
             INSERT INTO tags (name) VALUES ('green');
             INSERT INTO product_tags (product_id, tag_id) VALUES (1, 1);
             INSERT INTO reviews (product_id, body) VALUES (1, 'bright');
             INSERT INTO reviews (product_id, body) VALUES (NULL, 'dim');",
        ))
        .await;
    let datasource = data_db.datasource(Options::default()).await;
    let state_db = TestDb::new(Backend::Sqlite).await;
    let store = Store::open(&state_db.url, "acme", "production")
        .await
        .unwrap();
    let actor = Actor::System;
    let team = store.create_team(&actor, "Ops").await.unwrap();
    let rendering = store.rendering_id(team.id).await.unwrap();
    let mut roles = Vec::new();
    let mut users = Vec::new();
    let all: &[&str] = &["products", "tags", "product_tags", "reviews"];
    for (role, edit, delete) in [
        ("Admin", all, all),
        ("Products", &["products"][..], &[][..]),
        ("Tags", &["tags", "reviews"][..], &[][..]),
        ("Curator", &["products", "reviews"][..], &["tags"][..]),
    ] {
        let id = store.create_role(&actor, role).await.unwrap().id;
        roles.push((id, edit, delete));
        let user = store
            .create_user(
                &actor,
                NewUser {
                    email: format!("{}@acme.io", role.to_lowercase()),
                    first_name: role.to_owned(),
                    last_name: "User".to_owned(),
                    permission_level: PermissionLevel::User,
                    role: Some(role.to_owned()),
                    teams: vec!["Ops".to_owned()],
                    tags: Default::default(),
                    password_hash: None,
                },
            )
            .await
            .unwrap();
        users.push(Who {
            id: user.id,
            rendering,
        });
    }
    let document: EnvironmentPermissions = serde_json::from_value(environment(&roles)).unwrap();
    store
        .set_environment_document(&actor, &document)
        .await
        .unwrap();
    let permissions = Permissions::new(
        Arc::new(store.clone()),
        CachePolicy::new(true, std::time::Duration::from_secs(900)),
    );
    let mut state = AppState::new(
        Arc::new(datasource),
        SessionKey::new(AUTH_SECRET),
        &http_config(),
    );
    state.permissions = Arc::new(permissions);
    state.store = Some(store);
    World {
        app: router(Arc::new(state)),
        admin: users[0],
        products: users[1],
        tags: users[2],
        curator: users[3],
        _data: data_db,
        _state: state_db,
    }
}

fn link(collection: &str, id: &str) -> Json {
    json!({"data": [{"id": id, "type": collection}]})
}

fn selection(collection: &str, ids: &[&str]) -> Json {
    json!({"data": {"attributes": {"collection_name": collection, "ids": ids,
        "all_records": false, "all_records_ids_excluded": []}, "type": "action-requests"}})
}

impl World {
    async fn related(&self, relation: &str) -> Vec<i64> {
        let uri = format!("/forest/products/1/relationships/{relation}?{TZ}&fields[{relation}]=id");
        let (status, body) = call(&self.app, self.admin, "GET", &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        ids(&body)
    }

    async fn tag_count(&self) -> Json {
        call(
            &self.app,
            self.admin,
            "GET",
            &format!("/forest/tags/count?{TZ}"),
            None,
        )
        .await
        .1
    }
}

/// A user who may edit products, not tags, links and unlinks tags (a many-to-many writes only
/// the through table); a user who may edit tags, not products, may not.
async fn many_to_many_links_need_edit_on_the_parent(data: Backend) {
    let w = world(data).await;
    let tags_uri = format!("/forest/products/1/relationships/tags?{TZ}");
    // Refused to the tags editor, with nothing written.
    let (status, body) = call(&w.app, w.tags, "POST", &tags_uri, Some(&link("tags", "2"))).await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
    let (status, body) = call(
        &w.app,
        w.tags,
        "DELETE",
        &tags_uri,
        Some(&selection("tags", &["1"])),
    )
    .await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
    assert_eq!(w.related("tags").await, [1]);
    // Allowed to the products editor.
    let (status, body) = call(
        &w.app,
        w.products,
        "POST",
        &tags_uri,
        Some(&link("tags", "2")),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(w.related("tags").await, [1, 2]);
    let (status, body) = call(
        &w.app,
        w.products,
        "DELETE",
        &tags_uri,
        Some(&selection("tags", &["1"])),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(w.related("tags").await, [2]);
    assert_eq!(w.tag_count().await, json!({"count": 3}));
}

/// A one-to-many link moves the foreign key of the foreign records: `edit` on the parent and on
/// the foreign collection.
async fn one_to_many_links_need_edit_on_both(data: Backend) {
    let w = world(data).await;
    let uri = format!("/forest/products/1/relationships/reviews?{TZ}");
    for who in [w.products, w.tags] {
        let (status, body) = call(&w.app, who, "POST", &uri, Some(&link("reviews", "2"))).await;
        assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
        let (status, body) = call(
            &w.app,
            who,
            "DELETE",
            &uri,
            Some(&selection("reviews", &["1"])),
        )
        .await;
        assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
    }
    assert_eq!(w.related("reviews").await, [1]);
    let (status, body) = call(&w.app, w.curator, "POST", &uri, Some(&link("reviews", "2"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(w.related("reviews").await, [1, 2]);
    let (status, body) = call(
        &w.app,
        w.curator,
        "DELETE",
        &uri,
        Some(&selection("reviews", &["1"])),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(w.related("reviews").await, [2]);
}

/// `?delete=true` deletes the foreign records: `delete` on their collection, whatever the edit
/// rights on the parent.
async fn deleting_related_records_needs_delete_on_the_foreign_collection(data: Backend) {
    let w = world(data).await;
    let uri = format!("/forest/products/1/relationships/tags?{TZ}&delete=true");
    let (status, body) = call(
        &w.app,
        w.products,
        "DELETE",
        &uri,
        Some(&selection("tags", &["1"])),
    )
    .await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
    assert_eq!(w.tag_count().await, json!({"count": 3}));
    let (status, body) = call(
        &w.app,
        w.curator,
        "DELETE",
        &uri,
        Some(&selection("tags", &["1"])),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(w.tag_count().await, json!({"count": 2}));
    assert!(w.related("tags").await.is_empty());
}

on_all_backends!(
    many_to_many_links_need_edit_on_the_parent,
    one_to_many_links_need_edit_on_both,
    deleting_related_records_needs_delete_on_the_foreign_collection
);
