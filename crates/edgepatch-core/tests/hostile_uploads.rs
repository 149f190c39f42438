//! Hostile uploads to the writer: a module built to make the wasm transform's writer hold more
//! than its bounds allow (docs/WASM_TRANSFORM.md §5). Anyone with the owner's token, or a
//! compromised CI, can publish any build; the Worker then runs the writer on it in a 128 MB
//! isolate. Measured with a counting allocator, in a test binary of its own so that no other
//! test's allocations are counted.

use edgepatch_core::wasm_transform::{forward, inverse, reference};

mod counting_allocator;
mod wasm_modules;
use counting_allocator::{peak, reset_peak, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A module exporting two million functions under distinct names: the writer reads at most
/// 262,144 names per module for matching (`MAX_NAMES`), so what it holds for them stays a few
/// MB instead of growing with the upload. For this 14 MB module the writer held 28.6 MB; with
/// the bound lifted, 225 MB (measured when the bound was written).
#[test]
fn a_module_naming_millions_of_functions_bounds_what_the_writer_holds() {
    let (exports, functions) = (2_000_000u64, 4096u64);
    let old = wasm_modules::many_exports(functions, exports, 1);
    let new = wasm_modules::many_exports(functions, exports, 2);
    let reference = reference(&old).unwrap();
    let before = reset_peak();
    let normalized = forward(Some(&reference), &new).unwrap();
    let held = peak() - before;
    assert_eq!(inverse(&normalized.bytes, &normalized.side_info).unwrap(), new);
    // The normalized module (about the upload's size) and the writer's own state.
    let bound = 2 * new.len() + (48 << 20);
    assert!(held < bound, "the writer held {held} bytes for a {}-byte module (bound {bound})", new.len());
}
