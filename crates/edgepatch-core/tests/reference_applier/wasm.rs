//! The inverse of the wasm transform, written from docs/FORMAT.md §2.8 alone
//! (no code shared with `src/wasm_transform`): strict LEB128 readers, the
//! section parse, the body walk by opcode table, the data words, the side
//! info and the value rules. Whole-module, in memory, slow on purpose.

use super::Outcome;

/// §2.8.3: strict unsigned LEB128 of an N-bit value.
fn uleb(b: &[u8], at: &mut usize, bits: u32) -> Outcome<u64> {
    let max = bits.div_ceil(7) as usize;
    let mut value = 0u64;
    for i in 0..max {
        let byte = *b.get(*at).ok_or("LEB128 truncated")?;
        *at += 1;
        let payload = u64::from(byte & 0x7f);
        if i == max - 1 {
            let used = bits - 7 * i as u32;
            if byte & 0x80 != 0 || (used < 7 && payload >> used != 0) {
                return Err("LEB128 too long or above its width".into());
            }
        }
        value |= payload << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("LEB128 too long".into())
}

/// §2.8.3: strict signed LEB128 of an N-bit value.
fn sleb(b: &[u8], at: &mut usize, bits: u32) -> Outcome<i64> {
    let max = bits.div_ceil(7) as usize;
    let mut value = 0i64;
    for i in 0..max {
        let byte = *b.get(*at).ok_or("LEB128 truncated")?;
        *at += 1;
        let payload = i64::from(byte & 0x7f);
        if i == max - 1 {
            let used = bits - 7 * i as u32;
            if byte & 0x80 != 0 {
                return Err("LEB128 too long".into());
            }
            if used < 7 {
                // The unused bits copy the sign bit (bit used-1).
                let sign = (payload >> (used - 1)) & 1;
                let rest = payload >> used;
                if rest != if sign == 1 { (1 << (7 - used)) - 1 } else { 0 } {
                    return Err("LEB128 unused bits differ from the sign".into());
                }
            }
        }
        value |= payload << (7 * i);
        if byte & 0x80 == 0 {
            let shift = 7 * (i + 1);
            if shift < 64 && byte & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            return Ok(value);
        }
    }
    Err("LEB128 too long".into())
}

fn skip(b: &[u8], at: &mut usize, n: u64) -> Outcome<()> {
    let end = (*at as u64).checked_add(n).filter(|&e| e <= b.len() as u64).ok_or("runs past the end")?;
    *at = end as usize;
    Ok(())
}

fn byte(b: &[u8], at: &mut usize) -> Outcome<u8> {
    let v = *b.get(*at).ok_or("truncated")?;
    *at += 1;
    Ok(v)
}

fn value_type(b: &[u8], at: &mut usize) -> Outcome<()> {
    if matches!(byte(b, at)?, 0x63 | 0x64) {
        sleb(b, at, 33)?;
    }
    Ok(())
}

fn limits(b: &[u8], at: &mut usize) -> Outcome<()> {
    let flags = byte(b, at)?;
    if flags > 0x0f {
        return Err("limits flags".into());
    }
    uleb(b, at, 64)?;
    if flags & 1 != 0 {
        uleb(b, at, 64)?;
    }
    if flags & 8 != 0 {
        uleb(b, at, 32)?;
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    F,
    A32,
    A64,
    /// A memarg offset (side info version 2 only).
    M,
}

struct Body {
    size_field: usize,
    start: usize,
    end: usize,
}

struct Module {
    /// (id, start, contents, end)
    sections: Vec<(u8, usize, usize, usize)>,
    pc: Option<(u64, u64, u64)>,
    code: Option<usize>,
    data: Option<usize>,
    bodies: Vec<Body>,
}

fn parse(b: &[u8]) -> Outcome<Module> {
    if b.len() < 8 || b[..8] != *b"\0asm\x01\0\0\0" {
        return Err("no wasm header".into());
    }
    let mut m = Module { sections: Vec::new(), pc: None, code: None, data: None, bodies: Vec::new() };
    let mut at = 8;
    let mut function_import_seen = false;
    while at < b.len() {
        let start = at;
        let id = byte(b, &mut at)?;
        let size = uleb(b, &mut at, 32)?;
        let contents = at;
        skip(b, &mut at, size)?;
        let s = &b[..at];
        match id {
            2 if !function_import_seen => {
                let mut p = contents;
                for _ in 0..uleb(s, &mut p, 32)? {
                    for _ in 0..2 {
                        let n = uleb(s, &mut p, 32)?;
                        skip(s, &mut p, n)?;
                    }
                    match byte(s, &mut p)? {
                        0 => {
                            uleb(s, &mut p, 32)?;
                            function_import_seen = true;
                        }
                        1 => {
                            value_type(s, &mut p)?;
                            limits(s, &mut p)?;
                        }
                        2 => limits(s, &mut p)?,
                        3 => {
                            value_type(s, &mut p)?;
                            byte(s, &mut p)?;
                        }
                        4 => {
                            byte(s, &mut p)?;
                            uleb(s, &mut p, 32)?;
                        }
                        _ => return Err("import kind".into()),
                    }
                }
            }
            9 => m.pc = pc_table(s, contents),
            10 => {
                if m.code.is_some() {
                    return Err("second code section".into());
                }
                m.code = Some(m.sections.len());
                let mut p = contents;
                let count = uleb(s, &mut p, 32)?;
                if count > (s.len() - p) as u64 {
                    return Err("body count above the section".into());
                }
                for _ in 0..count {
                    let size_field = p;
                    let n = uleb(s, &mut p, 32)?;
                    let start = p;
                    skip(s, &mut p, n)?;
                    m.bodies.push(Body { size_field, start, end: p });
                }
                if p != s.len() {
                    return Err("bytes after the last body".into());
                }
            }
            11 => m.data = Some(m.sections.len()),
            _ => {}
        }
        m.sections.push((id, start, contents, at));
    }
    Ok(m)
}

/// Go's layout: exactly one active segment at `i32.const base` of consecutive indices.
fn pc_table(s: &[u8], contents: usize) -> Option<(u64, u64, u64)> {
    let mut p = contents;
    if uleb(s, &mut p, 32).ok()? != 1 || uleb(s, &mut p, 32).ok()? != 0 || byte(s, &mut p).ok()? != 0x41 {
        return None;
    }
    let base = sleb(s, &mut p, 32).ok()?;
    if base < 0 || byte(s, &mut p).ok()? != 0x0b {
        return None;
    }
    let len = uleb(s, &mut p, 32).ok()?;
    if len == 0 {
        return None;
    }
    let first = uleb(s, &mut p, 32).ok()?;
    for i in 1..len {
        if uleb(s, &mut p, 32).ok()? != first + i {
            return None;
        }
    }
    (p == s.len()).then_some((base as u64, first, len))
}

fn block_type(b: &[u8], at: &mut usize) -> Outcome<()> {
    match b.get(*at) {
        Some(0x63 | 0x64) => {
            *at += 1;
            sleb(b, at, 33)?;
        }
        _ => {
            sleb(b, at, 33)?;
        }
    }
    Ok(())
}

fn memarg(b: &[u8], at: &mut usize, offsets: bool, out: &mut Vec<(usize, usize, Kind, i64)>) -> Outcome<()> {
    let align = uleb(b, at, 32)?;
    if align & 0x40 != 0 {
        uleb(b, at, 32)?;
    }
    let s = *at;
    let v = uleb(b, at, 64)?;
    if offsets {
        out.push((s, *at, Kind::M, v as i64));
    }
    Ok(())
}

/// §2.8.3: the F/A32/A64 (and with `offsets`, M) immediates of a body as (start, end, kind, value), or why it does not walk.
fn walk(module: &[u8], start: usize, end: usize, offsets: bool) -> Outcome<Vec<(usize, usize, Kind, i64)>> {
    let b = &module[..end];
    let mut at = start;
    let mut out = Vec::new();
    for _ in 0..uleb(b, &mut at, 32)? {
        uleb(b, &mut at, 32)?;
        value_type(b, &mut at)?;
    }
    while at < end {
        let op = byte(b, &mut at)?;
        match op {
            0x00 | 0x01 | 0x05 | 0x0a | 0x0b | 0x0f | 0x19 | 0x1a | 0x1b | 0x45..=0xc4 | 0xd1 | 0xd3 | 0xd4 => {}
            0x02 | 0x03 | 0x04 | 0x06 => block_type(b, &mut at)?,
            0x07 | 0x08 | 0x09 | 0x0c | 0x0d | 0x14 | 0x15 | 0x18 | 0x20..=0x26 | 0x3f | 0x40 | 0xd5 | 0xd6 => {
                uleb(b, &mut at, 32)?;
            }
            0x0e => {
                let n = uleb(b, &mut at, 32)?;
                for _ in 0..=n {
                    uleb(b, &mut at, 32)?;
                }
            }
            0x10 | 0x12 | 0xd2 => {
                let s = at;
                let v = uleb(b, &mut at, 32)?;
                out.push((s, at, Kind::F, v as i64));
            }
            0x11 | 0x13 => {
                uleb(b, &mut at, 32)?;
                uleb(b, &mut at, 32)?;
            }
            0x1c => {
                for _ in 0..uleb(b, &mut at, 32)? {
                    value_type(b, &mut at)?;
                }
            }
            0x1f => {
                block_type(b, &mut at)?;
                for _ in 0..uleb(b, &mut at, 32)? {
                    match byte(b, &mut at)? {
                        0 | 1 => {
                            uleb(b, &mut at, 32)?;
                            uleb(b, &mut at, 32)?;
                        }
                        2 | 3 => {
                            uleb(b, &mut at, 32)?;
                        }
                        _ => return Err("catch kind".into()),
                    }
                }
            }
            0x28..=0x3e => memarg(b, &mut at, offsets, &mut out)?,
            0x41 => {
                let s = at;
                let v = sleb(b, &mut at, 32)?;
                out.push((s, at, Kind::A32, v));
            }
            0x42 => {
                let s = at;
                let v = sleb(b, &mut at, 64)?;
                out.push((s, at, Kind::A64, v));
            }
            0x43 => skip(b, &mut at, 4)?,
            0x44 => skip(b, &mut at, 8)?,
            0xd0 => {
                sleb(b, &mut at, 33)?;
            }
            0xfc => match uleb(b, &mut at, 32)? {
                0..=7 => {}
                8 | 10 | 12 | 14 => {
                    uleb(b, &mut at, 32)?;
                    uleb(b, &mut at, 32)?;
                }
                9 | 11 | 13 | 15 | 16 | 17 => {
                    uleb(b, &mut at, 32)?;
                }
                _ => return Err("FC sub-opcode".into()),
            },
            0xfd => match uleb(b, &mut at, 32)? {
                0..=11 | 92 | 93 => memarg(b, &mut at, offsets, &mut out)?,
                12 | 13 => skip(b, &mut at, 16)?,
                21..=34 => skip(b, &mut at, 1)?,
                84..=91 => {
                    memarg(b, &mut at, offsets, &mut out)?;
                    skip(b, &mut at, 1)?;
                }
                14..=20 | 35..=83 | 94..=275 => {}
                _ => return Err("FD sub-opcode".into()),
            },
            0xfe => match uleb(b, &mut at, 32)? {
                3 => skip(b, &mut at, 1)?,
                0..=2 | 0x10..=0x4e => memarg(b, &mut at, offsets, &mut out)?,
                _ => return Err("FE sub-opcode".into()),
            },
            _ => return Err(format!("opcode {op:#x}")),
        }
    }
    Ok(out)
}

/// §2.8.3 data words: (data word position in the module, width), in ordinal order.
fn data_words(b: &[u8], contents: usize, end: usize, width: u64) -> Vec<usize> {
    let s = &b[..end];
    let segments = (|| -> Outcome<Vec<(u64, usize, usize)>> {
        let mut p = contents;
        let mut out = Vec::new();
        for _ in 0..uleb(s, &mut p, 32)? {
            let flags = uleb(s, &mut p, 32)?;
            let address = match flags {
                0 | 2 => {
                    if flags == 2 && uleb(s, &mut p, 32)? != 0 {
                        return Err("memory".into());
                    }
                    let v = match byte(s, &mut p)? {
                        0x41 => sleb(s, &mut p, 32)?,
                        0x42 => sleb(s, &mut p, 64)?,
                        _ => return Err("offset".into()),
                    };
                    if byte(s, &mut p)? != 0x0b {
                        return Err("offset end".into());
                    }
                    Some(v as u64 & 0xffff_ffff)
                }
                1 => None,
                _ => return Err("segment flags".into()),
            };
            let len = uleb(s, &mut p, 32)?;
            let start = p;
            skip(s, &mut p, len)?;
            if let Some(a) = address {
                out.push((a, start, p));
            }
        }
        Ok(out)
    })()
    .unwrap_or_default();
    let mut words = Vec::new();
    for (address, start, stop) in segments {
        let first = (width - address % width) % width;
        let mut p = start as u64 + first;
        while p + width <= stop as u64 {
            words.push(p as usize);
            p += width;
        }
    }
    words
}

struct Side {
    /// Version 2: memarg offsets are immediates (kind M).
    offsets: bool,
    /// Every function keeps its number.
    identity: bool,
    /// The address map's images (start, end, piece), sorted.
    images: Vec<(u64, u64, usize)>,
    code_width: u64,
    ref_pc: Option<(u64, u64)>,
    /// (new_start, norm_start, len)
    runs: Vec<(u64, u64, u64)>,
    raw: std::collections::HashSet<u64>,
    widths: std::collections::HashMap<u64, u64>,
    exceptions: std::collections::HashSet<u64>,
    /// (new_start, end, delta)
    pieces: Vec<(u64, u64, i64)>,
    data_exceptions: std::collections::HashSet<u64>,
    /// Version 3 (§2.8.7): how locals and alignments are coded, the field streams' lengths.
    layout: Option<(Coding, [u64; 12])>,
    /// Version 4: the element entries kept verbatim (None: element sections are copied).
    element_exceptions: Option<std::collections::HashSet<u64>>,
    /// Version 5's `sections` byte without bit 0: 2 exports, 4 start, 8 the name section.
    function_keys: u8,
    /// Version 6: the code address map's pieces, and the line and range ordinals kept
    /// verbatim (None: those sections are copied).
    dwarf: Option<Dwarf>,
}

/// An address map's piece: (new_start, end, delta).
type Piece = (u64, u64, i64);

/// Version 6 (§2.8.3, DWARF addresses).
struct Dwarf {
    pieces: Vec<Piece>,
    line: Option<std::collections::HashSet<u64>>,
    ranges: Option<std::collections::HashSet<u64>>,
}

fn side(b: &[u8]) -> Outcome<Side> {
    if b.len() < 5 || &b[..4] != b"EPWT" || !(1..=6).contains(&b[4]) {
        return Err("side info magic or version".into());
    }
    let mut at = 5;
    // Versions 3 and 4: a byte for whether memarg offsets are immediates; then version 3's
    // coding (the layout is split): bit 0 locals as ranks, bit 1 alignments coded, bit 2 data
    // gaps; or version 4's
    // layout: 0 none, else split with the coding layout - 1.
    let offsets = match b[4] {
        3..=6 => match byte(b, &mut at)? {
            0 => false,
            1 => true,
            _ => return Err("memarg offsets byte".into()),
        },
        v => v == 2,
    };
    let (split, coding) = match b[4] {
        3 => match byte(b, &mut at)? {
            c @ 0..=7 => (true, c),
            _ => return Err("locals coding byte".into()),
        },
        4..=6 => match byte(b, &mut at)? {
            0 => (false, 0),
            l @ 1..=8 => (true, l - 1),
            _ => return Err("layout byte".into()),
        },
        _ => (false, 0),
    };
    let coding = Coding { mtf: coding & 1 != 0, aligns: coding & 2 != 0, gaps: coding & 4 != 0 };
    let v = |at: &mut usize| uleb(b, at, 64);
    let count = |at: &mut usize| -> Outcome<u64> {
        let n = uleb(b, at, 64)?;
        if n > (b.len() - *at) as u64 {
            return Err("count above the side info".into());
        }
        Ok(n)
    };
    let list = |at: &mut usize| -> Outcome<Vec<u64>> {
        let n = count(at)?;
        let mut out: Vec<u64> = Vec::new();
        for i in 0..n {
            let d = uleb(b, at, 64)?;
            out.push(if i == 0 { d } else { out[i as usize - 1].checked_add(d).and_then(|x| x.checked_add(1)).ok_or("list overflows")? });
        }
        Ok(out)
    };
    let code_width = v(&mut at)?;
    if code_width > 5 {
        return Err("code size width".into());
    }
    let ref_pc = match byte(b, &mut at)? {
        0 => None,
        1 => {
            let (base, first) = (v(&mut at)?, v(&mut at)?);
            if base > u64::from(u32::MAX) || first > u64::from(u32::MAX) {
                return Err("PC table above 32 bits".into());
            }
            Some((base, first))
        }
        _ => return Err("has_ref_pc".into()),
    };
    let mut runs = Vec::new();
    let (mut expected, mut new_start) = (0u64, 0u64);
    for _ in 0..count(&mut at)? {
        let z = v(&mut at)?;
        let norm = expected.wrapping_add((((z >> 1) as i64) ^ -((z & 1) as i64)) as u64);
        let len = v(&mut at)?;
        if len == 0 {
            return Err("empty run".into());
        }
        expected = norm.checked_add(len).ok_or("run overflows")?;
        runs.push((new_start, norm, len));
        new_start = new_start.checked_add(len).ok_or("runs overflow")?;
    }
    // The identity test needs the file order; the inverse the normalized one.
    let identity = runs.iter().all(|r| r.0 == r.1);
    runs.sort_by_key(|r| r.1);
    if runs.windows(2).any(|w| w[0].1 + w[0].2 > w[1].1) {
        return Err("runs overlap".into());
    }
    let raw = list(&mut at)?;
    let positions = list(&mut at)?;
    let mut widths = Vec::new();
    for p in positions {
        let w = byte(b, &mut at)?;
        if !(1..=5).contains(&w) {
            return Err("size width".into());
        }
        widths.push((p, u64::from(w)));
    }
    let exceptions = list(&mut at)?;
    // An address map (§2.8.4): the data's, and version 6's code address map.
    let address_map = |at: &mut usize| -> Outcome<Vec<(u64, u64, i64)>> {
        let mut starts = Vec::new();
        let mut prev = 0u64;
        for _ in 0..count(at)? {
            prev = prev.checked_add(v(at)?).ok_or("piece overflows")?;
            let z = v(at)?;
            starts.push((prev, ((z >> 1) as i64) ^ -((z & 1) as i64)));
        }
        let address_end = prev.checked_add(v(at)?).ok_or("address end overflows")?;
        let mut pieces = Vec::new();
        for (k, &(s, d)) in starts.iter().enumerate() {
            let e = starts.get(k + 1).map_or(address_end, |n| n.0);
            if e <= s || s.checked_add_signed(d).is_none() || e.checked_add_signed(d).is_none() {
                return Err("address piece empty or out of range".into());
            }
            pieces.push((s, e, d));
        }
        Ok(pieces)
    };
    let pieces = address_map(&mut at)?;
    let data_exceptions = list(&mut at)?;
    let mut layout = None;
    if split {
        let mut lens = [0u64; 12];
        for len in &mut lens {
            *len = v(&mut at)?;
        }
        layout = Some((coding, lens));
    }
    // Version 5: which sections outside the code name functions in the old numbering.
    let sections = match b[4] {
        4 => 1,
        5 => match byte(b, &mut at)? {
            bits if bits & !0x0f == 0 && bits & 0x0e != 0 => bits,
            _ => return Err("sections byte".into()),
        },
        6 => match byte(b, &mut at)? {
            bits if bits & !0x3f == 0 && bits & 0x30 != 0 => bits,
            _ => return Err("version 6 sections byte".into()),
        },
        _ => 0,
    };
    let element_exceptions = if sections & 1 != 0 { Some(list(&mut at)?.into_iter().collect()) } else { None };
    let dwarf = if b[4] == 6 {
        let pieces = address_map(&mut at)?;
        let line = if sections & 0x10 != 0 { Some(list(&mut at)?.into_iter().collect()) } else { None };
        let ranges = if sections & 0x20 != 0 { Some(list(&mut at)?.into_iter().collect()) } else { None };
        Some(Dwarf { pieces, line, ranges })
    } else {
        None
    };
    if at != b.len() {
        return Err("bytes after the side info".into());
    }
    let mut images: Vec<(u64, u64, usize)> = pieces.iter().enumerate().map(|(k, p)| (p.0.wrapping_add_signed(p.2), p.1.wrapping_add_signed(p.2), k)).collect();
    images.sort();
    // Lists ascend strictly, so as sets they keep every entry.
    Ok(Side {
        offsets,
        identity,
        images,
        code_width,
        ref_pc,
        runs,
        raw: raw.into_iter().collect(),
        widths: widths.into_iter().collect(),
        exceptions: exceptions.into_iter().collect(),
        pieces,
        data_exceptions: data_exceptions.into_iter().collect(),
        layout,
        element_exceptions,
        function_keys: sections & 0x0e,
        dwarf,
    })
}

impl Side {
    /// `runs` is kept sorted by normalized start (they do not overlap).
    fn pi_inverse(&self, n: u64) -> Option<u64> {
        let r = self.runs[..self.runs.partition_point(|r| r.1 <= n)].last()?;
        (n - r.1 < r.2).then(|| r.0 + (n - r.1))
    }

    fn alpha_inverse(&self, n: u64) -> Option<u64> {
        map_inverse(&self.pieces, n)
    }

    fn address(&self, n: i64, limit: u64) -> i64 {
        if n < 0 {
            return n;
        }
        match self.alpha_inverse(n as u64) {
            Some(v) if v <= limit => v as i64,
            _ => n,
        }
    }

    fn value(&self, kind: Kind, n: i64, pc: Option<(u64, u64, u64)>) -> i64 {
        match kind {
            Kind::F => match self.pi_inverse(n as u64) {
                Some(v) if v <= u64::from(u32::MAX) => v as i64,
                _ => n,
            },
            Kind::A32 => self.address(n, (1 << 31) - 1),
            Kind::M => self.address(n, u64::from(u32::MAX)),
            Kind::A64 => {
                if let (Some((base, first, len)), Some((ref_base, ref_first)), true) = (pc, self.ref_pc, n >= 0) {
                    let s = (n as u64) >> 16;
                    if s >= ref_base && s - ref_base < u64::from(u32::MAX) {
                        if let Some(f) = self.pi_inverse(ref_first + s - ref_base) {
                            if f >= first && f - first < len {
                                return (((base + f - first) << 16) | (n as u64 & 0xffff)) as i64;
                            }
                        }
                    }
                }
                self.address(n, i64::MAX as u64)
            }
        }
    }
}

/// α⁻¹ or γ⁻¹ (§2.8.4): of the images sorted by (start, end, piece), the last starting at or
/// below n, if n is below its end.
fn map_inverse(pieces: &[(u64, u64, i64)], n: u64) -> Option<u64> {
    let mut images: Vec<(u64, u64, usize)> = pieces.iter().enumerate().map(|(k, p)| (p.0.wrapping_add_signed(p.2), p.1.wrapping_add_signed(p.2), k)).collect();
    images.sort();
    let (_, end, k) = *images.iter().rev().find(|im| im.0 <= n)?;
    if n >= end {
        return None;
    }
    n.checked_add_signed(pieces[k].2.checked_neg()?)
}

/// §2.8.3, range addresses: the offsets in `s` of each range's or location's begin (its end
/// follows) in `s[from..]`, `.debug_loc` if `loc`, which MUST walk to its end.
fn range_addresses(s: &[u8], from: usize, loc: bool) -> Outcome<Vec<usize>> {
    let le32 = |at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap());
    let mut found = Vec::new();
    let mut at = from;
    while at < s.len() {
        if s.len() - at < 8 {
            return Err("range entry past its section".into());
        }
        let (begin, end) = (le32(at), le32(at + 4));
        let pair = at;
        at += 8;
        if (begin, end) == (0, 0) || begin == u32::MAX {
            continue;
        }
        if loc {
            let len = s.get(at..at + 2).ok_or("location past its section")?;
            at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
            if at > s.len() {
                return Err("location past its section".into());
            }
        }
        found.push(pair);
    }
    Ok(found)
}

/// §2.8.3, line addresses: the offsets in `s` of the 4-byte `DW_LNE_set_address` operands of
/// the line units in `s[from..]`, which MUST walk to its end.
fn line_addresses(s: &[u8], from: usize) -> Outcome<Vec<usize>> {
    let le32 = |at: usize| -> Outcome<u64> { Ok(u64::from(u32::from_le_bytes(s.get(at..at + 4).ok_or("line unit truncated")?.try_into().unwrap()))) };
    let mut found = Vec::new();
    let mut at = from;
    while at < s.len() {
        let unit_length = le32(at)?;
        if unit_length >= 0xffff_fff0 {
            return Err("64-bit DWARF".into());
        }
        let end = at + 4 + unit_length as usize;
        if end > s.len() {
            return Err("line unit past its section".into());
        }
        let u = &s[..end];
        let mut p = at + 4;
        let version = u64::from(byte(u, &mut p)?) | u64::from(byte(u, &mut p)?) << 8;
        if !(2..=5).contains(&version) {
            return Err("line version".into());
        }
        if version == 5 {
            p += 2;
        }
        let header_length = le32(p)?;
        p += 4;
        let program = p.checked_add(header_length as usize).filter(|&e| e <= end).ok_or("line header past its unit")?;
        p += if version >= 4 { 5 } else { 4 };
        let h = &u[..program];
        let opcode_base = byte(h, &mut p)?;
        if opcode_base == 0 {
            return Err("opcode base 0".into());
        }
        let lengths = h.get(p..p + usize::from(opcode_base) - 1).ok_or("opcode lengths past the header")?;
        p = program;
        while p < end {
            let op = byte(u, &mut p)?;
            if op == 0 {
                let len = uleb(u, &mut p, 32)?;
                let body = p;
                skip(u, &mut p, len)?;
                if len == 5 && u[body] == 2 {
                    found.push(body + 1);
                }
            } else if op >= opcode_base {
            } else if op == 9 {
                skip(u, &mut p, 2)?;
            } else {
                for _ in 0..lengths[usize::from(op) - 1] {
                    let mut n = 0;
                    while byte(u, &mut p)? & 0x80 != 0 {
                        n += 1;
                        if n == 10 {
                            return Err("operand over 10 bytes".into());
                        }
                    }
                }
            }
        }
        at = end;
    }
    Ok(found)
}

fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn put_sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v as u8) & 0x7f;
        v >>= 7;
        if (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0) {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// `len` as unsigned LEB128 padded to exactly `width` bytes.
fn put_padded(out: &mut Vec<u8>, len: u64, width: u64) -> Outcome<()> {
    if len > u64::from(u32::MAX) || width > 5 || width == 0 || (width < 5 && len >> (7 * width) != 0) {
        return Err("size does not fit its width".into());
    }
    for i in 0..width {
        let b = ((len >> (7 * i)) & 0x7f) as u8;
        out.push(if i + 1 < width { b | 0x80 } else { b });
    }
    Ok(())
}

/// §2.8.6: the file from its normalized form `n` and side info `side_bytes`.
pub fn inverse(n: &[u8], side_bytes: &[u8]) -> Outcome<Vec<u8>> {
    let side = side(side_bytes)?;
    let joined;
    let n = match side.layout {
        Some((coding, lens)) => {
            joined = join(n, &lens, coding)?;
            &joined[..]
        }
        None => n,
    };
    let m = parse(n)?;
    let mut out = n[..8].to_vec();
    let mut ordinal = 0u64;
    let mut used_exceptions = 0usize;
    let mut used_raw = 0usize;
    let mut used_widths = 0usize;
    let mut element_ordinal = 0u64;
    let mut used_element_exceptions = 0usize;
    // (ordinal, exceptions used) of the line addresses and of the range addresses.
    let mut dwarf_counts = [(0u64, 0usize); 2];
    for (index, &(id, start, contents, end)) in m.sections.iter().enumerate() {
        // A custom section's name: `u32 len` and bytes, within the section.
        let mut name_end = contents;
        let mut name: &[u8] = &[];
        if id == 0 {
            if let Ok(len) = uleb(&n[..end], &mut name_end, 32) {
                name_end += len as usize;
                if name_end <= end {
                    name = &n[name_end - len as usize..name_end];
                }
            }
        }
        // (line or range addresses, the exceptions, each address's offset and whether it is an end)
        let addresses = match (&side.dwarf, name) {
            (Some(Dwarf { pieces, line: Some(listed), .. }), b".debug_line") => {
                Some((0, pieces, listed, line_addresses(&n[..end], name_end)?.into_iter().map(|at| (at, false)).collect::<Vec<_>>()))
            }
            (Some(Dwarf { pieces, ranges: Some(listed), .. }), b".debug_ranges" | b".debug_loc") => {
                let begins = range_addresses(&n[..end], name_end, name == b".debug_loc")?;
                Some((1, pieces, listed, begins.into_iter().flat_map(|at| [(at, false), (at + 4, true)]).collect()))
            }
            _ => None,
        };
        if let Some((kind, pieces, listed, addresses)) = addresses {
            let mut section = n[start..end].to_vec();
            for (at, is_end) in addresses {
                let (ordinal, used) = &mut dwarf_counts[kind];
                if listed.contains(ordinal) {
                    *used += 1;
                } else {
                    // A start: γ⁻¹(v); an end: γ⁻¹(v - 1) + 1; where defined and within 32 bits.
                    let v = u64::from(u32::from_le_bytes(n[at..at + 4].try_into().unwrap()));
                    let restored = if is_end { v.checked_sub(1).and_then(|m| map_inverse(pieces, m)).map(|a| a + 1) } else { map_inverse(pieces, v) };
                    let restored = restored.filter(|&a| a <= u64::from(u32::MAX)).unwrap_or(v);
                    section[at - start..at - start + 4].copy_from_slice(&(restored as u32).to_le_bytes());
                }
                *ordinal += 1;
            }
            out.extend_from_slice(&section);
            continue;
        }
        if let (9, Some(listed)) = (id, &side.element_exceptions) {
            // §2.8.3, element entries: every function index of segments of flags 0 to 3.
            let mut section = Vec::new();
            let mut at = contents;
            let mut p = contents;
            let s = &n[..end];
            for _ in 0..uleb(s, &mut p, 32)? {
                let flags = uleb(s, &mut p, 32)?;
                if flags > 3 {
                    return Err("element segment without function indices".into());
                }
                if flags == 2 {
                    uleb(s, &mut p, 32)?;
                }
                if flags != 1 && flags != 3 {
                    match byte(s, &mut p)? {
                        0x41 => {
                            sleb(s, &mut p, 32)?;
                        }
                        0x23 => {
                            uleb(s, &mut p, 32)?;
                        }
                        _ => return Err("element offset".into()),
                    }
                    if byte(s, &mut p)? != 0x0b {
                        return Err("element offset end".into());
                    }
                }
                if flags != 0 && byte(s, &mut p)? != 0 {
                    return Err("element kind".into());
                }
                for _ in 0..uleb(s, &mut p, 32)? {
                    let e = p;
                    let value = uleb(s, &mut p, 32)?;
                    section.extend_from_slice(&n[at..e]);
                    if listed.contains(&element_ordinal) {
                        used_element_exceptions += 1;
                        section.extend_from_slice(&n[e..p]);
                    } else {
                        put_uleb(&mut section, side.value(Kind::F, value as i64, m.pc) as u64);
                    }
                    at = p;
                    element_ordinal += 1;
                }
            }
            if p != end {
                return Err("bytes after the element segments".into());
            }
            section.extend_from_slice(&n[at..end]);
            out.push(9);
            put_uleb(&mut out, section.len() as u64);
            out.extend_from_slice(&section);
        } else if let Some(contents) = function_keys(n, id, contents, end, &side)? {
            out.push(id);
            put_uleb(&mut out, contents.len() as u64);
            out.extend_from_slice(&contents);
        } else if Some(index) == m.code {
            let first = m.bodies.first().map_or(end, |b| b.size_field);
            let mut section = n[contents..first].to_vec();
            for (k, body) in m.bodies.iter().enumerate() {
                let k = k as u64;
                let mut restored = Vec::new();
                if side.raw.contains(&k) {
                    used_raw += 1;
                    restored.extend_from_slice(&n[body.start..body.end]);
                } else {
                    let mut at = body.start;
                    for (s, e, kind, value) in walk(n, body.start, body.end, side.offsets)? {
                        restored.extend_from_slice(&n[at..s]);
                        if side.exceptions.contains(&ordinal) {
                            used_exceptions += 1;
                            restored.extend_from_slice(&n[s..e]);
                        } else {
                            let v = side.value(kind, value, m.pc);
                            if kind == Kind::F || kind == Kind::M {
                                put_uleb(&mut restored, v as u64);
                            } else {
                                put_sleb(&mut restored, v);
                            }
                        }
                        at = e;
                        ordinal += 1;
                    }
                    restored.extend_from_slice(&n[at..body.end]);
                }
                let width = match side.widths.get(&k) {
                    Some(&w) => {
                        used_widths += 1;
                        w
                    }
                    None => (body.start - body.size_field) as u64,
                };
                put_padded(&mut section, restored.len() as u64, width)?;
                section.extend_from_slice(&restored);
            }
            out.push(10);
            put_padded(&mut out, section.len() as u64, side.code_width)?;
            out.extend_from_slice(&section);
        } else if Some(index) == m.data {
            let mut section = n[start..end].to_vec();
            let identity = side.identity && side.pieces.is_empty();
            let width = if m.pc.is_some() { 8 } else { 4 };
            let words = data_words(n, contents, end, width);
            if identity {
                if !side.data_exceptions.is_empty() {
                    return Err("data exceptions without a mapping".into());
                }
            } else {
                if side.data_exceptions.iter().any(|&e| e >= words.len() as u64) {
                    return Err("data exception beyond the data words".into());
                }
                for (k, &p) in words.iter().enumerate() {
                    if side.data_exceptions.contains(&(k as u64)) {
                        continue;
                    }
                    let w = &n[p..p + width as usize];
                    let (value, kind) = if width == 8 {
                        (i64::from_le_bytes(w.try_into().unwrap()), Kind::A64)
                    } else {
                        (i64::from(u32::from_le_bytes(w.try_into().unwrap())), Kind::A32)
                    };
                    let v = side.value(kind, value, m.pc);
                    let at = p - start;
                    section[at..at + width as usize].copy_from_slice(&v.to_le_bytes()[..width as usize]);
                }
            }
            out.extend_from_slice(&section);
        } else {
            out.extend_from_slice(&n[start..end]);
        }
    }
    if m.data.is_none() && !side.data_exceptions.is_empty() {
        return Err("data exceptions without data words".into());
    }
    if let Some(dwarf) = &side.dwarf {
        for (listed, (_, used)) in [&dwarf.line, &dwarf.ranges].into_iter().zip(dwarf_counts) {
            if listed.as_ref().is_some_and(|l| l.len() != used) {
                return Err("DWARF exceptions beyond the DWARF addresses".into());
            }
        }
    }
    if side.element_exceptions.as_ref().is_some_and(|l| l.len() != used_element_exceptions) {
        return Err("element exceptions beyond the element entries".into());
    }
    if used_raw != side.raw.len() || used_widths != side.widths.len() || used_exceptions != side.exceptions.len() {
        return Err("side info lists entries beyond the module".into());
    }
    Ok(out)
}

/// §2.8.3 (version 5): a section whose function indices the side info says are in the old
/// numbering (exports, start, the "name" custom section), its contents rebuilt with each one's
/// inverse; None for any other section.
fn function_keys(n: &[u8], id: u8, contents: usize, end: usize, side: &Side) -> Outcome<Option<Vec<u8>>> {
    let s = &n[..end];
    let name = |at: &mut usize| -> Outcome<()> {
        let len = uleb(s, at, 32)? as usize;
        *at = at.checked_add(len).filter(|&e| e <= end).ok_or("name past its section")?;
        Ok(())
    };
    // Copies s[*copied..*at] and the inverse of the function index at `*at` to `out`.
    let index = |out: &mut Vec<u8>, copied: &mut usize, at: &mut usize| -> Outcome<()> {
        out.extend_from_slice(&s[*copied..*at]);
        let value = uleb(s, at, 32)?;
        put_uleb(out, side.value(Kind::F, value as i64, None) as u64);
        *copied = *at;
        Ok(())
    };
    let is_name_section = id == 0 && {
        let mut at = contents;
        uleb(s, &mut at, 32).is_ok_and(|len| s.get(at..at + len as usize) == Some(&b"name"[..]))
    };
    let mut out = Vec::new();
    let (mut at, mut copied) = (contents, contents);
    match id {
        7 if side.function_keys & 2 != 0 => {
            for _ in 0..uleb(s, &mut at, 32)? {
                name(&mut at)?;
                if byte(s, &mut at)? == 0 {
                    index(&mut out, &mut copied, &mut at)?;
                } else {
                    uleb(s, &mut at, 32)?;
                }
            }
        }
        8 if side.function_keys & 4 != 0 => index(&mut out, &mut copied, &mut at)?,
        0 if side.function_keys & 8 != 0 && is_name_section => {
            name(&mut at)?;
            while at < end {
                out.extend_from_slice(&s[copied..at]);
                copied = at;
                let sub = byte(s, &mut at)?;
                let len = uleb(s, &mut at, 32)? as usize;
                let sub_end = at.checked_add(len).filter(|&e| e <= end).ok_or("name subsection past its section")?;
                if !(1..=3).contains(&sub) {
                    at = sub_end;
                    continue;
                }
                // Function names (1) map an index to a name; local (2) and label (3) names map
                // an index to a map of names. The size field is written anew.
                let mut keys = Vec::new();
                copied = at;
                for _ in 0..uleb(s, &mut at, 32)? {
                    index(&mut keys, &mut copied, &mut at)?;
                    if sub == 1 {
                        name(&mut at)?;
                    } else {
                        for _ in 0..uleb(s, &mut at, 32)? {
                            uleb(s, &mut at, 32)?;
                            name(&mut at)?;
                        }
                    }
                }
                if at != sub_end {
                    return Err("bytes after a name subsection's entries".into());
                }
                keys.extend_from_slice(&s[copied..at]);
                copied = at;
                out.push(sub);
                put_uleb(&mut out, keys.len() as u64);
                out.extend_from_slice(&keys);
            }
        }
        _ => return Ok(None),
    }
    if at != end {
        return Err("bytes after a section's function indices".into());
    }
    out.extend_from_slice(&s[copied..end]);
    Ok(Some(out))
}

/// §2.8.7: whether a side info says the split layout (version 3).
pub fn has_layout(side_bytes: &[u8]) -> bool {
    side_bytes.len() > 4
        && &side_bytes[..4] == b"EPWT"
        && (side_bytes[4] == 3 || ((4..=6).contains(&side_bytes[4]) && side_bytes.get(6).is_some_and(|&l| l != 0)))
}

/// §2.8.7: the old module `m` split as the side info says.
pub fn split_as(m: &[u8], side_bytes: &[u8]) -> Outcome<Vec<u8>> {
    let (coding, _) = side(side_bytes)?.layout.ok_or("not a split layout")?;
    split(m, coding)
}

// §2.8.7 field streams, in layout order.
const OP: usize = 0;
const BLOCK: usize = 1;
const LABEL: usize = 2;
const LOCAL: usize = 3;
const INDEX: usize = 4;
const CALL: usize = 5;
const I32: usize = 6;
const I64: usize = 7;
const ALIGN: usize = 8;
const OFFSET: usize = 9;
const BYTES: usize = 10;
const OTHER: usize = 11;

/// Reads a code section's fields: all from one interleaved source (splitting:
/// each field's bytes go to its stream), or each from its own stream
/// (joining: every field's bytes go to `out[0]` in order).
struct Fields<'a> {
    src: Vec<&'a [u8]>,
    at: Vec<usize>,
    out: Vec<Vec<u8>>,
    joining: bool,
    /// §2.8.7 locals as move-to-front ranks: the list of 0..=127, reset per body.
    mtf: Option<Vec<u8>>,
    /// §2.8.7 alignments coded: the last one-byte alignment's low 6 bits of each instruction
    /// (opcode, sub-opcode), over the whole section.
    aligns: Option<std::collections::HashMap<(u8, u64), u8>>,
}

