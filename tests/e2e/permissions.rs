//! Permissions through HTTP (protocol §5) with a real `platform::Store` (SQLite or PostgreSQL)
//! feeding `auth::Permissions`, over the shop fixture of `list` on SQLite, PostgreSQL and
//! MariaDB: collection rights per route and role, scopes with `{{currentUser.*}}` values from
//! the users document, relation reads (`skipRelationReadPermissions`), removed and disabled
//! users with live tokens, and invalid scopes. Charts, segments, the IP whitelist and caching are
//! in `permissions_charts` and `permissions_ip`.
//!
//! The world: role Admin (every right), role Support, teams Admins and Ops. `admin` is an
//! admin-level user with role Admin in team Admins; `sam` is a user-level Support member of Ops tagged
//! `customer=1`, whose tokens carry another email than the users document (so that a test
//! sees which one the scope used).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use canopy::auth::{CachePolicy, Permissions, SessionClaims, SessionKey};
use canopy::datasource::PermissionLevel;
use canopy::http::{AppState, router};
use canopy::platform::documents::{EnvironmentPermissions, IpWhitelist, RenderingCollection};
use canopy::platform::{Actor, NewUser, Store, UserChange};
use canopy_e2e::{Backend, TestDb};
use serde_json::{Value as Json, json};

use crate::harness::{AUTH_SECRET, http_config};
use crate::http::send;
use crate::list::shop;

/// The Support role's rights: everything on orders but add, browse alone on customers, nothing
/// on countries; order lines fully.
pub(crate) fn environment(admin: i64, support: i64) -> Json {
    let all = json!({"browseEnabled": true, "readEnabled": true, "editEnabled": true,
        "addEnabled": true, "deleteEnabled": true, "exportEnabled": true});
    let roles = |ids: &[i64]| json!({ "roles": ids });
    json!({"collections": {
        "orders": {"collection": {
            "browseEnabled": roles(&[admin, support]), "readEnabled": roles(&[admin, support]),
            "editEnabled": roles(&[admin, support]), "addEnabled": roles(&[admin]),
            "deleteEnabled": roles(&[admin, support]), "exportEnabled": roles(&[admin, support])}},
        "customers": {"collection": {
            "browseEnabled": roles(&[admin, support]), "readEnabled": roles(&[admin]),
            "editEnabled": roles(&[admin]), "addEnabled": roles(&[admin]),
            "deleteEnabled": roles(&[admin]), "exportEnabled": roles(&[admin])}},
        "countries": {"collection": {
            "browseEnabled": roles(&[admin]), "readEnabled": roles(&[admin]),
            "editEnabled": roles(&[admin]), "addEnabled": roles(&[admin]),
            "deleteEnabled": roles(&[admin]), "exportEnabled": roles(&[admin])}},
        "order_lines": {"collection": all},
    }})
}

/// A user of the world: their id and rendering.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Who {
    pub id: i64,
    pub rendering: i64,
}

/// The store, the router over the shop data, and the users.
pub(crate) struct World {
    pub store: Store,
    pub app: Router,
    pub permissions: Arc<Permissions>,
    pub admin: Who,
    pub sam: Who,
    pub support_role: i64,
    pub admin_role: i64,
    _data: TestDb,
    _state: TestDb,
}

/// Options of a world.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    pub policy: CachePolicy,
    pub skip_relation_read_permissions: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            policy: CachePolicy::new(true, Duration::from_secs(900)),
            skip_relation_read_permissions: false,
        }
    }
}

pub(crate) async fn world(store_backend: Backend, data: Backend) -> World {
    world_with(store_backend, data, Options::default()).await
}

