//! Whole responses (status, headers, body) of the wire details that issue 10 found different
//! from the Node agent, checked against insta snapshots on SQLite, PostgreSQL and MariaDB, over
//! the library fixture of `snapshots` (see there for the data and the redactions).
//!
//! One function per item of the issue; every other JSON snapshot also pins item 1 (the
//! `content-type` of JSON answers).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, header};
use canopy::customizer::{Customization, Kind, closures};
use canopy::datasource::action::{ActionScope, FieldType, FormElement, FormField, FormPhase};
use canopy_e2e::{Backend, on_all_backends};
use serde_json::{Value as Json, json};

use crate::snapshots::{filters, fixture, fixture_with, get, raw, request};

/// 2. CSV exports are `text/csv; charset=utf-8` whatever the file name; an error before the
///    first byte is the usual envelope, without the download headers.
async fn csv_headers(backend: Backend) {
    let f = fixture(backend).await;
    // `@forestadmin/agent-client` sends no `filename`.
    f.snap(
        "csv_without_filename",
        get("/forest/books.csv?timezone=UTC&fields[books]=id,title&header=id,title"),
    )
    .await;
    f.snap(
        "csv_related_without_filename",
        get(
            "/forest/books/3/relationships/tags.csv?timezone=UTC&fields[tags]=id,label\
             &header=id,label",
        ),
    )
    .await;
    f.snap(
        "csv_error_before_streaming",
        get("/forest/books.csv?fields[books]=id&header=id&filename=books.csv"),
    )
    .await;
}

/// 3. One trailing slash is ignored: `GET /forest/` is the healthcheck, as every route.
async fn trailing_slash(backend: Backend) {
    let f = fixture(backend).await;
    let anonymous = Request::get("/forest/").body(Body::empty()).unwrap();
    f.snap("healthcheck_trailing_slash", anonymous).await;
    f.snap(
        "count_trailing_slash",
        get("/forest/books/count/?timezone=UTC"),
    )
    .await;
}

/// 4. To-one relationships only for the relations in the projection; included records only
///    carry the to-one relations loaded under them (and their to-many links).
async fn relationships_of_the_projection(backend: Backend) {
    let f = fixture(backend).await;
    // The keys of book_tags are its foreign keys: they are attributes, not relationships.
    f.snap(
        "list_projection_without_relations",
        get(
            "/forest/book_tags?timezone=UTC&fields[book_tags]=book_id&sort=book_id,tag_id\
             &page[size]=2",
        ),
    )
    .await;
    // The included cover has a `book_id`, but its `book` relation was not loaded.
    f.snap(
        "get_included_without_nested_to_one",
        get("/forest/books/1?timezone=UTC&fields[books]=id,cover&fields[cover]=id,book_id"),
    )
    .await;
}

/// 5. An objective chart answers `{value}` alone, with or without an objective.
async fn objective_chart(backend: Backend) {
    let f = fixture(backend).await;
    f.snap_stats(
        "stats_objective_without_objective",
        request(
            "POST",
            "/forest/stats/books?timezone=UTC",
            Some(
                &json!({"type": "Objective", "sourceCollectionName": "books",
                "aggregator": "Count"}),
            ),
        ),
    )
    .await;
}

/// An action on books whose form declares one field required, one read-only, one neither, the
/// last watched (so the change hook is called).
fn review_action() -> Customization {
    let handler = closures::action(
        |_, phase| {
            let mut score = FormField::new("Score", FieldType::Number);
            score.is_required = true;
            let mut comment = FormField::new("Comment", FieldType::String);
            comment.watch_changes = true;
            let mut summary = FormField::new("Summary", FieldType::String);
            summary.is_read_only = true;
            summary.value = Some(json!(match phase {
                FormPhase::Change { .. } => "changed",
                _ => "loaded",
            }));
            Ok(vec![
                FormElement::Field(score),
                FormElement::Field(comment),
                FormElement::Field(summary),
            ])
        },
        |_, _| async { unreachable!("the test runs no action") },
    );
    Customization::collection(
        "wire-test",
        "books",
        Kind::Action {
            name: "Review".to_owned(),
            scope: ActionScope::Single,
            generate_file: false,
            description: None,
            submit_button_label: None,
            static_form: None,
            handler: Arc::clone(&handler),
        },
    )
}

