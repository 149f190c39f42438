//! edgepatch-format: the patch, manifest and descriptor formats (docs/FORMAT.md), and the
//! capabilities a reader declares so that a writer uses only what it can apply.

#![warn(missing_docs)]

pub mod capabilities;

pub use capabilities::{Capabilities, CapabilitiesError, Capability};
