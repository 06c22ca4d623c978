//! The console's data pages: home, a collection's table, a record, its edit form and its delete
//! confirmation. Each handler reads through `data` as the signed-in user and renders a template;
//! links and buttons appear only where the user's rights allow them.
//!
//! This file holds what every page shares (the layout around a page, the error page, looking a
//! collection or a record up); each page is a module of its own.

mod delete;
mod filters;
mod form;
pub(crate) mod record;
mod related;
mod table;

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::assets::{Urls, urls};
use super::data::{Data, Rights};
use super::session::Session;
use super::{Error, Result};
use crate::datasource::{CollectionSchema, Record};
use crate::state::SharedState;

/// Rows per page unless the user picks another size.
const DEFAULT_SIZE: u64 = 25;
/// The largest page the console asks for.
const MAX_SIZE: u64 = 100;
/// The page sizes offered.
const SIZES: [u64; 4] = [10, 25, 50, 100];

/// Characters escaped in a path segment or a query value.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

pub(crate) fn enc(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// An HTML answer.
pub fn html(body: String) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        body,
    )
}

pub(in crate::console) fn page(status: StatusCode, template: &impl Template) -> Result<Response> {
    Ok((status, html(template.render()?)).into_response())
}

/// What every signed-in page shows around its content: the sidebar and the header.
pub struct Layout {
    pub base: String,
    pub assets: &'static Urls,
    pub user: String,
    pub email: String,
    pub role: String,
    pub team: String,
    /// Whether the user is an admin of the project (the administration pages are theirs).
    pub admin: bool,
    pub timezone: String,
    pub csrf: String,
    pub collections: Vec<String>,
    pub current: String,
    pub title: String,
    /// The approval requests waiting for the user's decision (the Inbox link's badge; empty
    /// for none).
    pub inbox_count: String,
}

impl Layout {
    pub(in crate::console) async fn new(
        session: &Session,
        data: &Data<'_>,
        current: &str,
        title: String,
    ) -> Result<Self> {
        Ok(Self {
            base: session.base.clone(),
            assets: urls(),
            user: session.display_name(),
            email: session.caller.email.clone(),
            role: session.caller.role.clone(),
            team: session.caller.team.clone(),
            admin: session.caller.permission_level == crate::datasource::PermissionLevel::Admin,
            timezone: session.caller.timezone.name().to_owned(),
            csrf: session.csrf.clone(),
            collections: data.browsable().await?,
            current: current.to_owned(),
            title,
            inbox_count: data.inbox_count().await,
        })
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    base: String,
    status: u16,
    message: &'a str,
}

/// A page saying what went wrong, and a way back.
pub fn error_page(status: StatusCode, message: &str) -> Response {
    // The base path is not known here without the state; the link goes to the site root, which
    // redirects to the console.
    let template = ErrorPage {
        base: String::new(),
        status: status.as_u16(),
        message,
    };
    match template.render() {
        Ok(body) => (status, html(body)).into_response(),
        Err(_) => (status, message.to_owned()).into_response(),
    }
}

/// The data pages' routes, under the console's path.
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/", get(home))
        .route("/c/{collection}", get(table::table))
        .route("/c/{collection}/export", get(table::export))
        .route("/c/{collection}/bulk-delete", post(table::bulk_delete))
        .route(
            "/c/{collection}/new",
            get(form::new_form).post(form::create),
        )
        .route("/c/{collection}/r/{id}", get(record::record))
        .route(
            "/c/{collection}/r/{id}/edit",
            get(form::edit_form).post(form::edit_save),
        )
        .route(
            "/c/{collection}/r/{id}/delete",
            get(delete::delete_confirm).post(delete::delete),
        )
        .route(
            "/c/{collection}/r/{id}/related/{relation}/add",
            post(related::add),
        )
        .route(
            "/c/{collection}/r/{id}/related/{relation}/remove",
            post(related::remove),
        )
}

// ----- home ------------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    layout: Layout,
    /// Whether the home dashboard has charts (`[[dashboard.chart]]`): then the page is the
    /// dashboard, the collection cards below it.
    dashboard: bool,
    cards: Vec<super::charts::Card>,
}

/// `GET /console/`: the home dashboard when charts are defined, then the collections the user
/// may browse, or what to do when there are none.
pub async fn home(State(state): State<SharedState>, session: Session) -> Result<Response> {
    let data = Data::new(&state, &session.caller);
    let dashboard = crate::ops::dashboard::has_charts(&state, None).await;
    let title = if dashboard { "Dashboard" } else { "Home" };
    let layout = Layout::new(&session, &data, "", title.to_owned()).await?;
    let cards = if dashboard {
        super::charts::cards(&state, &session.caller, None).await
    } else {
        Vec::new()
    };
    page(
        StatusCode::OK,
        &HomePage {
            layout,
            dashboard,
            cards,
        },
    )
}

/// The console's page of record `id` of `collection`.
pub(crate) fn record_href(base: &str, collection: &str, id: &str) -> String {
    format!("{base}/c/{}/r/{}", enc(collection), enc(id))
}

/// The served collection `name`; an unknown one is a 404 page.
pub(crate) fn named<'d>(data: &'d Data<'_>, name: &str) -> Result<&'d CollectionSchema> {
    data.schema()
        .collections
        .get(name)
        .ok_or_else(|| Error::NotFound(format!("There is no collection \"{name}\".")))
}

/// The collection `name` if the user holds the right `allowed` picks on it: an unknown
/// collection is a 404, a missing right a 403 (pages hide what a user cannot use, so only a
/// typed URL or a stale page gets here).
pub(super) async fn guarded<'d>(
    data: &'d Data<'_>,
    name: &str,
    allowed: fn(&Rights) -> bool,
) -> Result<&'d CollectionSchema> {
    let collection = named(data, name)?;
    if !allowed(&data.rights(name).await?) {
        return Err(crate::auth::Error::forbidden().into());
    }
    Ok(collection)
}

async fn load(data: &Data<'_>, name: &str, id: &str) -> Result<Record> {
    data.get(name, id).await?.ok_or_else(|| {
        Error::NotFound(format!(
            "There is no record {id} in {name} that you may see."
        ))
    })
}
