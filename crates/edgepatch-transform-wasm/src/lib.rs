//! The wasm transform (being moved here from edgepatch-core).
