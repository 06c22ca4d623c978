//! The calls a test makes, on the agent's routes, as the server's user: records (list, count,
//! get, create, update, delete), actions (form, execute) and charts. Answers come back as plain
//! JSON records: a JSON:API document's attributes, with each to-one relation included as the
//! related record's attributes.

use std::path::PathBuf;

use serde_json::{Map, Value as Json, json};

use crate::error::{Error, Result};
use crate::http::{self, Origin, encode};

/// The timezone of every request: the routes require one, and UTC keeps dates as stored.
const TIMEZONE: &str = "UTC";

/// A client of one server's `/forest` routes, as one user.
#[derive(Debug, Clone)]
pub struct Client {
    origin: Origin,
    token: String,
    schema_path: PathBuf,
}

impl Client {
    /// A client of the agent routes at `forest_url` (`http://127.0.0.1:3351/forest`) with a
    /// session token, finding actions in the schema file that server wrote. [`TestServer::client`]
    /// gives one of a test server; this is for another server, e.g. a `canopy serve
    /// --server-url` that takes its permissions from a test server.
    ///
    /// [`TestServer::client`]: crate::TestServer::client
    pub fn new(
        forest_url: &str,
        token: impl Into<String>,
        schema_path: impl Into<PathBuf>,
    ) -> Result<Self> {
        Ok(Self {
            origin: Origin::parse(forest_url)?,
            token: token.into(),
            schema_path: schema_path.into(),
        })
    }

    /// The collection `name`.
    pub fn collection(&self, name: &str) -> Collection<'_> {
        Collection {
            client: self,
            name: name.to_owned(),
        }
    }

    /// The value of the datasource chart `name` (a plugin's `add_chart` on the datasource): the
    /// agent's raw chart value, e.g. `{"countCurrent": 3}` or `[{"key", "value"}]`.
    pub fn chart(&self, name: &str) -> Result<Json> {
        self.get(&format!("/_charts/{}?timezone={TIMEZONE}", encode(name)))
    }

    fn get(&self, path: &str) -> Result<Json> {
        self.call("GET", path, None)
    }

    /// Sends a request under the base path and reads its JSON answer; a status other than 2xx
    /// is an [`Error::Status`] with the answer.
    fn call(&self, method: &'static str, path: &str, body: Option<&Json>) -> Result<Json> {
        let path = format!("{}{path}", self.origin.base);
        let answer = http::send(&self.origin, method, &path, &self.token, body)?;
        let parsed = if answer.body.is_empty() {
            Json::Null
        } else {
            serde_json::from_slice(&answer.body).unwrap_or_else(|_| {
                Json::String(String::from_utf8_lossy(&answer.body).into_owned())
            })
        };
        if (200..300).contains(&answer.status) {
            Ok(parsed)
        } else {
            Err(Error::Status {
                method,
                path,
                status: answer.status,
                body: parsed,
            })
        }
    }

    /// The route of `action` of `collection` under the base path, from the schema file's
    /// `endpoint` (which carries the action's index among the collection's actions).
    fn action_route(&self, collection: &str, action: &str) -> Result<String> {
        let schema = &self.schema_path;
        let text = std::fs::read_to_string(schema)
            .map_err(|e| Error::io(format!("reading the schema file {}", schema.display()), e))?;
        let document: Json = serde_json::from_str(&text)
            .map_err(|e| Error::Unexpected(format!("the schema file {}: {e}", schema.display())))?;
        let endpoint = document["collections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["name"] == collection)
            .flat_map(|c| c["actions"].as_array().into_iter().flatten())
            .find(|a| a["name"] == action)
            .and_then(|a| a["endpoint"].as_str());
        let endpoint = endpoint.ok_or_else(|| Error::NoAction {
            collection: collection.to_owned(),
            action: action.to_owned(),
            schema: schema.display().to_string(),
        })?;
        // Endpoints are written as the agent's, `/forest/_actions/…`, whatever the prefix.
        Ok(endpoint
            .strip_prefix("/forest")
            .unwrap_or(endpoint)
            .to_owned())
    }
}

/// What a list or count asks for: fields, a filter, a search, a sort, a page, a segment.
#[derive(Debug, Clone, Default)]
pub struct Query {
    fields: Vec<String>,
    filter: Option<Json>,
    search: Option<String>,
    sort: Option<String>,
    page: Option<u32>,
    page_size: Option<u32>,
    segment: Option<String>,
}

impl Query {
    /// Every field, the first page of 15, the collection's default order.
    pub fn new() -> Self {
        Self::default()
    }

    /// The fields to read: the collection's own (columns and computed fields), and fields of
    /// to-one relations as `relation.field` (`customer.email`).
    pub fn fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// A condition tree, as the agent's `filters`: `{"field": "status", "operator": "equal",
    /// "value": "paid"}`, or `{"aggregator": "and", "conditions": [...]}`.
    pub fn filter(mut self, tree: Json) -> Self {
        self.filter = Some(tree);
        self
    }

