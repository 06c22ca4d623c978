//! Records of one collection (protocol §1.2): list, count, get one, create, update, delete (one
//! or a selection) and CSV export. Each operation authorizes its parsed request in one place —
//! the collection right, browse with its live-query segment, the relation reads, then the
//! caller's scope AND-ed into the filter — and records its activity entry.

use std::sync::Arc;

use super::activity::Recorded;
use super::permission::{self, IncludedScopes, LiveSegmentQuery, browse, scoped};
use super::{Ops, Result, relations};
use crate::agent;
use crate::agent::body::CreatePlan;
use crate::agent::query_string::{
    CompositeId, Params, QueryString, RequestFilter, match_ids, parse_paginated_filter,
    parse_projection, with_primary_keys,
};
use crate::auth::CollectionRight;
use crate::datasource::{
    self, Aggregation, Caller, Collection, CollectionSchema, ConditionTree, Filter, Operator, Page,
    Projection, Record, RelationSchema, Value, unpack_id,
};
use crate::platform::activity::Action;

/// Records per query of a CSV export, as the agent pages it.
const CSV_PAGE: u64 = 1000;

/// The filter of a request, with its live-query segment resolved: the native query runs on its
/// connection (`{{var}}` placeholders bound, never spliced) and the first primary key of its rows
/// restricts the filter with an `In` leaf (§8.5). Any failure is a `BusinessError`, as the
/// agent wraps it (its cause logged, not sent).
pub async fn resolve(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    request: RequestFilter,
) -> Result<Filter> {
    let Some(segment) = request.live_query_segment else {
        return Ok(request.filter);
    };
    let failed = |detail: String| {
        tracing::debug!(%detail, "live-query segment failed");
        agent::Error::Business(format!(
            "An error occurred during the execution of the segment query - {detail}"
        ))
    };
    // The agent's datasource names an unknown connection so (the native query route another way).
    if !ops
        .datasource
        .native_query_connections()
        .contains(&segment.connection_name)
    {
        return Err(failed(format!(
            "Unknown connection name '{}'",
            segment.connection_name
        ))
        .into());
    }
    // The agent keys the segment on the first primary key only.
    let pk = *collection
        .primary_keys()
        .first()
        .ok_or(datasource::Error::NoPrimaryKey)?;
    let variables = permission::context_variables(ops, caller, None).await?;
    let (sql, binds) = variables
        .bind_sql(&segment.query)
        .map_err(|e| failed(e.to_string()))?;
    let rows = ops
        .datasource
        .native_query(caller, &segment.connection_name, &sql, &binds)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let ids = rows
        .iter()
        .map(|row| {
            row.get(pk)
                .cloned()
                .ok_or_else(|| failed(format!("the query must return the column '{pk}'")))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mut filter = request.filter;
    filter.condition_tree = ConditionTree::intersect([
        filter.condition_tree.take(),
        Some(ConditionTree::leaf(pk, Operator::In, Value::Array(ids))),
    ]);
    Ok(filter)
}

/// What a projection request says besides its paths: whether the client chose the fields
/// (`Forest-Projection` or `fields[c]`), so that a denied relation read refuses the request
/// rather than leaving the fields out.
pub fn explicit_projection(query: &QueryString, header: Option<&str>, collection: &str) -> bool {
    header.is_some_and(|h| !h.trim().is_empty())
        || query
            .get(&format!("fields[{collection}]"))
            .is_some_and(|f| !f.is_empty())
}

/// What a list request is: a search (`search=`), a filtered list (`filters=`), else an index.
pub fn list_kind(query: &QueryString) -> Action {
    super::activity::list_action(query)
}

/// A page of records to list.
#[derive(Debug, Clone)]
pub struct ListRequest {
    pub collection: String,
    /// `index`, `search` or `filter`: how the activity entry names the list.
    pub kind: Action,
    /// Filters, search, segment, sort and page.
    pub filter: RequestFilter,
    pub projection: Projection,
    pub explicit_projection: bool,
    /// The live-query segment that browsing checks (`segmentQuery`, `connectionName`).
    pub segment_query: Option<LiveSegmentQuery>,
}

impl ListRequest {
    /// The list request of a query string (and `Forest-Projection` header) on `collection`.
    pub fn parse(
        ops: &Ops,
        collection: &str,
        query: &QueryString,
        projection_header: Option<&str>,
    ) -> Result<Self> {
        let schema = ops.schema();
        let collection_schema = ops.collection(collection)?;
        let filter = parse_paginated_filter(&Params::new(query), schema, collection_schema)?;
        let projection = parse_projection(query, projection_header, schema, collection_schema)?;
        Ok(Self {
            collection: collection.to_owned(),
            kind: list_kind(query),
            filter,
            projection,
            explicit_projection: explicit_projection(query, projection_header, collection),
            segment_query: LiveSegmentQuery::of(query),
        })
    }
}

/// A page of records, with the search that found them (the serializer highlights it).
#[derive(Debug, Clone)]
pub struct Listed {
    pub records: Vec<Record>,
    pub search: Option<String>,
}

/// Lists a page of records: browse right, page size, relation reads, segment and scope, and the
/// scopes of the records included through to-one relations.
pub async fn list(ops: &Ops, caller: &Caller, request: ListRequest) -> Result<Listed> {
    let collection_schema = ops.collection(&request.collection)?;
    let activity = Recorded::start(ops, request.kind, caller, &request.collection);
    let planned = plan_list(ops, caller, collection_schema, request).await?;
    let listed = read_page(ops, caller, collection_schema, planned).await?;
    activity.done();
    Ok(listed)
}

/// What a list reads once authorized: the caller's scope and the resolved segment are in the
/// filter, and the projection holds only relations the caller may read.
pub(super) struct PlannedList {
    pub filter: Filter,
    pub projection: Projection,
}

/// Authorizes a list of `schema`'s records (browse with its live-query segment, page size,
/// relation reads) and builds its scoped filter; a list of related records restricts it further.
pub(super) async fn plan_list(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    request: ListRequest,
) -> Result<PlannedList> {
    browse(ops, caller, &schema.name, request.segment_query.as_ref()).await?;
    ops.check_page_size(&request.filter)?;
    let mut projection = request.projection;
    permission::relation_reads(
        ops,
        caller,
        schema,
        &request.filter.filter,
        Some(&mut projection),
        request.explicit_projection,
    )
    .await?;
    let filter = resolve(ops, caller, schema, request.filter).await?;
    let filter = scoped(ops, caller, schema, filter).await?;
    Ok(PlannedList { filter, projection })
}

/// Reads the page a planned list asks for, with the scopes of the records it includes through
/// to-one relations applied.
pub(super) async fn read_page(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    planned: PlannedList,
) -> Result<Listed> {
    let PlannedList {
        filter,
        mut projection,
    } = planned;
    let included = IncludedScopes::new(ops, caller, schema, &mut projection).await?;
    let mut records = ops
        .datasource
        .collection(&schema.name)?
        .list(caller, &filter, &projection)
        .await?;
    included.apply(&mut records);
    Ok(Listed {
        records,
        search: filter.search,
    })
}

/// The records a count, a bulk delete or an export target: filters, search and segment.
#[derive(Debug, Clone)]
pub struct FilterRequest {
    pub collection: String,
    pub filter: RequestFilter,
    /// The live-query segment that browsing checks.
    pub segment_query: Option<LiveSegmentQuery>,
}

/// A count, or none where the collection's count is deactivated (`disableCount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Count(u64),
    Deactivated,
}

/// Counts the records of a filter within the caller's scope.
pub async fn count(ops: &Ops, caller: &Caller, request: FilterRequest) -> Result<Counted> {
    let collection_schema = ops.collection(&request.collection)?;
    match plan_count(ops, caller, collection_schema, request).await? {
        Some(filter) => count_of(ops, caller, collection_schema, &filter).await,
        None => Ok(Counted::Deactivated),
    }
}

/// Authorizes a count of `schema`'s records (browse with its segment, relation reads) and builds
/// its scoped filter; none where the collection's count is deactivated.
pub(super) async fn plan_count(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    request: FilterRequest,
) -> Result<Option<Filter>> {
    browse(ops, caller, &schema.name, request.segment_query.as_ref()).await?;
    if !schema.countable {
        return Ok(None);
    }
    permission::relation_reads(ops, caller, schema, &request.filter.filter, None, false).await?;
    let filter = resolve(ops, caller, schema, request.filter).await?;
    Ok(Some(scoped(ops, caller, schema, filter).await?))
}

/// Counts the records of an authorized filter.
pub(super) async fn count_of(
    ops: &Ops,
    caller: &Caller,
    schema: &CollectionSchema,
    filter: &Filter,
) -> Result<Counted> {
    let rows = ops
        .datasource
        .collection(&schema.name)?
        .aggregate(caller, filter, &Aggregation::count(), None)
        .await?;
    // A count is a non-negative integer; `as` saturates, and no row means 0.
    Ok(Counted::Count(
        rows.first()
            .and_then(|row| row.value.as_f64())
            .map_or(0, |n| n as u64),
    ))
}

/// The filter of the record `packed_id` (as the client packed it) within the caller's scope.
pub async fn one_in_scope(
    ops: &Ops,
    caller: &Caller,
    collection: &CollectionSchema,
    packed_id: &str,
) -> Result<Filter> {
    let filter = Filter::new(Some(match_ids(
        collection,
        &[unpack_id(collection, packed_id)?],
    )?));
    scoped(ops, caller, collection, filter).await
}

/// One record by its id.
#[derive(Debug, Clone)]
pub struct GetRequest {
    pub collection: String,
    /// The id as the client packed it (the activity entry keeps it so).
    pub packed_id: String,
    pub projection: Projection,
    pub explicit_projection: bool,
}

/// Reads one record within the caller's scope; none is `NotFound` (`Record does not exists`).
pub async fn get(ops: &Ops, caller: &Caller, request: GetRequest) -> Result<Record> {
    let collection_schema = ops.collection(&request.collection)?;
    let mut activity = Recorded::start(ops, Action::Read, caller, &request.collection);
    activity.records([request.packed_id.as_str()]);
    ops.permissions
        .can(caller, &request.collection, CollectionRight::Read)
        .await?;
    let filter = one_in_scope(ops, caller, collection_schema, &request.packed_id).await?;
    let mut projection = request.projection;
    permission::relation_reads(
        ops,
        caller,
        collection_schema,
        &Filter::default(),
        Some(&mut projection),
        request.explicit_projection,
    )
    .await?;
    let included = IncludedScopes::new(ops, caller, collection_schema, &mut projection).await?;
    let mut records = ops
        .datasource
        .collection(&request.collection)?
        .list(caller, &filter, &projection)
        .await?;
    included.apply(&mut records);
    let record = records
        .into_iter()
        .next()
        .ok_or_else(|| agent::Error::NotFound("Record does not exists".to_owned()))?;
    activity.done();
    Ok(record)
}

/// Deletes one record within the caller's scope (none found deletes nothing).
pub async fn delete_one(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    packed_id: &str,
) -> Result<()> {
    let collection_schema = ops.collection(collection)?;
    let mut activity = Recorded::start(ops, Action::Delete, caller, collection);
    activity.records([packed_id]);
    ops.permissions
        .can(caller, collection, CollectionRight::Delete)
        .await?;
    let filter = one_in_scope(ops, caller, collection_schema, packed_id).await?;
    ops.datasource
        .collection(collection)?
        .delete(caller, &filter)
        .await?;
    activity.done();
    Ok(())
}

/// The records of a bulk request (§2.6): the selection's ids, or all but the excluded ones, with
/// the query's filters.
#[derive(Debug, Clone)]
pub struct SelectionRequest {
    pub collection: String,
    /// `all_records`: the ids are not known without reading them.
    pub all_records: bool,
    pub ids: Vec<CompositeId>,
    /// The selection as a filter (ids ∧ filters, search, segment).
    pub filter: RequestFilter,
}

/// Deletes the records of a selection within the caller's scope.
pub async fn delete_selection(ops: &Ops, caller: &Caller, request: SelectionRequest) -> Result<()> {
    let collection_schema = ops.collection(&request.collection)?;
    let mut activity = Recorded::start(ops, Action::Delete, caller, &request.collection);
    ops.permissions
        .can(caller, &request.collection, CollectionRight::Delete)
        .await?;
    if request.all_records {
        // Every record matching the query but the excluded ones: the ids are not known
        // without reading them.
        activity.label("deleted all records of the selection");
    } else {
        activity.ids(&request.ids);
    }
    let filter = resolve(ops, caller, collection_schema, request.filter).await?;
    let filter = scoped(ops, caller, collection_schema, filter).await?;
    ops.datasource
        .collection(&request.collection)?
        .delete(caller, &filter)
        .await?;
    activity.done();
    Ok(())
}

/// A CSV export: the records of a filter, sorted, in the requested columns.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    pub collection: String,
    /// Filters, search, segment and sort (no page: the export pages itself).
    pub filter: RequestFilter,
    pub columns: Projection,
    pub explicit_projection: bool,
    pub segment_query: Option<LiveSegmentQuery>,
    /// The related export keeps to a parent's records.
    pub restrict: Option<ConditionTree>,
}

