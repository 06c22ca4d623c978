//! Notes under `/v1/project/{project}/environment/{environment}/notes` (public-api.md "List
//! notes", platform-api.md §1.4): the listing with every filter of the spec (`notes:read`), one
//! note (`notes:read`), and the writes the platform announces but does not publish
//! (`notes:write`): create a note on a record, add a message, rename, archive or unarchive,
//! delete (soft). Admins only, as the spec says for the notes listing.
//!
//! A note is shown exactly in the spec's shape, no more (clients validate with
//! `additionalProperties: false`); `archivedAt` and `collection` are left out rather than null.
//! A token with `notes:write` but not `notes:read` may write, but its answers carry only the
//! note's id: a write scope must not become a way to read the others' threads.

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value as Json, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::listing::{CreatedAtQuery, ListQuery, iso};
use super::{Admin, Body, Error, Fields as _, Result, id, no_content};
use crate::http::{SharedState, json, json_with};
use crate::ops::notes::{self, Writer};
use crate::platform::Scope;
use crate::platform::activity::Origin;
use crate::platform::notes::{NewNote, Note, NoteChange, NoteFilter, NoteUser};

pub fn routes() -> OpenApiRouter<SharedState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(read, change, remove))
        .routes(routes!(add_message))
}

/// The note operations' writer: the admin, through the public API (origin `api`), with the
/// application token that made the call, if one did.
fn writer<'a>(admin: &'a Admin, environment: &'a str) -> Writer<'a> {
    Writer {
        user: &admin.user,
        origin: Origin::Api,
        token_id: admin.token_id.as_deref(),
        environment: Some(environment),
    }
}

/// The query of `GET …/notes` (every filter is optional; several combine with AND).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(
    dead_code,
    reason = "documentation only: list reads the query with ListQuery"
)]
struct NotesQuery {
    /// How many notes, newest first (1 to 100).
    #[param(nullable = false, minimum = 1, maximum = 100, default = 10)]
    limit: Option<i64>,
    /// The creator's e-mail.
    #[param(rename = "userEmail", nullable = false, format = Email)]
    user_email: Option<String>,
    /// The creator's id.
    #[param(rename = "userId", nullable = false, minimum = 1)]
    user_id: Option<i64>,
    /// The team's name.
    #[param(rename = "teamName", nullable = false, min_length = 1)]
    team_name: Option<String>,
    /// The collection's name, as in the schema.
    #[param(rename = "collectionName", nullable = false, min_length = 1)]
    collection_name: Option<String>,
    /// The id of the record the note is attached to (packed form for composite keys).
    #[param(rename = "recordId", nullable = false, min_length = 1)]
    record_id: Option<String>,
    #[param(rename = "updatedAt.eq", nullable = false, format = DateTime)]
    updated_at_eq: Option<String>,
    #[param(rename = "updatedAt.lt", nullable = false, format = DateTime)]
    updated_at_lt: Option<String>,
    #[param(rename = "updatedAt.lte", nullable = false, format = DateTime)]
    updated_at_lte: Option<String>,
    #[param(rename = "updatedAt.gt", nullable = false, format = DateTime)]
    updated_at_gt: Option<String>,
    #[param(rename = "updatedAt.gte", nullable = false, format = DateTime)]
    updated_at_gte: Option<String>,
    #[param(rename = "archivedAt.eq", nullable = false, format = DateTime)]
    archived_at_eq: Option<String>,
    #[param(rename = "archivedAt.lt", nullable = false, format = DateTime)]
    archived_at_lt: Option<String>,
    #[param(rename = "archivedAt.lte", nullable = false, format = DateTime)]
    archived_at_lte: Option<String>,
    #[param(rename = "archivedAt.gt", nullable = false, format = DateTime)]
    archived_at_gt: Option<String>,
    #[param(rename = "archivedAt.gte", nullable = false, format = DateTime)]
    archived_at_gte: Option<String>,
}

/// A note's creator, a message's author.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: user_json writes it")]
struct NoteUserSchema {
    /// Always `user`.
    object: String,
    id: i64,
    username: String,
    email: String,
}

