//! How references are renumbered, one direction or the other: function indices through the
//! function map, Go's PCs through the PC tables, memory addresses through the address map;
//! and the data section's pointer-sized words, rewritten in place with them.

use crate::addresses::AddressMap;
use crate::error::TransformError;
use crate::immediates::ImmediateKind;
use crate::leb::{write_signed, write_unsigned};
use crate::module::PcTable;
use crate::side_info::FunctionMap;

/// The function index a Go PC refers to, if it lies in the PC table.
pub(crate) fn pc_slot(value: i64, table: PcTable) -> Option<u64> {
    if value < 0 {
        return None;
    }
    let slot = (value as u64) >> 16;
    let offset = slot.checked_sub(u64::from(table.base))?;
    (offset < u64::from(table.len)).then(|| u64::from(table.first) + offset)
}

/// How references are renumbered in one direction or the other.
pub(crate) struct References<'a> {
    pub(crate) map: &'a FunctionMap,
    /// The PC table of the module being transformed (new side).
    pub(crate) own_pc: Option<PcTable>,
    /// The PC table of the reference (old side) numbering.
    pub(crate) ref_pc: Option<PcTable>,
    pub(crate) addresses: &'a AddressMap,
    /// Whether memarg offsets are rewritten (side info version 2).
    pub(crate) offsets: bool,
    /// The writer's: values that bodies of unchanged shape show the same in both builds,
    /// sorted (empty for the applier, which keeps what the side info lists).
    pub(crate) shared: &'a [i64],
}

