//! Every data call the console makes, in one place: list, count, get, create, update, delete,
//! related records, and the rights that decide which links and buttons a page shows.
//!
//! Each call is one operation of the operations layer (`ops`), the same one the `/forest` route
//! calls: the collection right, the browse check with its segment, the caller's scope AND-ed into
//! the filter, relation reads, the scopes of included records, and one activity entry. Tables are
//! described in the agent's query-string terms and parsed by the same parsers as
//! `GET /forest/{collection}`, so a table page filters, sorts, searches and pages exactly as the
//! route does. Pages only call the methods of [`Data`].

use crate::agent::query_string::{
    Params, QueryString, Selection, match_ids, parse_filter, parse_projection,
};
use crate::auth::CollectionRight;
use crate::datasource::Caller;
use crate::datasource::{
    CollectionSchema, DataSourceSchema, Filter, Projection, Record, RelationSchema, pack_id,
    unpack_id,
};
use crate::ops::Result as OpsResult;
use crate::ops::permission::{LiveSegmentQuery, scoped};
use crate::ops::records::{self, Counted, FilterRequest, GetRequest, ListRequest};
use crate::ops::relations::{self, DissociateRequest, Parent};
use crate::ops::{Ops, served};
use crate::state::SharedState;

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

/// What a user may do on a to-many relation's tab of a record.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkRights {
    /// Link existing records of the foreign collection (associate).
    pub add: bool,
    /// Unlink records, keeping them (dissociate): not where unlinking would empty a foreign key
    /// that may not be empty.
    pub remove: bool,
    /// Delete linked records (dissociate with `delete`).
    pub delete: bool,
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

    /// The operations of the served generation.
    fn ops(&self) -> &'a Ops {
        self.state
    }

    /// The served schema.
    pub fn schema(&self) -> &DataSourceSchema {
        self.ops().schema()
    }

    /// How many approval requests wait for this user's decision (the sidebar's inbox badge), as
    /// text: empty for none, `99+` past what is looked at. A failure to count shows no badge
    /// rather than no page.
    pub async fn inbox_count(&self) -> String {
        match crate::ops::approvals::decidable(self.ops(), self.caller).await {
            Ok(0) => String::new(),
            Ok(n) if n >= crate::ops::approvals::DECIDABLE_LOOKED_AT => "99+".to_owned(),
            Ok(n) => n.to_string(),
            Err(error) => {
                tracing::warn!(%error, "the inbox badge could not be counted");
                String::new()
            }
        }
    }

    /// The collections the user may browse, in schema order.
    pub async fn browsable(&self) -> OpsResult<Vec<String>> {
        let mut names = Vec::new();
        for name in self.schema().collections.keys() {
            if self
                .ops()
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
    pub async fn rights(&self, collection: &str) -> OpsResult<Rights> {
        let has = |right| self.ops().permissions.has(self.caller, collection, right);
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

    /// A page of records: the operation behind `GET /forest/{collection}`.
    pub async fn list(&self, collection: &str, query: &ListQuery) -> OpsResult<Vec<Record>> {
        let query = QueryString::from_pairs(query.pairs(true));
        let request = ListRequest::parse(self.ops(), collection, &query, None)?;
        Ok(records::list(self.ops(), self.caller, request)
            .await?
            .records)
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
    ) -> OpsResult<crate::ops::export::Csv> {
        let mut pairs = query.pairs(false);
        if let Some(sort) = &query.sort {
            pairs.push(("sort".to_owned(), sort.clone()));
        }
        pairs.extend(query.fields.iter().cloned());
        pairs.push(("header".to_owned(), header.to_owned()));
        pairs.push(("filename".to_owned(), filename.to_owned()));
        let query = QueryString::from_pairs(pairs);
        let request = crate::ops::export::CsvRequest {
            collection,
            query: &query,
            projection_header: None,
            parent: None,
        };
        crate::ops::export::csv(self.ops(), self.caller, request).await
    }

    /// The number of records of a list, as `GET /forest/{collection}/count`; `None` where the
    /// collection's count is disabled (`disableCount`).
    pub async fn count(&self, collection: &str, query: &ListQuery) -> OpsResult<Option<u64>> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let query = QueryString::from_pairs(query.pairs(false));
        let request = FilterRequest {
            collection: collection.to_owned(),
            filter: parse_filter(&Params::new(&query), schema, collection_schema)?,
            segment_query: LiveSegmentQuery::of(&query),
        };
        Ok(
            match records::count(self.ops(), self.caller, request).await? {
                Counted::Count(count) => Some(count),
                Counted::Deactivated => None,
            },
        )
    }

    /// One record with every column and its to-one relations, as `GET /forest/{c}/{id}`:
    /// `None` when there is none within the caller's scope.
    pub async fn get(&self, collection: &str, id: &str) -> OpsResult<Option<Record>> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let projection =
            parse_projection(&QueryString::default(), None, schema, collection_schema)?;
        let request = GetRequest {
            collection: collection.to_owned(),
            packed_id: id.to_owned(),
            projection,
            explicit_projection: false,
        };
        match records::get(self.ops(), self.caller, request).await {
            Ok(record) => Ok(Some(record)),
            Err(crate::ops::Error::Agent(crate::agent::Error::NotFound(_))) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Whether the record `id` exists within the caller's scope (read with its keys only).
    async fn exists(&self, collection: &CollectionSchema, id: &str) -> OpsResult<bool> {
        let filter = records::one_in_scope(self.ops(), self.caller, collection, id).await?;
        let keys = Projection::new(collection.primary_keys());
        Ok(!self
            .ops()
            .datasource
            .collection(&collection.name)?
            .list(self.caller, &filter, &keys)
            .await?
            .is_empty())
    }

    /// Patches the record `id` with typed values: the operation behind `PUT /forest/{c}/{id}`
    /// (edit right, scope, activity entry `update`). A record outside the scope is not found.
    pub async fn update(&self, collection: &str, id: &str, patch: &Record) -> OpsResult<()> {
        let collection_schema = served(self.schema(), collection)?;
        if !self.exists(collection_schema, id).await? {
            return Err(not_found());
        }
        records::update(self.ops(), self.caller, collection, id, patch.clone()).await?;
        Ok(())
    }

    /// Creates a record from a write body's attributes: the body's own casting, then the
    /// operation behind `POST /forest/{c}` (add right, activity entry `create`); the new
    /// record's packed id.
    pub async fn create(
        &self,
        collection: &str,
        attributes: serde_json::Map<String, serde_json::Value>,
    ) -> OpsResult<String> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let body = serde_json::json!({"data": {"attributes": attributes}});
        let plan = crate::agent::body::parse_create(&body, schema, collection_schema)?;
        let created = records::create(self.ops(), self.caller, collection, plan).await?;
        Ok(pack_id(collection_schema, &created)?)
    }

    /// Deletes the record `id`: the operation behind `DELETE /forest/{c}/{id}` (delete right,
    /// scope, activity entry `delete`). A record outside the scope is not found.
    pub async fn delete(&self, collection: &str, id: &str) -> OpsResult<()> {
        let collection_schema = served(self.schema(), collection)?;
        if !self.exists(collection_schema, id).await? {
            return Err(not_found());
        }
        records::delete_one(self.ops(), self.caller, collection, id).await?;
        Ok(())
    }

    /// Deletes the records `ids`: the operation behind `DELETE /forest/{c}` with a selection
    /// (delete right, scope, one activity entry `delete` naming them); how many were within the
    /// scope.
    pub async fn delete_many(&self, collection: &str, ids: &[String]) -> OpsResult<usize> {
        let collection_schema = served(self.schema(), collection)?;
        let unpacked = ids
            .iter()
            .map(|id| unpack_id(collection_schema, id))
            .collect::<Result<Vec<_>, _>>()?;
        let filter = Filter::new(Some(match_ids(collection_schema, &unpacked)?));
        let within = scoped(self.ops(), self.caller, collection_schema, filter.clone()).await?;
        let keys = Projection::new(collection_schema.primary_keys());
        let found = self
            .ops()
            .datasource
            .collection(collection)?
            .list(self.caller, &within, &keys)
            .await?
            .len();
        let request = records::SelectionRequest {
            collection: collection.to_owned(),
            all_records: false,
            ids: unpacked,
            filter: crate::agent::query_string::RequestFilter {
                filter,
                live_query_segment: None,
            },
        };
        records::delete_selection(self.ops(), self.caller, request).await?;
        Ok(found)
    }

    /// A page of the records of a to-many relation of the record `id`: the operation behind
    /// `GET /forest/{c}/{id}/relationships/{r}` (browse on the foreign collection, its scope,
    /// activity entry `listRelatedData`).
    pub async fn related(
        &self,
        collection: &str,
        id: &str,
        relation_name: &str,
        query: &ListQuery,
    ) -> OpsResult<Vec<Record>> {
        let schema = self.schema();
        let parent = served(schema, collection)?;
        let relation = parent
            .relation(relation_name)
            .filter(|r| !r.is_to_one())
            .ok_or(crate::ops::Error::NotFound)?;
        let query = QueryString::from_pairs(query.pairs(true));
        let request = ListRequest::parse(self.ops(), relation.foreign_collection(), &query, None)?;
        let parent = Parent {
            collection: collection.to_owned(),
            packed_id: id.to_owned(),
            relation: relation_name.to_owned(),
        };
        Ok(
            relations::list_related(self.ops(), self.caller, &parent, request)
                .await?
                .records,
        )
    }

    /// What the user may do on the to-many relation `relation_name` of `collection`: the rights
    /// `ops::relations` checks when it links, unlinks or deletes (edit on the parent, and on the
    /// foreign collection for a one-to-many; delete on the foreign collection), and whether the
    /// data allows it (read-only collections, a foreign key that may not be empty).
    pub async fn link_rights(
        &self,
        collection: &CollectionSchema,
        relation_name: &str,
    ) -> OpsResult<LinkRights> {
        let Some(relation) = collection
            .relation(relation_name)
            .filter(|r| !r.is_to_one())
        else {
            return Ok(LinkRights::default());
        };
        let schema = self.schema();
        let foreign = served(schema, relation.foreign_collection())?;
        let read_only = |name: &str| schema.collections.get(name).is_none_or(|c| c.is_read_only);
        // The collection the links are written in, and the key that unlinking empties.
        let (written, emptied) = match relation {
            RelationSchema::OneToMany { origin_key, .. } => {
                (foreign.name.as_str(), foreign.column(origin_key))
            }
            RelationSchema::ManyToMany {
                through_collection, ..
            } => (through_collection.as_str(), None),
            _ => return Ok(LinkRights::default()),
        };
        let add = !read_only(written)
            && relations::may_link(self.ops(), self.caller, &collection.name, relation).await?;
        let remove = add && emptied.is_none_or(|key| key.allow_null && !key.is_read_only);
        let delete = !foreign.is_read_only
            && !read_only(written)
            && self
                .ops()
                .permissions
                .has(self.caller, &foreign.name, CollectionRight::Delete)
                .await?;
        Ok(LinkRights {
            add,
            remove,
            delete,
        })
    }

    /// Links the record `target` of the relation's foreign collection to the record `id`: the
    /// operation behind `POST /forest/{c}/{id}/relationships/{r}` (edit rights, scope, activity
    /// entry). A target that does not exist within the caller's scope is refused with a message
    /// and nothing changes (the operation itself would leave such a record silently).
    pub async fn associate(
        &self,
        collection: &str,
        id: &str,
        relation_name: &str,
        target: &str,
    ) -> OpsResult<()> {
        let parent = Parent {
            collection: collection.to_owned(),
            packed_id: id.to_owned(),
            relation: relation_name.to_owned(),
        };
        let (parent_schema, relation, foreign) = relations::locate(self.ops(), &parent, false)?;
        if !relations::may_link(self.ops(), self.caller, &parent_schema.name, relation).await? {
            return Err(crate::auth::Error::forbidden().into());
        }
        let unpacked = unpack_id(foreign, target).map_err(|_| {
            crate::ops::Error::from(crate::agent::Error::validation(format!(
                "\"{target}\" is not an id of {}; nothing was added.",
                foreign.name
            )))
        })?;
        if !self.exists(foreign, target).await? {
            return Err(crate::ops::Error::from(crate::agent::Error::validation(
                format!(
                    "There is no record {target} in {} that you may see; nothing was added.",
                    foreign.name
                ),
            )));
        }
        relations::associate(self.ops(), self.caller, &parent, unpacked).await?;
        Ok(())
    }

    /// Unlinks the records `ids` of the relation from the record `id`, or deletes them
    /// (`delete`): the operation behind `DELETE /forest/{c}/{id}/relationships/{r}[?delete=true]`.
    /// Only records linked to this record and within the caller's scope are touched; how many
    /// there were.
    pub async fn dissociate(
        &self,
        collection: &str,
        id: &str,
        relation_name: &str,
        ids: &[String],
        delete: bool,
    ) -> OpsResult<usize> {
        let parent = Parent {
            collection: collection.to_owned(),
            packed_id: id.to_owned(),
            relation: relation_name.to_owned(),
        };
        let (parent_schema, relation, foreign) = relations::locate(self.ops(), &parent, false)?;
        let unpacked = ids
            .iter()
            .map(|id| unpack_id(foreign, id))
            .collect::<Result<Vec<_>, _>>()?;
        let filter = Filter::new(Some(match_ids(foreign, &unpacked)?));
        // Counted first: afterwards a removed record no longer matches the relation.
        let parent_id = unpack_id(parent_schema, id)?;
        let tree =
            relations::related_tree(self.ops(), self.caller, parent_schema, &parent_id, relation)
                .await?;
        let within = scoped(self.ops(), self.caller, foreign, filter.clone())
            .await?
            .and(Some(tree));
        let keys = Projection::new(foreign.primary_keys());
        let linked = self
            .ops()
            .datasource
            .collection(&foreign.name)?
            .list(self.caller, &within, &keys)
            .await?
            .len();
        let request = DissociateRequest {
            delete,
            selection: records::SelectionRequest {
                collection: foreign.name.clone(),
                all_records: false,
                ids: unpacked,
                filter: crate::agent::query_string::RequestFilter {
                    filter,
                    live_query_segment: None,
                },
            },
        };
        relations::dissociate(self.ops(), self.caller, &parent, request).await?;
        Ok(linked)
    }

    /// Deletes every record of a table's query (filter, search, segment) but `excluded`: the
    /// operation behind `DELETE /forest/{c}` with `all_records: true` and
    /// `all_records_ids_excluded` (delete right, scope, one activity entry); how many there were
    /// within the scope, when the collection counts.
    pub async fn delete_all(
        &self,
        collection: &str,
        query: &ListQuery,
        excluded: &[String],
    ) -> OpsResult<Option<u64>> {
        let schema = self.schema();
        let collection_schema = served(schema, collection)?;
        let unpacked = excluded
            .iter()
            .map(|id| unpack_id(collection_schema, id))
            .collect::<Result<Vec<_>, _>>()?;
        let query = QueryString::from_pairs(query.pairs(false));
        let selection = Selection {
            all_records: true,
            ids: unpacked.clone(),
            subset_query: None,
        };
        let filter = selection.filter(&query, schema, collection_schema)?;
        let counted = records::count(
            self.ops(),
            self.caller,
            FilterRequest {
                collection: collection.to_owned(),
                filter: filter.clone(),
                segment_query: LiveSegmentQuery::of(&query),
            },
        )
        .await?;
        let request = records::SelectionRequest {
            collection: collection.to_owned(),
            all_records: true,
            ids: unpacked,
            filter,
        };
        records::delete_selection(self.ops(), self.caller, request).await?;
        Ok(match counted {
            Counted::Count(count) => Some(count),
            Counted::Deactivated => None,
        })
    }

    /// The to-many relations of `collection` whose foreign collection the user may browse.
    pub async fn browsable_relations(
        &self,
        collection: &CollectionSchema,
    ) -> OpsResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (name, relation) in collection.relations() {
            if relation.is_to_one() {
                continue;
            }
            let foreign = relation.foreign_collection();
            if self
                .ops()
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

fn not_found() -> crate::ops::Error {
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
