//! Data addresses that shift between builds. Constants in code that point
//! into the data segments (`i32.const` in wasm32 toolchains, `i64.const` in
//! Go) are rewritten as the address the same bytes had in the old build.
//!
//! The old-to-new layout is learned from the data itself: 16-byte windows,
//! picked by content (so the same bytes are picked on both sides), that occur
//! once in each build give (new address, old address) anchors; runs of
//! anchors with the same displacement become pieces of a step function.

use super::leb::{read_signed, read_unsigned};
use super::module::Section;

const WINDOW: usize = 16;
/// One window in 2^SAMPLE_BITS is an anchor candidate.
const SAMPLE_BITS: u32 = 3;
/// A displacement needs this many agreeing anchors in a row to become a piece.
const MIN_RUN: usize = 2;
/// Past the data, the displacements tried for a piece: the data's last one and
/// this many of the most common among address pairs past both builds' data.
const TAIL_CANDIDATES: usize = 8;
/// Address pairs past both builds' data that make pieces there (with fewer, the
/// data's last piece reaches past it); a piece places at least a quarter as many.
const MIN_TAIL_PAIRS: usize = 8;
/// At most this many pieces past the data (and twice as many stretches tried).
const MAX_TAIL_PIECES: usize = 64;
/// At most this many address pairs past the data are read (each stretch tried walks them
/// once per candidate displacement).
const MAX_TAIL_PAIRS: usize = 1 << 16;

/// Active data segments of memory 0: (address, byte range in the module).
/// This is the format's list (docs/FORMAT.md §2.8.3, data words): an applier
/// reads it too.
pub(crate) fn data_segments(bytes: &[u8], section: &Section) -> Vec<(u64, usize, usize)> {
    every_data_segment(bytes, section).into_iter().filter_map(|(a, s, e)| a.map(|a| (a, s, e))).collect()
}

/// Every data segment in index order: its address if active in memory 0
/// (None if passive), and its byte range in the module. Empty if any
/// segment does not parse.
pub(crate) fn every_data_segment(bytes: &[u8], section: &Section) -> Vec<(Option<u64>, usize, usize)> {
    data_segment_walk(bytes, section).into_iter().map(|s| (s.address, s.start, s.end)).collect()
}

/// One data segment as [`data_segment_walk`] reads it.
pub(crate) struct DataSegment {
    /// Its address if active in memory 0, None if passive.
    pub address: Option<u64>,
    /// Where its offset expression's value is and how many bytes it takes, if that expression
    /// is `i32.const` (`41 s32 0B`): the address a side info's data addresses rewrite
    /// (docs/FORMAT.md §2.8.3, "Segment addresses").
    pub address_field: Option<(usize, usize)>,
    /// Its bytes in the module.
    pub start: usize,
    pub end: usize,
}

/// Every data segment of a data section in index order. Empty if any segment does not parse.
pub(crate) fn data_segment_walk(bytes: &[u8], section: &Section) -> Vec<DataSegment> {
    let mut out = Vec::new();
    let end = section.end;
    let mut pos = section.contents;
    let Ok(count) = read_unsigned(&bytes[..end], &mut pos, 32) else {
        return out;
    };
    for _ in 0..count {
        let Ok(flags) = read_unsigned(&bytes[..end], &mut pos, 32) else {
            return Vec::new();
        };
        let (address, address_field) = match flags {
            0 | 2 => {
                if flags == 2 && read_unsigned(&bytes[..end], &mut pos, 32) != Ok(0) {
                    return Vec::new();
                }
                let Some(&op) = bytes[..end].get(pos) else {
                    return Vec::new();
                };
                pos += 1;
                let at = pos;
                let value = match op {
                    0x41 => read_signed(&bytes[..end], &mut pos, 32),
                    0x42 => read_signed(&bytes[..end], &mut pos, 64),
                    _ => return Vec::new(),
                };
                let field = (op == 0x41).then_some((at, pos - at));
                let (Ok(v), Some(0x0b)) = (value, bytes[..end].get(pos)) else {
                    return Vec::new();
                };
                pos += 1;
                (Some(v as u32 as u64), field)
            }
            1 => (None, None),
            _ => return Vec::new(),
        };
        let Ok(len) = read_unsigned(&bytes[..end], &mut pos, 32) else {
            return Vec::new();
        };
        let start = pos;
        let Some(stop) = pos.checked_add(len as usize).filter(|&s| s <= end) else {
            return Vec::new();
        };
        pos = stop;
        out.push(DataSegment { address, address_field, start, end: stop });
    }
    out
}

