//! The sections besides code and elements that name functions by index (side
//! info version 5, docs/FORMAT.md §2.8.3): the export section, the start
//! section, and the "name" custom section's function, local and label names.
//!
//! One added function renumbers every later one, so without this every
//! exported function after it and every entry of the name section changed
//! between builds (duckdb-wasm exports 75,111 functions: its export section is
//! 7.4 MB). A section is rewritten as it is handed on: a first walk sizes what
//! a second emits, so neither side holds a copy of it.

use super::leb::{read_unsigned, unsigned_width, write_unsigned};
use super::module::Section;
use super::TransformError;

/// The export section's function exports (a bit of side info version 5's `sections` byte).
pub(crate) const EXPORTS: u8 = 1 << 1;
/// The start section's function.
pub(crate) const START: u8 = 1 << 2;
/// The keys of the "name" custom section's function, local and label names.
pub(crate) const NAMES: u8 = 1 << 3;
/// Every kind, in the order the writer tries them.
pub(crate) const KINDS: [u8; 3] = [EXPORTS, START, NAMES];

const CUSTOM_SECTION: u8 = 0;
const EXPORT_SECTION: u8 = 7;
const START_SECTION: u8 = 8;
const FUNCTION_EXPORT: u8 = 0;

/// What a stretch of bytes holds, for the walk that finds its function indices.
#[derive(Clone, Copy)]
enum Stretch {
    Exports,
    Start,
    /// Name subsection 1: a name map keyed by function index.
    FunctionNames,
    /// Name subsections 2 and 3: an indirect name map, keyed by function index.
    ByFunction,
}

/// Which kind `section` of `bytes` is (its bit), or 0.
pub(crate) fn kind_of(bytes: &[u8], section: &Section) -> u8 {
    match bytes[section.start] {
        EXPORT_SECTION => EXPORTS,
        START_SECTION => START,
        CUSTOM_SECTION if custom_name(bytes, section).is_some_and(|(name, _)| name == b"name") => NAMES,
        _ => 0,
    }
}

/// A custom section's name, and where its contents after the name start.
pub(crate) fn custom_name<'a>(bytes: &'a [u8], section: &Section) -> Option<(&'a [u8], usize)> {
    let mut at = section.contents;
    let len = read_unsigned(&bytes[..section.end], &mut at, 32).ok()? as usize;
    let end = at.checked_add(len).filter(|&e| e <= section.end)?;
    Some((&bytes[at..end], end))
}

fn malformed(offset: usize, what: &'static str) -> TransformError {
    TransformError::Normalized { offset, what }
}

/// Reads a `u32` LEB128 of `bytes[..end]` at `*at`.
fn u32_at(bytes: &[u8], at: &mut usize, end: usize) -> Result<u64, TransformError> {
    let from = *at;
    read_unsigned(&bytes[..end], at, 32).map_err(|_| malformed(from, "bad LEB128 in a section naming functions"))
}

/// Skips a name (`u32 len`, bytes) of `bytes[..end]` at `*at`.
fn skip_name(bytes: &[u8], at: &mut usize, end: usize) -> Result<(), TransformError> {
    let len = u32_at(bytes, at, end)? as usize;
    *at = at.checked_add(len).filter(|&e| e <= end).ok_or_else(|| malformed(*at, "name past its section"))?;
    Ok(())
}

/// Calls `index(start, end, value)` for each function index in `bytes[from..to]`, in order;
/// an error unless the stretch is exactly what `stretch` says.
fn indices<E: From<TransformError>>(
    bytes: &[u8],
    from: usize,
    to: usize,
    stretch: Stretch,
    index: &mut dyn FnMut(usize, usize, u64) -> Result<(), E>,
) -> Result<(), E> {
    let mut at = from;
    let mut function_index = |at: &mut usize| -> Result<(), E> {
        let start = *at;
        let value = u32_at(bytes, at, to)?;
        index(start, *at, value)
    };
    match stretch {
        Stretch::Start => function_index(&mut at)?,
        Stretch::Exports => {
            for _ in 0..u32_at(bytes, &mut at, to)? {
                skip_name(bytes, &mut at, to)?;
                let kind = *bytes.get(at).filter(|_| at < to).ok_or_else(|| malformed(at, "export past its section"))?;
                at += 1;
                if kind == FUNCTION_EXPORT {
                    function_index(&mut at)?;
                } else {
                    u32_at(bytes, &mut at, to)?;
                }
            }
        }
        Stretch::FunctionNames | Stretch::ByFunction => {
            for _ in 0..u32_at(bytes, &mut at, to)? {
                function_index(&mut at)?;
                if let Stretch::FunctionNames = stretch {
                    skip_name(bytes, &mut at, to)?;
                } else {
                    for _ in 0..u32_at(bytes, &mut at, to)? {
                        u32_at(bytes, &mut at, to)?;
                        skip_name(bytes, &mut at, to)?;
                    }
                }
            }
        }
    }
    if at != to {
        return Err(malformed(at, "bytes after a section's function indices").into());
    }
    Ok(())
}

