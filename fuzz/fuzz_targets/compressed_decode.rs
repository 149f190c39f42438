//! Input: a selector byte, then bytes. The compressed-asset crate's readers of untrusted bytes
//! must never panic and never allocate past their bounds (Err is fine):
//! - `SideInfo::decode`, the side info's own fields (a side info reaches preflate only once a
//!   signed manifest vouched for it, so preflate's reconstruction is not fuzzed here);
//! - `decoded::decode_for_storage` of a `.gz` and a `.br` file, with a 1 MiB bound: when it
//!   decodes, the content is at most the bound.
#![no_main]

use edgepatch_transform_compressed::decoded::decode_for_storage;
use edgepatch_transform_compressed::side_info::SideInfo;
use libfuzzer_sys::fuzz_target;

const MAX_DECODED: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else { return };
    match which % 3 {
        0 => {
            let _ = SideInfo::decode(bytes);
        }
        1 => {
            if let Ok(content) = decode_for_storage("x.gz", bytes, MAX_DECODED) {
                assert!(content.len() as u64 <= MAX_DECODED);
            }
        }
        _ => {
            if let Ok(content) = decode_for_storage("x.br", bytes, MAX_DECODED) {
                assert!(content.len() as u64 <= MAX_DECODED);
            }
        }
    }
});
