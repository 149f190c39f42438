//! What a reader understands: the set of format features a patch may use.
//!
//! Every writer option that a reader must understand to apply the patch is named by one
//! [`Capability`]. A reader declares its [`Capabilities`]; a writer given them uses no
//! feature outside the set, so a client built before a feature existed still gets a patch it
//! can apply (docs/FORMAT.md §5). [`Capabilities::required_by_flags`] and
//! [`Capabilities::required_by_side_info`] say what a written patch needs, which is how a
//! reader's refusal ("unknown flag", "unknown side info version") is predicted before it
//! downloads anything.
//!
//! Bits are append-only: a capability keeps its bit forever, and a new one takes the next.
//! A set from a newer client may carry bits this build does not know; [`Capabilities::known`]
//! drops them (that client reads everything this build writes).

use std::fmt;

/// One format feature a reader may or may not understand. The discriminant is its bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Capability {
    /// Transformed wasm files (header flag bit 1, §2.8), side info versions 1 and 2.
    WasmTransform = 0,
    /// Window segments reaching back further than 4 MiB (header flag bit 2, §2.6).
    WindowReach = 1,
    /// Run-coded ops segments (header flag bit 3, §2.3).
    RunCodedOps = 2,
    /// The mode-blind listing digest (header flag bit 4, §2.1).
    ModeBlindDigest = 3,
    /// The wasm code section's field-split layout (side info version 3, or a layout byte
    /// from 1 to 8 in versions 4 to 6, §2.8.7).
    WasmSplitLayout = 4,
    /// Transform rows naming the old module a split-layout file reads (header flag bit 5,
    /// §2.8.1).
    WasmSplitReference = 5,
    /// LZMA window and ops segments (header flag bit 6, §2.3 `M`, §2.6 `L`).
    LzmaSegments = 6,
    /// Element entries as immediates (side info version 4, §2.8.3).
    WasmElements = 7,
    /// Function keys of the export, start and name sections (side info version 5, §2.8.3).
    WasmFunctionKeys = 8,
    /// DWARF line and range addresses (side info version 6, §2.8.3).
    WasmDwarfAddresses = 9,
    /// gzip and zlib files diffed as their content and rebuilt byte for byte (side infos
    /// `EPDF` in the transform table, §2.8.8).
    DeflateTransform = 10,
    /// Brotli files diffed as their content and rebuilt byte for byte by the reference
    /// encoder (side infos `EPDF` of container 2, §2.8.8).
    BrotliTransform = 11,
}

impl Capability {
    /// Every capability this build knows, in bit order.
    pub const ALL: [Capability; 12] = [
        Capability::WasmTransform,
        Capability::WindowReach,
        Capability::RunCodedOps,
        Capability::ModeBlindDigest,
        Capability::WasmSplitLayout,
        Capability::WasmSplitReference,
        Capability::LzmaSegments,
        Capability::WasmElements,
        Capability::WasmFunctionKeys,
        Capability::WasmDwarfAddresses,
        Capability::DeflateTransform,
        Capability::BrotliTransform,
    ];

    /// The capability's stable name (as in `--reader` lists and docs/FORMAT.md §5).
    pub fn name(self) -> &'static str {
        match self {
            Capability::WasmTransform => "wasm-transform",
            Capability::WindowReach => "window-reach",
            Capability::RunCodedOps => "run-coded-ops",
            Capability::ModeBlindDigest => "mode-blind-digest",
            Capability::WasmSplitLayout => "wasm-split-layout",
            Capability::WasmSplitReference => "wasm-split-reference",
            Capability::LzmaSegments => "lzma-segments",
            Capability::WasmElements => "wasm-elements",
            Capability::WasmFunctionKeys => "wasm-function-keys",
            Capability::WasmDwarfAddresses => "wasm-dwarf-addresses",
            Capability::DeflateTransform => "deflate-transform",
            Capability::BrotliTransform => "brotli-transform",
        }
    }

    /// The capability named `name`, if this build knows it.
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    fn bit(self) -> u64 {
        1 << self as u8
    }
}

/// A set of [`Capability`]: what a reader understands, or what a patch needs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u64);

/// A `--reader` list or a wire form that does not name a set of capabilities.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CapabilitiesError(String);

impl Capabilities {
    /// The baseline reader: patch version 2 with no header flag bit but the single-file
    /// one. A static site that cannot ask its readers publishes patches for a stated set,
    /// at least this.
    pub const BASELINE: Capabilities = Capabilities(0);

    /// What the readers of release 0.1 (the CLI, the browser library and @edgepatch/js) read:
    /// the first ten capabilities. Fixed forever, so that a static site publishing for it
    /// keeps serving those readers when later releases add capabilities (`v0.1` in lists).
    pub const RELEASE_0_1: Capabilities = Capabilities(0x3ff);

    /// Everything this build reads and writes.
    pub fn current() -> Capabilities {
        Capability::ALL.into_iter().collect()
    }