/// The stretch a name subsection of id `id` is, if it is keyed by function index.
fn name_subsection(id: u8) -> Option<Stretch> {
    match id {
        1 => Some(Stretch::FunctionNames),
        2 | 3 => Some(Stretch::ByFunction),
        _ => None,
    }
}

/// A stretch whose function indices are rewritten: for a name subsection, its id and the
/// width of its size field (written anew before it).
type Keyed = Option<(u8, usize, Stretch)>;

/// Calls `part(from, to, keyed)` for each part of a section's contents in order: the
/// stretches whose indices are rewritten (`keyed` is Some), and the bytes between them, copied
/// (None: a name section's name, and its other subsections whole, headers included).
fn parts<E: From<TransformError>>(bytes: &[u8], section: &Section, kind: u8, part: &mut dyn FnMut(usize, usize, Keyed) -> Result<(), E>) -> Result<(), E> {
    let (from, to) = (section.contents, section.end);
    match kind {
        EXPORTS => part(from, to, Some((0, 0, Stretch::Exports))),
        START => part(from, to, Some((0, 0, Stretch::Start))),
        NAMES => {
            let (_, mut at) = custom_name(bytes, section).ok_or_else(|| malformed(from, "a name section without its name"))?;
            part(from, at, None)?;
            while at < to {
                let id = bytes[at];
                let mut contents = at + 1;
                let len = u32_at(bytes, &mut contents, to)? as usize;
                let end = contents.checked_add(len).filter(|&e| e <= to).ok_or_else(|| malformed(at, "name subsection past its section"))?;
                match name_subsection(id) {
                    Some(stretch) => part(contents, end, Some((id, contents - at - 1, stretch)))?,
                    None => part(at, end, None)?,
                }
                at = end;
            }
            Ok(())
        }
        _ => Err(malformed(section.start, "not a section naming functions").into()),
    }
}

/// The length of `bytes[from..to]` (a stretch) with each function index written as
/// `map` gives it.
fn stretch_len(bytes: &[u8], from: usize, to: usize, stretch: Stretch, map: &dyn Fn(u64) -> u64) -> Result<usize, TransformError> {
    let mut len = to - from;
    indices(bytes, from, to, stretch, &mut |start, end, value| {
        len = len - (end - start) + unsigned_width(map(value));
        Ok::<(), TransformError>(())
    })?;
    Ok(len)
}

/// `bytes[from..to]` (a stretch) handed to `emit` with each function index written as `map`
/// gives it.
fn emit_stretch<E: From<TransformError>>(
    bytes: &[u8],
    from: usize,
    to: usize,
    stretch: Stretch,
    map: &dyn Fn(u64) -> u64,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut at = from;
    let mut leb = Vec::with_capacity(5);
    indices::<E>(bytes, from, to, stretch, &mut |start, end, value| {
        emit(&bytes[at..start])?;
        leb.clear();
        write_unsigned(&mut leb, map(value));
        emit(&leb)?;
        at = end;
        Ok(())
    })?;
    emit(&bytes[at..to])
}

/// The section's contents rewritten, handed to `emit`: every stretch keyed by function index
/// written as `map` gives each, and each name subsection's size field written anew.
fn emit_contents<E: From<TransformError>>(
    bytes: &[u8],
    section: &Section,
    kind: u8,
    map: &dyn Fn(u64) -> u64,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut header = Vec::with_capacity(6);
    parts(bytes, section, kind, &mut |from, to, stretch| match stretch {
        None => emit(&bytes[from..to]),
        Some((id, _, stretch)) => {
            if kind == NAMES {
                header.clear();
                header.push(id);
                write_unsigned(&mut header, stretch_len(bytes, from, to, stretch, map)? as u64);
                emit(&header)?;
            }
            emit_stretch(bytes, from, to, stretch, map, emit)
        }
    })
}

/// The length of [`rewrite`]'s contents, the section's new size field; an error if the section
/// is not in the form its kind has (the applier's check before it emits anything).
pub(crate) fn contents_len(bytes: &[u8], section: &Section, kind: u8, map: &dyn Fn(u64) -> u64) -> Result<usize, TransformError> {
    let mut len = 0usize;
    emit_contents(bytes, section, kind, map, &mut |piece: &[u8]| {
        len += piece.len();
        Ok::<(), TransformError>(())
    })?;
    Ok(len)
}

