//! Hand-made wasm modules: sections, vectors and function bodies in the
//! binary format's own layout, so tests can build exactly the bytes they mean
//! (padded LEB128s, odd section orders) without a toolchain.

use crate::leb128;

/// The magic number and version 1 that start every module.
pub const HEADER: &[u8; 8] = b"\0asm\x01\0\0\0";

/// Section ids of the binary format.
pub mod id {
    pub const CUSTOM: u8 = 0;
    pub const TYPE: u8 = 1;
    pub const IMPORT: u8 = 2;
    pub const FUNCTION: u8 = 3;
    pub const TABLE: u8 = 4;
    pub const MEMORY: u8 = 5;
    pub const EXPORT: u8 = 7;
    pub const START: u8 = 8;
    pub const ELEMENT: u8 = 9;
    pub const CODE: u8 = 10;
    pub const DATA: u8 = 11;
}

/// A section: its id, the contents' size (LEB128) and the contents.
pub fn section(id: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![id];
    leb128::write_u64(&mut out, contents.len() as u64);
    out.extend_from_slice(contents);
    out
}

/// A vector: the item count (LEB128) and the items, each already encoded.
pub fn vector(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = leb128::u64(items.len() as u64);
    for item in items {
        out.extend_from_slice(item);
    }
    out
}

/// A name: its length (LEB128) and its bytes.
pub fn name(text: &[u8]) -> Vec<u8> {
    let mut out = leb128::u64(text.len() as u64);
    out.extend_from_slice(text);
    out
}

/// A function body as the code section holds it, without its size:
/// `locals` (the encoded local declarations, `[0]` for none), the
/// instructions and the final `end`.
pub fn body(locals: &[u8], instructions: &[u8]) -> Vec<u8> {
    [locals, instructions, &[0x0b]].concat()
}

/// Builds a module section by section, in the order the calls come; the
/// calls chain, or take turns with other code on a `let mut` builder.
///
/// ```
/// use edgepatch_testkit::wasm::{body, WasmModuleBuilder};
/// let m = WasmModuleBuilder::new().void_type().functions(1).code(&[body(&[0], &[])]).finish();
/// assert_eq!(&m[..4], b"\0asm");
/// ```
#[derive(Clone, Debug)]
pub struct WasmModuleBuilder {
    bytes: Vec<u8>,
}

impl Default for WasmModuleBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl WasmModuleBuilder {
    /// A module of no sections: the header alone.
    pub fn new() -> Self {
        WasmModuleBuilder { bytes: HEADER.to_vec() }
    }

    /// Appends section `id` with `contents`.
    pub fn section(&mut self, id: u8, contents: &[u8]) -> &mut Self {
        self.bytes.extend(section(id, contents));
        self
    }

    /// Appends bytes as they are (sections made elsewhere, or junk).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// Appends a custom section named `name`.
    pub fn custom(&mut self, name_text: &[u8], contents: &[u8]) -> &mut Self {
        self.section(id::CUSTOM, &[name(name_text), contents.to_vec()].concat())
    }

    /// Appends a type section of one type, `() -> ()`.
    pub fn void_type(&mut self) -> &mut Self {
        self.section(id::TYPE, &[1, 0x60, 0, 0])
    }

    /// Appends a function section of `count` functions, all of type 0.
    pub fn functions(&mut self, count: usize) -> &mut Self {
        self.section(id::FUNCTION, &vector(&vec![vec![0]; count]))
    }

    /// Appends a code section of `bodies` (see [`body`]), each after its size.
    pub fn code(&mut self, bodies: &[Vec<u8>]) -> &mut Self {
        let items: Vec<Vec<u8>> = bodies.iter().map(|b| [leb128::u64(b.len() as u64), b.clone()].concat()).collect();
        self.section(id::CODE, &vector(&items))
    }

    /// The module's bytes so far.
    pub fn finish(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_binary_layout() {
        let m = WasmModuleBuilder::new().void_type().functions(2).code(&[body(&[0], &[0x10, 1]), body(&[0], &[])]).custom(b"x", &[7]).finish();
        let expected = [&HEADER[..], &[1, 4, 1, 0x60, 0, 0], &[3, 3, 2, 0, 0], &[10, 9, 2, 4, 0, 0x10, 1, 0x0b, 2, 0, 0x0b], &[0, 3, 1, b'x', 7]].concat();
        assert_eq!(m, expected);
    }
}
