//! `canopy-sdk`: write Canopy collection customizations in Rust, compiled to a WebAssembly
//! component (`cargo build --target wasm32-wasip2 --release`) that the host loads from its plugin
//! directory.
//!
//! A plugin is one type implementing [`Plugin`], exported with [`export_plugin!`]:
//!
//! ```ignore
//! use canopy_sdk::prelude::*;
//!
//! struct Shop;
//!
//! impl Plugin for Shop {
//!     fn customize(ds: &mut DataSource) -> Result<()> {
//!         ds.collection("customers").add_field(
//!             "fullName",
//!             ComputedField::new(ColumnType::STRING, ["firstName", "lastName"], |rows, _ctx| {
//!                 let (first, last) = (rows.text("firstName")?, rows.text("lastName")?);
//!                 let mut names = Texts::with_capacity(rows.len(), 16 * rows.len());
//!                 for (f, l) in first.iter().zip(last.iter()) {
//!                     names.push_with(|cell| {
//!                         cell.push_str(f.unwrap_or(""));
//!                         cell.push(' ');
//!                         cell.push_str(l.unwrap_or(""));
//!                     });
//!                 }
//!                 Ok(names.into())
//!             }),
//!         );
//!         Ok(())
//!     }
//! }
//!
//! canopy_sdk::export_plugin!(Shop);
//! ```
//!
//! The same `customize` may declare workflow-step handlers
//! ([`DataSource::add_workflow_step`]), which `plugin` steps of workflow runs call.
//!
//! The contract underneath is `wit/plugin@0.3.0` ([`WIT_VERSION`]); authors never touch it. (The
//! host still loads plugins built against the frozen 0.1.0, which have no workflow steps, and
//! 0.2.0, whose computed fields take one string per text cell instead of packed [`Texts`].)
//! See `guest-sdk/README.md` for a guide to each kind of customization.

mod action;
#[doc(hidden)]
pub mod bindings;
mod chart;
mod customize;
mod data;
mod error;
mod hook;
mod relation;
mod texts;
mod workflow;
mod write;

pub use action::{Action, ActionContext, ActionResult, FieldType, FormElement, Scope};
pub use chart::{ChartContext, ChartResult, TimeRange};
#[doc(hidden)]
pub use customize::Exports;
pub use customize::{
    CollectionCustomizer, ColumnType, ComputedField, DataSource, Plugin, Search, Segment,
};
pub use data::{Caller, CollectionRef, Column, Context, Level, Rows, TextCells, log};
pub use error::{Error, Result};
pub use hook::{HookContext, Operation, Position};
pub use relation::{
    ExternalRelation, ManyToManyOptions, ManyToOneOptions, OneToManyOptions, OneToOneOptions,
};
/// JSON values (condition trees, form values, records) are `serde_json` values.
pub use serde_json::{Value, json};
pub use texts::{Cell, Texts};
pub use workflow::{StepContext, StepOutput};
pub use write::{BinaryMode, WriteAction, WriteContext};

/// The version of the WIT package this SDK builds against; the host checks it at load.
pub const WIT_VERSION: &str = "0.3.0";

/// Everything a plugin usually needs: `use canopy_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Action, ActionContext, ActionResult, BinaryMode, ChartContext, ChartResult,
        CollectionCustomizer, Column, ColumnType, ComputedField, Context, DataSource, Error,
        ExternalRelation, FieldType, FormElement, HookContext, Level, ManyToManyOptions,
        ManyToOneOptions, OneToManyOptions, OneToOneOptions, Operation, Plugin, Position, Result,
        Rows, Scope, Search, Segment, StepContext, StepOutput, TextCells, Texts, TimeRange, Value,
        WriteAction, WriteContext, json, log,
    };
}

/// Exports a [`Plugin`] as the component's `customizer` and `workflow` interfaces. Call it once, at the root of
/// the plugin crate: `canopy_sdk::export_plugin!(MyPlugin);`.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        type __CanopyPluginExports = $crate::Exports<$plugin>;
        $crate::bindings::__export_customization!(__CanopyPluginExports with_types_in $crate::bindings);
    };
}