/// Starts an export: the checks (browse, `export`, relation reads) and the filter within the
/// caller's scope; the pages are read as [`Export::next_records`] is called. The activity entry
/// is recorded when the export starts: a page failing later is logged by the export itself.
pub async fn export(ops: &Ops, caller: &Caller, request: ExportRequest) -> Result<Export> {
    let schema = ops.schema();
    let collection_schema = ops.collection(&request.collection)?;
    let activity = Recorded::start(ops, Action::Export, caller, &request.collection);
    browse(
        ops,
        caller,
        &request.collection,
        request.segment_query.as_ref(),
    )
    .await?;
    ops.permissions
        .can(caller, &request.collection, CollectionRight::Export)
        .await?;
    let mut filter_request = request.filter;
    let mut columns = request.columns;
    permission::relation_reads(
        ops,
        caller,
        collection_schema,
        &filter_request.filter,
        Some(&mut columns),
        request.explicit_projection,
    )
    .await?;
    let sort = std::mem::take(&mut filter_request.filter.sort);
    let mut filter = resolve(ops, caller, collection_schema, filter_request)
        .await?
        .and(request.restrict);
    filter = scoped(ops, caller, collection_schema, filter).await?;
    // Without `sort`, the primary keys (`parse_sort`), so that the pages of the stream follow
    // one order.
    filter.sort = sort;
    let collection = ops.datasource.collection(&request.collection)?;
    let mut projection = with_primary_keys(&columns, schema, collection_schema);
    // An included record outside the caller's scope on its collection is written as a null
    // relation: its columns are empty, as for an order without a customer.
    let included = IncludedScopes::new(ops, caller, collection_schema, &mut projection).await?;
    let paging = Paging::of(collection_schema, &filter.sort);
    let export = Export {
        rows: CsvRows {
            wires: agent::serialize::csv_wires(schema, collection_schema, &columns.0),
            columns,
            page_bytes: 0,
        },
        collection,
        caller: caller.clone(),
        filter,
        projection,
        included,
        remaining: ops.limit_export_size,
        paging,
        done: false,
    };
    activity.done();
    Ok(export)
}

