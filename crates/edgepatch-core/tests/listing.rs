//! One listing, however a build is known: a build in memory (`diff::build_listing`) and its
//! signature (`Signature::listing`, what the generator keeps entries by) list the same
//! entries, with kinds, executable bits and sizes, in the same order.

mod fixture_builds;

use edgepatch_core::diff::build_listing;
use edgepatch_core::signature::{Signature, DEFAULT_BLOCK_SIZE};
use edgepatch_core::Build;
use edgepatch_testkit::noise;
use fixture_builds::load_tar;

#[test]
fn a_tree_and_a_single_file_list_the_same_from_the_build_and_from_its_signature() {
    for build in [load_tar("game-v1.tar"), load_tar("game-v2.tar"), Build::single_file(noise(3, 70_000))] {
        let signature = Signature::of_build(&build, DEFAULT_BLOCK_SIZE);
        assert_eq!(signature.is_single_file(), build.is_single_file());
        let listing = build_listing(&build);
        assert!(!listing.is_empty());
        assert_eq!(signature.listing(), listing);
    }
}