/// `section` of `bytes`, a section of `kind`, handed to `emit` whole (id, size field, contents)
/// with every function index it holds written as `map` gives it, in canonical LEB128, and its
/// size fields (the section's, the name subsections') written canonically. An error, before
/// anything is emitted, if the section is not in the form its kind has.
pub(crate) fn rewrite<E: From<TransformError>>(
    bytes: &[u8],
    section: &Section,
    kind: u8,
    map: &dyn Fn(u64) -> u64,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let len = contents_len(bytes, section, kind, map)?;
    let mut header = vec![bytes[section.start]];
    write_unsigned(&mut header, len as u64);
    emit(&header)?;
    emit_contents(bytes, section, kind, map, emit)
}

/// The writer's check that rewriting `section` with `forward` and then with `inverse` gives
/// its bytes back: every function index and rewritten size field in it is canonical LEB128,
/// and `inverse` undoes `forward` on each index. `Some(changed)` if so (whether `forward`
/// changes some index), None if not (or if the section is not in its kind's form).
pub(crate) fn round_trips(bytes: &[u8], section: &Section, kind: u8, forward: &dyn Fn(u64) -> u64, inverse: &dyn Fn(u64) -> u64) -> Option<bool> {
    let canonical = |size_field: usize, contents: usize, end: usize| contents - size_field == unsigned_width((end - contents) as u64);
    if !canonical(section.start + 1, section.contents, section.end) {
        return None;
    }
    let (mut changed, mut exact) = (false, true);
    parts(bytes, section, kind, &mut |from, to, stretch| {
        let Some((_, size_width, stretch)) = stretch else { return Ok(()) };
        if kind == NAMES {
            exact &= canonical(from - size_width, from, to);
        }
        indices(bytes, from, to, stretch, &mut |start, end, value| {
            let normalized = forward(value);
            changed |= normalized != value;
            exact &= end - start == unsigned_width(value) && inverse(normalized) == value;
            Ok::<(), TransformError>(())
        })
    })
    .ok()?;
    exact.then_some(changed)
}

/// The functions the module names: (hash of the name, function index) for each function export
/// and each entry of the name section's function names, the two kinds hashed apart, sorted.
/// A section not in its form gives nothing. For the matcher: a function whose body changed
/// keeps its name. At most `max` of them are read (a hostile module of tiny exports could
/// name millions).
pub(crate) fn function_names(bytes: &[u8], sections: &[Section], max: usize) -> Vec<(u64, u64)> {
    let mut names = Vec::new();
    for section in sections {
        let kind = kind_of(bytes, section);
        let mut found = Vec::new();
        let walked = match kind {
            EXPORTS => named_entries(bytes, section.contents, section.end, true, max - names.len(), &mut found),
            NAMES => parts(bytes, section, kind, &mut |from, to, keyed| match keyed {
                Some((1, _, _)) => named_entries(bytes, from, to, false, max - names.len(), &mut found),
                _ => Ok(()),
            }),
            _ => continue,
        };
        if walked.is_ok() {
            names.extend(found.into_iter().map(|(name, index)| (xxhash_rust::xxh3::xxh3_64_with_seed(name, u64::from(kind)), index)));
        }
    }
    names.sort_unstable();
    names
}

