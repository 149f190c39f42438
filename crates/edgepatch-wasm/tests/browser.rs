//! `wasm-pack test --headless --chrome crates/edgepatch-wasm --test browser`: the
//! same cases as `node.rs`, in Debian's Chromium.
#![cfg(target_arch = "wasm32")]

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

include!("shared/golden_cases.rs");
