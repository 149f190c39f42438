//! The containers a deflate stream comes in: gzip (RFC 1952, one member) and zlib (RFC 1950).
//! [`Framing::of`] finds where the deflate stream starts and where its trailer begins; the
//! header and trailer bytes are kept as they are, so an odd header (a file name, an extra
//! field, a header CRC) comes back byte for byte.

/// Which container a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// RFC 1952: `1F 8B 08`, flags, time, extra flags, system, optional fields; the trailer is
    /// the CRC-32 and the size mod 2^32 of the content.
    Gzip,
    /// RFC 1950: two bytes (method 8, a check that makes them a multiple of 31, no preset
    /// dictionary); the trailer is the Adler-32 of the content.
    Zlib,
}

impl Container {
    /// Its code in a side info.
    pub fn code(self) -> u8 {
        match self {
            Container::Gzip => 0,
            Container::Zlib => 1,
        }
    }

    /// The container a side info's code names.
    pub fn from_code(code: u8) -> Option<Container> {
        match code {
            0 => Some(Container::Gzip),
            1 => Some(Container::Zlib),
            _ => None,
        }
    }

    /// The trailer's length.
    pub fn trailer_len(self) -> usize {
        match self {
            Container::Gzip => 8,
            Container::Zlib => 4,
        }
    }

    /// Whether `bytes` start like this container: a look at the first bytes only.
    pub fn starts(self, bytes: &[u8]) -> bool {
        match self {
            Container::Gzip => bytes.starts_with(&[0x1f, 0x8b, 0x08]),
            Container::Zlib => {
                bytes.len() >= 2
                    && bytes[0] & 0x0f == 8
                    && bytes[0] >> 4 <= 7
                    && bytes[1] & 0x20 == 0
                    && (u16::from(bytes[0]) << 8 | u16::from(bytes[1])) % 31 == 0
            }
        }
    }

    /// The container `bytes` start like, if any.
    pub fn detect(bytes: &[u8]) -> Option<Container> {
        [Container::Gzip, Container::Zlib].into_iter().find(|c| c.starts(bytes))
    }
}

/// Where a compressed file's parts are: `header` bytes, then the deflate stream, then the
/// trailer (the last [`Container::trailer_len`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// The container.
    pub container: Container,
    /// Length of the header.
    pub header_len: usize,
}

impl Framing {
    /// The framing of `file`, or why it is not one file of a container this crate reads.
    pub fn of(file: &[u8]) -> Result<Framing, &'static str> {
        let container = Container::detect(file).ok_or("neither gzip nor zlib")?;
        let header_len = match container {
            Container::Zlib => 2,
            Container::Gzip => gzip_header_len(file)?,
        };
        if file.len() < header_len + container.trailer_len() {
            return Err("shorter than its header and trailer");
        }
        Ok(Framing { container, header_len })
    }

    /// The deflate stream of `file`, this framing's.
    pub fn deflate<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        &file[self.header_len..file.len() - self.container.trailer_len()]
    }
}

/// The length of a gzip member's header (RFC 1952 §2.3): 10 bytes and the optional fields the
/// flags announce.
fn gzip_header_len(file: &[u8]) -> Result<usize, &'static str> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let flags = *file.get(3).ok_or("gzip header truncated")?;
    if flags & 0xe0 != 0 {
        return Err("gzip header has reserved flags set");
    }
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let len = file.get(at..at + 2).ok_or("gzip extra field truncated")?;
        at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let rest = file.get(at..).ok_or("gzip header truncated")?;
            at += 1 + rest.iter().position(|&b| b == 0).ok_or("gzip name or comment not terminated")?;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    if at > file.len() {
        return Err("gzip header truncated");
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_with_every_optional_field_are_measured() {
        // Flags: FHCRC | FEXTRA | FNAME | FCOMMENT.
        let mut file = vec![0x1f, 0x8b, 8, 2 | 4 | 8 | 16, 0, 0, 0, 0, 0, 3];
        file.extend_from_slice(&[3, 0, b'a', b'b', b'c']);
        file.extend_from_slice(b"name\0comment\0");
        file.extend_from_slice(&[0xaa, 0xbb]);
        let header = file.len();
        file.extend_from_slice(&[3, 0]); // an empty fixed-Huffman block
        file.extend_from_slice(&[0; 8]);
        let f = Framing::of(&file).unwrap();
        assert_eq!((f.container, f.header_len), (Container::Gzip, header));
        assert_eq!(f.deflate(&file), &[3, 0]);
    }

    #[test]
    fn truncated_and_foreign_headers_are_refused() {
        assert!(Framing::of(b"").is_err());
        assert!(Framing::of(&[0x1f, 0x8b, 8, 8, 0, 0, 0, 0, 0, 3, b'x']).is_err(), "unterminated name");
        assert!(Framing::of(&[0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 3, 0xff, 0xff]).is_err(), "extra field past the end");
        assert!(Framing::of(&[0x1f, 0x8b, 8, 0x20, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(), "reserved flag");
        assert!(Framing::of(b"PK\x03\x04").is_err());
        assert_eq!(Container::detect(&[0x78, 0x9c]), Some(Container::Zlib));
        assert_eq!(Container::detect(&[0x78, 0x9d]), None, "check bits wrong");
        assert_eq!(Container::detect(&[0x78, 0xbb]), None, "a preset dictionary");
    }
}
