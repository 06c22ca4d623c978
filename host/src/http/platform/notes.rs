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

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Map, Value as Json, json};

use super::listing::{ListQuery, iso};
use super::{Admin, Body, Error, Fields as _, Result, id, no_content};
use crate::http::{SharedState, json, json_with};
use crate::platform::Scope;
use crate::platform::notes::{NewNote, Note, NoteChange, NoteFilter, NoteUser};

pub fn router() -> Router<SharedState> {
    let base = "/project/{project}/environment/{environment}/notes";
    Router::new()
        .route(base, get(list).post(create))
        .route(
            &format!("{base}/{{id}}"),
            get(read).patch(change).delete(remove),
        )
        .route(&format!("{base}/{{id}}/messages"), post(add_message))
}

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

async fn create(
    admin: Admin,
    State(state): State<SharedState>,
    Path((project, environment)): Path<(String, String)>,
    Body(body): Body,
) -> Result<Response> {
    admin.require(Scope::NotesWrite)?;
    body.only(&CREATE_FIELDS)?;
    let required = |field: &str| {
        body.string(field)?
            .ok_or_else(|| Error::field(field, "is required"))
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
    let note = store.create_note(&admin.user, new).await?;
    // The activity log's createNote entry: `note.reference()` (id, collection, record id).
    Ok(json_with(StatusCode::CREATED, &shown(&admin, &note)))
}

async fn add_message(
    admin: Admin,
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
    let note = store.add_note_message(&admin.user, id, &content).await?;
    // The activity log's createMessage entry: `note.reference()`.
    Ok(json_with(StatusCode::CREATED, &shown(&admin, &note)))
}

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
    let note = store.update_note(&admin.user, id, change).await?;
    Ok(json(&shown(&admin, &note)))
}

async fn remove(
    admin: Admin,
    Path((project, environment, raw)): Path<(String, String, String)>,
) -> Result<Response> {
    admin.require(Scope::NotesWrite)?;
    let id = id("id", &raw)?;
    let store = admin.environment(&project, &environment).await?;
    // The activity log's deleteNote entry: `deleted` (id, collection, record id).
    let _deleted = store.delete_note(id).await?;
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
        }
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
            status(remove(token(&f, &read_only), path3(id)).await),
            forbidden
        );
        assert_eq!(f.store.note(id).await.unwrap().unwrap(), note);

        // A write-only token writes, but its answer shows only the note's id.
        let added = add_message(
            token(&f, &write_only),
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
        let removed = remove(token(&f, &write_only), path3(id)).await;
        assert_eq!(status(removed), StatusCode::NO_CONTENT);
        assert_eq!(f.store.note(id).await.unwrap(), None);
        f.store.close().await;
    }
}
