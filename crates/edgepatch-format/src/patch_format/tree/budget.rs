//! The limits on a tree section's size and on the names it holds (docs/FORMAT.md §2.7),
//! counted the same way by the decoder and the encoder.

use crate::patch_format::{MAX_ENTRIES, MAX_NAMED_ENTRIES, MAX_TREE_BYTES, MAX_TREE_NAME_BYTES, TREE_NAME_EXPANSION, TREE_NAME_FLOOR};
/// The most path and target bytes a decoded tree section of `decoded` bytes may name (§2.7).
pub fn max_tree_name_bytes(decoded: u64) -> u64 {
    MAX_TREE_NAME_BYTES.min(TREE_NAME_FLOOR.saturating_add(TREE_NAME_EXPANSION.saturating_mul(decoded)))
}

/// The §2.7 rules on a tree section's size and what it names, in one place for both
/// sides: the decoder counts each name as it reads it and refuses the patch; the encoder
/// counts what it wrote and refuses to write a patch no applier would take (a build whose
/// directories nest so deep that the full path of every level breaks the name budget, say).
/// Depth has no rule of its own: each level's directory is an entry naming its whole path,
/// so depth is bounded by the path length and by this budget.
pub struct TreeBudget {
    decoded: u64,
    names_limit: u64,
    names: u64,
}

impl TreeBudget {
    /// The budget of a decoded tree section of `decoded` bytes.
    pub fn new(decoded: u64) -> TreeBudget {
        TreeBudget { decoded, names_limit: max_tree_name_bytes(decoded), names: 0 }
    }

    /// Counts one more path or link target of `len` bytes.
    pub fn count_name(&mut self, len: usize) -> std::result::Result<(), String> {
        self.names = self.names.saturating_add(len as u64);
        if self.names > self.names_limit {
            return Err(format!(
                "the tree's paths and link targets add up to more than {} bytes (the limit for a {}-byte tree section)",
                self.names_limit, self.decoded
            ));
        }
        Ok(())
    }

    /// The decoded section's size: 1..=[`MAX_TREE_BYTES`].
    pub fn check_section(decoded: u64) -> std::result::Result<(), String> {
        if decoded > MAX_TREE_BYTES {
            return Err(format!("tree section of {decoded} bytes, above the limit {MAX_TREE_BYTES}"));
        }
        Ok(())
    }

    /// Entries the tree names: at most [`MAX_NAMED_ENTRIES`].
    pub fn check_named(named: u64) -> std::result::Result<(), String> {
        if named > MAX_NAMED_ENTRIES {
            return Err(format!("the tree names {named} entries, above the limit {MAX_NAMED_ENTRIES}"));
        }
        Ok(())
    }

    /// Entries of the new tree, kept and named: at most [`MAX_ENTRIES`].
    pub fn check_entries(entries: u64) -> std::result::Result<(), String> {
        if entries > MAX_ENTRIES {
            return Err(format!("the new tree has {entries} entries, above the limit {MAX_ENTRIES}"));
        }
        Ok(())
    }
}
