//! What the plugin loader reads about a plugin before compiling it (`plugins::loader`): its
//! language from the component's custom sections (`canopy-language`, `producers`,
//! `component-name`, read with wasmparser) and its `<name>.toml` settings (options, limits,
//! `[[use]]` entries, `unscoped_reads`, `language`).
//!
//! Input: a component or module (`\0asm…`) or the text of a `.toml`; both readers run on every
//! input, since each must refuse the other's bytes cleanly.

#![no_main]

#[allow(dead_code, reason = "each target uses some of the shared helpers")]
mod common;

use std::path::Path;

use canopy::fuzzing::{PluginToml, detect_language};
use common::schema;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(language) = detect_language(data) {
        assert_eq!(language, language.to_ascii_lowercase());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(settings) = toml::from_str::<PluginToml>(text) else {
        return;
    };
    let _ = settings.applications();
    let _ = settings.unscoped_reads("fuzzed", Path::new("plugins/fuzzed.wasm"), schema());
    let _ = settings.limits.memory_bytes();
});