/// `{object, name}` of the note's environment, team or collection.
#[derive(ToSchema)]
#[allow(dead_code, reason = "documentation only: note_json writes it")]
struct NamedObject {
    /// `environment`, `team` or `collection`.
    object: String,
    name: String,
}

/// One message of a note's thread.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "documentation only: note_json writes it")]
struct NoteMessage {
    /// Always `note-message`.
    object: String,
    /// Sanitised HTML.
    content: String,
    #[schema(format = DateTime)]
    created_at: String,
    user: NoteUserSchema,
}

/// A note on a record, with its thread (oldest message first). A write made with a token that
/// lacks `notes:read` answers only `object` and `id`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Note)]
#[allow(dead_code, reason = "documentation only: note_json writes it")]
struct NoteSchema {
    /// Always `note`.
    object: String,
    id: i64,
    #[schema(nullable = false)]
    title: Option<String>,
    #[schema(nullable = false)]
    record_id: Option<String>,
    #[schema(nullable = false, format = DateTime)]
    created_at: Option<String>,
    /// The last change of the note or of its thread.
    #[schema(nullable = false, format = DateTime)]
    updated_at: Option<String>,
    /// Present only while the note is archived.
    #[schema(nullable = false, format = DateTime)]
    archived_at: Option<String>,
    #[schema(nullable = false)]
    user: Option<NoteUserSchema>,
    #[schema(nullable = false)]
    environment: Option<NamedObject>,
    #[schema(nullable = false)]
    team: Option<NamedObject>,
    /// Missing when the collection is unknown.
    #[schema(nullable = false)]
    collection: Option<NamedObject>,
    #[schema(nullable = false)]
    messages: Option<Vec<NoteMessage>>,
}

/// A page of notes, newest (highest id) first.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "documentation only: ListQuery::envelope writes it"
)]
struct NoteList {
    /// Whether more notes match beyond `limit`.
    has_more: bool,
    /// The path parameters, the limit and every filter given, under the same keys.
    #[schema(value_type = Object)]
    parameters: Json,
    data: Vec<NoteSchema>,
}

/// A new note: its first message is `content`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: create reads the body as JSON"
)]
struct NewNoteSchema {
    /// A collection of the served schema.
    #[schema(min_length = 1)]
    collection_name: String,
    #[schema(min_length = 1)]
    record_id: String,
    #[schema(min_length = 1)]
    title: String,
    /// HTML, sanitised (paragraphs, emphasis, lists, quotes, code, http/https/mailto links);
    /// nothing left after sanitising is a 400.
    #[schema(min_length = 1)]
    content: String,
    /// Defaults to the author's first team.
    #[schema(nullable = false)]
    team_name: Option<String>,
}

/// A message added to a note's thread.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "documentation only: add_message reads the body as JSON"
)]
struct NewMessage {
    /// HTML, sanitised as a note's first message; nothing left after sanitising is a 400.
    #[schema(min_length = 1)]
    content: String,
}

/// A change of a note: at least one field.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(min_properties = 1)]
#[allow(
    dead_code,
    reason = "documentation only: change reads the body as JSON"
)]
struct NoteChangeSchema {
    /// Not blank.
    #[schema(nullable = false, min_length = 1, pattern = r"\S")]
    title: Option<String>,
    /// `true` archives the note (sets `archivedAt`), `false` unarchives it.
    #[schema(nullable = false)]
    archived: Option<bool>,
}

