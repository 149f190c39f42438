//! §2.8.3: the side info, read whole, and the value rules that map normalized
//! numbers back (function numbers, addresses, DWARF addresses).

use super::*;

pub(super) struct Side {
    /// Version 2: memarg offsets are immediates (kind M).
    pub(super) offsets: bool,
    /// Every function keeps its number.
    pub(super) identity: bool,
    /// The address map's images (start, end, piece), sorted.
    pub(super) images: Vec<(u64, u64, usize)>,
    pub(super) code_width: u64,
    pub(super) ref_pc: Option<(u64, u64)>,
    /// (new_start, norm_start, len)
    pub(super) runs: Vec<(u64, u64, u64)>,
    pub(super) raw: std::collections::HashSet<u64>,
    pub(super) widths: std::collections::HashMap<u64, u64>,
    pub(super) exceptions: std::collections::HashSet<u64>,
    /// (new_start, end, delta)
    pub(super) pieces: Vec<(u64, u64, i64)>,
    pub(super) data_exceptions: std::collections::HashSet<u64>,
    /// Version 3 (§2.8.7): how locals and alignments are coded, the field streams' lengths.
    pub(super) layout: Option<(Coding, [u64; 12])>,
    /// Version 4: the element entries kept verbatim (None: element sections are copied).
    pub(super) element_exceptions: Option<std::collections::HashSet<u64>>,
    /// Version 5's `sections` byte without bit 0: 2 exports, 4 start, 8 the name section.
    pub(super) function_keys: u8,
    /// Version 6: the code address map's pieces, and the line and range ordinals kept
    /// verbatim (None: those sections are copied).
    pub(super) dwarf: Option<Dwarf>,
}

/// An address map's piece: (new_start, end, delta).
pub(super) type Piece = (u64, u64, i64);

/// Version 6 (§2.8.3, DWARF addresses).
pub(super) struct Dwarf {
    pub(super) pieces: Vec<Piece>,
    pub(super) line: Option<std::collections::HashSet<u64>>,
    pub(super) ranges: Option<std::collections::HashSet<u64>>,
}

pub(super) fn side(b: &[u8]) -> Outcome<Side> {
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
    pub(super) fn pi_inverse(&self, n: u64) -> Option<u64> {
        let r = self.runs[..self.runs.partition_point(|r| r.1 <= n)].last()?;
        (n - r.1 < r.2).then(|| r.0 + (n - r.1))
    }

    pub(super) fn alpha_inverse(&self, n: u64) -> Option<u64> {
        map_inverse(&self.pieces, n)
    }

    pub(super) fn address(&self, n: i64, limit: u64) -> i64 {
        if n < 0 {
            return n;
        }
        match self.alpha_inverse(n as u64) {
            Some(v) if v <= limit => v as i64,
            _ => n,
        }
    }

    pub(super) fn value(&self, kind: Kind, n: i64, pc: Option<(u64, u64, u64)>) -> i64 {
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
pub(super) fn map_inverse(pieces: &[(u64, u64, i64)], n: u64) -> Option<u64> {
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
pub(super) fn range_addresses(s: &[u8], from: usize, loc: bool) -> Outcome<Vec<usize>> {
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
pub(super) fn line_addresses(s: &[u8], from: usize) -> Outcome<Vec<usize>> {
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