/// The sampled windows of a data image that occur once in it: (hash, address),
/// sorted by hash. A sorted Vec, not a map: 16 bytes a window (a hash map took
/// over twice that, and twice again while it grew).
pub(crate) type WindowIndex = Vec<(u64, u64)>;

fn for_each_window<'a>(image: impl Iterator<Item = (u64, &'a [u8])>, f: &mut dyn FnMut(u64, u64)) {
    for (address, data) in image {
        if data.len() < WINDOW {
            continue;
        }
        for p in 0..=data.len() - WINDOW {
            let w = &data[p..p + WINDOW];
            if w.iter().all(|&b| b == w[0]) {
                continue;
            }
            let h = xxhash_rust::xxh3::xxh3_64(w);
            if h >> (64 - SAMPLE_BITS) == 0 {
                f(h, address + p as u64);
            }
        }
    }
}

/// The windows of a data image: (address, bytes) per segment, in any order.
pub(crate) fn index_windows<'a>(image: impl Iterator<Item = (u64, &'a [u8])> + Clone) -> WindowIndex {
    // Counted first, so that the list is allocated once at its size.
    let mut count = 0usize;
    for_each_window(image.clone(), &mut |_, _| count += 1);
    let mut all: Vec<(u64, u64)> = Vec::with_capacity(count);
    for_each_window(image, &mut |h, a| all.push((h, a)));
    all.sort_unstable();
    // Keep the hashes seen once, in place.
    let mut kept = 0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i + 1;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        if j - i == 1 {
            all[kept] = all[i];
            kept += 1;
        }
        i = j;
    }
    all.truncate(kept);
    all
}

/// The old build's data as the new build's forward transform needs it.
#[derive(Debug, Clone, Default)]
pub(crate) struct OldData {
    /// The segments' bytes, one after the other, in address order (one
    /// allocation: Go's modules have some 100,000 segments).
    data: Vec<u8>,
    /// (address, offset in `data`) of each segment, sorted by address; a
    /// segment's bytes end where the next one's start.
    starts: Vec<(u64, usize)>,
}

impl OldData {
    pub fn new(bytes: &[u8], segments: &[(u64, usize, usize)]) -> OldData {
        let mut sorted = segments.to_vec();
        sorted.sort_by_key(|s| s.0);
        let mut data = Vec::with_capacity(sorted.iter().map(|s| s.2 - s.1).sum());
        let mut starts = Vec::with_capacity(sorted.len());
        for (a, s, e) in sorted {
            starts.push((a, data.len()));
            data.extend_from_slice(&bytes[s..e]);
        }
        // Its windows are indexed when the new module's forward transform
        // needs them, not kept here: the reference stays a copy of the data.
        OldData { data, starts }
    }

    fn segment(&self, i: usize) -> (u64, &[u8]) {
        let end = self.starts.get(i + 1).map_or(self.data.len(), |n| n.1);
        (self.starts[i].0, &self.data[self.starts[i].1..end])
    }

    fn segments(&self) -> impl Iterator<Item = (u64, &[u8])> + Clone {
        (0..self.starts.len()).map(|i| self.segment(i))
    }

    /// From the lowest address of the data to the end of its last segment
    /// (the gaps between segments are zeros that still lie in the data).
    fn range(&self) -> std::ops::Range<u64> {
        let end = (0..self.starts.len()).map(|i| {
            let (a, d) = self.segment(i);
            a + d.len() as u64
        });
        self.starts.first().map_or(0, |s| s.0)..end.max().unwrap_or(0)
    }

