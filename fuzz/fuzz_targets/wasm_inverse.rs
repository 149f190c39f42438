//! Input: a normalized wasm module and a side info, given to the inverse of the wasm
//! transform as an applier gives them (docs/FORMAT.md §2.8): `inverse_to` (in memory, the
//! data section restored in place), `inverse_read` (read through a callback from an
//! applier's scratch space) and `inverse_emit` (borrowed). Checks: no panic (hostile input
//! is an `Err`), every read `inverse_read` asks for lies within the module it was given, and
//! no single allocation over libFuzzer's `-malloc_limit_mb`. The output is capped as an
//! applier caps it (the tree's size): past the cap `emit` returns an error.
//!
//! First byte 0 (raw): `side info length (u32 LE) | side info | normalized`.
//! Any other first byte (structured): a real module's forward transform (`normalized_forms`,
//! picked by that byte) with the rest of the input decoded by `arbitrary` into edits of its
//! side info and normalized bytes, so mutations reach the inverse on modules of any size.
#![no_main]

use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use edgepatch_core::wasm_transform::{inverse_emit, inverse_read, inverse_to, Normalized, TransformError};
use edgepatch_fuzz::wasm::{normalized_forms, split_raw, MODE_RAW};
use libfuzzer_sys::fuzz_target;

/// Output cap: what an applier allows a transformed file (MAX_WASM_TRANSFORM_BYTES), and
/// never more than the inverse's documented few bytes per immediate over its input.
const OUTPUT_LIMIT: u64 = 64 << 20;

fn forms() -> &'static [(String, Normalized)] {
    static FORMS: OnceLock<Vec<(String, Normalized)>> = OnceLock::new();
    FORMS.get_or_init(normalized_forms)
}

#[derive(Arbitrary, Debug)]
enum Edit {
    Side(Op),
    Normalized(Op),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Xor {
        at: u32,
        value: u8,
    },
    Set {
        at: u32,
        bytes: Vec<u8>,
    },
    Insert {
        at: u32,
        bytes: Vec<u8>,
    },
    Delete {
        at: u32,
        len: u16,
    },
    Truncate {
        at: u32,
    },
    /// Replaces the LEB128 at `at` (a count, size or index) with `value`'s.
    Leb {
        at: u32,
        value: u64,
    },
}

impl Op {
    fn apply(&self, b: &mut Vec<u8>) {
        let pos = |at: u32, len: usize| if len == 0 { 0 } else { at as usize % (len + 1) };
        match self {
            Op::Xor { at, value } if !b.is_empty() => {
                let i = *at as usize % b.len();
                b[i] ^= value;
            }
            Op::Xor { .. } => {}
            Op::Set { at, bytes } => {
                let i = pos(*at, b.len());
                let end = (i + bytes.len()).min(b.len());
                b.splice(i..end, bytes.iter().copied());
            }
            Op::Insert { at, bytes } => {
                let i = pos(*at, b.len());
                b.splice(i..i, bytes.iter().copied());
            }
            Op::Delete { at, len } => {
                let i = pos(*at, b.len());
                let end = (i + *len as usize).min(b.len());
                b.drain(i..end);
            }
            Op::Truncate { at } => b.truncate(pos(*at, b.len())),
            Op::Leb { at, value } => {
                let i = pos(*at, b.len());
                let mut end = i;
                while end < b.len() && end - i < 10 {
                    end += 1;
                    if b[end - 1] & 0x80 == 0 {
                        break;
                    }
                }
                b.splice(i..end, edgepatch_testkit::leb128::u64(*value));
            }
        }
    }
}

/// Why `emit` or `read` stopped the inverse.
#[derive(Debug)]
enum Stop {
    Transform,
    TooLong,
}

impl From<TransformError> for Stop {
    fn from(_: TransformError) -> Self {
        Stop::Transform
    }
}

fn check(side: &[u8], normalized: &[u8]) {
    // Only errors are allowed: the outcome of each call is dropped.
    let mut written = 0u64;
    let mut emit = |piece: &[u8]| {
        written += piece.len() as u64;
        if written > OUTPUT_LIMIT {
            return Err(Stop::TooLong);
        }
        Ok(())
    };
    let _ = inverse_emit(normalized, side, &mut emit);

    let mut written = 0u64;
    let mut emit = |piece: &[u8]| {
        written += piece.len() as u64;
        if written > OUTPUT_LIMIT {
            return Err(Stop::TooLong);
        }
        Ok(())
    };
    let _ = inverse_to(&mut normalized.to_vec(), side, &mut emit);

    let mut written = 0u64;
    let mut emit = |piece: &[u8]| {
        written += piece.len() as u64;
        if written > OUTPUT_LIMIT {
            return Err(Stop::TooLong);
        }
        Ok(())
    };
    let _ = inverse_read(
        normalized.len() as u64,
        &mut |at, buf: &mut [u8]| {
            let range = usize::try_from(at).ok().and_then(|a| Some(a..a.checked_add(buf.len())?));
            match range.and_then(|r| normalized.get(r)) {
                Some(bytes) => buf.copy_from_slice(bytes),
                None => panic!("inverse_read asked for {} bytes at {at} of a {}-byte module", buf.len(), normalized.len()),
            }
            Ok::<(), Stop>(())
        },
        side,
        &mut emit,
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode == MODE_RAW {
        let (side, normalized) = split_raw(rest);
        check(side, normalized);
        return;
    }
    let forms = forms();
    let (_, base) = &forms[(mode as usize - 1) % forms.len()];
    let (mut side, mut normalized) = (base.side_info.clone(), base.bytes.clone());
    let mut u = Unstructured::new(rest);
    for _ in 0..16 {
        match Edit::arbitrary(&mut u) {
            Ok(Edit::Side(op)) => op.apply(&mut side),
            Ok(Edit::Normalized(op)) => op.apply(&mut normalized),
            Err(_) => break,
        }
        if u.is_empty() {
            break;
        }
    }
    check(&side, &normalized);
});
