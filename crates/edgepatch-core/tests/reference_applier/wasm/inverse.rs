//! §2.8.6: the inverse, section by section, and the function keys of the
//! export, start and name sections (version 5).

use edgepatch_testkit::leb128;

use super::*;

/// `len` as unsigned LEB128 padded to exactly `width` bytes.
pub(super) fn put_padded(out: &mut Vec<u8>, len: u64, width: u64) -> Outcome<()> {
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
                        leb128::write_u64(&mut section, side.value(Kind::F, value as i64, m.pc) as u64);
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
            leb128::write_u64(&mut out, section.len() as u64);
            out.extend_from_slice(&section);
        } else if let Some(contents) = function_keys(n, id, contents, end, &side)? {
            out.push(id);
            leb128::write_u64(&mut out, contents.len() as u64);
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
                                leb128::write_u64(&mut restored, v as u64);
                            } else {
                                leb128::write_i64(&mut restored, v);
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
pub(super) fn function_keys(n: &[u8], id: u8, contents: usize, end: usize, side: &Side) -> Outcome<Option<Vec<u8>>> {
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
        leb128::write_u64(out, side.value(Kind::F, value as i64, None) as u64);
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
                leb128::write_u64(&mut out, keys.len() as u64);
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