    /// [`byte_at`] of the old image.
    fn byte_at(&self, address: u64) -> Option<u8> {
        let i = self.starts.partition_point(|s| s.0 <= address).checked_sub(1)?;
        let (start, data) = self.segment(i);
        data.get(usize::try_from(address - start).ok()?).copied()
    }
}

/// The byte at `address` of a data image sorted by address (later segments
/// win where they overlap, as at instantiation; close enough here).
fn byte_at<T: AsRef<[u8]>>(image: &[(u64, T)], address: u64) -> Option<u8> {
    let i = image.partition_point(|s| s.0 <= address).checked_sub(1)?;
    let (start, data) = (image[i].0, image[i].1.as_ref());
    data.get(usize::try_from(address - start).ok()?).copied()
}

/// A step function over new addresses: from `new_start` on (until the next
/// piece), add `delta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub new_start: u64,
    pub delta: i64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct AddressMap {
    /// Sorted by `new_start`.
    pieces: Vec<Piece>,
    /// Addresses at or past this are not mapped.
    new_end: u64,
    /// (image start, image end, piece), sorted by image start.
    images: Vec<(u64, u64, usize)>,
}

impl AddressMap {
    /// Builds the map from the old build's window index and the new data,
    /// refined by `pairs`: (new address, old address) pairs read off the
    /// constants of bodies that kept their shape (exact where an edit inside
    /// the data leaves too few windows to place it). Past the data lie
    /// zero-initialized variables, which follow the data and move with its
    /// end, or are laid out anew: where address pairs there are evidence
    /// enough, they make pieces of their own ([`tail_pieces`]); else the
    /// last piece reaches past the data as far as the code's constants there
    /// (`tail`) support its displacement.
    pub fn learn(old_data: &OldData, bytes: &[u8], segments: &[(u64, usize, usize)], pairs: &[(u64, u64)], tail: &TailConstants) -> AddressMap {
        let mut new_image: Vec<(u64, &[u8])> = segments.iter().map(|&(a, s, e)| (a, &bytes[s..e])).collect();
        new_image.sort_by_key(|i| i.0);
        let new = index_windows(new_image.iter().copied());
        let old = index_windows(old_data.segments());
        // Windows seen once on each side give (new address, displacement).
        let mut anchors: Vec<(u64, i64)> = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < new.len() && j < old.len() {
            match new[i].0.cmp(&old[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    anchors.push((new[i].1, old[j].1 as i64 - new[i].1 as i64));
                    i += 1;
                    j += 1;
                }
            }
        }
        drop((new, old));
        anchors.sort_unstable();
        let mut new_end = segments.iter().map(|s| s.0 + (s.2 - s.1) as u64).max().unwrap_or(0);
        let lowest = segments.iter().map(|s| s.0).min().unwrap_or(0);
        let data_end = new_end;
        // Anchors in runs that agree on the displacement are evidence; a lone
        // window is not (it may be a chance repeat).
        let mut points: Vec<(u64, i64)> = Vec::with_capacity(anchors.len() + pairs.len());
        let mut i = 0;
        while i < anchors.len() {
            let mut j = i + 1;
            while j < anchors.len() && anchors[j].1 == anchors[i].1 {
                j += 1;
            }
            if j - i >= MIN_RUN {
                points.extend_from_slice(&anchors[i..j]);
            }
            i = j;
        }
        drop(anchors);
        // Each address pair inside both builds' data is evidence too. (The old range once:
        // it walks every segment, and Go modules have some 100,000 of them.)
        let old_range = old_data.range();
        let mut exact: Vec<(u64, i64)> =
            pairs.iter().filter(|&&(n, o)| (lowest..data_end).contains(&n) && old_range.contains(&o)).map(|&(n, o)| (n, o as i64 - n as i64)).collect();
        points.extend_from_slice(&exact);
        exact.sort_unstable();
        exact = majority(&exact);
        points.sort_unstable();
        // One displacement per address (the one most evidence gives), then
        // consecutive points of one displacement make a piece, weighed by
        // its points.
        // (piece, its last point), weight
        let mut weighed: Vec<((Piece, u64), u64)> = Vec::new();
        for (address, delta, most) in majority_counted(&points) {
            match weighed.last_mut() {
                Some(((p, last), w)) if p.delta == delta => {
                    *w += most;
                    *last = address;
                }
                _ => weighed.push(((Piece { new_start: address, delta }, address), most)),
            }
        }
        drop(points);
        // Keep the pieces whose old addresses ascend too (moved blocks are
        // left to the diff), so that the pieces' images can be made
        // disjoint: the heaviest such chain.
        let old_start = |p: &Piece| p.new_start as i64 + p.delta;
        let mut chain: Vec<(Piece, u64)> = heaviest_ascending(&weighed, |p| old_start(&p.0));
        chain.dedup_by(|b, a| {
            let same = a.0.delta == b.0.delta;
            if same {
                a.1 = b.1;
            }
            same
        });
        // The last point of each kept piece: grown data starts after it.
        let last_points: Vec<u64> = chain.iter().map(|c| c.1).collect();
        let mut kept: Vec<Piece> = chain.into_iter().map(|c| c.0).collect();
        let mut tail_pieces = Vec::new();
        if let Some(last) = kept.last() {
            let mut past_both: Vec<(u64, i64)> =
                pairs.iter().filter(|&&(n, o)| n >= data_end && o >= old_range.end).map(|&(n, o)| (n, o as i64 - n as i64)).collect();
            if past_both.len() >= MIN_TAIL_PAIRS {
                past_both.sort_unstable();
                if past_both.len() > MAX_TAIL_PAIRS {
                    // Evenly spaced ones (the real modules measured have up to 15,009).
                    let step = past_both.len().div_ceil(MAX_TAIL_PAIRS);
                    past_both = past_both.into_iter().step_by(step).collect();
                }
                (tail_pieces, new_end) = self::tail_pieces(data_end, last.delta, &past_both, tail);
            }
            if tail_pieces.is_empty() {
                // Only the data's last piece reaches past it: as far as the pairs or the
                // constants support it.
                new_end = new_end.max(tail.stretch(data_end, last.delta).map_or(0, |(end, _)| end));
            }
        }
        // The data's last piece ends where a piece past the data starts.
        let data_pieces_end = tail_pieces.first().map_or(new_end, |p: &Piece| p.new_start);
        if let Some(first) = kept.first_mut() {
            // Data before the first anchor keeps its displacement.
            if lowest < first.new_start && lowest.checked_add_signed(first.delta).is_some() {
                first.new_start = lowest;
            }
        }
        // Where the new data grew, the grown part gets fresh addresses past
        // every old one, so that no two new addresses share a normalized one.
        let end_of = |k: usize| kept.get(k + 1).map_or(data_pieces_end, |n| n.new_start);
        let tail_end_of = |k: usize| tail_pieces.get(k + 1).map_or(new_end, |n: &Piece| n.new_start);
        let image_end = (0..kept.len())
            .filter_map(|k| end_of(k).checked_add_signed(kept[k].delta))
            .chain((0..tail_pieces.len()).filter_map(|k| tail_end_of(k).checked_add_signed(tail_pieces[k].delta)))
            .max()
            .unwrap_or(0);
        let mut fresh = image_end.max(new_end).next_multiple_of(1 << 12);
        let mut pieces: Vec<Piece> = Vec::with_capacity(kept.len() * 2);
        for k in 0..kept.len() {
            let piece = kept[k];
            pieces.push(piece);
            if let Some(next) = kept.get(k + 1) {
                let new_len = next.new_start - piece.new_start;
                let old_len = (old_start(next) - old_start(&piece)).max(0) as u64;
                if old_len < new_len {
                    // The grown part starts where the bytes stop matching
                    // under this piece's displacement.
                    let matching = (0..old_len)
                        .take_while(|&o| {
                            let a = piece.new_start + o;
                            let old_byte = a.checked_add_signed(piece.delta).and_then(|b| old_data.byte_at(b));
                            old_byte.is_some() && old_byte == byte_at(&new_image, a)
                        })
                        .count() as u64;
                    let grown = new_len - old_len;
                    // ... and the bytes before the next piece match under its one.
                    let matching_after = (0..old_len)
                        .take_while(|&o| {
                            let a = next.new_start - 1 - o;
                            let old_byte = a.checked_add_signed(next.delta).and_then(|b| old_data.byte_at(b));
                            old_byte.is_some() && old_byte == byte_at(&new_image, a)
                        })
                        .count() as u64;
                    // Both agree on any split in [old_len - after, matching];
                    // when edits leave no such split, trust the later piece.
                    let matching = if matching + matching_after >= old_len { matching } else { old_len - matching_after };
                    // Evidence of this piece's displacement reaches its last
                    // point: the grown part is not before it.
                    let matching = matching.max(last_points[k] + 1 - piece.new_start.min(last_points[k])).min(old_len);
                    let grown_at = piece.new_start + matching;
                    pieces.push(Piece { new_start: grown_at, delta: fresh as i64 - grown_at as i64 });
                    fresh += grown;
                    if matching < old_len {
                        pieces.push(Piece { new_start: grown_at + grown, delta: next.delta });
                    }
                }
            }
        }
        pieces.retain(|p| p.new_start < data_pieces_end);
        pieces.dedup_by(|b, a| a.new_start == b.new_start);
        let mut pieces = place_exact(pieces, data_pieces_end, &exact);
        pieces.extend(tail_pieces);
        AddressMap::from_pieces(pieces, new_end).unwrap_or_default()
    }

