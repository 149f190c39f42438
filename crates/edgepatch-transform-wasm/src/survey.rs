//! What the writer reads off a module before normalizing it: where its data lies in memory,
//! the constants past the data, and each function's shape for matching. The writer's view
//! only: none of it reaches the side info but what the address map learns from it.

use crate::addresses::{data_segments, every_data_segment};
use crate::immediates::{memory_inits, walk_body, Immediate, ImmediateKind, MemoryInit};
use crate::index_sections;
use crate::matching::FunctionShapes;
use crate::module::Module;
use crate::references::pc_slot;

/// The active data segments: the format's data words lie in these (§2.8.3).
pub(crate) fn segments(bytes: &[u8], module: &Module) -> Vec<(u64, usize, usize)> {
    module.data.map_or_else(Vec::new, |d| data_segments(bytes, &module.sections[d]))
}

/// The data where memory holds it once the module has started, as the
/// writer learns the address map from it (address, byte range in the
/// module): the active segments, and each passive segment that one
/// `memory.init` with constant operands places (`__wasm_init_memory`: a
/// module with shared memory, such as Emscripten's and Rust's threaded
/// builds, keeps all its data passive, so without these its constants had
/// no data to point into). The writer's view only: data words are still
/// those of active segments, and nothing here reaches the side info but the
/// pieces it learns.
pub(crate) fn layout(bytes: &[u8], module: &Module) -> Vec<(u64, usize, usize)> {
    let Some(d) = module.data else {
        return Vec::new();
    };
    let every = every_data_segment(bytes, &module.sections[d]);
    let active = || every.iter().filter_map(|&(a, s, e)| a.map(|a| (a, s, e)));
    if every.iter().all(|s| s.0.is_some()) {
        return active().collect();
    }
    let mut inits: Vec<MemoryInit> = module.bodies.iter().filter_map(|b| memory_inits(bytes, b.start, b.end).ok()).flatten().collect();
    inits.sort_unstable();
    inits.dedup();
    // (address, start, end, passive)
    let mut placed: Vec<(u64, usize, usize, bool)> = active().map(|(a, s, e)| (a, s, e, false)).collect();
    for (i, init) in inits.iter().enumerate() {
        // A segment placed at two places is left out: which one would the constants mean?
        let twice = |j: usize| inits.get(j).is_some_and(|o| o.segment == init.segment);
        if twice(i + 1) || i.checked_sub(1).is_some_and(twice) || init.len == 0 {
            continue;
        }
        let Some(&(None, s, e)) = usize::try_from(init.segment).ok().and_then(|k| every.get(k)) else {
            continue;
        };
        let (offset, len) = (init.offset as usize, init.len as usize);
        if offset.checked_add(len).is_some_and(|end| end <= e - s) {
            placed.push((u64::from(init.address), s + offset, s + offset + len, true));
        }
    }
    // A passive segment placed over another segment is left out (an active one is kept as it is).
    placed.sort_unstable_by_key(|p| (p.0, p.3));
    let mut out: Vec<(u64, usize, usize, bool)> = Vec::with_capacity(placed.len());
    let mut end = 0u64;
    for p in placed {
        let p_end = p.0 + (p.2 - p.1) as u64;
        if p.0 < end {
            if p.3 {
                continue;
            }
            if out.last().is_some_and(|l| l.3) {
                out.pop();
            }
        }
        end = end.max(p_end);
        out.push(p);
    }
    out.into_iter().map(|(a, s, e, _)| (a, s, e)).collect()
}

/// The addresses a constant may point to: from the lowest data segment to the
/// end of the data or, past it, of the memory's initial size (zero-initialized
/// variables lie after the data segments and move with them).
fn address_range(module: &Module, data: &[(u64, usize, usize)]) -> std::ops::Range<i64> {
    let lowest = data.iter().map(|s| s.0).min().unwrap_or(0);
    let data_end = data.iter().map(|s| s.0 + (s.2 - s.1) as u64).max().unwrap_or(0);
    let end = if data.is_empty() { 0 } else { data_end.max(module.memory_bytes.unwrap_or(0)).min(i64::MAX as u64) };
    lowest as i64..end as i64
}

