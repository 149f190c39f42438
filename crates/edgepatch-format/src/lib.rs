//! The edgepatch formats (docs/FORMAT.md): the patch container (§2), the manifest (§4), the
//! signed statements and the JSON documents of the update protocol with the rules a client
//! applies to them (docs/UPDATE_PROTOCOL.md), with the encoder and the decoder of each
//! structure side by side, the wire primitives and codecs they share, the path and tree
//! rules every decoder enforces, the error type all of them report with, and the capabilities
//! a reader declares so that a writer uses only what it can apply (§5), and the interface every
//! file transform implements (§2.8, [`transform`]). No I/O: every decoder reads bytes it is given.

#![warn(missing_docs)]

pub mod capabilities;
pub mod channel;
pub mod compressed_side_info;
pub mod descriptor;
pub mod document_rules;
pub mod error;
pub mod key_rotations;
pub mod lzma;
pub mod manifest;
pub mod patch_format;
pub mod path_rules;
mod perfect_hash;
pub mod segment_codec;
pub mod statement;
pub mod transform;
#[cfg(test)]
mod typescript;
pub mod wasm_side_info;
pub mod wire;

pub use capabilities::{Capabilities, CapabilitiesError, Capability};
pub use error::{Error, ErrorKind, Input, Result};
