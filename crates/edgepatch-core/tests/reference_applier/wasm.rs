//! The inverse of the wasm transform, written from docs/FORMAT.md §2.8 alone
//! (no code shared with `src/wasm_transform`): strict LEB128 readers, the
//! section parse, the body walk by opcode table and the data words here; the
//! side info and the value rules in `side_info`, the inverse in `inverse`, the
//! split layout in `layout`. Whole-module, in memory, slow on purpose.

mod inverse;
mod layout;
mod side_info;

pub use inverse::inverse;
use layout::*;
pub use layout::{has_layout, split_as};
use side_info::*;

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
