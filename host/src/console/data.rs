//! Every data call the console makes, in one place: list, count, get, update, delete, related
//! records, and the rights that decide which links and buttons a page shows.
//!
//! Each call goes through the same internal steps as its `/forest` route, in the same order:
//! the collection right (`auth::Permissions`), the browse check with its segment, the caller's
//! scope AND-ed into the filter, relation reads, the scopes of included records, and one
//! activity entry (origin `ui`) completed only when the operation succeeded. A list is the list
//! route's own function (`http::collection::list_records`) fed with the agent's query string, so
//! a table page filters, sorts, searches and pages exactly as `GET /forest/{collection}` does.
//!
//! This is the one file to point at the operations layer once it exists: pages only call the
//! methods of [`Data`].

use crate::agent::query_string::{
    CompositeId, Params, QueryString, match_ids, parse_filter, parse_paginated_filter,
    parse_projection,
};
use crate::auth::CollectionRight;
use crate::datasource::{
    Aggregation, Caller, CollectionSchema, DataSourceSchema, Filter, Projection, Record,
    RelationSchema, unpack_id,
};
use crate::http::activity::Recorded;
use crate::http::collection::{csv, list_records, resolve, served};
use crate::http::permission::{self, IncludedScopes, browse, scoped};
use crate::http::{ApiError, ApiResult, CallerContext, SharedState};
use crate::platform::activity::Action;

/// The data the console reads and writes, as one signed-in user.
pub struct Data<'a> {
    state: &'a SharedState,
    caller: &'a Caller,
}

/// What a user may do on one collection; pages show only the links and buttons these allow.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rights {
    pub browse: bool,
    pub edit: bool,
    pub add: bool,
    pub delete: bool,
    pub export: bool,
}

/// One page of a table, in the agent's query-string terms (what `GET /forest/{c}` takes).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// 1-based.
    pub page: u64,
    pub size: u64,
    /// `field` or `-field`.
    pub sort: Option<String>,
    pub search: Option<String>,
    pub search_extended: bool,
    pub segment: Option<String>,
    /// The `filters` JSON (a condition tree), when the user built one.
    pub filters: Option<serde_json::Value>,
    /// `fields[…]` pairs: the collection's chosen fields, and each chosen relation's fields.
    pub fields: Vec<(String, String)>,
}

impl ListQuery {
    fn pairs(&self, with_page: bool) -> Vec<(String, String)> {
        let mut pairs = vec![("timezone".to_owned(), "UTC".to_owned())];
        if with_page {
            pairs.push(("page[number]".to_owned(), self.page.max(1).to_string()));
            pairs.push(("page[size]".to_owned(), self.size.max(1).to_string()));
            if let Some(sort) = &self.sort {
                pairs.push(("sort".to_owned(), sort.clone()));
            }
            pairs.extend(self.fields.iter().cloned());
        }
        if let Some(search) = &self.search {
            pairs.push(("search".to_owned(), search.clone()));
            if self.search_extended {
                pairs.push(("searchExtended".to_owned(), "true".to_owned()));
            }
        }
        if let Some(segment) = &self.segment {
            pairs.push(("segment".to_owned(), segment.clone()));
        }
        if let Some(filters) = &self.filters {
            pairs.push(("filters".to_owned(), filters.to_string()));
        }
        pairs
    }
}

impl<'a> Data<'a> {
    pub fn new(state: &'a SharedState, caller: &'a Caller) -> Self {
        Self { state, caller }
    }

    /// The served schema.
    pub fn schema(&self) -> &DataSourceSchema {
        self.state.datasource.schema()
    }

    /// The request context the `/forest` steps take: this caller and a query string.
    fn context(&self, pairs: Vec<(String, String)>) -> CallerContext {
        CallerContext {
            caller: self.caller.clone(),
            query: QueryString::from_pairs(pairs),
        }
    }

    /// The collections the user may browse, in schema order.
    pub async fn browsable(&self) -> ApiResult<Vec<String>> {
        let mut names = Vec::new();
        for name in self.schema().collections.keys() {
            if self
                .state
                .permissions
                .has(self.caller, name, CollectionRight::Browse)
                .await?
            {
                names.push(name.clone());
            }
        }
        Ok(names)
    }

