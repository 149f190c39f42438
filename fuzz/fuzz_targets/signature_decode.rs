//! Input: a signature file. `Signature::decode` must never panic (Err is
//! fine); a decoded signature must re-encode to bytes that decode to the same
//! signature. Run on the input as is and with its BLAKE3 trailer repaired.
#![no_main]

use edgepatch_core::signature::Signature;
use edgepatch_fuzz::with_fixed_trailer;
use libfuzzer_sys::fuzz_target;

fn check(data: &[u8]) {
    if let Ok(sig) = Signature::decode(data) {
        let again = Signature::decode(&sig.encode()).expect("re-encoded signature does not decode");
        assert_eq!(sig, again, "signature changed through encode/decode");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(fixed) = with_fixed_trailer(data) {
        check(&fixed);
    }
});