/// The state of a CSV export under way.
pub struct Export {
    collection: Arc<dyn Collection>,
    caller: Caller,
    filter: Filter,
    /// What is fetched: the written columns and the keys ids need.
    projection: Projection,
    /// The caller's scopes on the records included through to-one relations (`strictScopes`).
    included: IncludedScopes,
    /// How the records are written.
    rows: CsvRows,
    /// Records still allowed by `limitExportSize`.
    remaining: Option<u64>,
    paging: Paging,
    done: bool,
}

/// The writing half of an export: pages of records as CSV rows. Apart from [`Export`], so that
/// a download can write one page while the next is read.
#[derive(Default)]
pub struct CsvRows {
    /// What is written, in order: the fields the client asked for.
    columns: Projection,
    /// The wire form of each written column.
    wires: Vec<crate::datasource::schema::Wire>,
    /// The size of the last page written: the next one's buffer starts at it, not empty.
    page_bytes: usize,
}

impl CsvRows {
    /// One page of records as CSV rows; `None` when they cannot be written (logged: the answer
    /// has started, so the stream ends there).
    pub fn write(&mut self, records: &[Record]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(self.page_bytes);
        if let Err(error) =
            agent::serialize::write_csv_batch(&mut out, &self.columns.0, &self.wires, records)
        {
            tracing::error!(%error, "CSV export stopped");
            return None;
        }
        self.page_bytes = out.len();
        Some(out)
    }
}

