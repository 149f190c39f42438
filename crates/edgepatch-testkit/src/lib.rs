//! Test helpers shared by the edgepatch crates (being gathered here).
