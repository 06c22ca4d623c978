//! Placeholder while the plugin benchmark is written.
fn main() {}