/// 6. Form fields carry `isRequired` / `isReadOnly` only when declared, in the load and change
///    hook answers.
async fn action_form_flags(backend: Backend) {
    let f = fixture_with(backend, vec![review_action()]).await;
    let selection = |extra: Json| {
        let mut body = json!({"data": {"attributes": {"collection_name": "books",
            "ids": ["1"], "all_records": false}}});
        if let (Some(attributes), Json::Object(extra)) =
            (body["data"]["attributes"].as_object_mut(), extra)
        {
            attributes.extend(extra);
        }
        body
    };
    f.snap(
        "action_load_hook",
        request(
            "POST",
            "/forest/_actions/books/0/review/hooks/load?timezone=UTC",
            Some(&selection(json!({}))),
        ),
    )
    .await;
    f.snap(
        "action_change_hook",
        request(
            "POST",
            "/forest/_actions/books/0/review/hooks/change?timezone=UTC",
            Some(&selection(json!({"changed_field": "Comment", "fields": [
                {"field": "Score", "value": 4}, {"field": "Comment", "value": "good"},
                {"field": "Summary", "value": "loaded"}]}))),
        ),
    )
    .await;
}

/// 7. Error details in the agent's words: unknown fields and relations listing what exists,
///    operators in PascalCase, the id type message.
async fn error_wording(backend: Backend) {
    let f = fixture(backend).await;
    let leaf = |field: &str, operator: &str, value: Json| {
        get(&format!(
            "/forest/books?timezone=UTC&{}",
            filters(&json!({"field": field, "operator": operator, "value": value}))
        ))
    };
    f.snap_per_backend(
        "400_filters_unknown_relation",
        leaf("writer:name", "equal", json!("Terry")),
    )
    .await;
    f.snap(
        "400_filters_unknown_nested_field",
        leaf("author:nope", "equal", json!(1)),
    )
    .await;
    f.snap(
        "400_filters_operator_not_listed",
        leaf("published", "like", json!("2024%")),
    )
    .await;
    f.snap_per_backend(
        "400_get_projection_unknown_field",
        get("/forest/books/1?timezone=UTC&fields[books]=id,nope"),
    )
    .await;
    f.snap(
        "400_stats_leaderboard_unknown_relation",
        request(
            "POST",
            "/forest/stats/authors?timezone=UTC",
            Some(
                &json!({"type": "Leaderboard", "sourceCollectionName": "authors",
                "aggregator": "Count", "relationshipFieldName": "novels",
                "labelFieldName": "name", "limit": 2}),
            ),
        ),
    )
    .await;
    f.snap_per_backend(
        "400_stats_filter_unknown_field",
        request(
            "POST",
            "/forest/stats/books?timezone=UTC",
            Some(&json!({"type": "Value", "sourceCollectionName": "books",
                "aggregator": "Count",
                "filter": {"field": "nope", "operator": "equal", "value": 1}})),
        ),
    )
    .await;
    f.snap(
        "400_create_unknown_field_listed",
        request(
            "POST",
            "/forest/tags?timezone=UTC",
            Some(&json!({"data": {"attributes": {"label": "x", "colour": "red"}}})),
        ),
    )
    .await;
}

/// 8. koa's own answers: plain-text 404 for a path or method no route serves (after the token
///    check under `/forest`), 400 for a body that is not JSON, 413 over `jsonLimit`.
async fn unknown_routes(backend: Backend) {
    let f = fixture(backend).await;
    f.snap("404_unknown_path_under_forest", get("/forest/books/1/2/3"))
        .await;
    let anonymous = Request::get("/forest/books/1/2/3")
        .body(Body::empty())
        .unwrap();
    f.snap("401_unknown_path_without_token", anonymous).await;
    f.snap(
        "404_wrong_method",
        request("PATCH", "/forest/books?timezone=UTC", None),
    )
    .await;
    f.snap(
        "404_wrong_method_on_record",
        request("POST", "/forest/books/1?timezone=UTC", None),
    )
    .await;
    let mut preflight_free = request("OPTIONS", "/forest/books?timezone=UTC", None);
    preflight_free
        .headers_mut()
        .insert(header::ORIGIN, "https://app.example.com".parse().unwrap());
    f.snap("404_options_without_preflight", preflight_free)
        .await;
    f.snap(
        "400_body_not_json_without_route_detail",
        raw("PUT", "/forest/books/1?timezone=UTC", "[1,"),
    )
    .await;
}