impl References<'_> {
    /// Whether the writer keeps `value`, which it would normalize to `normalized`, as it is (an
    /// exception): a value that unchanged bodies show the same in both builds is a number both
    /// share more likely than an address that moved (a character code that falls in data that
    /// grew would get the grown bytes' fresh address; in a changed body it should not).
    pub(crate) fn keeps(&self, kind: ImmediateKind, value: i64, normalized: i64) -> bool {
        let address = match kind {
            ImmediateKind::Function => false,
            ImmediateKind::I64Const => self.own_pc.is_none_or(|t| pc_slot(value, t).is_none()),
            ImmediateKind::I32Const | ImmediateKind::MemOffset => true,
        };
        address && normalized != value && self.shared.binary_search(&value).is_ok()
    }

    pub(crate) fn forward(&self, kind: ImmediateKind, value: i64) -> i64 {
        match kind {
            ImmediateKind::Function => match self.map.forward(value as u64) {
                Some(n) if n <= u64::from(u32::MAX) => n as i64,
                _ => value,
            },
            ImmediateKind::I32Const => self.address_forward(value, i64::from(i32::MAX)),
            ImmediateKind::MemOffset => self.address_forward(value, i64::from(u32::MAX)),
            ImmediateKind::I64Const => {
                let (Some(own), Some(theirs)) = (self.own_pc, self.ref_pc) else {
                    return self.address_forward(value, i64::MAX);
                };
                let Some(function) = pc_slot(value, own) else {
                    return self.address_forward(value, i64::MAX);
                };
                let Some(normalized) = self.map.forward(function) else {
                    return value;
                };
                let Some(slot) = normalized.checked_sub(u64::from(theirs.first)).and_then(|o| o.checked_add(u64::from(theirs.base))) else {
                    return value;
                };
                if slot >= 1 << 47 {
                    return value;
                }
                ((slot << 16) | (value as u64 & 0xffff)) as i64
            }
        }
    }

    pub(crate) fn inverse(&self, kind: ImmediateKind, value: i64) -> i64 {
        match kind {
            ImmediateKind::Function => match self.map.inverse(value as u64) {
                Some(n) if n <= u64::from(u32::MAX) && value >= 0 => n as i64,
                _ => value,
            },
            ImmediateKind::I32Const => self.address_inverse(value, i64::from(i32::MAX)),
            ImmediateKind::MemOffset => self.address_inverse(value, i64::from(u32::MAX)),
            ImmediateKind::I64Const => {
                let pc = |(own, theirs): (PcTable, PcTable)| {
                    let normalized = pc_slot(value, PcTable { len: u32::MAX, ..theirs })?;
                    let function = self.map.inverse(normalized)?;
                    let offset = function.checked_sub(u64::from(own.first)).filter(|&o| o < u64::from(own.len))?;
                    Some((((u64::from(own.base) + offset) << 16) | (value as u64 & 0xffff)) as i64)
                };
                match self.own_pc.zip(self.ref_pc).and_then(pc) {
                    Some(v) => v,
                    None => self.address_inverse(value, i64::MAX),
                }
            }
        }
    }

    fn address_forward(&self, value: i64, max: i64) -> i64 {
        if value < 0 {
            return value;
        }
        match self.addresses.forward(value as u64) {
            Some(n) if n <= max as u64 => n as i64,
            _ => value,
        }
    }

    fn address_inverse(&self, value: i64, max: i64) -> i64 {
        if value < 0 {
            return value;
        }
        match self.addresses.inverse(value as u64) {
            Some(n) if n <= max as u64 => n as i64,
            _ => value,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Forward,
    Inverse,
}

/// Rewrites the pointer-sized words of the data segments (8 bytes in Go,
/// whose pointers and PCs are 64-bit; 4 bytes otherwise), aligned by address,
/// in place: the section keeps its size. Forward fills `exceptions` with the
/// ordinals of words kept verbatim; inverse reads them from it. Returns how
/// many words changed.
pub(crate) fn rewrite_data_words(
    out: &mut [u8],
    segments: &[(u64, usize, usize)],
    refs: &References,
    direction: Direction,
    exceptions: &mut Vec<u64>,
) -> Result<u64, TransformError> {
    if refs.addresses.pieces().is_empty() && refs.map.is_identity() {
        if direction == Direction::Inverse && !exceptions.is_empty() {
            return Err(TransformError::SideInfo { offset: 0, what: "data exceptions without a mapping" });
        }
        return Ok(0);
    }
    let (width, kind) = if refs.own_pc.is_some() { (8usize, ImmediateKind::I64Const) } else { (4, ImmediateKind::I32Const) };
    let mut ordinal = 0u64;
    let mut changed = 0u64;
    let mut listed = std::mem::take(exceptions);
    let mut next_listed = 0usize;
    for &(address, start, stop) in segments {
        let skip = ((width as u64 - address % width as u64) % width as u64) as usize;
        let mut p = start + skip;
        while p + width <= stop {
            let word = &mut out[p..p + width];
            let value = if width == 8 {
                i64::from_le_bytes(word.try_into().expect("8 bytes"))
            } else {
                i64::from(u32::from_le_bytes(word.try_into().expect("4 bytes")))
            };
            match direction {
                Direction::Forward => {
                    let n = refs.forward(kind, value);
                    if n != value {
                        if refs.inverse(kind, n) == value {
                            write_word(word, n);
                            changed += 1;
                        } else {
                            listed.push(ordinal);
                        }
                    } else if refs.inverse(kind, n) != value {
                        listed.push(ordinal);
                    }
                }
                Direction::Inverse => {
                    if listed.get(next_listed) == Some(&ordinal) {
                        next_listed += 1;
                    } else {
                        let v = refs.inverse(kind, value);
                        if v != value {
                            write_word(word, v);
                            changed += 1;
                        }
                    }
                }
            }
            ordinal += 1;
            p += width;
        }
    }
    if direction == Direction::Inverse && next_listed != listed.len() {
        return Err(TransformError::SideInfo { offset: 0, what: "data exceptions beyond the data words" });
    }
    *exceptions = listed;
    Ok(changed)
}

fn write_word(word: &mut [u8], value: i64) {
    let bytes = value.to_le_bytes();
    let n = word.len();
    word.copy_from_slice(&bytes[..n]);
}

pub(crate) fn write_immediate(out: &mut Vec<u8>, kind: ImmediateKind, value: i64) {
    match kind {
        ImmediateKind::Function | ImmediateKind::MemOffset => write_unsigned(out, value as u64),
        ImmediateKind::I64Const | ImmediateKind::I32Const => write_signed(out, value),
    }
}