/// How an export reaches its next page. An offset makes the database read and drop every row
/// before the page, so a whole export costs the square of its rows; when the sort is the primary
/// keys (the export's default), the next page starts after the last row's keys instead, one
/// index range per page, and the cost stays linear. Another sort keeps the offset: its fields
/// may repeat or be null, where "after this row" has no simple condition.
#[derive(Debug)]
enum Paging {
    Offset(u64),
    /// The sort's primary keys in order, and the last written row's values of them.
    Keyset {
        keys: Vec<datasource::SortClause>,
        after: Option<Vec<Value>>,
    },
}

impl Paging {
    /// Keyset paging when `sort` names every primary key of `collection` and nothing else, and
    /// each key answers the comparisons the condition needs; offset paging otherwise.
    fn of(collection: &CollectionSchema, sort: &datasource::Sort) -> Self {
        let primary_keys = collection.primary_keys();
        let comparable = |clause: &datasource::SortClause| {
            let step = if clause.ascending {
                Operator::GreaterThan
            } else {
                Operator::LessThan
            };
            collection.column(&clause.field).is_some_and(|column| {
                column.is_primary_key
                    && column.filter_operators.contains(&step)
                    && column.filter_operators.contains(&Operator::Equal)
            })
        };
        // A collection without a key (a view) has nothing to start a page after.
        let covers_keys = !primary_keys.is_empty()
            && sort.0.len() == primary_keys.len()
            && primary_keys
                .iter()
                .all(|pk| sort.0.iter().any(|clause| clause.field == *pk));
        if covers_keys && sort.0.iter().all(comparable) {
            Self::Keyset {
                keys: sort.0.clone(),
                after: None,
            }
        } else {
            Self::Offset(0)
        }
    }

