//! The guest SDK for Canopy plugins.
//!
//! Plugin authors will implement one trait and call one export macro; the WIT contract
//! (`wit/plugin@0.1.0`) and the builder API land with the plugins issue. Until then this crate only
//! reserves its place in the workspace so the layout, lints and CI are settled.
#![deny(missing_docs)]

/// The version of the WIT package this SDK builds against.
pub const WIT_VERSION: &str = "0.1.0";