    /// The user's rights on `collection`.
    pub async fn rights(&self, collection: &str) -> ApiResult<Rights> {
        let has = |right| self.state.permissions.has(self.caller, collection, right);
        let read_only = self
            .schema()
            .collections
            .get(collection)
            .is_some_and(|c| c.is_read_only);
        Ok(Rights {
            browse: has(CollectionRight::Browse).await?,
            edit: !read_only && has(CollectionRight::Edit).await?,
            add: !read_only && has(CollectionRight::Add).await?,
            export: has(CollectionRight::Export).await?,
            delete: !read_only && has(CollectionRight::Delete).await?,
        })
    }

    /// A page of records: `GET /forest/{collection}` itself (browse, segment, filters, search,
    /// sort, relation reads, scope, included scopes, activity entry).
    pub async fn list(&self, collection: &str, query: &ListQuery) -> ApiResult<Vec<Record>> {
        let context = self.context(query.pairs(true));
        let listed = list_records(self.state, &context, collection, None).await?;
        listed.activity.done();
        Ok(listed.records)
    }

    /// The records of a list as a streamed CSV download: `GET /forest/{collection}.csv` itself
    /// (browse and export rights, scope, `limitExportSize`, activity entry `export`) with the
    /// table's filter, search, segment, sort and columns; `header` is the header row.
    pub async fn export(
        &self,
        collection: &str,
        query: &ListQuery,
        header: &str,
        filename: &str,
    ) -> ApiResult<axum::response::Response> {
        let mut pairs = query.pairs(false);
        if let Some(sort) = &query.sort {
            pairs.push(("sort".to_owned(), sort.clone()));
        }
        pairs.extend(query.fields.iter().cloned());
        pairs.push(("header".to_owned(), header.to_owned()));
        pairs.push(("filename".to_owned(), filename.to_owned()));
        let context = self.context(pairs);
        csv(
            self.state,
            collection,
            &context,
            &axum::http::HeaderMap::new(),
            None,
        )
        .await
    }

