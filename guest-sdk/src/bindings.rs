//! The wit-bindgen glue for `wit/plugin@0.3.0`. Plugin authors never name it: the SDK's types
//! wrap it and [`crate::export_plugin!`] expands to its export macro.
#![allow(
    unsafe_code,
    reason = "wit-bindgen's canonical-ABI glue is unsafe by nature"
)]
#![allow(missing_docs, reason = "generated code; the WIT file documents it")]
#![allow(clippy::all, reason = "generated code")]

wit_bindgen::generate!({
    world: "customization",
    path: "../wit/plugin@0.3.0",
    pub_export_macro: true,
    export_macro_name: "__export_customization",
    default_bindings_module: "canopy_sdk::bindings",
});
