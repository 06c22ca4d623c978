//! The CSV download of a collection's records or of a record's to-many relation: what
//! `GET /forest/{c}.csv`, `GET /forest/{c}/{id}/relationships/{r}.csv` and the console's
//! Export button all serve, byte for byte the same (protocol §3.5).
//!
//! The request is read in the agent's query-string terms (filters, search, segment, sort,
//! `fields[…]` or the `Forest-Projection` header, `header`, `filename`), checked and started by
//! [`records::export`] (or [`relations::export_related`]), and written as the header row then
//! pages of rows read as the download is consumed. Each surface wraps [`Csv`] in its own answer.

use futures::Stream;

use super::activity;
use super::permission::LiveSegmentQuery;
use super::records::{self, Export, ExportRequest, explicit_projection};
use super::relations::{self, Parent};
use super::{Ops, Result, served};
use crate::agent::query_string::{
    Params, QueryString, parse_csv_params, parse_filter, parse_requested_projection, parse_sort,
};
use crate::agent::serialize;
use crate::datasource::{Caller, CollectionSchema};
use crate::platform::activity::Action;

/// A CSV download as a client asks for it.
#[derive(Debug, Clone, Copy)]
pub struct CsvRequest<'a> {
    /// The exported collection (for a relation, its foreign collection).
    pub collection: &'a str,
    /// The request's query string, in the agent's terms.
    pub query: &'a QueryString,
    /// The `Forest-Projection` header, which overrides `fields[…]`.
    pub projection_header: Option<&'a str>,
    /// The record whose relation is exported, for a related export.
    pub parent: Option<&'a Parent>,
}

/// A started download: its file name and the rows still to read.
pub struct Csv {
    /// `Content-Disposition` as the agent writes it (`attachment; filename=…`).
    pub content_disposition: String,
    head: Vec<u8>,
    export: Export,
}

impl Csv {
    /// The header row, then each page of rows as it is read; a page that fails ends the
    /// stream (the answer has started; the export logs why).
    ///
    /// Three stages, each its own task, hand pages on through channels of one: the reader asks
    /// the database for the next page while the writer turns the previous one into CSV and the
    /// answer sends the one before. Done one after the other, the database sat idle while this
    /// process decoded, wrote and sent a page, and the reverse (280k rows/s; see the README's
    /// benchmark table for the figures now). A download holds at most a few pages whatever its
    /// size. A client that goes away drops the last receiver, and each stage stops at its next
    /// page.
    pub fn into_stream(self) -> impl Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
        let Self { head, export, .. } = self;
        let (mut export, mut rows) = export.into_parts();
        let (records_tx, mut records_rx) = tokio::sync::mpsc::channel(1);
        let (pages_tx, pages_rx) = tokio::sync::mpsc::channel(1);
        let reader = async move {
            while let Some(records) = export.next_records().await {
                if records_tx.send(records).await.is_err() {
                    break;
                }
            }
        };
        let writer = async move {
            while let Some(records) = records_rx.recv().await {
                let Some(page) = rows.write(&records) else {
                    break;
                };
                drop(records);
                if pages_tx.send(page).await.is_err() {
                    break;
                }
            }
        };
        tokio::spawn(tracing::Instrument::in_current_span(reader));
        tokio::spawn(tracing::Instrument::in_current_span(writer));
        let first = futures::stream::once(async move { Ok::<_, std::io::Error>(head) });
        let pages = futures::stream::unfold(pages_rx, |mut pages_rx| async move {
            let page = pages_rx.recv().await?;
            Some((Ok::<_, std::io::Error>(page), pages_rx))
        });
        futures::StreamExt::chain(first, pages)
    }
}

/// Starts the download of `request` as `caller`: the checks of an export (browse and export
/// rights, the scope, relation reads, `limitExportSize`) and its activity entry. A request that
/// cannot be parsed is refused as a refused export is (the rights first, a failed entry).
pub async fn csv(ops: &Ops, caller: &Caller, request: CsvRequest<'_>) -> Result<Csv> {
    let name = request.collection;
    let collection_schema = served(ops.schema(), name)?;
    let export = match export_request(ops, &request, collection_schema) {
        Ok(export) => export,
        Err(error) => {
            activity::unparsed(ops, Action::Export, caller, name, None, None).await?;
            return Err(error);
        }
    };
    let export = match request.parent {
        None => records::export(ops, caller, export).await?,
        Some(parent) => relations::export_related(ops, caller, parent, export).await?,
    };
    let params = parse_csv_params(request.query);
    let head = serialize::csv_header(params.header.as_deref().unwrap_or(""))?;
    // The agent interpolates the query parameter as is: without one, the name is `undefined`
    // (what `@forestadmin/agent-client` gets, as it sends none).
    let filename = params.filename.unwrap_or_else(|| "undefined".to_owned());
    Ok(Csv {
        content_disposition: serialize::csv_content_disposition(&filename),
        head,
        export,
    })
}

/// The export's filter, sort and columns from the query string (and the projection header).
fn export_request(
    ops: &Ops,
    request: &CsvRequest<'_>,
    collection: &CollectionSchema,
) -> Result<ExportRequest> {
    let schema = ops.schema();
    let params = Params::new(request.query);
    let mut filter = parse_filter(&params, schema, collection)?;
    filter.filter.sort = parse_sort(&params, schema, collection)?;
    let header = request.projection_header;
    let columns = parse_requested_projection(request.query, header, schema, collection)?;
    Ok(ExportRequest {
        collection: collection.name.clone(),
        filter,
        columns,
        explicit_projection: explicit_projection(request.query, header, &collection.name),
        segment_query: LiveSegmentQuery::of(request.query),
        restrict: None,
    })
}
