//! Hostile modules, normalized bytes and side info: refused or round-tripped
//! exactly, never a panic.

use super::*;

fn mutate(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut m = data.to_vec();
    match rng.below(4) {
        0 => m.truncate(rng.below(m.len().max(1))),
        1 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(m.len().max(1));
                if let Some(b) = m.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            let i = rng.below(m.len().max(1));
            if let Some(b) = m.get_mut(i) {
                *b = [0x00, 0x7f, 0x80, 0xff][rng.below(4)];
            }
        }
        _ => {
            let i = rng.below(m.len().max(1));
            let at = i.min(m.len());
            m.splice(at..at, [0xff, 0xff, 0xff, 0xff, 0x0f]);
        }
    }
    m
}

/// Hostile modules: forward either refuses or round-trips exactly; hostile
/// normalized bytes and side info give an error or some output, never a panic.
#[test]
fn hostile_input_never_panics_and_accepted_input_round_trips() {
    let game = game_wasm("game-v1.tar");
    let mut rng = Rng::xorshift64_star(0x9e37_79b9_7f4a_7c15);
    // A module with many instruction kinds: calls, Go PCs, blocks, br_table,
    // memory access, locals, f64 constants.
    let bodies: Vec<Vec<u8>> = (0..24u64)
        .map(|i| {
            let mut b = vec![0x02, 0x40, 0x41, 0x01, 0x0e, 0x02, 0x00, 0x00, 0x00, 0x0b];
            b.extend(call(rng.next_u64() % 26));
            b.extend(i64_const((i64::from(0x1000 + (rng.next_u64() % 24) as u32) << 16) | (i as i64)));
            b.extend([0x41, 0x08, 0x29, 0x03, 0x10, 0x1a, 0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x1a]);
            b
        })
        .collect();
    let mut medium = module(&["a", "b"], &bodies, Some(0x1000));
    // Data with pointers into itself and PCs, so data words are rewritten too.
    let words: Vec<u8> = (0..64u64).flat_map(|i| (if i % 2 == 0 { 4096 + i * 8 } else { (0x1003 << 16) | i }).to_le_bytes()).collect();
    medium.extend(data_section(&[(4096, [noise(7, 600), words].concat()), (8192, noise(8, 300))]));
    let r = reference(&medium).unwrap();
    // A debug build whose line addresses moved (side info version 6).
    let (debug_old, debug_new) = wasm_modules::versions_with_debug_line(60, 3);
    let debug_reference = reference(&debug_old).unwrap();
    let (mut accepted, mut line_addresses) = (0, 0);
    for round in 0..900 {
        let (base, reference): (&[u8], _) = match round % 5 {
            0 => (&game, (round % 2 == 0).then_some(&r)),
            1 => (&debug_new, Some(&debug_reference)),
            _ => (&medium, (round % 2 == 0).then_some(&r)),
        };
        let hostile = mutate(&mut rng, base);
        if let Ok(n) = forward(reference, &hostile) {
            accepted += 1;
            line_addresses += usize::from(n.side_info[4] == 6);
            assert_eq!(inverse(&n.bytes, &n.side_info).expect("inverse of an accepted module"), hostile, "round {round}");
            let bad_bytes = mutate(&mut rng, &n.bytes);
            let _ = inverse(&bad_bytes, &n.side_info);
            let bad_side = mutate(&mut rng, &n.side_info);
            let _ = inverse(&n.bytes, &bad_side);
            if let Ok(split) = with_code_layout_as(&n, round % 3 == 0) {
                assert_eq!(inverse(&split.bytes, &split.side_info).expect("inverse of the split layout"), hostile, "round {round}, split");
                let _ = inverse(&mutate(&mut rng, &split.bytes), &split.side_info);
                let _ = inverse(&split.bytes, &mutate(&mut rng, &split.side_info));
                // In place: the same bytes, or an error that leaves a (hostile) module as it was.
                let mut in_place = n.bytes.clone();
                split_code_layout_in_place(&mut in_place, &split.side_info).expect("split in place");
                assert_eq!(in_place, split.bytes, "round {round}, split in place");
                let odd = mutate(&mut rng, &n.bytes);
                let mut odd_in_place = odd.clone();
                match split_read(&odd, &split.side_info) {
                    Ok(odd_split) => {
                        split_code_layout_in_place(&mut odd_in_place, &split.side_info).expect("splits as split does");
                        assert_eq!(odd_in_place, odd_split, "round {round}, mutated split in place");
                    }
                    Err(_) => {
                        assert!(split_code_layout_in_place(&mut odd_in_place, &split.side_info).is_err());
                        assert_eq!(odd_in_place, odd, "round {round}, a failed split in place changed the module");
                    }
                }
            }
        }
    }
    assert!(accepted > 100, "mutations kept some modules parseable ({accepted})");
    assert!(line_addresses > 20, "mutated debug builds kept their line addresses rewritten ({line_addresses})");
}