/// §2.8.7: the split layout's coding (the side info's locals or layout byte).
#[derive(Clone, Copy)]
pub struct Coding {
    mtf: bool,
    aligns: bool,
    gaps: bool,
}

impl Fields<'_> {
    fn k(&self, f: usize) -> usize {
        if self.joining {
            f
        } else {
            0
        }
    }
    fn record(&mut self, f: usize, k: usize, s: usize) {
        let bytes = &self.src[k][s..self.at[k]];
        self.out[if self.joining { 0 } else { f }].extend_from_slice(bytes);
    }
    fn u(&mut self, f: usize, bits: u32) -> Outcome<u64> {
        let k = self.k(f);
        let s = self.at[k];
        let v = uleb(self.src[k], &mut self.at[k], bits)?;
        self.record(f, k, s);
        Ok(v)
    }
    fn s(&mut self, f: usize, bits: u32) -> Outcome<i64> {
        let k = self.k(f);
        let s = self.at[k];
        let v = sleb(self.src[k], &mut self.at[k], bits)?;
        self.record(f, k, s);
        Ok(v)
    }
    fn b(&mut self, f: usize) -> Outcome<u8> {
        let k = self.k(f);
        let s = self.at[k];
        let v = byte(self.src[k], &mut self.at[k])?;
        self.record(f, k, s);
        Ok(v)
    }
    fn n(&mut self, f: usize, n: u64) -> Outcome<()> {
        let k = self.k(f);
        let s = self.at[k];
        skip(self.src[k], &mut self.at[k], n)?;
        self.record(f, k, s);
        Ok(())
    }
    /// Bytes of the interleaved code section read or written so far.
    fn pos(&self) -> usize {
        if self.joining {
            self.out[0].len()
        } else {
            self.at[0]
        }
    }
    fn value_type(&mut self, f: usize) -> Outcome<()> {
        if matches!(self.b(f)?, 0x63 | 0x64) {
            self.s(f, 33)?;
        }
        Ok(())
    }
    fn block_type(&mut self) -> Outcome<()> {
        // 0x63 and 0x64 read as one-byte signed LEB128: -29 and -28.
        if matches!(self.s(BLOCK, 33)?, -29 | -28) {
            self.s(BLOCK, 33)?;
        }
        Ok(())
    }
    /// A local index: with move-to-front on, a one-byte index is its rank in the list
    /// (splitting) or a one-byte rank stands for the index there (joining).
    fn local(&mut self) -> Outcome<()> {
        let k = self.k(LOCAL);
        let next = self.src[k].get(self.at[k]).copied();
        match (&mut self.mtf, next) {
            (Some(list), Some(b)) if b < 0x80 => {
                self.at[k] += 1;
                let (pos, value) = if self.joining { (b as usize, list[b as usize]) } else { (list.iter().position(|&x| x == b).unwrap(), b) };
                list.remove(pos);
                list.insert(0, value);
                let written = if self.joining { value } else { pos as u8 };
                self.out[if self.joining { 0 } else { LOCAL }].push(written);
                Ok(())
            }
            _ => self.u(LOCAL, 32).map(|_| ()),
        }
    }
    /// A memarg of instruction `op` (opcode, sub-opcode): with alignments coded, a one-byte
    /// alignment is stored XOR the low 6 bits of the last one-byte alignment of `op` (0 at first).
    fn memarg(&mut self, op: (u8, u64)) -> Outcome<()> {
        let k = self.k(ALIGN);
        let next = self.src[k].get(self.at[k]).copied();
        let align = match (&mut self.aligns, next) {
            (Some(last), Some(b)) if b < 0x80 => {
                self.at[k] += 1;
                let prev = last.get(&op).copied().unwrap_or(0);
                let (value, written) = if self.joining { (b ^ prev, b ^ prev) } else { (b, b ^ prev) };
                last.insert(op, value & 0x3f);
                self.out[if self.joining { 0 } else { ALIGN }].push(written);
                u64::from(value)
            }
            _ => self.u(ALIGN, 32)?,
        };
        if align & 0x40 != 0 {
            self.u(ALIGN, 32)?;
        }
        self.u(OFFSET, 64)?;
        Ok(())
    }

    /// The code section's contents, `len` bytes interleaved.
    fn code(&mut self, len: usize) -> Outcome<()> {
        for _ in 0..self.u(OTHER, 32)? {
            let size = self.u(OTHER, 32)? as usize;
            let end = self.pos() + size;
            if end > len {
                return Err("body past the code section".into());
            }
            for _ in 0..self.u(OTHER, 32)? {
                self.u(OTHER, 32)?;
                self.value_type(OTHER)?;
            }
            if let Some(list) = &mut self.mtf {
                *list = (0..128).collect();
            }
            while self.pos() < end {
                self.instruction()?;
            }
            if self.pos() != end {
                return Err("instruction past its body".into());
            }
        }
        if self.pos() != len {
            return Err("bytes after the last body".into());
        }
        Ok(())
    }

    fn instruction(&mut self) -> Outcome<()> {
        let op = self.b(OP)?;
        match op {
            0x00 | 0x01 | 0x05 | 0x0a | 0x0b | 0x0f | 0x19 | 0x1a | 0x1b | 0x45..=0xc4 | 0xd1 | 0xd3 | 0xd4 => {}
            0x02 | 0x03 | 0x04 | 0x06 => self.block_type()?,
            0x0c | 0x0d | 0xd5 | 0xd6 => {
                self.u(LABEL, 32)?;
            }
            0x20..=0x22 => self.local()?,
            0x07 | 0x08 | 0x09 | 0x14 | 0x15 | 0x18 | 0x23..=0x26 | 0x3f | 0x40 => {
                self.u(INDEX, 32)?;
            }
            0x0e => {
                for _ in 0..=self.u(LABEL, 32)? {
                    self.u(LABEL, 32)?;
                }
            }
            0x10 | 0x12 | 0xd2 => {
                self.u(CALL, 32)?;
            }
            0x11 | 0x13 => {
                self.u(OTHER, 32)?;
                self.u(OTHER, 32)?;
            }
            0x1c => {
                for _ in 0..self.u(OTHER, 32)? {
                    self.value_type(OTHER)?;
                }
            }
            0x1f => {
                self.block_type()?;
                for _ in 0..self.u(OTHER, 32)? {
                    match self.b(OTHER)? {
                        0 | 1 => {
                            self.u(INDEX, 32)?;
                            self.u(LABEL, 32)?;
                        }
                        2 | 3 => {
                            self.u(LABEL, 32)?;
                        }
                        _ => return Err("catch kind".into()),
                    }
                }
            }
            0x28..=0x3e => self.memarg((op, 0))?,
            0x41 => {
                self.s(I32, 32)?;
            }
            0x42 => {
                self.s(I64, 64)?;
            }
            0x43 => self.n(BYTES, 4)?,
            0x44 => self.n(BYTES, 8)?,
            0xd0 => {
                self.s(OTHER, 33)?;
            }
            0xfc => match self.u(OP, 32)? {
                0..=7 => {}
                8 | 10 | 12 | 14 => {
                    self.u(INDEX, 32)?;
                    self.u(INDEX, 32)?;
                }
                9 | 11 | 13 | 15 | 16 | 17 => {
                    self.u(INDEX, 32)?;
                }
                _ => return Err("FC sub-opcode".into()),
            },
            0xfd => match self.u(OP, 32)? {
                sub @ (0..=11 | 92 | 93) => self.memarg((op, sub))?,
                12 | 13 => self.n(BYTES, 16)?,
                21..=34 => self.n(OTHER, 1)?,
                sub @ 84..=91 => {
                    self.memarg((op, sub))?;
                    self.n(OTHER, 1)?;
                }
                14..=20 | 35..=83 | 94..=275 => {}
                _ => return Err("FD sub-opcode".into()),
            },
            0xfe => match self.u(OP, 32)? {
                3 => self.n(OTHER, 1)?,
                sub @ (0..=2 | 0x10..=0x4e) => self.memarg((op, sub))?,
                _ => return Err("FE sub-opcode".into()),
            },
            _ => return Err(format!("opcode {op:#x}")),
        }
        Ok(())
    }
}