    /// The number of records of a list, as `GET /forest/{collection}/count`; `None` where the
    /// collection's count is disabled (`disableCount`).
    pub async fn count(&self, collection: &str, query: &ListQuery) -> ApiResult<Option<u64>> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let context = self.context(query.pairs(false));
        browse(self.state, &context, collection).await?;
        if !collection_schema.countable {
            return Ok(None);
        }
        let request = parse_filter(&Params::new(&context.query), schema, collection_schema)?;
        permission::relation_reads(
            self.state,
            &context,
            None,
            collection_schema,
            &request.filter,
            None,
        )
        .await?;
        let filter = resolve(self.state, self.caller, collection_schema, request).await?;
        let filter = scoped(self.state, self.caller, collection_schema, filter).await?;
        let rows = self
            .state
            .datasource
            .collection(collection)?
            .aggregate(self.caller, &filter, &Aggregation::count(), None)
            .await?;
        // A count is a non-negative integer; `as` saturates, and no row means 0.
        Ok(Some(
            rows.first()
                .and_then(|row| row.value.as_f64())
                .map_or(0, |n| n as u64),
        ))
    }

    /// One record with every column and its to-one relations, as `GET /forest/{c}/{id}`:
    /// `None` when there is none within the caller's scope.
    pub async fn get(&self, collection: &str, id: &str) -> ApiResult<Option<Record>> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let mut activity = Recorded::start(self.state, Action::Read, self.caller, collection);
        activity.records([id]);
        self.state
            .permissions
            .can(self.caller, collection, CollectionRight::Read)
            .await?;
        let filter = self.by_id(collection_schema, id).await?;
        let context = self.context(vec![]);
        let mut projection = parse_projection(&context.query, None, schema, collection_schema)?;
        permission::relation_reads(
            self.state,
            &context,
            None,
            collection_schema,
            &Filter::default(),
            Some(&mut projection),
        )
        .await?;
        let included =
            IncludedScopes::new(self.state, self.caller, collection_schema, &projection).await?;
        let mut records = self
            .state
            .datasource
            .collection(collection)?
            .list(self.caller, &filter, &projection)
            .await?;
        included.apply(self.caller, &mut records).await?;
        activity.done();
        Ok(records.into_iter().next())
    }

    /// The filter of the record `id` within the caller's scope.
    async fn by_id(&self, collection: &CollectionSchema, id: &str) -> ApiResult<Filter> {
        let filter = Filter::new(Some(match_ids(collection, &[unpack_id(collection, id)?])?));
        scoped(self.state, self.caller, collection, filter).await
    }

    /// Whether the record `id` exists within the caller's scope (read with its keys only).
    async fn exists(&self, collection: &CollectionSchema, filter: &Filter) -> ApiResult<bool> {
        let keys = Projection::new(collection.primary_keys());
        Ok(!self
            .state
            .datasource
            .collection(&collection.name)?
            .list(self.caller, filter, &keys)
            .await?
            .is_empty())
    }

    /// Patches the record `id` with typed values, as `PUT /forest/{c}/{id}` does (edit right,
    /// scope, activity entry `update`). A record outside the scope is not found.
    pub async fn update(&self, collection: &str, id: &str, patch: &Record) -> ApiResult<()> {
        let collection_schema = served(self.schema(), collection)?;
        let mut activity = Recorded::start(self.state, Action::Update, self.caller, collection);
        activity.records([id]);
        self.state
            .permissions
            .can(self.caller, collection, CollectionRight::Edit)
            .await?;
        let filter = self.by_id(collection_schema, id).await?;
        if !self.exists(collection_schema, &filter).await? {
            return Err(not_found());
        }
        self.state
            .datasource
            .collection(collection)?
            .update(self.caller, &filter, patch)
            .await?;
        activity.done();
        Ok(())
    }

    /// Creates a record from a write body's attributes, as `POST /forest/{c}` does (add right,
    /// the body's own casting, activity entry `create`); the new record's packed id.
    pub async fn create(
        &self,
        collection: &str,
        attributes: serde_json::Map<String, serde_json::Value>,
    ) -> ApiResult<String> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let mut activity = Recorded::start(self.state, Action::Create, self.caller, collection);
        self.state
            .permissions
            .can(self.caller, collection, CollectionRight::Add)
            .await?;
        let body = serde_json::json!({"data": {"attributes": attributes}});
        let plan = crate::agent::body::parse_create(&body, schema, collection_schema)?;
        let created = self
            .state
            .datasource
            .collection(collection)?
            .create(self.caller, vec![plan.record])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                crate::datasource::Error::Internal("create returned no record".to_owned())
            })?;
        let id = crate::datasource::pack_id(collection_schema, &created)?;
        activity.records([id.as_str()]);
        activity.done();
        Ok(id)
    }

    /// Deletes the record `id`, as `DELETE /forest/{c}/{id}` does (delete right, scope,
    /// activity entry `delete`). A record outside the scope is not found.
    pub async fn delete(&self, collection: &str, id: &str) -> ApiResult<()> {
        let collection_schema = served(self.schema(), collection)?;
        let mut activity = Recorded::start(self.state, Action::Delete, self.caller, collection);
        activity.records([id]);
        self.state
            .permissions
            .can(self.caller, collection, CollectionRight::Delete)
            .await?;
        let filter = self.by_id(collection_schema, id).await?;
        if !self.exists(collection_schema, &filter).await? {
            return Err(not_found());
        }
        self.state
            .datasource
            .collection(collection)?
            .delete(self.caller, &filter)
            .await?;
        activity.done();
        Ok(())
    }

    /// Deletes the records `ids`, as `DELETE /forest/{c}` with a selection does (delete right,
    /// scope, one activity entry `delete` naming them); how many were within the scope.
    pub async fn delete_many(&self, collection: &str, ids: &[String]) -> ApiResult<usize> {
        let collection_schema = served(self.schema(), collection)?;
        let mut activity = Recorded::start(self.state, Action::Delete, self.caller, collection);
        activity.records(ids.iter().map(String::as_str));
        self.state
            .permissions
            .can(self.caller, collection, CollectionRight::Delete)
            .await?;
        let unpacked = ids
            .iter()
            .map(|id| unpack_id(collection_schema, id))
            .collect::<Result<Vec<_>, _>>()?;
        let filter = Filter::new(Some(match_ids(collection_schema, &unpacked)?));
        let filter = scoped(self.state, self.caller, collection_schema, filter).await?;
        let keys = Projection::new(collection_schema.primary_keys());
        let found = self
            .state
            .datasource
            .collection(collection)?
            .list(self.caller, &filter, &keys)
            .await?
            .len();
        self.state
            .datasource
            .collection(collection)?
            .delete(self.caller, &filter)
            .await?;
        activity.done();
        Ok(found)
    }

    /// A page of the records of a to-many relation of the record `id`, as
    /// `GET /forest/{c}/{id}/relationships/{r}` (browse on the foreign collection, its scope,
    /// activity entry `listRelatedData`).
    pub async fn related(
        &self,
        collection: &str,
        id: &str,
        relation_name: &str,
        query: &ListQuery,
    ) -> ApiResult<Vec<Record>> {
        let schema = self.schema();
        let parent = served(schema, collection)?;
        let relation = parent
            .relation(relation_name)
            .filter(|r| !r.is_to_one())
            .ok_or(ApiError::RouteNotFound)?;
        let mut activity =
            Recorded::start(self.state, Action::ListRelatedData, self.caller, collection);
        activity.records([id]);
        activity.label(relation_name);
        let foreign_name = relation.foreign_collection();
        let foreign = schema.collection(foreign_name)?;
        let context = self.context(query.pairs(true));
        browse(self.state, &context, foreign_name).await?;
        let params = Params::new(&context.query);
        let request = parse_paginated_filter(&params, schema, foreign)?;
        self.state.check_page_size(&request)?;
        let mut projection = parse_projection(&context.query, None, schema, foreign)?;
        permission::relation_reads(
            self.state,
            &context,
            None,
            foreign,
            &request.filter,
            Some(&mut projection),
        )
        .await?;
        let filter = resolve(self.state, self.caller, foreign, request).await?;
        let filter = scoped(self.state, self.caller, foreign, filter).await?;
        let parent_id: CompositeId = unpack_id(parent, id)?;
        let tree = crate::http::related::related_tree(
            self.state,
            self.caller,
            parent,
            &parent_id,
            relation,
        )
        .await?;
        let filter = filter.and(Some(tree));
        let included = IncludedScopes::new(self.state, self.caller, foreign, &projection).await?;
        let mut records = self
            .state
            .datasource
            .collection(foreign_name)?
            .list(self.caller, &filter, &projection)
            .await?;
        included.apply(self.caller, &mut records).await?;
        activity.done();
        Ok(records)
    }

    /// The to-many relations of `collection` whose foreign collection the user may browse.
    pub async fn browsable_relations(
        &self,
        collection: &CollectionSchema,
    ) -> ApiResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (name, relation) in collection.relations() {
            if relation.is_to_one() {
                continue;
            }
            let foreign = relation.foreign_collection();
            if self
                .state
                .permissions
                .has(self.caller, foreign, CollectionRight::Browse)
                .await?
            {
                out.push((name.clone(), foreign.to_owned()));
            }
        }
        Ok(out)
    }
}

fn not_found() -> ApiError {
    crate::agent::Error::NotFound("Record does not exists".to_owned()).into()
}

/// The foreign collection of a to-one relation, for links.
pub fn to_one_target<'s>(collection: &'s CollectionSchema, field: &str) -> Option<&'s str> {
    match collection.relation(field)? {
        relation @ (RelationSchema::ManyToOne { .. } | RelationSchema::OneToOne { .. }) => {
            Some(relation.foreign_collection())
        }
        _ => None,
    }
}