    /// Checks the pieces (ascending, inside the address range) and indexes
    /// their images for the inverse.
    pub fn from_pieces(pieces: Vec<Piece>, new_end: u64) -> Result<AddressMap, &'static str> {
        let mut images = Vec::with_capacity(pieces.len());
        for (k, p) in pieces.iter().enumerate() {
            let end = pieces.get(k + 1).map_or(new_end, |n| n.new_start);
            if end <= p.new_start {
                return Err("address pieces not ascending");
            }
            let start = p.new_start.checked_add_signed(p.delta).ok_or("address piece out of range")?;
            let stop = end.checked_add_signed(p.delta).ok_or("address piece out of range")?;
            images.push((start, stop, k));
        }
        images.sort_unstable();
        Ok(AddressMap { pieces, new_end, images })
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    pub fn new_end(&self) -> u64 {
        self.new_end
    }

    pub fn forward(&self, address: u64) -> Option<u64> {
        if address >= self.new_end {
            return None;
        }
        let k = self.pieces.partition_point(|p| p.new_start <= address).checked_sub(1)?;
        address.checked_add_signed(self.pieces[k].delta)
    }

    pub fn inverse(&self, normalized: u64) -> Option<u64> {
        let i = self.images.partition_point(|im| im.0 <= normalized).checked_sub(1)?;
        let (_, stop, k) = self.images[i];
        // checked_neg: a hostile delta of i64::MIN has no negation.
        (normalized < stop).then(|| self.pieces[k].delta.checked_neg().and_then(|d| normalized.checked_add_signed(d))).flatten()
    }
}