pub(crate) async fn world_with(store_backend: Backend, data: Backend, options: Options) -> World {
    let (data_db, datasource) = shop(data).await;
    let state_db = TestDb::new(store_backend).await;
    let store = Store::open(&state_db.url, "acme", "production")
        .await
        .unwrap();
    let actor = Actor::System;
    let admin_role = store.create_role(&actor, "Admin").await.unwrap().id;
    let support_role = store.create_role(&actor, "Support").await.unwrap().id;
    let ops = store.create_team(&actor, "Ops").await.unwrap();
    // The admin's own team: Ops's scopes are not theirs.
    let admins = store.create_team(&actor, "Admins").await.unwrap();
    let new_user = |email: &str, level, role: &str, team: &str, tags: &[(&str, &str)]| NewUser {
        email: email.to_owned(),
        first_name: "First".to_owned(),
        last_name: email.split('@').next().unwrap().to_owned(),
        permission_level: level,
        role: Some(role.to_owned()),
        teams: vec![team.to_owned()],
        tags: tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        password_hash: None,
    };
    let admin = store
        .create_user(
            &actor,
            new_user(
                "admin@acme.io",
                PermissionLevel::Admin,
                "Admin",
                "Admins",
                &[],
            ),
        )
        .await
        .unwrap();
    // `ann@x.io` is the email of customer 1 in the shop data (the customers scope uses it).
    let sam = store
        .create_user(
            &actor,
            new_user(
                "ann@x.io",
                PermissionLevel::User,
                "Support",
                "Ops",
                &[("customer", "1")],
            ),
        )
        .await
        .unwrap();
    let document: EnvironmentPermissions =
        serde_json::from_value(environment(admin_role, support_role)).unwrap();
    store
        .set_environment_document(&actor, &document)
        .await
        .unwrap();
    let rendering = store.rendering_id(ops.id).await.unwrap();
    let admins_rendering = store.rendering_id(admins.id).await.unwrap();
    let mut permissions = Permissions::new(Arc::new(store.clone()), options.policy);
    permissions.skip_relation_read_permissions = options.skip_relation_read_permissions;
    let permissions = Arc::new(permissions);
    let mut state = AppState::new(
        Arc::new(datasource),
        SessionKey::new(AUTH_SECRET),
        &http_config(),
    );
    state.permissions = Arc::clone(&permissions);
    state.store = Some(store.clone());
    World {
        app: router(Arc::new(state)),
        store,
        permissions,
        admin: Who {
            id: admin.id,
            rendering: admins_rendering,
        },
        sam: Who {
            id: sam.id,
            rendering,
        },
        support_role,
        admin_role,
        _data: data_db,
        _state: state_db,
    }
}

impl World {
    /// The store's URL, for a second handle (another instance on the same store).
    pub(crate) fn state_url(&self) -> String {
        self._state.url.clone()
    }

    /// Sets the Ops team's rendering (scopes, segments, charts).
    pub(crate) async fn rendering(&self, collections: Json, stats: Json) {
        let collections: std::collections::BTreeMap<String, RenderingCollection> =
            serde_json::from_value(collections).unwrap();
        let stats: Vec<Json> = serde_json::from_value(stats).unwrap();
        self.store
            .set_rendering(&Actor::System, "Ops", collections, stats)
            .await
            .unwrap();
    }

    pub(crate) async fn ip_whitelist(&self, whitelist: Json) {
        let whitelist: IpWhitelist = serde_json::from_value(whitelist).unwrap();
        self.store
            .set_ip_whitelist(&Actor::System, &whitelist)
            .await
            .unwrap();
    }

    pub(crate) async fn level(&self, who: Who, level: PermissionLevel) -> Who {
        self.store
            .update_user(
                &Actor::System,
                who.id,
                UserChange {
                    permission_level: Some(level),
                    ..UserChange::default()
                },
            )
            .await
            .unwrap();
        who
    }
}

/// A session token for `who`; its claims say admin and another email, which no check may
/// believe: the users document decides.
pub(crate) fn token(who: Who) -> String {
    let claims = SessionClaims {
        id: who.id,
        email: format!("token-{}@elsewhere.io", who.id),
        first_name: "Token".to_owned(),
        last_name: "Claims".to_owned(),
        team: "Ops".to_owned(),
        team_id: None,
        role: "Admin".to_owned(),
        role_id: None,
        permission_level: PermissionLevel::Admin,
        rendering_id: who.rendering,
        tags: [("customer".to_owned(), "2".to_owned())].into(),
        iat: 0,
        exp: 0,
    };
    SessionKey::new(AUTH_SECRET)
        .mint(claims, Duration::from_secs(3600))
        .unwrap()
}

