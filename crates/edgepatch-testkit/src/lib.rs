//! Test helpers shared by the edgepatch crates' tests and benches: one seeded
//! PRNG ([`Rng`]), LEB128 ([`leb128`]) and a small wasm module builder
//! ([`wasm`]), text-like content ([`text`]) and the corpus of real version pairs
//! ([`corpus`]).
//!
//! No dependency on the crates under test: the reference applier and the
//! hand-made modules stay independent of the code they check.

pub mod corpus;
pub mod leb128;
pub mod rng;
pub mod text;
pub mod wasm;

pub use rng::{noise, Rng};
pub use wasm::WasmModuleBuilder;