/// The newest notes of the environment.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/notes",
    operation_id = "list_notes",
    tag = "notes",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        NotesQuery,
        CreatedAtQuery,
    ),
    responses((status = 200, description = "The newest notes", body = NoteList)),
)]
async fn list(
    admin: Admin,
    Path((project, environment)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    admin.require(Scope::NotesRead)?;
    let mut query = ListQuery::parse(
        query.as_deref(),
        &[("projectName", &project), ("environmentName", &environment)],
    )?;
    // Every parameter is read (and so checked) before the environment is looked up: a bad
    // value is a 400 whatever the path.
    let filter = NoteFilter {
        user_email: query.email("userEmail")?,
        user_id: query.id("userId")?,
        team_name: query.text("teamName")?,
        collection_name: query.text("collectionName")?,
        record_id: query.text("recordId")?,
        created_at: query.dates("createdAt")?,
        updated_at: query.dates("updatedAt")?,
        archived_at: query.dates("archivedAt")?,
    };
    let store = admin.environment(&project, &environment).await?;
    let notes = store.notes(&filter, query.limit + 1).await?;
    Ok(json(&query.envelope(notes.iter().map(note_json).collect())))
}

/// One note.
#[utoipa::path(
    get,
    path = "/project/{project}/environment/{environment}/notes/{id}",
    operation_id = "read_note",
    tag = "notes",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The note's id"),
    ),
    responses((status = 200, description = "The note", body = NoteSchema)),
)]
async fn read(
    admin: Admin,
    Path((project, environment, raw)): Path<(String, String, String)>,
) -> Result<Response> {
    admin.require(Scope::NotesRead)?;
    let id = id("id", &raw)?;
    let store = admin.environment(&project, &environment).await?;
    let note = store
        .note(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("note {id} not found")))?;
    Ok(json(&note_json(&note)))
}

const CREATE_FIELDS: [&str; 5] = ["collectionName", "recordId", "title", "content", "teamName"];

/// Files a note on a record.
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/notes",
    operation_id = "create_note",
    tag = "notes",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
    ),
    request_body = NewNoteSchema,
    responses((status = 201, description = "The new note", body = NoteSchema)),
)]
async fn create(
    admin: Admin,
    State(state): State<SharedState>,
    Path((project, environment)): Path<(String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.require(Scope::NotesWrite)?;
    body.only(&CREATE_FIELDS)?;
    let required = |field: &str| match body.string(field)? {
        None => Err(Error::field(field, "is required")),
        Some(value) if value.is_empty() => Err(Error::field(field, "must not be empty")),
        Some(value) => Ok(value),
    };
    let collection_name = required("collectionName")?;
    let new = NewNote {
        record_id: required("recordId")?,
        title: required("title")?,
        content: required("content")?,
        team_name: body.string("teamName")?,
        collection_name,
    };
    if state.datasource.collection(&new.collection_name).is_err() {
        return Err(Error::field(
            "collectionName",
            format!("no collection is named {:?}", new.collection_name),
        ));
    }
    let store = admin.environment(&project, &environment).await?;
    let note = notes::file(&state, &writer(&admin, &environment), &store, new).await?;
    Ok(json_with(StatusCode::CREATED, &shown(&admin, &note)))
}

/// Adds a message to a note's thread (moves `updatedAt`).
#[utoipa::path(
    post,
    path = "/project/{project}/environment/{environment}/notes/{id}/messages",
    operation_id = "add_note_message",
    tag = "notes",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The note's id"),
    ),
    request_body = NewMessage,
    responses((status = 201, description = "The note with its new message", body = NoteSchema)),
)]
async fn add_message(
    admin: Admin,
    State(state): State<SharedState>,
    Path((project, environment, raw)): Path<(String, String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.require(Scope::NotesWrite)?;
    let id = id("id", &raw)?;
    body.only(&["content"])?;
    let content = body
        .string("content")?
        .ok_or_else(|| Error::field("content", "is required"))?;
    let store = admin.environment(&project, &environment).await?;
    let note = notes::reply(&state, &writer(&admin, &environment), &store, id, &content).await?;
    Ok(json_with(StatusCode::CREATED, &shown(&admin, &note)))
}

/// Renames, archives or unarchives a note.
#[utoipa::path(
    patch,
    path = "/project/{project}/environment/{environment}/notes/{id}",
    operation_id = "change_note",
    tag = "notes",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The note's id"),
    ),
    request_body = NoteChangeSchema,
    responses((status = 200, description = "The note as changed", body = NoteSchema)),
)]
async fn change(
    admin: Admin,
    Path((project, environment, raw)): Path<(String, String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.require(Scope::NotesWrite)?;
    let id = id("id", &raw)?;
    body.only(&["title", "archived"])?;
    let change = NoteChange {
        title: body.string("title")?,
        archived: body.boolean("archived")?,
    };
    if change.title.is_none() && change.archived.is_none() {
        return Err(Error::InvalidParameter(
            "nothing to change: give title or archived".to_owned(),
        ));
    }
    let store = admin.environment(&project, &environment).await?;
    let note = notes::change(&writer(&admin, &environment), &store, id, change).await?;
    Ok(json(&shown(&admin, &note)))
}

/// Deletes a note (it is gone from the API).
#[utoipa::path(
    delete,
    path = "/project/{project}/environment/{environment}/notes/{id}",
    operation_id = "delete_note",
    tag = "notes",
    params(
        ("project" = String, Path, description = "The project's name (case sensitive)"),
        ("environment" = String, Path, description = "The environment's name (case sensitive)"),
        ("id" = i64, Path, minimum = 1, description = "The note's id"),
    ),
    responses((status = 204, description = "Deleted")),
)]
async fn remove(
    admin: Admin,
    State(state): State<SharedState>,
    Path((project, environment, raw)): Path<(String, String, String)>,
) -> Result<Response> {
    admin.require(Scope::NotesWrite)?;
    let id = id("id", &raw)?;
    let store = admin.environment(&project, &environment).await?;
    notes::delete(&state, &writer(&admin, &environment), &store, id).await?;
    Ok(no_content())
}