    /// Whether `c` is in the set.
    pub fn contains(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    /// The set with `c` added.
    pub fn with(self, c: Capability) -> Capabilities {
        Capabilities(self.0 | c.bit())
    }

    /// The set with `c` removed.
    pub fn without(self, c: Capability) -> Capabilities {
        Capabilities(self.0 & !c.bit())
    }

    /// Whether every capability of `self` is in `other`.
    pub fn is_subset(self, other: Capabilities) -> bool {
        self.0 & !other.0 == 0
    }

    /// The capabilities in either set.
    pub fn union(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 | other.0)
    }

    /// The capabilities in both sets.
    pub fn intersection(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 & other.0)
    }

    /// The capabilities of `self` missing from `other`.
    pub fn difference(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 & !other.0)
    }

    /// The set without bits this build does not know (a newer reader's).
    pub fn known(self) -> Capabilities {
        self.intersection(Capabilities::current())
    }

    /// The capabilities in bit order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.into_iter().filter(move |&c| self.contains(c))
    }

    /// The wire form: the set's bits as lowercase hexadecimal without leading zeros
    /// ("0" for the baseline). Used in URLs and cache keys, so one set has one form.
    pub fn to_hex(self) -> String {
        format!("{:x}", self.0)
    }

    /// Reads the wire form (1 to 16 hex digits). Unknown bits are kept: a newer reader's
    /// set; [`Capabilities::known`] drops them.
    pub fn from_hex(hex: &str) -> Result<Capabilities, CapabilitiesError> {
        if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CapabilitiesError(format!("reader capabilities {hex:?} are not 1 to 16 hexadecimal digits")));
        }
        u64::from_str_radix(hex, 16).map(Capabilities).map_err(|e| CapabilitiesError(e.to_string()))
    }

    /// Reads a list of names separated by commas, or one of the words `baseline` (no
    /// capability), `current` (all of this build's) and `v0.1` (release 0.1's readers). `current,-lzma-segments` names
    /// this build's set without one capability.
    pub fn parse_list(list: &str) -> Result<Capabilities, CapabilitiesError> {
        let mut set = Capabilities::BASELINE;
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (remove, name) = match item.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, item),
            };
            let named = match name {
                "baseline" => Capabilities::BASELINE,
                "current" => Capabilities::current(),
                "v0.1" => Capabilities::RELEASE_0_1,
                _ => match Capability::from_name(name) {
                    Some(c) => Capabilities::BASELINE.with(c),
                    None => {
                        let known: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
                        return Err(CapabilitiesError(format!("unknown reader capability {name:?} (known: baseline, current, v0.1, {})", known.join(", "))));
                    }
                },
            };
            set = if remove { Capabilities(set.0 & !named.0) } else { Capabilities(set.0 | named.0) };
        }
        Ok(set)
    }

    /// What a patch with these header flags needs (docs/FORMAT.md §2, flag bits 1 to 6).
    /// Bit 0 (single file) needs nothing; unknown bits are the reader's to refuse.
    pub fn required_by_flags(flags: u16) -> Capabilities {
        let by_bit = [
            (1, Capability::WasmTransform),
            (2, Capability::WindowReach),
            (3, Capability::RunCodedOps),
            (4, Capability::ModeBlindDigest),
            (5, Capability::WasmSplitReference),
            (6, Capability::LzmaSegments),
        ];
        by_bit.into_iter().filter(|&(bit, _)| flags & (1 << bit) != 0).map(|(_, c)| c).collect()
    }

    /// What a transformed file's side info needs (docs/FORMAT.md §2.8.4: its version byte,
    /// and in versions 4 to 6 its layout byte; a compressed asset's, §2.8.8, its transform). Side info too short to say is read as the
    /// transform alone (the reader refuses it as corrupt anyway).
    pub fn required_by_side_info(side_info: &[u8]) -> Capabilities {
        use crate::wasm_side_info::{side_info_has_code_layout, VERSION_DWARF_ADDRESSES, VERSION_ELEMENTS, VERSION_INDEX_SECTIONS};
        let mut set = Capabilities::BASELINE.with(Capability::WasmTransform);
        if crate::compressed_side_info::is_compressed(side_info) {
            let inner = crate::compressed_side_info::inner_side_info(side_info).map_or(set, Capabilities::required_by_side_info);
            let coding = match crate::compressed_side_info::container(side_info) {
                Some(crate::compressed_side_info::CONTAINER_BROTLI) => Capability::BrotliTransform,
                _ => Capability::DeflateTransform,
            };
            return set.with(coding).union(inner);
        }
        let version = side_info.get(4).copied().unwrap_or(0);
        for (since, c) in [
            (VERSION_ELEMENTS, Capability::WasmElements),
            (VERSION_INDEX_SECTIONS, Capability::WasmFunctionKeys),
            (VERSION_DWARF_ADDRESSES, Capability::WasmDwarfAddresses),
        ] {
            if (since..=VERSION_DWARF_ADDRESSES).contains(&version) {
                set = set.with(c);
            }
        }
        if side_info_has_code_layout(side_info) {
            set = set.with(Capability::WasmSplitLayout);
        }
        set
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Capabilities {
        iter.into_iter().fold(Capabilities::BASELINE, Capabilities::with)
    }
}