/// The code section's contents (start, end), from the section headers alone.
fn code_contents(m: &[u8]) -> Outcome<(usize, usize)> {
    if m.len() < 8 || &m[..8] != b"\0asm\x01\0\0\0" {
        return Err("not a wasm module".into());
    }
    let mut at = 8;
    let mut code = None;
    while at < m.len() {
        let id = byte(m, &mut at)?;
        let size = uleb(m, &mut at, 32)?;
        let contents = at;
        skip(m, &mut at, size)?;
        if id == 10 {
            if code.is_some() {
                return Err("two code sections".into());
            }
            code = Some((contents, at));
        }
    }
    code.ok_or_else(|| "no code section".into())
}

/// §2.8.7: the module with its code section split into the field streams.
fn split(m: &[u8], coding: Coding) -> Outcome<Vec<u8>> {
    let (start, end) = code_contents(m)?;
    let (mtf, aligns) = (coding.mtf.then(Vec::new), coding.aligns.then(Default::default));
    let mut f = Fields { src: vec![&m[start..end]], at: vec![0], out: vec![Vec::new(); 12], joining: false, mtf, aligns };
    f.code(end - start)?;
    let mut out = m[..start].to_vec();
    for stream in &f.out {
        out.extend_from_slice(stream);
    }
    out.extend_from_slice(&m[end..]);
    if coding.gaps {
        gaps(&mut out, false)?;
    }
    Ok(out)
}