/// The answer of a write: the note, or only its id for a token that may not read notes.
fn shown(admin: &Admin, note: &Note) -> Json {
    if admin.require(Scope::NotesRead).is_ok() {
        note_json(note)
    } else {
        json!({"object": "note", "id": note.id})
    }
}

/// A note in the spec's shape.
pub fn note_json(note: &Note) -> Json {
    let mut out = Map::new();
    out.insert("object".into(), "note".into());
    out.insert("id".into(), note.id.into());
    out.insert("title".into(), note.title.clone().into());
    out.insert("recordId".into(), note.record_id.clone().into());
    out.insert("createdAt".into(), iso(note.created_at).into());
    out.insert("updatedAt".into(), iso(note.updated_at).into());
    if let Some(at) = note.archived_at {
        out.insert("archivedAt".into(), iso(at).into());
    }
    out.insert("user".into(), user_json(&note.author));
    out.insert(
        "environment".into(),
        json!({"object": "environment", "name": note.environment}),
    );
    out.insert(
        "team".into(),
        json!({"object": "team", "name": note.team_name}),
    );
    if let Some(name) = &note.collection_name {
        out.insert(
            "collection".into(),
            json!({"object": "collection", "name": name}),
        );
    }
    let messages: Vec<Json> = note
        .messages
        .iter()
        .map(|m| {
            json!({
                "object": "note-message",
                "content": m.content_html,
                "createdAt": iso(m.created_at),
                "user": user_json(&m.author),
            })
        })
        .collect();
    out.insert("messages".into(), messages.into());
    Json::Object(out)
}

fn user_json(user: &NoteUser) -> Json {
    json!({"object": "user", "id": user.id, "username": user.username, "email": user.email})
}

#[cfg(test)]
mod tests {
    //! The scope each route needs, on a real SQLite store: what an application token's `Admin`
    //! meets (session tokens hold every scope and are tested end to end in tests/e2e/notes.rs).

    use axum::response::IntoResponse as _;

    use super::*;
    use crate::datasource::PermissionLevel;
    use crate::platform::{Actor, NewUser, Store, User};

    struct Fixture {
        store: Store,
        user: User,
        dir: std::path::PathBuf,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    async fn fixture() -> Fixture {
        let dir = std::env::temp_dir().join(format!("canopy-notes-{}", uuid::Uuid::now_v7()));
        let url = format!("sqlite://{}?mode=rwc", dir.join("state.sqlite").display());
        let store = Store::open(&url, "acme", "production").await.unwrap();
        store.create_team(&Actor::System, "Ops").await.unwrap();
        let user = store
            .create_user(
                &Actor::System,
                NewUser {
                    email: "ann@acme.io".into(),
                    permission_level: PermissionLevel::Admin,
                    teams: vec!["Ops".into()],
                    ..NewUser::default()
                },
            )
            .await
            .unwrap();
        Fixture { store, user, dir }
    }