    /// `filter` restricted to the next page of `limit` rows.
    fn page(&self, filter: &Filter, limit: u64) -> Filter {
        match self {
            Self::Offset(skip) => filter.clone().with_page(Page::new(*skip, limit)),
            Self::Keyset { keys, after } => {
                let after = after.as_ref().and_then(|values| after_row(keys, values));
                filter.clone().and(after).with_page(Page::new(0, limit))
            }
        }
    }

    /// Moves past the `read` rows just read, `last` the last of them.
    fn advance(&mut self, read: u64, last: &Record) {
        match self {
            Self::Offset(skip) => *skip += read,
            Self::Keyset { keys, after } => {
                *after = Some(
                    keys.iter()
                        .map(|clause| last.get(&clause.field).cloned().unwrap_or(Value::Null))
                        .collect(),
                );
            }
        }
    }
}

/// The rows after `values` in the order of `keys`: for keys k1..kn, the OR over i of
/// (k1 = v1 AND … AND k(i-1) = v(i-1) AND ki > vi), with `<` where ki descends; `None`
/// without keys.
fn after_row(keys: &[datasource::SortClause], values: &[Value]) -> Option<ConditionTree> {
    let step = |clause: &datasource::SortClause, value: &Value| {
        let operator = if clause.ascending {
            Operator::GreaterThan
        } else {
            Operator::LessThan
        };
        ConditionTree::leaf(clause.field.clone(), operator, value.clone())
    };
    let branches = keys
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (key, value))| {
            let equal = keys[..i].iter().zip(values).map(|(clause, value)| {
                Some(ConditionTree::leaf(
                    clause.field.clone(),
                    Operator::Equal,
                    value.clone(),
                ))
            });
            ConditionTree::intersect(equal.chain([Some(step(key, value))]))
        });
    ConditionTree::union(branches)
}

