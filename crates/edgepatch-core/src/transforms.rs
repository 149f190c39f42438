//! The transforms this build knows, in one place (docs/FORMAT.md §2.8): each behind the
//! interface every transform implements ([`Transform`], edgepatch-format), found by the file
//! pair it reads (the writer) or by the side info that names it (the applier, and what a
//! reader must understand). A new transform is a crate implementing [`Transform`], listed in
//! [`TRANSFORMS`].

use edgepatch_format::transform::Transform;
use edgepatch_format::Capabilities;

/// Every transform, in the order the writer tries them.
#[cfg(feature = "deflate-transform")]
static TRANSFORMS: [&dyn Transform; 2] = [&edgepatch_transform_wasm::Wasm, &edgepatch_transform_compressed::Deflate];
#[cfg(not(feature = "deflate-transform"))]
static TRANSFORMS: [&dyn Transform; 1] = [&edgepatch_transform_wasm::Wasm];

/// What this build's applier reads (docs/FORMAT.md §5): every capability, but
/// `deflate-transform` in a build without that feature (the browsers' apply-only module) and
/// `brotli-transform` in one without the Brotli encoder (every wasm build).
/// The set a client names when it asks for an update.
pub fn reader_capabilities() -> Capabilities {
    use edgepatch_format::Capability;
    let mut set = Capabilities::current();
    if !cfg!(feature = "deflate-transform") {
        set = set.without(Capability::DeflateTransform);
    }
    if !cfg!(feature = "brotli-transform") {
        set = set.without(Capability::BrotliTransform);
    }
    set
}

/// Every transform this build knows.
pub fn transforms() -> &'static [&'static dyn Transform] {
    &TRANSFORMS
}

/// The first transform that reads the pair `old`, `new`, if any.
pub fn detect(old: &[u8], new: &[u8]) -> Option<&'static dyn Transform> {
    detect_in(&TRANSFORMS, old, new)
}

/// The transform of a file whose side info is `side_info`: the one its first four bytes name.
/// The patch's transform table is the wasm transform's (header flag bit 1, §2.8.1): a side
/// info naming none is that transform's to refuse, with its own error.
pub fn transform_for(side_info: &[u8]) -> &'static dyn Transform {
    named_in(&TRANSFORMS, side_info).unwrap_or(TRANSFORMS[0])
}

/// What a reader must understand to apply a file with this side info (docs/FORMAT.md §5).
pub fn required_by_side_info(side_info: &[u8]) -> Capabilities {
    transform_for(side_info).required_capabilities(side_info)
}

fn detect_in<'a>(registry: &[&'a dyn Transform], old: &[u8], new: &[u8]) -> Option<&'a dyn Transform> {
    registry.iter().copied().find(|t| t.detect(old, new))
}

fn named_in<'a>(registry: &[&'a dyn Transform], side_info: &[u8]) -> Option<&'a dyn Transform> {
    registry.iter().copied().find(|t| side_info.starts_with(&t.id()))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use edgepatch_format::transform::{Emit, Normalized, NormalizedBytes, TransformStop};
    use edgepatch_format::Capability;

    use super::*;

    /// A transform for tests: files starting with `XOR!`, stored with every byte after the
    /// first four flipped; its side info is its id.
    struct Flip;

    impl Transform for Flip {
        fn id(&self) -> [u8; 4] {
            *b"TFLP"
        }
        fn detect(&self, old: &[u8], new: &[u8]) -> bool {
            old.starts_with(b"XOR!") && new.starts_with(b"XOR!")
        }
        fn forward(&self, _old: Cow<'_, [u8]>, new: &[u8]) -> Result<Normalized, TransformStop> {
            Ok(Normalized { bytes: flip(new), side_info: self.id().to_vec() })
        }
        fn required_capabilities(&self, _side_info: &[u8]) -> Capabilities {
            Capabilities::BASELINE.with(Capability::LzmaSegments)
        }
        fn inverse(&self, normalized: NormalizedBytes<'_>, _side_info: &[u8], emit: &mut Emit<'_>) -> Result<(), TransformStop> {
            match normalized {
                NormalizedBytes::InPlace(b) => emit(&flip(b)),
                NormalizedBytes::Shared(b) => emit(&flip(b)),
                NormalizedBytes::Read { len, read } => {
                    let mut b = vec![0; len as usize];
                    read(0, &mut b)?;
                    emit(&flip(&b))
                }
            }
        }
    }

    fn flip(b: &[u8]) -> Vec<u8> {
        b.iter().enumerate().map(|(i, &x)| if i < 4 { x } else { !x }).collect()
    }

    #[test]
    fn the_wasm_transform_is_found_by_its_side_info_and_refuses_other_files() {
        let wasm = transform_for(b"EPWT\x06\x00\x01");
        assert_eq!(&wasm.id(), b"EPWT");
        assert!(wasm.detect(b"\0asm\x01\0\0\0", b"\0asm\x01\0\0\0"));
        assert!(detect(b"\0asm\x01\0\0\0", b"PK\x03\x04").is_none(), "a zip is no module");
        assert!(matches!(wasm.forward(Cow::Borrowed(b"\0asm\x01\0\0\0"), b"not wasm"), Err(TransformStop::NotInput(_))));
        assert_eq!(required_by_side_info(b"EPWT\x06\x00\x01"), Capabilities::required_by_side_info(b"EPWT\x06\x00\x01"));
        assert!(required_by_side_info(b"EPWT\x06\x00\x01").contains(Capability::WasmSplitLayout));
        // Each transform is named by an id of its own.
        let mut ids: Vec<[u8; 4]> = transforms().iter().map(|t| t.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), transforms().len());
    }

    #[test]
    fn a_registry_dispatches_by_pair_and_by_side_info() {
        let registry: [&dyn Transform; 2] = [&edgepatch_transform_wasm::Wasm, &Flip];
        let (old, new) = (b"XOR!old", b"XOR!new file");
        let t = detect_in(&registry, old, new).expect("Flip reads the pair");
        let n = t.forward(Cow::Borrowed(old), new).unwrap();
        assert_ne!(n.bytes, new);
        let back = named_in(&registry, &n.side_info).expect("the side info names Flip");
        assert!(back.required_capabilities(&n.side_info).contains(Capability::LzmaSegments));
        let mut out = Vec::new();
        let mut normalized = n.bytes.clone();
        back.inverse(NormalizedBytes::InPlace(&mut normalized), &n.side_info, &mut |p: &[u8]| {
            out.extend_from_slice(p);
            Ok(())
        })
        .unwrap();
        assert_eq!(out, new);
        // The old file as it is, where the transform has no layout of its own.
        let mut split = Vec::new();
        back.split_old_read(
            old.len() as u64,
            &mut |at, buf| {
                buf.copy_from_slice(&old[at as usize..][..buf.len()]);
                Ok(())
            },
            &n.side_info,
            &mut |at, b| {
                assert_eq!(at as usize, split.len());
                split.extend_from_slice(b);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(split, old);
        assert!(named_in(&registry, b"NONE").is_none());
    }
}
