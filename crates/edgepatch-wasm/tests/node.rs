//! `wasm-pack test --node crates/edgepatch-wasm --test node`: the bindings against
//! the golden fixtures, through JS objects exactly as a JS caller would use them.
#![cfg(target_arch = "wasm32")]

include!("shared/golden_cases.rs");
