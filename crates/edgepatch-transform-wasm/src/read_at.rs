//! Reading a module that is not in memory through a callback (an applier's scratch space): a
//! window that moves forward, the section walk with the parser's checks, and the image of a
//! normalized form that the streaming inverse holds (every section but the large ones it copies
//! as they are, and the code section, which it reads a body at a time).

use crate::dwarf;
use crate::error::{corrupt, TransformError};
use crate::leb;
use crate::module::{self, CODE_SECTION};
use crate::window;

/// Reads bytes of a module that is not in memory, and takes bytes of one at an offset: the
/// callbacks of every transform (edgepatch-format's `transform`).
pub use edgepatch_format::transform::{ReadAt, WriteAt};

/// A byte range of a module: (start, end).
pub(crate) type Span = (usize, usize);

/// Bytes of a normalized form read at once where it is not in memory (section headers,
/// sections, bodies), outside the field streams' own windows.
pub(crate) const READ_WINDOW: usize = 64 << 10;

/// A window on a normalized form that is not in memory, moved forward as it is read.
#[derive(Default)]
pub(crate) struct ReadWindow(window::Window);

impl ReadWindow {
    /// Bytes `at..at + n` (within `..limit`), read with those after them up to a window.
    pub(crate) fn get<E>(&mut self, read: &mut ReadAt<'_, E>, limit: usize, at: usize, n: usize) -> Result<&[u8], E> {
        self.0.get(at, n, READ_WINDOW, limit, |at, buf| read(at as u64, buf))
    }
}

/// The sections of a module that is not in memory, one at a time: the checks of
/// `module::section_headers` (each section within the module, one code section), errors made
/// by `err`.
pub(crate) struct SectionWalk {
    pos: usize,
    len: usize,
    count: usize,
    code_seen: bool,
    err: fn(module::ParseError) -> TransformError,
}

impl SectionWalk {
    /// After the module's first 8 bytes (checked by the caller).
    pub(crate) fn new(len: usize, err: fn(module::ParseError) -> TransformError) -> Self {
        SectionWalk { pos: len.min(8), len, count: 0, code_seen: false, err }
    }

    /// The next section's (id, start, contents, end); None after the last.
    pub(crate) fn next<E: From<TransformError>>(&mut self, window: &mut ReadWindow, read: &mut ReadAt<'_, E>) -> Result<Option<(u8, usize, usize, usize)>, E> {
        let (pos, len) = (self.pos, self.len);
        if pos >= len {
            return Ok(None);
        }
        let bad = |what| (self.err)(module::ParseError { offset: pos, what });
        if self.count == module::MAX_SECTIONS {
            return Err(bad("more than 65,536 sections").into());
        }
        self.count += 1;
        let head = window.get(read, len, pos, (len - pos).min(6))?;
        let mut p = 1;
        let size = leb::read_unsigned(head, &mut p, 32).map_err(|_| bad("a section's size field ends early or is malformed"))? as usize;
        let end = (pos + p).checked_add(size).filter(|&e| e <= len).ok_or_else(|| bad("a section past the end of the module"))?;
        let id = head[0];
        if id == CODE_SECTION {
            if self.code_seen {
                return Err(bad("second code section").into());
            }
            self.code_seen = true;
        }
        self.pos = end;
        Ok(Some((id, pos, pos + p, end)))
    }
}

/// The normalized form of `len` bytes, read through `read`, with its code section's contents
/// left out (its header then says 0 bytes), and where those contents are in the form; likewise
/// the sections over 4 KiB that the inverse copies as they are and parses nowhere (types,
/// functions, tables, globals, the data count, tags, and custom sections but "name" and, with
/// `dwarf`, ".debug_line", ".debug_ranges" and ".debug_loc"), by index
/// with their place in the form: the module an inverse that reads those sections itself holds.
pub(crate) fn image_without_code<E: From<TransformError>>(len: u64, read: &mut ReadAt<'_, E>, dwarf: bool) -> Result<Image, E> {
    const COPIED_IN_PLACE: usize = 4 << 10;
    let len = usize::try_from(len).map_err(|_| TransformError::Normalized { offset: 0, what: "larger than this machine's memory" })?;
    let mut window = ReadWindow::default();
    let (mut image, mut code, mut copied) = (Vec::new(), None, Vec::new());
    image.extend_from_slice(window.get(read, len, 0, len.min(8))?);
    let mut sections = SectionWalk::new(len, corrupt);
    let mut index = 0;
    while let Some((id, start, contents, end)) = sections.next(&mut window, read)? {
        let copied_as_is = end - start > COPIED_IN_PLACE
            && match id {
                1 | 3 | 4 | 6 | 12 | 13 => true,
                0 => {
                    // Its name decides: "name" may be rewritten (§2.8.3); one that does not read stays in the image.
                    let head = window.get(read, len, contents, (end - contents).min(16))?;
                    let mut at = 0;
                    let read_name = leb::read_unsigned(head, &mut at, 32).ok().filter(|&n| n as usize <= end - contents - at);
                    let is = |n: u64, name: &[u8]| n as usize == name.len() && head.get(at..at + name.len()) == Some(name);
                    let rewritten =
                        |n| is(n, b"name") || dwarf && [dwarf::LINE_SECTION, dwarf::RANGES_SECTION, dwarf::LOC_SECTION].iter().any(|name| is(n, name));
                    read_name.is_some_and(|n| !rewritten(n))
                }
                _ => false,
            };
        if id == CODE_SECTION {
            code = Some((contents, end));
            image.extend_from_slice(&[CODE_SECTION, 0]);
        } else if copied_as_is {
            copied.push((index, (start, end)));
            image.extend_from_slice(&[id, 0]);
        } else if end - start <= READ_WINDOW {
            image.extend_from_slice(window.get(read, len, start, end - start)?);
        } else {
            let at = image.len();
            image.resize(at + end - start, 0);
            read(start as u64, &mut image[at..])?;
        }
        index += 1;
    }
    Ok(Image { bytes: image, code, copied })
}

/// What [`image_without_code`] holds of a module (`bytes`), and where the rest is.
pub(crate) struct Image {
    pub(crate) bytes: Vec<u8>,
    pub(crate) code: Option<Span>,
    pub(crate) copied: Vec<(usize, Span)>,
}