/// §2.8.7 data gaps, in place: each active segment's `i32.const` address of canonical width w
/// (splitting; joining, every one) to (address - the last active segment's end) modulo
/// 2^(7w), or 2^32 for w = 5, as a signed number padded to w bytes; joining, back, the address
/// written canonical in w bytes. A data section that does not walk is left alone.
fn gaps(m: &mut [u8], joining: bool) -> Outcome<()> {
    let mut at = 8;
    let mut data = None;
    while at < m.len() {
        let id = byte(m, &mut at)?;
        let size = uleb(m, &mut at, 32)?;
        let contents = at;
        skip(m, &mut at, size)?;
        if id == 11 {
            data = Some((contents, at));
        }
    }
    let Some((contents, end)) = data else { return Ok(()) };
    // Per segment: None if passive, else (field position, width, its value if `i32.const`,
    // its end as it is read).
    type Field = Option<(usize, usize, Option<i64>, u64)>;
    let walk = |m: &[u8]| -> Outcome<Vec<Field>> {
        let s = &m[..end];
        let mut p = contents;
        let mut out = Vec::new();
        for _ in 0..uleb(s, &mut p, 32)? {
            let flags = uleb(s, &mut p, 32)?;
            let field = match flags {
                0 | 2 => {
                    if flags == 2 && uleb(s, &mut p, 32)? != 0 {
                        return Err("memory".into());
                    }
                    let op = byte(s, &mut p)?;
                    let at = p;
                    let v = match op {
                        0x41 => sleb(s, &mut p, 32)?,
                        0x42 => sleb(s, &mut p, 64)?,
                        _ => return Err("offset".into()),
                    };
                    if byte(s, &mut p)? != 0x0b {
                        return Err("offset end".into());
                    }
                    Some((at, p - 1 - at, (op == 0x41).then_some(v), v as u64 & 0xffff_ffff))
                }
                1 => None,
                _ => return Err("segment flags".into()),
            };
            let len = uleb(s, &mut p, 32)?;
            skip(s, &mut p, len)?;
            out.push(field.map(|(at, w, v, address)| (at, w, v, address.wrapping_add(len) & 0xffff_ffff)));
        }
        Ok(out)
    };
    let Ok(segments) = walk(m) else { return Ok(()) };
    let mut last_end = 0i64;
    for (at, w, value, end_as_is) in segments.into_iter().flatten() {
        let modulus = 1i64 << (7 * w as u32).min(32);
        let signed = |v: i64| {
            let v = v.rem_euclid(modulus);
            if v >= modulus / 2 {
                v - modulus
            } else {
                v
            }
        };
        let mut field = Vec::new();
        let mut end_here = end_as_is as i64;
        match value {
            Some(v) if joining => {
                let address = signed(v + last_end);
                put_sleb(&mut field, address);
                if field.len() != w {
                    return Err("a data gap restores an address not of its width".into());
                }
                let len = (end_as_is as i64 - (v & 0xffff_ffff)).rem_euclid(1 << 32);
                end_here = (address + len).rem_euclid(1 << 32);
            }
            Some(v) => {
                put_sleb(&mut field, v);
                if field.len() == w {
                    field.clear();
                    let gap = signed(v - last_end);
                    for i in 0..w {
                        let b = ((gap >> (7 * i)) & 0x7f) as u8;
                        field.push(if i + 1 < w { b | 0x80 } else { b });
                    }
                } else {
                    field.clear();
                }
            }
            None => {}
        }
        if !field.is_empty() {
            m[at..at + w].copy_from_slice(&field);
        }
        last_end = end_here;
    }
    Ok(())
}

/// §2.8.7: the module with its code section interleaved again.
fn join(n: &[u8], lens: &[u64; 12], coding: Coding) -> Outcome<Vec<u8>> {
    let (start, end) = code_contents(n)?;
    let mut src = Vec::new();
    let mut at = start as u64;
    for &len in lens {
        let e = at.checked_add(len).filter(|&e| e <= end as u64).ok_or("streams past the code section")?;
        src.push(&n[at as usize..e as usize]);
        at = e;
    }
    if at != end as u64 {
        return Err("streams short of the code section".into());
    }
    let (mtf, aligns) = (coding.mtf.then(Vec::new), coding.aligns.then(Default::default));
    let mut f = Fields { src, at: vec![0; 12], out: vec![Vec::new()], joining: true, mtf, aligns };
    f.code(end - start)?;
    if f.at.iter().zip(lens).any(|(&a, &l)| a as u64 != l) {
        return Err("stream bytes left over".into());
    }
    let mut out = n[..start].to_vec();
    out.extend_from_slice(&f.out[0]);
    out.extend_from_slice(&n[end..]);
    if coding.gaps {
        gaps(&mut out, true)?;
    }
    Ok(out)
}