impl Export {
    /// Splits the export into its reading half (this, read with [`Export::next_records`]) and
    /// its writing half.
    pub fn into_parts(mut self) -> (Self, CsvRows) {
        let rows = std::mem::take(&mut self.rows);
        (self, rows)
    }

    /// The next page of records, with the caller's scopes applied to the included ones; `None`
    /// once every record (or the limit) is read, or when a page fails (logged).
    pub async fn next_records(&mut self) -> Option<Vec<Record>> {
        if self.done {
            return None;
        }
        let limit = self.remaining.map_or(CSV_PAGE, |r| r.min(CSV_PAGE));
        if limit == 0 {
            return None;
        }
        let filter = self.paging.page(&self.filter, limit);
        let mut records = match self
            .collection
            .list(&self.caller, &filter, &self.projection)
            .await
        {
            Ok(records) => records,
            Err(error) => {
                tracing::error!(%error, "CSV export stopped");
                return None;
            }
        };
        self.included.apply(&mut records);
        let read = records.len() as u64;
        if let Some(last) = records.last() {
            self.paging.advance(read, last);
        }
        self.remaining = self.remaining.map(|r| r.saturating_sub(read));
        self.done = read < limit;
        if read == 0 {
            return None;
        }
        Some(records)
    }
}

/// A `OneToOne` link of a create body, applied once the record exists (it holds no key of ours).
struct OneToOneLink<'a> {
    foreign_collection: &'a str,
    origin_key: &'a str,
    origin_key_target: &'a str,
    target_id: Option<CompositeId>,
}