    fn token(f: &Fixture, scopes: &[Scope]) -> Admin {
        Admin {
            user: f.user.clone(),
            store: f.store.clone(),
            scopes: Some(scopes.to_vec()),
            token_id: Some("tok_test".to_owned()),
        }
    }

    /// A bare server state (no collections, activity logging off): what the write routes need.
    fn state() -> State<SharedState> {
        let datasource =
            crate::datasource::CompositeDataSource::new(Vec::new()).expect("an empty composite");
        State(std::sync::Arc::new(crate::http::AppState::new(
            std::sync::Arc::new(datasource),
            crate::auth::SessionKey::new("a-test-secret"),
            &crate::config::HttpConfig::default(),
        )))
    }

    fn path3(id: i64) -> Path<(String, String, String)> {
        Path(("acme".into(), "production".into(), id.to_string()))
    }

    fn body(value: &Json) -> Body {
        Body(value.as_object().unwrap().clone())
    }

    fn status(result: Result<Response>) -> StatusCode {
        match result {
            Ok(response) => response.status(),
            Err(error) => error.into_response().status(),
        }
    }

    #[tokio::test]
    async fn each_route_needs_its_scope() {
        let f = fixture().await;
        let note = f
            .store
            .create_note(
                &f.user,
                NewNote {
                    collection_name: "orders".into(),
                    record_id: "1".into(),
                    title: "T".into(),
                    content: "<p>secret thread</p>".into(),
                    team_name: None,
                },
            )
            .await
            .unwrap();
        let id = note.id;
        let env = || Path(("acme".to_owned(), "production".to_owned()));
        let forbidden = StatusCode::FORBIDDEN;

        // Reads need notes:read; notes:write alone is refused.
        let write_only = [Scope::NotesWrite];
        let read = list(token(&f, &write_only), env(), RawQuery(None)).await;
        assert_eq!(status(read), forbidden);
        assert_eq!(
            status(super::read(token(&f, &write_only), path3(id)).await),
            forbidden
        );
        for scopes in [&[Scope::NotesRead][..], &[Scope::All]] {
            let listed = list(token(&f, scopes), env(), RawQuery(None)).await;
            assert_eq!(status(listed), StatusCode::OK);
            assert_eq!(
                status(super::read(token(&f, scopes), path3(id)).await),
                StatusCode::OK
            );
        }
        for other in [Scope::ActivityLogsRead, Scope::AdminLogsRead] {
            let listed = list(token(&f, &[other]), env(), RawQuery(None)).await;
            assert_eq!(status(listed), forbidden);
        }

        // Writes need notes:write; notes:read alone is refused and changes nothing.
        let read_only = [Scope::NotesRead];
        let added = add_message(
            token(&f, &read_only),
            state(),
            path3(id),
            body(&json!({"content": "x"})),
        )
        .await;
        assert_eq!(status(added), forbidden);
        let changed = change(
            token(&f, &read_only),
            path3(id),
            body(&json!({"archived": true})),
        )
        .await;
        assert_eq!(status(changed), forbidden);
        assert_eq!(
            status(remove(token(&f, &read_only), state(), path3(id)).await),
            forbidden
        );
        assert_eq!(f.store.note(id).await.unwrap().unwrap(), note);

        // A write-only token writes, but its answer shows only the note's id.
        let added = add_message(
            token(&f, &write_only),
            state(),
            path3(id),
            body(&json!({"content": "<p>more</p>"})),
        )
        .await
        .unwrap();
        assert_eq!(added.status(), StatusCode::CREATED);
        let bytes = axum::body::to_bytes(added.into_body(), usize::MAX)
            .await
            .unwrap();
        let shown: Json = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(shown, json!({"object": "note", "id": id}));
        assert_eq!(f.store.note(id).await.unwrap().unwrap().messages.len(), 2);
        let removed = remove(token(&f, &write_only), state(), path3(id)).await;
        assert_eq!(status(removed), StatusCode::NO_CONTENT);
        assert_eq!(f.store.note(id).await.unwrap(), None);
        f.store.close().await;
    }
}