/// The `i32.const`/`i64.const` values (and memarg offsets) of the code that lie past the data
/// and below the memory's initial size: the new module's, sorted, with how often each occurs,
/// and the old module's, sorted, once each. Evidence of where the variables there moved.
pub(crate) struct TailConstants<'a> {
    pub new: &'a [(i64, u64)],
    pub old: &'a [i64],
}

impl TailConstants<'_> {
    /// Per new constant from `from` on, in order: the occurrences displacement `delta` turns
    /// into an old constant that the value itself is not count +1 each, those it turns away from
    /// an old constant -1 each. The running count's peak, if above 0, and the end just past
    /// the constant where it peaks.
    pub fn stretch(&self, from: u64, delta: i64) -> Option<(u64, i64)> {
        let from_here = &self.new[self.new.partition_point(|&(v, _)| (v as u64) < from)..];
        let (best, end) = running_peak(from_here.iter().map(|&(v, n)| (v as u64, self.count(v, n, delta))));
        (best > 0).then_some((end, best))
    }

    /// That count over the new constants in `[from, to)`.
    pub fn net(&self, from: u64, to: u64, delta: i64) -> i64 {
        let first = self.new.partition_point(|&(v, _)| (v as u64) < from);
        self.new[first..].iter().take_while(|&&(v, _)| (v as u64) < to).map(|&(v, n)| self.count(v, n, delta)).sum()
    }

    fn count(&self, v: i64, n: u64, delta: i64) -> i64 {
        let in_old = |v: i64| self.old.binary_search(&v).is_ok();
        match (in_old(v), v.checked_add(delta).is_some_and(in_old)) {
            (false, true) => n as i64,
            (true, false) => -(n as i64),
            _ => 0,
        }
    }
}

