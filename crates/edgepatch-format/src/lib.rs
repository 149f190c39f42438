//! The edgepatch formats (being moved here from edgepatch-core).