/// The names, comma-separated; `baseline` for the empty set.
impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Capability::name).collect();
        if names.is_empty() && self.0 == 0 {
            return f.write_str("baseline");
        }
        f.write_str(&names.join(","))?;
        let unknown = self.0 & !Capabilities::current().0;
        if unknown != 0 {
            write!(f, "{}unknown bits {unknown:#x}", if names.is_empty() { "" } else { "," })?;
        }
        Ok(())
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Capabilities({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_bits_are_one_to_one() {
        for (i, c) in Capability::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i, "ALL is in bit order");
            assert_eq!(Capability::from_name(c.name()), Some(c));
        }
        assert_eq!(Capabilities::current().iter().count(), Capability::ALL.len());
    }

    #[test]
    fn wire_form_round_trips_and_refuses_garbage() {
        for set in [Capabilities::BASELINE, Capabilities::current(), Capabilities::current().without(Capability::LzmaSegments)] {
            assert_eq!(Capabilities::from_hex(&set.to_hex()).unwrap(), set);
            assert_eq!(Capabilities::parse_list(&set.to_string()).unwrap(), set);
        }
        assert_eq!(Capabilities::BASELINE.to_hex(), "0");
        for bad in ["", "x", "12345678901234567", "-1", "0x3"] {
            assert!(Capabilities::from_hex(bad).is_err(), "{bad:?}");
        }
        assert!(Capabilities::parse_list("lzma").unwrap_err().to_string().contains("lzma-segments"));
    }

    #[test]
    fn a_newer_readers_bits_are_dropped_by_known() {
        let newer = Capabilities::from_hex("ffff").unwrap();
        assert_eq!(newer.known(), Capabilities::current());
        assert!(newer.to_string().contains("unknown bits"));
    }

    #[test]
    fn release_sets_are_fixed() {
        // A release's set never changes; this build reads at least every released reader's.
        assert_eq!(Capabilities::RELEASE_0_1.to_hex(), "3ff");
        assert!(Capabilities::RELEASE_0_1.is_subset(Capabilities::current()));
        assert_eq!(Capabilities::parse_list("v0.1").unwrap(), Capabilities::RELEASE_0_1);
    }

    #[test]
    fn lists_add_and_remove() {
        let set = Capabilities::parse_list("current,-lzma-segments, -wasm-dwarf-addresses").unwrap();
        assert!(!set.contains(Capability::LzmaSegments) && !set.contains(Capability::WasmDwarfAddresses));
        assert!(set.contains(Capability::WasmTransform));
        assert_eq!(Capabilities::parse_list("baseline").unwrap(), Capabilities::BASELINE);
    }

    #[test]
    fn flags_map_to_their_capabilities() {
        assert_eq!(Capabilities::required_by_flags(1), Capabilities::BASELINE);
        assert_eq!(
            Capabilities::required_by_flags(0x7f),
            Capabilities::current()
                .without(Capability::WasmSplitLayout)
                .without(Capability::WasmElements)
                .without(Capability::WasmFunctionKeys)
                .without(Capability::WasmDwarfAddresses)
                .without(Capability::DeflateTransform)
                .without(Capability::BrotliTransform)
        );
        assert_eq!(Capabilities::required_by_flags(64), Capabilities::BASELINE.with(Capability::LzmaSegments));
    }

    #[test]
    fn side_info_versions_map_to_their_capabilities() {
        let side = |version: u8, layout: u8| vec![b'E', b'P', b'W', b'T', version, 0, layout];
        let t = Capabilities::BASELINE.with(Capability::WasmTransform);
        assert_eq!(Capabilities::required_by_side_info(&side(1, 0)), t);
        assert_eq!(Capabilities::required_by_side_info(&side(2, 0)), t);
        assert_eq!(Capabilities::required_by_side_info(&side(3, 0)), t.with(Capability::WasmSplitLayout));
        assert_eq!(Capabilities::required_by_side_info(&side(4, 0)), t.with(Capability::WasmElements));
        assert_eq!(Capabilities::required_by_side_info(&side(4, 2)), t.with(Capability::WasmElements).with(Capability::WasmSplitLayout));
        assert!(Capabilities::required_by_side_info(&side(6, 1)).contains(Capability::WasmDwarfAddresses));
        assert_eq!(Capabilities::required_by_side_info(&[]), t);
        assert_eq!(Capabilities::required_by_side_info(b"EPDF\x01\x00\x05"), t.with(Capability::DeflateTransform));
        assert_eq!(Capabilities::required_by_side_info(b"EPDF\x01\x01\x05"), t.with(Capability::DeflateTransform));
        assert_eq!(Capabilities::required_by_side_info(b"EPDF\x01\x02\x05"), t.with(Capability::BrotliTransform));
    }
}