/// Over (position, step) in ascending position: the running sum's peak and the end just past
/// the position where it is first reached ((0, 0) if the sum never rises above 0).
fn running_peak(steps: impl Iterator<Item = (u64, i64)>) -> (i64, u64) {
    let (mut sum, mut best, mut end) = (0i64, 0i64, 0u64);
    for (at, step) in steps {
        sum += step;
        if sum > best {
            (best, end) = (sum, at + 1);
        }
    }
    (best, end)
}

/// The pieces past the data, from `data_end` on, read off `pairs` there: (new address,
/// displacement to the old one), sorted. Each piece takes, of the candidate displacements
/// (`last_delta`, the data's last, and the most common of the pairs'), the one whose stretch
/// from where the previous piece ends holds the most pairs it places, less those it displaces
/// that were in place as they are; the stretch ends after its last such pair. A first piece of
/// `last_delta` continues the data's last piece and is not listed. Returns the pieces and
/// where the last ends (`data_end` if there is none).
fn tail_pieces(data_end: u64, last_delta: i64, pairs: &[(u64, i64)], constants: &TailConstants) -> (Vec<Piece>, u64) {
    let mut deltas: Vec<i64> = pairs.iter().map(|p| p.1).collect();
    deltas.sort_unstable();
    let mut counted: Vec<(usize, i64)> = deltas.chunk_by(|a, b| a == b).map(|c| (c.len(), c[0])).collect();
    counted.sort_unstable_by(|a, b| b.cmp(a));
    let mut candidates: Vec<i64> = std::iter::once(last_delta).chain(counted.iter().take(TAIL_CANDIDATES).map(|c| c.1)).collect();
    candidates.sort_unstable();
    candidates.dedup();
    // From `from`, the net count of pairs a piece of displacement `delta` places, the first it
    // places and the end of the stretch that counts most.
    let stretch = |from: u64, delta: i64| {
        let from_here = &pairs[pairs.partition_point(|p| p.0 < from)..];
        let (best, end) = running_peak(from_here.iter().map(|&(n, d)| (n, (d == delta) as i64 - (d == 0) as i64)));
        let first = from_here.iter().find(|p| p.1 == delta).map_or(from, |p| p.0);
        (best as u64 >= MIN_TAIL_PAIRS as u64 / 4).then_some((best, first, end))
    };
    let (mut pieces, mut at, mut delta_at) = (Vec::new(), data_end, last_delta);
    // Each stretch walks the pairs once per candidate: at most twice as many stretches as
    // pieces (a stretch may continue the last piece), so a module with many pairs (an upload
    // to the Worker) costs a bounded number of walks.
    for _ in 0..2 * MAX_TAIL_PIECES {
        if pieces.len() == MAX_TAIL_PIECES {
            break;
        }
        // The most pairs placed; of equal counts the shorter stretch, then the smaller displacement.
        let best =
            candidates.iter().filter_map(|&d| stretch(at, d).map(|(score, first, end)| (score, std::cmp::Reverse(end), std::cmp::Reverse(d), first))).max();
        let Some((_, std::cmp::Reverse(end), std::cmp::Reverse(delta), first)) = best else { break };
        // Pairs come from unchanged bodies only: a new piece must also turn more of all the
        // code's constants over its stretch into old ones than it spoils.
        if delta != delta_at && constants.net(first, end, delta) <= 0 {
            break;
        }
        if delta != delta_at {
            // The piece starts at the first pair it places: the previous one reaches there. (Its
            // image then overlaps the previous one's, if at all, where the previous one has no
            // evidence; overlapping images cost exceptions.)
            pieces.push(Piece { new_start: first, delta });
            delta_at = delta;
        }
        at = end;
    }
    (pieces, at)
}