/// The values that address pairs show unchanged (most pairs of the value are (v, v)): numbers
/// both builds share (a character code, a mask, a size that falls in the data's range), or
/// variables that did not move; sorted.
pub(crate) fn shared_numbers(mut pairs: Vec<(u64, u64)>) -> Vec<i64> {
    pairs.sort_unstable();
    pairs.chunk_by(|a, b| a.0 == b.0).filter(|c| 2 * c.iter().filter(|p| p.0 == p.1).count() > c.len()).map(|c| c[0].0 as i64).collect()
}

/// The `i32.const`/`i64.const` values in the code that lie past the data and
/// below the memory's initial size (where zero-initialized variables live),
/// sorted, with how often each occurs.
pub(crate) fn tail_constants(bytes: &[u8], module: &Module, data: &[(u64, usize, usize)]) -> Vec<(i64, u64)> {
    let data_end = data.iter().map(|s| s.0 + (s.2 - s.1) as u64).max().unwrap_or(0) as i64;
    let range = data_end..address_range(module, data).end;
    let mut values = Vec::new();
    if range.is_empty() {
        return Vec::new();
    }
    for body in &module.bodies {
        // A body that does not walk is kept raw: its constants are not rewritten.
        let mut found = Vec::new();
        let walked = walk_body(bytes, body.start, body.end, true, &mut |imm: Immediate| {
            if imm.kind != ImmediateKind::Function && range.contains(&imm.value) {
                found.push(imm.value);
            }
        });
        if walked.is_ok() {
            values.extend(found);
        }
    }
    values.sort_unstable();
    let mut counted: Vec<(i64, u64)> = Vec::new();
    for v in values {
        match counted.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => counted.push((v, 1)),
        }
    }
    counted
}

/// The hash of each body with its references blanked, for matching, and the
/// blanked constants themselves (the address pairs of matched bodies).
pub(crate) fn shapes(bytes: &[u8], module: &Module, data: &[(u64, usize, usize)]) -> FunctionShapes {
    let pc = module.pc_table;
    // Constants pointing into the data move when data grows: blank them so
    // that the function still matches.
    let data_range = address_range(module, data);
    let mut constants = Vec::new();
    let mut constant_ends = Vec::with_capacity(module.bodies.len());
    let (mut calls, mut call_ends) = (Vec::new(), Vec::with_capacity(module.bodies.len()));
    let bodies = module
        .bodies
        .iter()
        .map(|body| {
            let mut hasher = xxhash_rust::xxh3::Xxh3::new();
            let mut at = body.start;
            let (first_constant, first_call) = (constants.len(), calls.len());
            let walked = walk_body(bytes, body.start, body.end, true, &mut |imm: Immediate| {
                let blank = match imm.kind {
                    ImmediateKind::Function => true,
                    ImmediateKind::I64Const => pc.is_some_and(|t| pc_slot(imm.value, t).is_some()) || data_range.contains(&imm.value),
                    ImmediateKind::I32Const | ImmediateKind::MemOffset => data_range.contains(&imm.value),
                };
                if blank {
                    hasher.update(&bytes[at..imm.start]);
                    hasher.update(&[0xff]);
                    at = imm.end;
                    if imm.kind != ImmediateKind::Function {
                        constants.push(imm.value);
                    } else {
                        calls.push(u32::try_from(imm.value).unwrap_or(u32::MAX));
                    }
                }
            });
            let hash = if walked.is_err() {
                constants.truncate(first_constant);
                calls.truncate(first_call);
                let mut raw = xxhash_rust::xxh3::Xxh3::new();
                raw.update(&bytes[body.start..body.end]);
                raw.digest()
            } else {
                hasher.update(&bytes[at..body.end]);
                hasher.digest()
            };
            constant_ends.push(u32::try_from(constants.len()).unwrap_or(u32::MAX));
            call_ends.push(u32::try_from(calls.len()).unwrap_or(u32::MAX));
            hash
        })
        .collect();
    if constants.len() > u32::MAX as usize {
        // No address pairs rather than wrong ones.
        constants.clear();
        constant_ends.clear();
    }
    if calls.len() > u32::MAX as usize {
        calls.clear();
        call_ends.clear();
    }
    let names = index_sections::function_names(bytes, &module.sections, MAX_NAMES);
    FunctionShapes { imports: module.imported_functions.clone(), bodies, constants, constant_ends, calls, call_ends, names }
}

/// At most this many function names are read for matching (4 MiB of them; duckdb-wasm, the
/// most measured, has 75,111), so that a hostile module of tiny exports cannot make the writer
/// hold more.
const MAX_NAMES: usize = 1 << 18;