    /// The collection's search (a plugin may replace it).
    pub fn search(mut self, text: impl Into<String>) -> Self {
        self.search = Some(text.into());
        self
    }

    /// A sort, as the agent's: `name`, `-id` for descending, `customer.email`.
    pub fn sort(mut self, sort: impl Into<String>) -> Self {
        self.sort = Some(sort.into());
        self
    }

    /// The page, from 1, of `size` records.
    pub fn page(mut self, number: u32, size: u32) -> Self {
        self.page = Some(number);
        self.page_size = Some(size);
        self
    }

    /// A segment of the collection (a plugin's, by name).
    pub fn segment(mut self, name: impl Into<String>) -> Self {
        self.segment = Some(name.into());
        self
    }

    /// The query string for `collection`, starting with `?`.
    fn query_string(&self, collection: &str) -> String {
        let mut pairs = vec![("timezone".to_owned(), TIMEZONE.to_owned())];
        if !self.fields.is_empty() {
            let mut own: Vec<&str> = Vec::new();
            let mut related: Vec<(&str, Vec<&str>)> = Vec::new();
            for field in &self.fields {
                match field.split_once(['.', ':']) {
                    Some((relation, sub)) => {
                        if !own.contains(&relation) {
                            own.push(relation);
                        }
                        match related.iter_mut().find(|(r, _)| *r == relation) {
                            Some((_, subs)) => subs.push(sub),
                            None => related.push((relation, vec![sub])),
                        }
                    }
                    None if !own.contains(&field.as_str()) => own.push(field),
                    None => {}
                }
            }
            pairs.push((format!("fields[{collection}]"), own.join(",")));
            for (relation, subs) in related {
                pairs.push((format!("fields[{relation}]"), subs.join(",")));
            }
        }
        if let Some(filter) = &self.filter {
            pairs.push(("filters".to_owned(), filter.to_string()));
        }
        if let Some(search) = &self.search {
            pairs.push(("search".to_owned(), search.clone()));
        }
        if let Some(sort) = &self.sort {
            pairs.push(("sort".to_owned(), sort.clone()));
        }
        if let Some(page) = self.page {
            pairs.push(("page[number]".to_owned(), page.to_string()));
        }
        if let Some(size) = self.page_size {
            pairs.push(("page[size]".to_owned(), size.to_string()));
        }
        if let Some(segment) = &self.segment {
            pairs.push(("segment".to_owned(), segment.clone()));
        }
        let encoded: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        format!("?{}", encoded.join("&"))
    }
}

/// One collection of the server.
#[derive(Debug, Clone)]
pub struct Collection<'a> {
    client: &'a Client,
    name: String,
}

impl Collection<'_> {
    fn path(&self) -> String {
        format!("/{}", encode(&self.name))
    }

    fn record_path(&self, id: &str) -> String {
        format!("/{}/{}?timezone={TIMEZONE}", encode(&self.name), encode(id))
    }

    /// The records `query` selects, as plain JSON objects.
    pub fn list(&self, query: &Query) -> Result<Vec<Json>> {
        let path = format!("{}{}", self.path(), query.query_string(&self.name));
        let document = self.client.get(&path)?;
        let items = document["data"]
            .as_array()
            .ok_or_else(|| Error::Unexpected(format!("GET {path}: no `data` list")))?;
        Ok(items.iter().map(|item| record(item, &document)).collect())
    }

    /// How many records `query` selects (its fields and page are ignored); `None` when the
    /// collection's count is deactivated (a plugin may turn it off).
    pub fn count(&self, query: &Query) -> Result<Option<u64>> {
        let path = format!("{}/count{}", self.path(), query.query_string(&self.name));
        let answer = self.client.get(&path)?;
        match answer.get("count") {
            Some(count) => count
                .as_u64()
                .map(Some)
                .ok_or_else(|| Error::Unexpected(format!("GET {path}: count {count}"))),
            None => Ok(None),
        }
    }

    /// The record with this id (a composite key's parts joined with `|`).
    pub fn get(&self, id: &str) -> Result<Json> {
        let document = self.client.get(&self.record_path(id))?;
        Ok(record(&document["data"], &document))
    }

    /// Creates a record from its attributes; answers it as created (hooks and defaults
    /// applied).
    pub fn create(&self, attributes: Json) -> Result<Json> {
        let mut body = json!({"data": {"type": self.name}});
        body["data"]["attributes"] = attributes;
        let path = format!("{}?timezone={TIMEZONE}", self.path());
        let document = self.client.call("POST", &path, Some(&body))?;
        Ok(record(&document["data"], &document))
    }

    /// Changes the given attributes of a record; answers it as updated.
    pub fn update(&self, id: &str, attributes: Json) -> Result<Json> {
        let mut body = json!({"data": {"type": self.name, "id": id}});
        body["data"]["attributes"] = attributes;
        let document = self
            .client
            .call("PUT", &self.record_path(id), Some(&body))?;
        Ok(record(&document["data"], &document))
    }

    /// Deletes a record.
    pub fn delete(&self, id: &str) -> Result<()> {
        self.client
            .call("DELETE", &self.record_path(id), None)
            .map(drop)
    }

    /// The action `name` of the collection.
    pub fn action(&self, name: &str) -> Action<'_> {
        Action {
            collection: self,
            name: name.to_owned(),
        }
    }

    /// The value of the collection chart `name` for one record (a plugin's `add_chart` on the
    /// collection).
    pub fn chart(&self, name: &str, record_id: &str) -> Result<Json> {
        self.client.get(&format!(
            "/_charts/{}/{}?timezone={TIMEZONE}&record_id={}",
            encode(&self.name),
            encode(name),
            encode(record_id)
        ))
    }
}