/// The chain of `items` (ascending in position) strictly ascending in `key`
/// whose weights sum highest (a Fenwick tree of prefix maxima over the keys'
/// ranks, O(n log n)).
fn heaviest_ascending<T: Copy, K: Ord + Copy>(items: &[(T, u64)], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut keys: Vec<K> = items.iter().map(|(t, _)| key(t)).collect();
    keys.sort_unstable();
    keys.dedup();
    // tree[r]: the best (total, item) over ranks of its range.
    let mut tree: Vec<(u64, usize)> = vec![(0, usize::MAX); keys.len() + 1];
    let mut parent = vec![usize::MAX; items.len()];
    let mut best = (0u64, usize::MAX);
    for (i, (item, weight)) in items.iter().enumerate() {
        let rank = keys.binary_search(&key(item)).expect("a key of the items");
        // The best chain ending below this key: ranks [0, rank).
        let (mut below, mut r) = ((0u64, usize::MAX), rank);
        while r > 0 {
            if tree[r].0 > below.0 {
                below = tree[r];
            }
            r &= r - 1;
        }
        parent[i] = below.1;
        let total = (below.0 + weight, i);
        if total.0 > best.0 {
            best = total;
        }
        let mut r = rank + 1;
        while r < tree.len() {
            if total.0 > tree[r].0 {
                tree[r] = total;
            }
            r += r & r.wrapping_neg();
        }
    }
    let mut out = Vec::new();
    let mut at = best.1;
    while at != usize::MAX {
        out.push(items[at].0);
        at = parent[at];
    }
    out.reverse();
    out
}

/// Per address of `points` (sorted), the displacement most of its points give.
fn majority(points: &[(u64, i64)]) -> Vec<(u64, i64)> {
    majority_counted(points).into_iter().map(|(address, delta, _)| (address, delta)).collect()
}

/// Per address of `points` (sorted): (address, the displacement most of its points give, how
/// many give it); the first displacement wins a tie.
fn majority_counted(points: &[(u64, i64)]) -> Vec<(u64, i64, u64)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let address = points[i].0;
        let (mut delta, mut most) = (points[i].1, 0usize);
        let mut j = i;
        while j < points.len() && points[j].0 == address {
            let mut k = j;
            while k < points.len() && points[k] == points[j] {
                k += 1;
            }
            if k - j > most {
                (delta, most) = (points[j].1, k - j);
            }
            j = k;
        }
        out.push((address, delta, most as u64));
        i = j;
    }
    out
}

