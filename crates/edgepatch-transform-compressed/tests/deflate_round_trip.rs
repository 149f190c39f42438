//! The compressed-asset transform's decode and rebuild: exact bytes back from real encoders'
//! files, memory in chunks for long streams, and hostile side infos and content refused with
//! an error, never a panic.

use std::io::{Read, Write};
use std::path::PathBuf;

use edgepatch_testkit::text::words;
use edgepatch_transform_compressed::deflate::{decode, rebuild_to_vec, WHOLE_CONTENT};
use edgepatch_transform_compressed::side_info::SideInfo;
use edgepatch_transform_compressed::CompressedError;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compressed").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn inflate(file: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if file.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(file).read_to_end(&mut out).unwrap();
    } else {
        flate2::read::ZlibDecoder::new(file).read_to_end(&mut out).unwrap();
    }
    out
}

fn gzip_with_miniz(content: &[u8], level: u32) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(content).unwrap();
    e.finish().unwrap()
}

#[test]
fn real_encoders_files_come_back_byte_for_byte() {
    for name in ["format-gnu-gzip-9.md.gz", "wasm-transform-zlib-6.md.zz", "design-python-gzip-1.md.gz"] {
        let file = fixture(name);
        let decoded = decode(&file, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded.content, inflate(&file), "{name}: the content is the decoded file");
        assert!(decoded.side_info.len() < file.len() / 20, "{name}: side info of {} bytes", decoded.side_info.len());
        assert_eq!(rebuild_to_vec(&decoded.content, &decoded.side_info).unwrap(), file, "{name}");
    }
}

#[test]
fn another_implementations_levels_come_back_byte_for_byte() {
    let content = words(1, 300_000);
    for level in [0, 1, 6, 9] {
        let file = gzip_with_miniz(&content, level);
        let decoded = decode(&file, 0).unwrap_or_else(|e| panic!("level {level}: {e}"));
        assert_eq!(decoded.content, content);
        assert_eq!(rebuild_to_vec(&decoded.content, &decoded.side_info).unwrap(), file, "level {level}");
    }
}

#[test]
fn a_stream_of_more_content_than_the_writer_describes_is_stored_as_it_is() {
    let file = gzip_with_miniz(&vec![7u8; WHOLE_CONTENT + 1], 1);
    let r = decode(&file, 0);
    assert!(matches!(r, Err(CompressedError::NotInput(_))), "{:?}", r.map(|d| d.content.len()));
}

#[test]
fn files_that_are_not_one_stream_are_not_input() {
    let one = gzip_with_miniz(b"first member", 6);
    let mut two = one.clone();
    two.extend_from_slice(&gzip_with_miniz(b"second member", 6));
    assert!(matches!(decode(&two, 0), Err(CompressedError::NotInput(_))), "two gzip members");
    assert!(matches!(decode(b"plain text", 0), Err(CompressedError::NotInput(_))));
    assert!(matches!(decode(&one[..one.len() - 9], 0), Err(CompressedError::NotInput(_))), "truncated stream");
}

/// The side info's own fields (everything but preflate's coded corrections): each bit flipped
/// gives an error, or output the applier's file hash refuses; never a panic.
#[test]
fn hostile_side_info_fields_and_content_are_refused_without_panic() {
    let file = fixture("wasm-transform-zlib-6.md.zz");
    let decoded = decode(&file, 0).unwrap();
    let corrections_len = SideInfo::decode(&decoded.side_info).unwrap().chunks[0].corrections.len();
    let fields = decoded.side_info.len() - corrections_len;
    for at in 0..fields {
        if at == 6 {
            // The old file's decoded length (0 here, one byte): the reference's, not the rebuild's.
            continue;
        }
        for bit in 0..8 {
            let mut side_info = decoded.side_info.clone();
            side_info[at] ^= 1 << bit;
            if let Ok(out) = rebuild_to_vec(&decoded.content, &side_info) {
                assert_ne!(out, file, "byte {at} bit {bit}: a changed field rebuilt the file");
            }
        }
    }
    // Content of another length, and other content of the same length.
    assert!(matches!(rebuild_to_vec(&decoded.content[1..], &decoded.side_info), Err(CompressedError::Rebuild(_))));
    let mut other = decoded.content.clone();
    other.reverse();
    if let Ok(out) = rebuild_to_vec(&other, &decoded.side_info) {
        assert_ne!(out, file);
    }
}

/// preflate's reconstruction record, to write hostile encoder parameters (the layout
/// `check_parameters` reads).
#[derive(bitcode::Encode, bitcode::Decode)]
struct Reconstruction {
    parameters: preflate_rs::TokenPredictorParameters,
    corrections: Vec<u8>,
}

#[test]
fn encoder_parameters_out_of_bounds_are_refused_before_preflate_runs() {
    let file = fixture("format-gnu-gzip-9.md.gz");
    let decoded = decode(&file, 0).unwrap();
    let info = SideInfo::decode(&decoded.side_info).unwrap();
    let record: Reconstruction = bitcode::decode(info.chunks[0].corrections).unwrap();
    type Edit = fn(&mut preflate_rs::TokenPredictorParameters);
    let edits: [(&str, Edit); 4] = [
        ("window bits", |p| p.window_bits = 40),
        ("hash chain", |p| p.max_chain = u32::MAX),
        ("nice length", |p| p.nice_length = 100_000),
        ("distance of 3-byte matches", |p| p.max_dist_3_matches = u32::MAX),
    ];
    for (what, edit) in edits {
        let mut hostile = Reconstruction { parameters: record.parameters, corrections: record.corrections.clone() };
        edit(&mut hostile.parameters);
        let corrections = bitcode::encode(&hostile);
        let mut chunks = info.chunks.clone();
        chunks[0].corrections = &corrections;
        let side_info = SideInfo { chunks, ..info.clone() }.encode();
        match rebuild_to_vec(&decoded.content, &side_info) {
            Err(CompressedError::Rebuild(e)) => assert!(e.contains(what), "{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// Every bit of preflate's corrections (parameters and coded corrections) flipped in turn, on
/// two real encoders' files: an error, other bytes (which the file's hash refuses) or, where
/// the bit does not matter, the same file; never a panic (an applier runs this on patches
/// from anywhere), and each rebuild finishes.
#[test]
fn every_flipped_bit_of_the_corrections_is_refused_without_panic() {
    for name in ["design-python-gzip-1.md.gz", "wasm-transform-zlib-6.md.zz"] {
        let file = fixture(name);
        let decoded = decode(&file, 0).unwrap();
        let info = SideInfo::decode(&decoded.side_info).unwrap();
        let corrections = info.chunks[0].corrections.to_vec();
        for at in 0..corrections.len() {
            for bit in 0..8 {
                let mut hostile = corrections.clone();
                hostile[at] ^= 1 << bit;
                let mut chunks = info.chunks.clone();
                chunks[0].corrections = &hostile;
                let side_info = SideInfo { chunks, ..info.clone() }.encode();
                let outcome = std::panic::catch_unwind(|| rebuild_to_vec(&decoded.content, &side_info));
                assert!(outcome.is_ok(), "{name}: byte {at} bit {bit} of the corrections panicked");
            }
        }
    }
}
