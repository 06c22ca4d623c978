//! A plugin built against the frozen `canopy:plugin@0.1.0` (`wit/plugin@0.1.0`) with its own
//! wit-bindgen generation, as plugins built before 0.2.0 were: the host must keep loading it and
//! calling it through 0.1.0's link names. It declares one computed field on `customers`,
//! `shout`: the `name` in capitals, a slash and the number of customers, which it counts through
//! the host's `collections.list` (so the 0.1.0 imports are exercised too).
#![allow(unsafe_code, reason = "wit-bindgen glue")]

wit_bindgen::generate!({ world: "customization", path: "../../../wit/plugin@0.1.0" });

include!("customizer.rs");

export!(Legacy);