/// A request of `who` with an optional JSON body.
pub(crate) fn request(who: Who, method: &str, uri: &str, body: Option<&Json>) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", token(who)));
    match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => builder.body(Body::empty()).unwrap(),
    }
}

pub(crate) async fn call(
    app: &Router,
    who: Who,
    method: &str,
    uri: &str,
    body: Option<&Json>,
) -> (StatusCode, Json) {
    let (status, _, body) = send(app, request(who, method, uri, body)).await;
    (status, body)
}

pub(crate) fn forbidden() -> Json {
    json!({"errors": [{"name": "ForbiddenError", "detail": "Forbidden", "status": 403}]})
}

/// The ids of a JSON:API list, as numbers.
pub(crate) fn ids(body: &Json) -> Vec<i64> {
    let mut ids: Vec<i64> = body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().parse().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

fn selection(collection: &str, ids: &[&str], all: bool) -> Json {
    json!({"data": {"attributes": {"collection_name": collection, "ids": ids,
        "all_records": all, "all_records_ids_excluded": []}, "type": "action-requests"}})
}

const TZ: &str = "timezone=UTC";

/// Each route asks its right of §1 (list/count browse, get read, create add, update edit,
/// delete delete, CSV browse + export, related routes on the foreign collection), with the
/// role from the users document, never the token's admin claims.
async fn collection_rights_follow_the_role(store: Backend, data: Backend) {
    let w = world(store, data).await;
    let (admin, sam) = (w.admin, w.sam);
    let ok = [
        ("GET", format!("/forest/orders?{TZ}"), None),
        ("GET", format!("/forest/orders/count?{TZ}"), None),
        ("GET", format!("/forest/orders/1?{TZ}"), None),
        (
            "GET",
            format!("/forest/orders.csv?{TZ}&fields[orders]=id&header=id"),
            None,
        ),
        (
            "GET",
            format!("/forest/customers?{TZ}&fields[customers]=id,name"),
            None,
        ),
        (
            "GET",
            format!("/forest/customers/1/relationships/orders?{TZ}&fields[orders]=id"),
            None,
        ),
        (
            "GET",
            format!("/forest/customers/1/relationships/orders/count?{TZ}"),
            None,
        ),
        (
            "PUT",
            format!("/forest/orders/1?{TZ}"),
            Some(json!({"data": {"id": "1", "type": "orders", "attributes": {"note": "edited"}}})),
        ),
        // Browse on customers suffices, whatever the rights on countries (the parent).
        (
            "GET",
            format!("/forest/countries/1/relationships/customers?{TZ}&fields[customers]=id"),
            None,
        ),
    ];
    for (method, uri, body) in &ok {
        let (status, answer) = call(&w.app, sam, method, uri, body.as_ref()).await;
        assert_eq!(status, StatusCode::OK, "sam {method} {uri}: {answer}");
    }
    let refused = [
        // add on orders
        (
            "POST",
            format!("/forest/orders?{TZ}"),
            Some(json!({"data": {"type": "orders", "attributes": {"status": "new"}}})),
        ),
        // read, export and edit on customers
        ("GET", format!("/forest/customers/1?{TZ}"), None),
        (
            "GET",
            format!("/forest/customers.csv?{TZ}&fields[customers]=id&header=id"),
            None,
        ),
        (
            "PUT",
            format!("/forest/customers/1?{TZ}"),
            Some(json!({"data": {"id": "1", "type": "customers", "attributes": {"name": "X"}}})),
        ),
        // nothing on countries
        ("GET", format!("/forest/countries?{TZ}"), None),
        ("GET", format!("/forest/countries/count?{TZ}"), None),
        (
            "DELETE",
            format!("/forest/countries?{TZ}"),
            Some(selection("countries", &["1"], false)),
        ),
        ("DELETE", format!("/forest/countries/2?{TZ}"), None),
        // related routes ask the foreign collection (export on customers); the links ask edit on
        // the parent (countries) and, for this one-to-many, on customers too
        (
            "GET",
            format!(
                "/forest/countries/1/relationships/customers.csv?{TZ}&header=id&fields[customers]=id"
            ),
            None,
        ),
        (
            "POST",
            format!("/forest/countries/2/relationships/customers?{TZ}"),
            Some(json!({"data": [{"id": "3", "type": "customers"}]})),
        ),
        (
            "DELETE",
            format!("/forest/countries/1/relationships/customers?{TZ}"),
            Some(selection("customers", &["4"], false)),
        ),
        // ManyToOne link: edit on the parent (customers)
        (
            "PUT",
            format!("/forest/customers/3/relationships/country?{TZ}"),
            Some(json!({"data": {"id": "1", "type": "countries"}})),
        ),
    ];
    for (method, uri, body) in &refused {
        let (status, answer) = call(&w.app, sam, method, uri, body.as_ref()).await;
        assert_eq!(
            (status, &answer),
            (StatusCode::FORBIDDEN, &forbidden()),
            "sam {method} {uri}"
        );
    }
    // Malformed as well as refused: the refusal, as the agent checks the right before it reads
    // the request (a parse error would tell which field names exist).
    let malformed = [
        (
            "GET",
            format!("/forest/countries?{TZ}&sort=no_such_field"),
            None,
        ),
        (
            "GET",
            format!("/forest/countries?{TZ}&filters=not-json"),
            None,
        ),
        (
            "GET",
            format!(
                "/forest/countries/count?{TZ}&filters=%7B%22field%22%3A%22no_such_field%22%2C%22operator%22%3A%22equal%22%2C%22value%22%3A1%7D"
            ),
            None,
        ),
        (
            "GET",
            format!("/forest/customers.csv?{TZ}&fields[customers]=no_such_field&header=x"),
            None,
        ),
        (
            "PUT",
            format!("/forest/customers/1?{TZ}"),
            Some(
                json!({"data": {"id": "1", "type": "customers", "attributes": {"no_such_field": "X"}}}),
            ),
        ),
        (
            "POST",
            format!("/forest/orders?{TZ}"),
            Some(json!({"data": {"type": "orders", "attributes": {"no_such_field": 1}}})),
        ),
        (
            "DELETE",
            format!("/forest/countries?{TZ}"),
            Some(json!({"data": "not a selection"})),
        ),
    ];
    for (method, uri, body) in &malformed {
        let (status, answer) = call(&w.app, sam, method, uri, body.as_ref()).await;
        assert_eq!(
            (status, &answer),
            (StatusCode::FORBIDDEN, &forbidden()),
            "sam, malformed {method} {uri}"
        );
    }
    // Nothing was written by a refused request.
    let (_, customer) = call(
        &w.app,
        admin,
        "GET",
        &format!("/forest/customers/1?{TZ}"),
        None,
    )
    .await;
    assert_eq!(customer["data"]["attributes"]["name"], "Ann");
    let (_, count) = call(
        &w.app,
        admin,
        "GET",
        &format!("/forest/countries/count?{TZ}"),
        None,
    )
    .await;
    assert_eq!(count, json!({"count": 2}));
    // The admin role has every right on every route.
    for (method, uri, body) in ok
        .iter()
        .chain(refused.iter())
        .filter(|(m, _, _)| *m == "GET")
    {
        let (status, answer) = call(&w.app, admin, method, uri, body.as_ref()).await;
        assert_eq!(status, StatusCode::OK, "admin {method} {uri}: {answer}");
    }
    // With the right, the same kind of malformed request answers its parse error.
    let (status, answer) = call(
        &w.app,
        sam,
        "GET",
        &format!("/forest/orders?{TZ}&sort=no_such_field"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    // Delete with the right: 204 (an order without lines).
    let (status, _) = call(
        &w.app,
        sam,
        "DELETE",
        &format!("/forest/orders/4?{TZ}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Taking the role away is seen on the next request (a change through the store).
    w.store
        .update_user(
            &Actor::System,
            sam.id,
            UserChange {
                role: Some(None),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    let (status, _) = call(&w.app, sam, "GET", &format!("/forest/orders?{TZ}"), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// The scopes of sam's team: orders of the customer in sam's `customer` tag, customers whose
/// email is sam's email of the users document. Every read and write keeps to them.
async fn scopes_restrict_every_read_and_write(store: Backend, data: Backend) {
    let w = world(store, data).await;
    let (admin, sam) = (w.admin, w.sam);
    w.rendering(
        json!({
            "orders": {"scope": {"aggregator": "and", "conditions": [
                {"field": "customer_id", "operator": "equal", "value": "{{currentUser.tags.customer}}"}
            ]}, "segments": [], "liveQuerySegments": []},
            "customers": {"scope": {"field": "email", "operator": "equal",
                "value": "{{currentUser.email}}"}},
        }),
        json!([{"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"}]),
    )
    .await;
    let get = |who, uri: String| {
        let app = w.app.clone();
        async move { call(&app, who, "GET", &uri, None).await }
    };
    // Lists and counts.
    let (_, list) = get(sam, format!("/forest/orders?{TZ}&fields[orders]=id")).await;
    assert_eq!(ids(&list), [1, 2]);
    let (_, list) = get(admin, format!("/forest/orders?{TZ}&fields[orders]=id")).await;
    assert_eq!(ids(&list), [1, 2, 3, 4, 5]);
    let (_, count) = get(sam, format!("/forest/orders/count?{TZ}")).await;
    assert_eq!(count, json!({"count": 2}));
    // The scope is AND-ed with the request's own filter.
    let paid =
        crate::harness::filters(&json!({"field": "status", "operator": "equal", "value": "paid"}));
    let (_, list) = get(
        sam,
        format!("/forest/orders?{TZ}&fields[orders]=id&filters={paid}"),
    )
    .await;
    assert_eq!(ids(&list), [1]);
    // The email comes from the users document, not from the token.
    let (_, customers) = get(sam, format!("/forest/customers?{TZ}&fields[customers]=id")).await;
    assert_eq!(ids(&customers), [1]);
    // Get: outside the scope is not found.
    let (status, _) = get(sam, format!("/forest/orders/3?{TZ}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get(sam, format!("/forest/orders/2?{TZ}")).await;
    assert_eq!(status, StatusCode::OK);
    // CSV.
    let (status, csv) = get(
        sam,
        format!("/forest/orders.csv?{TZ}&fields[orders]=id&header=id"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(csv, json!("id\n1\n2\n"));
    // Related lists and counts use the foreign collection's scope: customer 2's order 3 is
    // outside sam's orders.
    let (_, related) = get(
        sam,
        format!("/forest/customers/2/relationships/orders?{TZ}&fields[orders]=id"),
    )
    .await;
    assert_eq!(ids(&related), Vec::<i64>::new());
    let (_, related) = get(
        sam,
        format!("/forest/customers/2/relationships/orders/count?{TZ}"),
    )
    .await;
    assert_eq!(related, json!({"count": 0}));
    let (_, related) = get(
        sam,
        format!("/forest/customers/1/relationships/orders/count?{TZ}"),
    )
    .await;
    assert_eq!(related, json!({"count": 2}));
    // A chart counts within the scope.
    let (status, chart) = call(
        &w.app,
        sam,
        "POST",
        &format!("/forest/stats/orders?{TZ}"),
        Some(&json!({"type": "Value", "sourceCollectionName": "orders", "aggregator": "Count"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{chart}");
    assert_eq!(
        chart["data"]["attributes"]["value"],
        json!({"countCurrent": 2})
    );
    // Writes outside the scope touch nothing.
    let (status, updated) = call(
        &w.app,
        sam,
        "PUT",
        &format!("/forest/orders/3?{TZ}"),
        Some(&json!({"data": {"id": "3", "type": "orders", "attributes": {"note": "hacked"}}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(updated["data"], Json::Null);
    let (status, _) = call(
        &w.app,
        sam,
        "DELETE",
        &format!("/forest/orders/3?{TZ}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(
        &w.app,
        sam,
        "DELETE",
        &format!("/forest/orders?{TZ}"),
        Some(&selection("orders", &["3", "4", "5"], false)),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Dissociating customer 2's order 3 (outside the scope) changes nothing either. Unlinking
    // needs edit on the parent (customers), which Support lacks: refused first, then granted so
    // that the scope is what keeps order 3 linked.
    let unlink_uri = format!("/forest/customers/2/relationships/orders?{TZ}");
    let order_3 = selection("orders", &["3"], false);
    let unlink = || call(&w.app, sam, "DELETE", &unlink_uri, Some(&order_3));
    let (status, _) = unlink().await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut document = environment(w.admin_role, w.support_role);
    document["collections"]["customers"]["collection"]["editEnabled"] =
        json!({"roles": [w.admin_role, w.support_role]});
    let granted: EnvironmentPermissions = serde_json::from_value(document).unwrap();
    w.store
        .set_environment_document(&Actor::System, &granted)
        .await
        .unwrap();
    w.permissions.invalidate_all();
    let (status, body) = unlink().await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, order) = get(
        admin,
        format!("/forest/orders/3?{TZ}&fields[orders]=id,note,customer&fields[customer]=id"),
    )
    .await;
    assert_eq!(order["data"]["attributes"]["note"], Json::Null, "{order}");
    assert_eq!(
        order["data"]["relationships"]["customer"]["data"]["id"], "2",
        "{order}"
    );
    let (_, list) = get(admin, format!("/forest/orders?{TZ}&fields[orders]=id")).await;
    assert_eq!(ids(&list), [1, 2, 3, 4, 5]);
    // Inside the scope, writes apply.
    let (_, updated) = call(
        &w.app,
        sam,
        "PUT",
        &format!("/forest/orders/2?{TZ}"),
        Some(&json!({"data": {"id": "2", "type": "orders", "attributes": {"note": "seen"}}})),
    )
    .await;
    assert_eq!(updated["data"]["attributes"]["note"], "seen");
    // A change of tag through the store moves the scope on the next request.
    w.store
        .update_user(
            &Actor::System,
            sam.id,
            UserChange {
                tags: Some([("customer".to_owned(), "2".to_owned())].into()),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    let (_, list) = get(sam, format!("/forest/orders?{TZ}&fields[orders]=id")).await;
    assert_eq!(ids(&list), [3]);
}

/// Strict scopes on included records (`strictScopes`) match the related collection's scope on
/// fields the request does not read, through a relation of its own (`country:name`): the
/// customers in sam's scope are those of France with an `@x.io` email, so only Ann (orders 1
/// and 2) is included; Bob (Japan) and Carl (no email, no country) are left out. What was read
/// only to match the scope is not in the answer: an included customer is exactly the admin's.
async fn included_records_match_scopes_on_fields_the_request_does_not_read(
    store: Backend,
    data: Backend,
) {
    let options = Options {
        skip_relation_read_permissions: true,
        ..Options::default()
    };
    let w = world_with(store, data, options).await;
    w.rendering(
        json!({
            "customers": {"scope": {"aggregator": "and", "conditions": [
                {"field": "email", "operator": "ends_with", "value": "@x.io"},
                {"field": "country:name", "operator": "equal", "value": "France"}
            ]}},
        }),
        json!([]),
    )
    .await;
    let customer_of = |body: &Json, order: usize| -> Json {
        body["data"][order]["relationships"]["customer"]["data"].clone()
    };
    let included = |body: &Json| -> Vec<Json> {
        body["included"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["type"] == "customers")
            .collect()
    };
    let list =
        format!("/forest/orders?{TZ}&fields[orders]=id,customer&fields[customer]=name&sort=id");
    let (status, by_sam) = call(&w.app, w.sam, "GET", &list, None).await;
    assert_eq!(status, StatusCode::OK, "{by_sam}");
    let (_, by_admin) = call(&w.app, w.admin, "GET", &list, None).await;
    assert_eq!(ids(&by_sam), [1, 2, 3, 4, 5]);
    let linked: Vec<Json> = (0..5)
        .map(|i| customer_of(&by_sam, i)["id"].clone())
        .collect();
    assert_eq!(
        linked,
        [json!("1"), json!("1"), Json::Null, Json::Null, Json::Null],
        "{by_sam}"
    );
    let admin_linked: Vec<Json> = (0..5)
        .map(|i| customer_of(&by_admin, i)["id"].clone())
        .collect();
    assert_eq!(
        admin_linked,
        [json!("1"), json!("1"), json!("2"), Json::Null, json!("3")]
    );
    // Ann as sam sees her is Ann as the admin sees her: no email, no country, read for the scope.
    let ann = included(&by_sam);
    assert_eq!(ann.len(), 1, "{by_sam}");
    assert_eq!(
        ann[0]["attributes"],
        json!({"id": 1, "name": "Ann"}),
        "{by_sam}"
    );
    let admins_ann = included(&by_admin)
        .into_iter()
        .find(|r| r["id"] == "1")
        .unwrap();
    assert_eq!(ann[0], admins_ann);

    // Get one: Bob's order includes no customer; Ann's includes her as the admin sees her.
    let one = |id: i64| {
        format!("/forest/orders/{id}?{TZ}&fields[orders]=id,customer&fields[customer]=name")
    };
    let (status, bobs) = call(&w.app, w.sam, "GET", &one(3), None).await;
    assert_eq!(status, StatusCode::OK, "{bobs}");
    assert!(
        bobs["data"]["relationships"]["customer"]["data"].is_null(),
        "{bobs}"
    );
    assert!(included(&bobs).is_empty(), "{bobs}");
    let (_, anns) = call(&w.app, w.sam, "GET", &one(1), None).await;
    let (_, admins) = call(&w.app, w.admin, "GET", &one(1), None).await;
    assert_eq!(anns, admins);

    // The default projection (every column of the customer) reads the email: still matched.
    let (_, bobs) = call(
        &w.app,
        w.sam,
        "GET",
        &format!("/forest/orders/3?{TZ}"),
        None,
    )
    .await;
    assert!(
        bobs["data"]["relationships"]["customer"]["data"].is_null(),
        "{bobs}"
    );
    let (_, anns) = call(
        &w.app,
        w.sam,
        "GET",
        &format!("/forest/orders/2?{TZ}"),
        None,
    )
    .await;
    let (_, admins) = call(
        &w.app,
        w.admin,
        "GET",
        &format!("/forest/orders/2?{TZ}"),
        None,
    )
    .await;
    assert_eq!(anns, admins);
}

/// A scope on a field the collection lacks, or with a variable the user has no value for,
/// refuses the request (403 naming the problem) instead of serving unscoped data.
async fn invalid_scopes_refuse_the_request(store: Backend, data: Backend) {
    let w = world(store, data).await;
    w.rendering(
        json!({
            "orders": {"scope": {"field": "nowhere", "operator": "equal", "value": 1}},
            "customers": {"scope": {"field": "name", "operator": "equal",
                "value": "{{currentUser.tags.region}}"}},
        }),
        json!([]),
    )
    .await;
    for (uri, mention) in [
        (format!("/forest/orders?{TZ}"), "nowhere"),
        (format!("/forest/orders/1?{TZ}"), "nowhere"),
        (
            format!("/forest/customers/count?{TZ}"),
            "currentUser.tags.region",
        ),
    ] {
        let (status, body) = call(&w.app, w.sam, "GET", &uri, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri}: {body}");
        let detail = body["errors"][0]["detail"].as_str().unwrap();
        assert!(detail.contains(mention), "{uri}: {detail}");
        assert_eq!(body["errors"][0]["name"], "ForbiddenError");
    }
}

/// `skipRelationReadPermissions` off: reading `customer:*` from orders needs read on customers
/// (which Support lacks) in fields, filters and sorts; the default projection leaves it out.
/// On: only the rights on orders apply.
async fn relation_reads_need_read_unless_skipped(store: Backend, data: Backend) {
    let w = world(store, data).await;
    let sam = w.sam;
    let by_name = crate::harness::filters(
        &json!({"field": "customer:name", "operator": "equal", "value": "Ann"}),
    );
    let refused = [
        format!("/forest/orders?{TZ}&fields[orders]=id,customer&fields[customer]=name"),
        format!("/forest/orders?{TZ}&fields[orders]=id&filters={by_name}"),
        format!("/forest/orders?{TZ}&fields[orders]=id&sort=customer.name"),
        format!("/forest/orders/count?{TZ}&filters={by_name}"),
        format!("/forest/orders/1?{TZ}&fields[orders]=id,customer&fields[customer]=name"),
    ];
    for uri in &refused {
        let (status, body) = call(&w.app, sam, "GET", uri, None).await;
        assert_eq!(
            (status, &body),
            (StatusCode::FORBIDDEN, &forbidden()),
            "{uri}"
        );
    }
    // The default projection drops the relation sam may not read.
    let (status, body) = call(&w.app, sam, "GET", &format!("/forest/orders/1?{TZ}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["data"]["relationships"].get("customer").is_none(),
        "{body}"
    );
    assert!(
        body.get("included")
            .is_none_or(|i| i.as_array().unwrap().is_empty()),
        "{body}"
    );

    let w = world_with(
        store,
        data,
        Options {
            skip_relation_read_permissions: true,
            ..Options::default()
        },
    )
    .await;
    for uri in &refused {
        let (status, body) = call(&w.app, w.sam, "GET", uri, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    }
    // The queried collection's own right still applies.
    let (status, _) = call(
        &w.app,
        w.sam,
        "GET",
        &format!("/forest/customers/1?{TZ}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// A user removed or disabled after their token was issued is refused on every private route
/// (the token is valid for an hour, the rights are not); a re-enabled user is served again.
async fn removed_and_disabled_users_are_refused(store: Backend, data: Backend) {
    let w = world(store, data).await;
    let sam = w.sam;
    let routes = [
        ("GET", format!("/forest/orders?{TZ}")),
        ("POST", "/forest/_internal/capabilities".to_owned()),
        ("POST", "/forest/scope-cache-invalidation".to_owned()),
        ("GET", "/forest/no/such/route".to_owned()),
    ];
    let (status, _) = call(&w.app, sam, "GET", &routes[0].1, None).await;
    assert_eq!(status, StatusCode::OK);
    w.store
        .update_user(
            &Actor::System,
            sam.id,
            UserChange {
                disabled: Some(true),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    for (method, uri) in &routes {
        let (status, body) = call(&w.app, sam, method, uri, Some(&json!({"renderingId": 1}))).await;
        assert_eq!(
            (status, &body),
            (StatusCode::FORBIDDEN, &forbidden()),
            "{method} {uri}"
        );
    }
    w.store
        .update_user(
            &Actor::System,
            sam.id,
            UserChange {
                disabled: Some(false),
                ..UserChange::default()
            },
        )
        .await
        .unwrap();
    let (status, _) = call(&w.app, sam, "GET", &routes[0].1, None).await;
    assert_eq!(status, StatusCode::OK);
    w.store.remove_user(&Actor::System, sam.id).await.unwrap();
    let (status, body) = call(&w.app, sam, "GET", &routes[0].1, None).await;
    assert_eq!((status, body), (StatusCode::FORBIDDEN, forbidden()));
    // The healthcheck stays public, and a missing token is still the 401.
    let (status, _, _) = send(&w.app, Request::get("/forest").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(
        &w.app,
        Request::get("/forest/orders?timezone=UTC")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let _ = (w.admin_role, w.support_role, &w.permissions);
}

/// Store on SQLite and PostgreSQL × user data on SQLite, PostgreSQL and MariaDB.
macro_rules! on_stores_and_data {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use canopy_e2e::Backend;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_store_sqlite_data() { super::$name(Backend::Sqlite, Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_store_postgres_data() { super::$name(Backend::Sqlite, Backend::Postgres).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_store_mysql_data() { super::$name(Backend::Sqlite, Backend::MySql).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_store_sqlite_data() { super::$name(Backend::Postgres, Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_store_postgres_data() { super::$name(Backend::Postgres, Backend::Postgres).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_store_mysql_data() { super::$name(Backend::Postgres, Backend::MySql).await }
            }
        )*
    };
}

/// Store on SQLite and PostgreSQL, user data on SQLite (rules that do not depend on the data's
/// database).
macro_rules! on_stores {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use canopy_e2e::Backend;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite_store() { super::$name(Backend::Sqlite, Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres_store() { super::$name(Backend::Postgres, Backend::Sqlite).await }
            }
        )*
    };
}
pub(crate) use {on_stores, on_stores_and_data};

on_stores_and_data!(
    collection_rights_follow_the_role,
    scopes_restrict_every_read_and_write,
    included_records_match_scopes_on_fields_the_request_does_not_read,
    relation_reads_need_read_unless_skipped,
);
on_stores!(
    invalid_scopes_refuse_the_request,
    removed_and_disabled_users_are_refused
);