/// Creates a record and applies its to-one links; the answer is the created record merged with
/// the links the request gave (as nested id records), so that they show as the agent answers.
pub async fn create(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    plan: CreatePlan,
) -> Result<Record> {
    let schema = ops.schema();
    let collection_schema = ops.collection(collection)?;
    let mut activity = Recorded::start(ops, Action::Create, caller, collection);
    ops.permissions
        .can(caller, collection, CollectionRight::Add)
        .await?;
    // Edit on the target of every linked OneToOne, all checked before anything is written.
    for link in &plan.to_one {
        if let Some(RelationSchema::OneToOne {
            foreign_collection, ..
        }) = collection_schema.relation(&link.relation)
        {
            ops.permissions
                .can(caller, foreign_collection, CollectionRight::Edit)
                .await?;
        }
    }
    let mut record = plan.record;
    let mut links = Record::new();
    let mut one_to_one = Vec::new();
    for link in plan.to_one {
        let Some(relation) = collection_schema.relation(&link.relation) else {
            // parse_create only returns the collection's to-one relations.
            continue;
        };
        let foreign = schema.collection(relation.foreign_collection())?;
        let linked = match &link.target_id {
            Some(id) => Value::Record(Box::new(id_record(id))),
            None => Value::Null,
        };
        match relation {
            RelationSchema::ManyToOne {
                foreign_collection,
                foreign_key,
                foreign_key_target,
            } => {
                // The key may target a non-primary column: read it from the linked record.
                let value = match &link.target_id {
                    Some(id) => {
                        relations::to_one_target(
                            ops,
                            caller,
                            foreign_collection,
                            foreign,
                            id,
                            foreign_key_target,
                        )
                        .await?
                    }
                    None => Value::Null,
                };
                record.insert(foreign_key.as_str(), value);
            }
            RelationSchema::OneToOne {
                foreign_collection,
                origin_key,
                origin_key_target,
            } => {
                one_to_one.push(OneToOneLink {
                    foreign_collection,
                    origin_key,
                    origin_key_target,
                    target_id: link.target_id,
                });
            }
            RelationSchema::OneToMany { .. } | RelationSchema::ManyToMany { .. } => continue,
        }
        links.insert(link.relation.as_str(), linked);
    }
    let created = ops
        .datasource
        .collection(collection)?
        .create(caller, vec![record])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| datasource::Error::Internal("create returned no record".to_owned()))?;
    if let Ok(id) = datasource::pack_id(collection_schema, &created) {
        activity.records([id]);
    }
    for link in &one_to_one {
        let origin_value = relations::column_value(&created, link.origin_key_target);
        relations::link_one_to_one(
            ops,
            caller,
            link.foreign_collection,
            link.origin_key,
            &origin_value,
            link.target_id.as_ref(),
        )
        .await?;
    }
    let mut response = created;
    for (relation, value) in links.iter() {
        response.insert(relation, value.clone());
    }
    activity.done();
    Ok(response)
}

/// Patches one record within the caller's scope, then reads it again (under its new id when the
/// patch moved its primary key) with every column and every to-one relation's columns; `None`
/// when the filter finds no record (there was none, or the patch moved it out of sight).
pub async fn update(
    ops: &Ops,
    caller: &Caller,
    collection: &str,
    packed_id: &str,
    patch: Record,
) -> Result<Option<Record>> {
    let schema = ops.schema();
    let collection_schema = ops.collection(collection)?;
    let mut activity = Recorded::start(ops, Action::Update, caller, collection);
    activity.records([packed_id]);
    ops.permissions
        .can(caller, collection, CollectionRight::Edit)
        .await?;
    let id = unpack_id(collection_schema, packed_id)?;
    let handle = ops.datasource.collection(collection)?;
    let filter = Filter::new(Some(match_ids(
        collection_schema,
        std::slice::from_ref(&id),
    )?));
    let filter = scoped(ops, caller, collection_schema, filter).await?;
    handle.update(caller, &filter, &patch).await?;
    let new_id: CompositeId = id
        .into_iter()
        .map(|(pk, value)| {
            let value = patch.get(&pk).cloned().unwrap_or(value);
            (pk, value)
        })
        .collect();
    let filter = Filter::new(Some(match_ids(collection_schema, &[new_id])?));
    let filter = scoped(ops, caller, collection_schema, filter).await?;
    let mut projection = with_primary_keys(
        &Projection::with_to_one_relations(collection_schema, schema),
        schema,
        collection_schema,
    );
    let included = IncludedScopes::new(ops, caller, collection_schema, &mut projection).await?;
    let mut records = handle.list(caller, &filter, &projection).await?;
    included.apply(&mut records);
    activity.done();
    Ok(records.into_iter().next())
}

