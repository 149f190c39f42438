//! §2.8.7: the split layout: a code section's fields in streams of their own,
//! locals and alignments coded, data gaps; split (an old module) and join.

use edgepatch_testkit::leb128;

use super::*;

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
pub(super) const OP: usize = 0;
pub(super) const BLOCK: usize = 1;
pub(super) const LABEL: usize = 2;
pub(super) const LOCAL: usize = 3;
pub(super) const INDEX: usize = 4;
pub(super) const CALL: usize = 5;
pub(super) const I32: usize = 6;
pub(super) const I64: usize = 7;
pub(super) const ALIGN: usize = 8;
pub(super) const OFFSET: usize = 9;
pub(super) const BYTES: usize = 10;
pub(super) const OTHER: usize = 11;

/// Reads a code section's fields: all from one interleaved source (splitting:
/// each field's bytes go to its stream), or each from its own stream
/// (joining: every field's bytes go to `out[0]` in order).
pub(super) struct Fields<'a> {
    pub(super) src: Vec<&'a [u8]>,
    pub(super) at: Vec<usize>,
    pub(super) out: Vec<Vec<u8>>,
    pub(super) joining: bool,
    /// §2.8.7 locals as move-to-front ranks: the list of 0..=127, reset per body.
    pub(super) mtf: Option<Vec<u8>>,
    /// §2.8.7 alignments coded: the last one-byte alignment's low 6 bits of each instruction
    /// (opcode, sub-opcode), over the whole section.
    pub(super) aligns: Option<std::collections::HashMap<(u8, u64), u8>>,
}

/// §2.8.7: the split layout's coding (the side info's locals or layout byte).
#[derive(Clone, Copy)]
pub struct Coding {
    pub(super) mtf: bool,
    pub(super) aligns: bool,
    pub(super) gaps: bool,
}

impl Fields<'_> {
    pub(super) fn k(&self, f: usize) -> usize {
        if self.joining {
            f
        } else {
            0
        }
    }
    pub(super) fn record(&mut self, f: usize, k: usize, s: usize) {
        let bytes = &self.src[k][s..self.at[k]];
        self.out[if self.joining { 0 } else { f }].extend_from_slice(bytes);
    }
    pub(super) fn u(&mut self, f: usize, bits: u32) -> Outcome<u64> {
        let k = self.k(f);
        let s = self.at[k];
        let v = uleb(self.src[k], &mut self.at[k], bits)?;
        self.record(f, k, s);
        Ok(v)
    }
    pub(super) fn s(&mut self, f: usize, bits: u32) -> Outcome<i64> {
        let k = self.k(f);
        let s = self.at[k];
        let v = sleb(self.src[k], &mut self.at[k], bits)?;
        self.record(f, k, s);
        Ok(v)
    }
    pub(super) fn b(&mut self, f: usize) -> Outcome<u8> {
        let k = self.k(f);
        let s = self.at[k];
        let v = byte(self.src[k], &mut self.at[k])?;
        self.record(f, k, s);
        Ok(v)
    }
    pub(super) fn n(&mut self, f: usize, n: u64) -> Outcome<()> {
        let k = self.k(f);
        let s = self.at[k];
        skip(self.src[k], &mut self.at[k], n)?;
        self.record(f, k, s);
        Ok(())
    }
    /// Bytes of the interleaved code section read or written so far.
    pub(super) fn pos(&self) -> usize {
        if self.joining {
            self.out[0].len()
        } else {
            self.at[0]
        }
    }
    pub(super) fn value_type(&mut self, f: usize) -> Outcome<()> {
        if matches!(self.b(f)?, 0x63 | 0x64) {
            self.s(f, 33)?;
        }
        Ok(())
    }
    pub(super) fn block_type(&mut self) -> Outcome<()> {
        // 0x63 and 0x64 read as one-byte signed LEB128: -29 and -28.
        if matches!(self.s(BLOCK, 33)?, -29 | -28) {
            self.s(BLOCK, 33)?;
        }
        Ok(())
    }
    /// A local index: with move-to-front on, a one-byte index is its rank in the list
    /// (splitting) or a one-byte rank stands for the index there (joining).
    pub(super) fn local(&mut self) -> Outcome<()> {
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
    pub(super) fn memarg(&mut self, op: (u8, u64)) -> Outcome<()> {
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
    pub(super) fn code(&mut self, len: usize) -> Outcome<()> {
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

    pub(super) fn instruction(&mut self) -> Outcome<()> {
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
pub(super) fn code_contents(m: &[u8]) -> Outcome<(usize, usize)> {
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
pub(super) fn split(m: &[u8], coding: Coding) -> Outcome<Vec<u8>> {
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
pub(super) fn gaps(m: &mut [u8], joining: bool) -> Outcome<()> {
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
                leb128::write_i64(&mut field, address);
                if field.len() != w {
                    return Err("a data gap restores an address not of its width".into());
                }
                let len = (end_as_is as i64 - (v & 0xffff_ffff)).rem_euclid(1 << 32);
                end_here = (address + len).rem_euclid(1 << 32);
            }
            Some(v) => {
                leb128::write_i64(&mut field, v);
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
pub(super) fn join(n: &[u8], lens: &[u64; 12], coding: Coding) -> Outcome<Vec<u8>> {
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