/// 9. Capabilities: every type's operators as the agent lists them, in its order.
async fn capabilities_operators(backend: Backend) {
    let f = fixture(backend).await;
    f.snap(
        "capabilities_every_type",
        request(
            "POST",
            "/forest/_internal/capabilities",
            Some(&json!({"collectionNames": ["authors", "covers"]})),
        ),
    )
    .await;
    // What is listed is answered: `in` on a date, comparisons on a string (code point order,
    // on every database).
    let published = json!({"field": "published", "operator": "in",
        "value": ["2024-01-15", "2024-04-01"]});
    f.snap(
        "list_date_in",
        get(&format!(
            "/forest/books?timezone=UTC&fields[books]=id,published&sort=id&{}",
            filters(&published)
        )),
    )
    .await;
    let titles = json!({"aggregator": "and", "conditions": [
        {"field": "title", "operator": "greater_than_or_equal", "value": "Earthsea"},
        {"field": "title", "operator": "less_than", "value": "Mort"}]});
    f.snap(
        "list_string_comparison",
        get(&format!(
            "/forest/books?timezone=UTC&fields[books]=id,title&sort=id&{}",
            filters(&titles)
        )),
    )
    .await;
}

/// 10. Writes of `@forestadmin/agent-client`: a to-one relation named in `attributes`, an
///     explicit auto-increment key, an update of a record that does not exist.
async fn agent_client_writes(backend: Backend) {
    let f = fixture(backend).await;
    f.snap(
        "create_to_one_in_attributes",
        request(
            "POST",
            "/forest/books?timezone=UTC",
            Some(&json!({"data": {"type": "books", "attributes": {
                "title": "Small Gods", "author": [2]}}})),
        ),
    )
    .await;
    f.snap(
        "create_to_one_in_attributes_null",
        request(
            "POST",
            "/forest/covers?timezone=UTC",
            Some(&json!({"data": {"type": "covers", "attributes": {
                "color": "green", "book": null}}})),
        ),
    )
    .await;
    f.snap(
        "create_explicit_auto_increment_key",
        request(
            "POST",
            "/forest/tags?timezone=UTC",
            Some(&json!({"data": {"type": "tags", "attributes": {"id": 990001, "label": "epic"}}})),
        ),
    )
    .await;
    f.snap(
        "read_explicit_auto_increment_key",
        get("/forest/tags/990001?timezone=UTC"),
    )
    .await;
    f.snap(
        "update_unknown_record",
        request(
            "PUT",
            "/forest/books/99?timezone=UTC",
            Some(&json!({"data": {"attributes": {"title": "x"}}})),
        ),
    )
    .await;
}

/// 11. A live-query segment on an unknown connection: `BusinessError` with `data: {}`.
async fn live_query_unknown_connection(backend: Backend) {
    let f = fixture(backend).await;
    f.snap(
        "422_live_query_unknown_connection",
        get("/forest/books?timezone=UTC&connectionName=other\
             &segmentQuery=SELECT%20id%20FROM%20books"),
    )
    .await;
    f.snap(
        "422_live_query_unknown_connection_count",
        get("/forest/books/count?timezone=UTC&connectionName=other\
             &segmentQuery=SELECT%20id%20FROM%20books"),
    )
    .await;
}

on_all_backends!(
    csv_headers,
    trailing_slash,
    relationships_of_the_projection,
    objective_chart,
    action_form_flags,
    error_wording,
    unknown_routes,
    capabilities_operators,
    agent_client_writes,
    live_query_unknown_connection,
);