/// A to-one link as the serializer expects it: the target's primary keys as a nested record.
fn id_record(id: &CompositeId) -> Record {
    let mut record = Record::with_capacity(id.len());
    for (pk, value) in id {
        record.insert(pk.as_str(), value.clone());
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{ColumnSchema, FieldSchema, PrimitiveType, Sort, SortClause};

    /// `stock (shelf, slot)` keyed by both, with the comparisons of a SQL column on them;
    /// `qty` not a key.
    fn stock() -> CollectionSchema {
        let mut stock = CollectionSchema::new("stock");
        for (name, key) in [("shelf", true), ("slot", true), ("qty", false)] {
            let mut column = ColumnSchema::new(PrimitiveType::Number);
            column.is_primary_key = key;
            column.filter_operators =
                [Operator::Equal, Operator::GreaterThan, Operator::LessThan].into();
            stock
                .fields
                .insert(name.into(), FieldSchema::Column(column));
        }
        stock
    }

    fn clause(field: &str, ascending: bool) -> SortClause {
        SortClause {
            field: field.into(),
            ascending,
        }
    }

    fn is_keyset(sort: &str) -> bool {
        matches!(
            Paging::of(&stock(), &Sort::parse(sort)),
            Paging::Keyset { .. }
        )
    }

    #[test]
    fn exports_sorted_by_every_key_page_by_keyset_the_others_by_offset() {
        assert!(is_keyset("shelf,slot"));
        assert!(is_keyset("-slot,shelf"));
        // Not every key (rows repeat the value), or a field that is not a key.
        assert!(!is_keyset("shelf"));
        assert!(!is_keyset("shelf,slot,qty"));
        assert!(!is_keyset("qty"));
        assert!(!is_keyset(""));
        // A collection without a key.
        let mut view = stock();
        for field in view.fields.values_mut() {
            if let FieldSchema::Column(column) = field {
                column.is_primary_key = false;
            }
        }
        assert!(matches!(
            Paging::of(&view, &Sort::default()),
            Paging::Offset(0)
        ));
        // A key that cannot be compared (a collection whose key has no `GreaterThan`).
        let mut stock = stock();
        if let Some(FieldSchema::Column(slot)) = stock.fields.get_mut("slot") {
            slot.filter_operators.remove(&Operator::GreaterThan);
        }
        assert!(matches!(
            Paging::of(&stock, &Sort::parse("shelf,slot")),
            Paging::Offset(0)
        ));
    }

    #[test]
    fn the_next_keyset_page_starts_after_the_last_rows_keys() {
        let keys = [clause("shelf", true), clause("slot", false)];
        let after = after_row(&keys, &[Value::Int(2), Value::Int(40)]).unwrap();
        let leaf = |field: &str, operator, value: i64| {
            ConditionTree::leaf(field, operator, Value::Int(value))
        };
        assert_eq!(
            after,
            ConditionTree::or(vec![
                leaf("shelf", Operator::GreaterThan, 2),
                ConditionTree::and(vec![
                    leaf("shelf", Operator::Equal, 2),
                    leaf("slot", Operator::LessThan, 40),
                ]),
            ])
        );

        let mut paging = Paging::of(&stock(), &Sort::parse("shelf,-slot"));
        let first = paging.page(&Filter::default(), 10);
        assert_eq!(first.condition_tree, None);
        assert_eq!(first.page, Some(Page::new(0, 10)));
        let mut last = Record::new();
        last.insert("shelf", Value::Int(2));
        last.insert("slot", Value::Int(40));
        paging.advance(10, &last);
        let next = paging.page(&Filter::new(Some(leaf("qty", Operator::Equal, 1))), 10);
        assert_eq!(
            next.condition_tree,
            ConditionTree::intersect([Some(leaf("qty", Operator::Equal, 1)), Some(after)])
        );
        assert_eq!(next.page, Some(Page::new(0, 10)));
    }

    #[test]
    fn offset_pages_move_by_the_rows_read() {
        let mut paging = Paging::of(&stock(), &Sort::parse("qty"));
        paging.advance(1000, &Record::new());
        paging.advance(250, &Record::new());
        let filter = paging.page(&Filter::default(), 1000);
        assert_eq!(filter.page, Some(Page::new(1250, 1000)));
        assert_eq!(filter.condition_tree, None);
    }
}