/// One action of a collection.
#[derive(Debug, Clone)]
pub struct Action<'a> {
    collection: &'a Collection<'a>,
    name: String,
}

impl Action<'_> {
    /// The body of a call on the records `ids` (none for a global action) with form `values`.
    fn body(&self, values: Json, ids: &[&str]) -> Json {
        let mut body = json!({"data": {"type": "custom-action-requests", "attributes": {
            "collection_name": self.collection.name,
            "ids": ids,
            "all_records": false,
            "all_records_ids_excluded": [],
            "all_records_subset_query": {},
        }}});
        body["data"]["attributes"]["values"] = values;
        body
    }

    fn route(&self) -> Result<String> {
        self.collection
            .client
            .action_route(&self.collection.name, &self.name)
    }

    /// Runs the action on the records `ids` (none for a global action) with the form's
    /// `values` by field label (`{"Amount": 10}`; `{}` without a form). Answers the result:
    /// `{"success": message}`, `{"html": …}`, `{"webhook": …}`, `{"redirectTo": …}`; an error
    /// result (the plugin's `error`) is an [`Error::Status`] 400 whose [`Error::message`] is
    /// its message.
    pub fn execute(&self, values: Json, ids: &[&str]) -> Result<Json> {
        let path = format!("{}?timezone={TIMEZONE}", self.route()?);
        let body = self.body(values, ids);
        self.collection.client.call("POST", &path, Some(&body))
    }

    /// The form as it opens on the records `ids`: its `fields` (each with `field`, `type`,
    /// `value`, `isRequired`…) and `layout`.
    pub fn form(&self, ids: &[&str]) -> Result<Json> {
        let path = format!("{}/hooks/load?timezone={TIMEZONE}", self.route()?);
        let body = self.body(json!({}), ids);
        self.collection.client.call("POST", &path, Some(&body))
    }
}

/// A JSON:API resource as a plain object: its attributes, and each to-one relation sent with
/// data as the included record's attributes (`null` when empty; `{"id"}` when not included).
fn record(item: &Json, document: &Json) -> Json {
    let mut out: Map<String, Json> = item["attributes"].as_object().cloned().unwrap_or_default();
    if let Some(relationships) = item["relationships"].as_object() {
        for (name, relation) in relationships {
            let Some(data) = relation.get("data") else {
                continue;
            };
            let value = match data {
                Json::Object(_) => included(data, document),
                Json::Array(items) => items.iter().map(|d| included(d, document)).collect(),
                _ => Json::Null,
            };
            out.insert(name.clone(), value);
        }
    }
    Json::Object(out)
}

/// The attributes of the included resource `reference` (`{"type", "id"}`) points to.
fn included(reference: &Json, document: &Json) -> Json {
    document["included"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["type"] == reference["type"] && r["id"] == reference["id"])
        .map_or_else(
            || json!({"id": reference["id"]}),
            |r| r["attributes"].clone(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relation_fields_ask_for_the_relation_and_its_fields() {
        let query = Query::new().fields(["id", "customer.email", "customer:name"]);
        assert_eq!(
            query.query_string("orders"),
            "?timezone=UTC&fields%5Borders%5D=id%2Ccustomer&fields%5Bcustomer%5D=email%2Cname"
        );
    }

    #[test]
    fn a_record_includes_its_to_one_relations() {
        let document = json!({
            "data": [{"type": "orders", "id": "1", "attributes": {"id": 1},
                      "relationships": {"customer": {"data": {"type": "customers", "id": "7"}},
                                        "items": {"links": {"related": {"href": "/x"}}}}}],
            "included": [{"type": "customers", "id": "7", "attributes": {"email": "a@b.c"}}]
        });
        let item = &document["data"][0];
        assert_eq!(
            record(item, &document),
            json!({"id": 1, "customer": {"email": "a@b.c"}})
        );
    }
}