/// The (name, function index) entries of `bytes[from..to]`: an export section's function
/// exports (`exports`), or a name map (index, then name); no more than `room` of them in
/// `found`.
fn named_entries<'a>(bytes: &'a [u8], from: usize, to: usize, exports: bool, room: usize, found: &mut Vec<(&'a [u8], u64)>) -> Result<(), TransformError> {
    let mut at = from;
    let name = |at: &mut usize| -> Result<&'a [u8], TransformError> {
        let start = *at;
        skip_name(bytes, at, to)?;
        let mut text = start;
        u32_at(bytes, &mut text, to)?;
        Ok(&bytes[text..*at])
    };
    for _ in 0..u32_at(bytes, &mut at, to)? {
        if exports {
            let text = name(&mut at)?;
            let kind = *bytes.get(at).filter(|_| at < to).ok_or_else(|| malformed(at, "export past its section"))?;
            at += 1;
            let index = u32_at(bytes, &mut at, to)?;
            if kind == FUNCTION_EXPORT && found.len() < room {
                found.push((text, index));
            }
        } else {
            let index = u32_at(bytes, &mut at, to)?;
            let text = name(&mut at)?;
            if found.len() < room {
                found.push((text, index));
            }
        }
    }
    if at != to {
        return Err(malformed(at, "bytes after a section's names"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::section_headers;

    fn module(sections: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        for (id, contents) in sections {
            m.push(*id);
            write_unsigned(&mut m, contents.len() as u64);
            m.extend_from_slice(contents);
        }
        m
    }

    fn rewritten(bytes: &[u8], map: &dyn Fn(u64) -> u64) -> Vec<u8> {
        let mut out = bytes[..8].to_vec();
        for (_, section) in section_headers(bytes).unwrap() {
            let kind = kind_of(bytes, &section);
            if kind == 0 {
                out.extend_from_slice(&bytes[section.start..section.end]);
            } else {
                rewrite(bytes, &section, kind, map, &mut |p: &[u8]| {
                    out.extend_from_slice(p);
                    Ok::<(), TransformError>(())
                })
                .unwrap();
            }
        }
        out
    }

    /// Exports (a function, a memory), a start function and a name section with function,
    /// local and label names and a module name, with function indices from `f`.
    fn sample(f: &dyn Fn(u64) -> u64) -> Vec<u8> {
        let mut exports = vec![2, 3, b'r', b'u', b'n', 0];
        write_unsigned(&mut exports, f(1));
        exports.extend_from_slice(&[3, b'm', b'e', b'm', 2, 0]);
        let mut start = Vec::new();
        write_unsigned(&mut start, f(130));
        let mut names = vec![4, b'n', b'a', b'm', b'e', 0, 2, 1, b'm'];
        let mut functions = vec![2];
        for (i, name) in [(1u64, &b"run"[..]), (130, &b"init"[..])] {
            write_unsigned(&mut functions, f(i));
            functions.push(name.len() as u8);
            functions.extend_from_slice(name);
        }
        for (id, sub) in [(1u8, functions), (2, vec![1]), (3, vec![1])] {
            let mut sub = sub;
            if id != 1 {
                write_unsigned(&mut sub, f(130));
                sub.extend_from_slice(&[1, 0, 1, b'x']);
            }
            names.push(id);
            write_unsigned(&mut names, sub.len() as u64);
            names.extend_from_slice(&sub);
        }
        module(&[(EXPORT_SECTION, exports), (START_SECTION, start), (CUSTOM_SECTION, names)])
    }

    #[test]
    fn every_function_index_outside_the_code_is_rewritten_and_given_back() {
        // 130 -> 2 narrows a LEB128 from two bytes to one: the start section's and the name
        // subsections' size fields shrink with it.
        let forward = |v: u64| if v == 130 { 2 } else { v + 1000 };
        let inverse = |v: u64| if v == 2 { 130 } else { v - 1000 };
        let old_numbers = sample(&forward);
        let new = sample(&|v| v);
        assert_eq!(rewritten(&new, &forward), old_numbers);
        assert_eq!(rewritten(&old_numbers, &inverse), new);
        let sections: Vec<Section> = section_headers(&new).unwrap().into_iter().map(|(_, s)| s).collect();
        for s in &sections {
            assert_eq!(round_trips(&new, s, kind_of(&new, s), &forward, &inverse), Some(true));
        }
        // The names the matcher reads: the export `run` and the function names `run`, `init`
        // (the export and the function name of 1 hashed apart), as many as asked for.
        let names = function_names(&new, &sections, 10);
        let mut indices: Vec<u64> = names.iter().map(|n| n.1).collect();
        indices.sort_unstable();
        assert_eq!(indices, [1, 1, 130]);
        assert_ne!(names[0].0, names[1].0);
        assert_eq!(function_names(&new, &sections, 2).len(), 2);
    }

    #[test]
    fn a_section_not_in_its_form_is_refused_not_rewritten() {
        let new = sample(&|v| v);
        let identity = |v: u64| v;
        for (_, s) in section_headers(&new).unwrap() {
            let (id, contents) = (new[s.start], &new[s.contents..s.end]);
            let mut refused = 0;
            // Each cut of the contents is refused, or (where it is still in the form) given
            // back as it is; never a panic.
            for cut in 0..contents.len() {
                let m = module(&[(id, contents[..cut].to_vec())]);
                let (_, t) = section_headers(&m).unwrap().remove(0);
                let kind = kind_of(&m, &t);
                let mut out = Vec::new();
                match rewrite(&m, &t, kind, &identity, &mut |p: &[u8]| {
                    out.extend_from_slice(p);
                    Ok::<(), TransformError>(())
                }) {
                    Ok(()) => assert_eq!(out, m[8..]),
                    Err(_) => refused += 1,
                }
            }
            assert!(refused > 0);
        }
        // A padded (non-canonical) index is not the writer's to rewrite.
        let padded = module(&[(START_SECTION, vec![0x81, 0x80, 0x00])]);
        let (_, s) = section_headers(&padded).unwrap().remove(0);
        assert_eq!(round_trips(&padded, &s, START, &identity, &identity), None);
        // An export section with bytes after its entries is malformed.
        let trailing = module(&[(EXPORT_SECTION, vec![0, 7])]);
        let (_, s) = section_headers(&trailing).unwrap().remove(0);
        assert!(rewrite(&trailing, &s, EXPORTS, &identity, &mut |_: &[u8]| Ok::<(), TransformError>(())).is_err());
    }
}