/// Gives the addresses of `exact` (sorted (new address, displacement) from
/// constants of bodies that kept their shape) their own displacement where the
/// step function `pieces` disagrees, from the address to the next exact
/// address of another displacement (or the next piece), as long as no two
/// images overlap. All at once, not one by one: blocks of data that changed
/// order swap places, which no single move allows.
fn place_exact(pieces: Vec<Piece>, new_end: u64, exact: &[(u64, i64)]) -> Vec<Piece> {
    struct Span {
        start: u64,
        end: u64,
        delta: i64,
        /// The displacement of the piece it was cut from, if it was.
        was: Option<i64>,
    }
    let end_of = |k: usize| pieces.get(k + 1).map_or(new_end, |n| n.new_start);
    let mut spans: Vec<Span> = Vec::with_capacity(pieces.len() + 2 * exact.len());
    let mut e = exact.partition_point(|x| pieces.first().is_none_or(|p| x.0 < p.new_start));
    for (k, p) in pieces.iter().enumerate() {
        let piece_end = end_of(k);
        let mut at = p.new_start;
        while e < exact.len() && exact[e].0 < piece_end {
            let (address, delta) = exact[e];
            let next = exact[e + 1..].iter().position(|x| x.1 != delta).map_or(exact.len(), |i| e + 1 + i);
            e = next;
            if delta == p.delta || address < at {
                continue;
            }
            let end = exact.get(next).map_or(piece_end, |x| x.0).min(piece_end);
            if address > at {
                spans.push(Span { start: at, end: address, delta: p.delta, was: None });
            }
            spans.push(Span { start: address, end, delta, was: Some(p.delta) });
            at = end;
        }
        if at < piece_end {
            spans.push(Span { start: at, end: piece_end, delta: p.delta, was: None });
        }
    }
    // A cut whose image overlaps another image gets fresh addresses past
    // every image instead (giving it back its old displacement could make it
    // overlap a cut kept: in a reordered table, undoing one undid all).
    let mut fresh = spans.iter().filter_map(|s| s.end.checked_add_signed(s.delta)).max().unwrap_or(0).max(new_end).next_multiple_of(1 << 12);
    loop {
        let mut images: Vec<(u64, u64, usize)> =
            spans.iter().enumerate().filter_map(|(i, s)| Some((s.start.checked_add_signed(s.delta)?, s.end.checked_add_signed(s.delta)?, i))).collect();
        images.sort_unstable();
        let mut undo: Vec<usize> = Vec::new();
        let mut reach: Option<(u64, usize)> = None;
        for &(start, end, i) in &images {
            if let Some((r, j)) = reach {
                if start < r {
                    undo.extend([i, j].into_iter().filter(|&x| spans[x].was.is_some()));
                }
            }
            if reach.is_none_or(|(r, _)| end > r) {
                reach = Some((end, i));
            }
        }
        if undo.is_empty() {
            break;
        }
        undo.sort_unstable();
        undo.dedup();
        for i in undo {
            let span = &mut spans[i];
            span.was = None;
            span.delta = fresh as i64 - span.start as i64;
            fresh += span.end - span.start;
        }
    }
    let mut out: Vec<Piece> = Vec::with_capacity(spans.len());
    for s in spans {
        if out.last().is_none_or(|p| p.delta != s.delta) {
            out.push(Piece { new_start: s.start, delta: s.delta });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heaviest_chain_beats_the_longest() {
        // Keys 1, 2, 3 (weight 1 each) against key 0 after them (weight 5).
        let items = [(1, 1), (2, 1), (3, 1), (0, 5)];
        assert_eq!(heaviest_ascending(&items, |&k| k), vec![0]);
        let items = [(1, 2), (3, 1), (2, 2), (4, 1)];
        assert_eq!(heaviest_ascending(&items, |&k| k), vec![1, 2, 4]);
        assert!(heaviest_ascending::<i32, i32>(&[], |&k| k).is_empty());
    }

    #[test]
    fn swapped_blocks_get_their_own_pieces() {
        // New [0, 16) holds old [16, 32) and the other way round; one piece
        // of displacement 0 covered both.
        let pieces = vec![Piece { new_start: 0, delta: 0 }];
        let placed = place_exact(pieces, 32, &[(0, 16), (16, -16)]);
        assert_eq!(placed, vec![Piece { new_start: 0, delta: 16 }, Piece { new_start: 16, delta: -16 }]);
        let map = AddressMap::from_pieces(placed, 32).unwrap();
        for a in 0..32 {
            assert_eq!(map.inverse(map.forward(a).unwrap()), Some(a));
        }
        // A cut that would land on another piece's image gets fresh addresses.
        let pieces = vec![Piece { new_start: 0, delta: 0 }];
        let placed = place_exact(pieces, 32, &[(8, -8)]);
        let map = AddressMap::from_pieces(placed, 32).unwrap();
        assert!(map.forward(8).unwrap() >= 32, "{map:?}");
        for a in 0..32 {
            assert_eq!(map.inverse(map.forward(a).unwrap()), Some(a));
        }
    }
}
