//! A patch described as a structure (`arbitrary`), encoded into bytes that
//! are syntactically a patch (docs/FORMAT.md §2): real zstd frames, a right
//! checksum, and the listing digest of the old build it is applied to unless
//! the plan says otherwise. What the plan controls is what an attacker
//! controls: counts, front coding, paths, link targets, sizes, op lengths,
//! diagonals, window spans and every header field (each either its true value
//! or an override).

use arbitrary::Arbitrary;
use edgepatch_core::patch_format::{listing_digest, ListedKind};
use edgepatch_core::Build;
use edgepatch_testkit::leb128;

#[derive(Arbitrary, Debug, Clone)]
pub struct PatchPlan {
    pub wrong_listing: bool,
    pub tree_size: Option<u64>,
    pub tree_comp: Option<u64>,
    pub runs: Vec<(u8, u8)>,
    pub run_count: Option<u64>,
    pub entries: Vec<NamedPlan>,
    pub entry_count: Option<u64>,
    pub old_table: Vec<(u8, u8)>,
    pub old_count: Option<u64>,
    pub files_digest: [u8; 32],
    pub tree_tail: Vec<u8>,
    pub segments: Vec<SegmentPlan>,
    pub end_count: Option<u64>,
    pub end_total: Option<u64>,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct NamedPlan {
    pub shared: u16,
    pub rest: PathPlan,
    pub code: u8,
    pub target: PathPlan,
    pub size: LenPlan,
    pub copy_index: u8,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum PathPlan {
    /// A word from a small dictionary (names that collide, links that chain).
    Word(u8),
    Raw(String),
    /// `n` repetitions of one byte (front coding makes these cheap).
    Long(u8, u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum LenPlan {
    Small(u8),
    Medium(u16),
    Large(u32),
    Huge(u64),
}

impl LenPlan {
    fn value(self) -> u64 {
        match self {
            LenPlan::Small(n) => n.into(),
            LenPlan::Medium(n) => n.into(),
            LenPlan::Large(n) => n.into(),
            LenPlan::Huge(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub enum SegmentPlan {
    Ops {
        ops: Vec<OpPlan>,
        fill: u8,
        /// Overrides of new_len, ctrl raw/comp, diff raw/comp, extra raw/comp.
        header: [Option<u64>; 7],
        op_count: Option<u64>,
        ctrl_tail: Vec<u8>,
        /// Append a second zstd frame to the extra stream.
        second_frame: bool,
    },
    Window {
        spans: Vec<(u16, u16)>,
        span_count: Option<u64>,
        back_len: LenPlan,
        content: Vec<u8>,
        repeat: u16,
        new_len: Option<u64>,
        comp_len: Option<u64>,
    },
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct OpPlan {
    pub diagonal_code: LenPlan,
    pub copy: LenPlan,
    pub extra: LenPlan,
}

const WORDS: [&str; 12] = ["a", "x", "s", ".", "..", "x/..", "a/b", "bin/run", "latest", "assets", "../..", "assets/a.txt"];

fn path_bytes(p: &PathPlan) -> Vec<u8> {
    match p {
        PathPlan::Word(i) => WORDS[*i as usize % WORDS.len()].as_bytes().to_vec(),
        PathPlan::Raw(s) => s.as_bytes().to_vec(),
        PathPlan::Long(b, n) => vec![*b; (*n as usize).min(5000)],
    }
}

fn compress(data: &[u8]) -> Vec<u8> {
    if data.is_empty() {
        Vec::new()
    } else {
        zstd::bulk::compress(data, 1).expect("zstd compresses")
    }
}

/// Biggest stream the encoder materializes; a plan asking for more gets a
/// shorter stream than its header claims (which the applier must refuse).
const MAX_STREAM: u64 = 4 << 20;

/// The patch the plan describes, for `old` (a tree when `tree`, else a single file).
pub fn encode(plan: &PatchPlan, old: &Build, tree: bool) -> Vec<u8> {
    encode_with_digest(plan, old, tree, plan.files_digest)
}

pub fn encode_with_digest(plan: &PatchPlan, old: &Build, tree: bool, files_digest: [u8; 32]) -> Vec<u8> {
    let listing = edgepatch_core::diff::build_listing(old);
    let mut t = Vec::new();
    if tree {
        let mut digest = listing_digest(&listing);
        if plan.wrong_listing {
            digest[0] ^= 1;
        }
        t.extend_from_slice(&digest);
    } else {
        let size = match listing.first().map(|e| &e.kind) {
            Some(ListedKind::File { size, .. }) => *size,
            _ => 0,
        };
        leb128::write_u64(&mut t, size + plan.wrong_listing as u64);
    }
    leb128::write_u64(&mut t, plan.run_count.unwrap_or(plan.runs.len() as u64));
    for &(k, d) in &plan.runs {
        leb128::write_u64(&mut t, k.into());
        leb128::write_u64(&mut t, d.into());
    }
    leb128::write_u64(&mut t, plan.entry_count.unwrap_or(plan.entries.len() as u64));
    for e in &plan.entries {
        let rest = if tree { path_bytes(&e.rest) } else { Vec::new() };
        leb128::write_u64(&mut t, if tree { e.shared.into() } else { 0 });
        leb128::write_u64(&mut t, rest.len() as u64);
        t.extend_from_slice(&rest);
    }
    let code = |e: &NamedPlan| if tree { e.code % 7 } else { 2 + e.code % 4 };
    for e in &plan.entries {
        t.push(code(e));
    }
    for e in plan.entries.iter().filter(|e| code(e) == 1) {
        let target = path_bytes(&e.target);
        leb128::write_u64(&mut t, target.len() as u64);
        t.extend_from_slice(&target);
    }
    for e in plan.entries.iter().filter(|e| matches!(code(e), 2 | 3)) {
        leb128::write_u64(&mut t, e.size.value());
    }
    for e in plan.entries.iter().filter(|e| matches!(code(e), 4 | 5)) {
        leb128::write_u64(&mut t, e.copy_index.into());
    }
    leb128::write_u64(&mut t, plan.old_count.unwrap_or(plan.old_table.len() as u64));
    for &(gap, _) in &plan.old_table {
        leb128::write_u64(&mut t, gap.into());
    }
    for &(_, flag) in &plan.old_table {
        t.push(if flag < 200 { flag & 1 } else { flag });
    }
    t.extend_from_slice(&files_digest);
    t.extend_from_slice(&plan.tree_tail);

    let mut p = Vec::new();
    p.extend_from_slice(b"EDGEPTCH");
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&(if tree { 0u16 } else { 1 }).to_le_bytes());
    let tree_comp = compress(&t);
    leb128::write_u64(&mut p, plan.tree_size.unwrap_or(t.len() as u64));
    leb128::write_u64(&mut p, plan.tree_comp.unwrap_or(tree_comp.len() as u64));
    p.extend_from_slice(&tree_comp);

    let mut produced = 0u64;
    for s in &plan.segments {
        match s {
            SegmentPlan::Ops { ops, fill, header, op_count, ctrl_tail, second_frame } => {
                let mut ctrl = Vec::new();
                leb128::write_u64(&mut ctrl, op_count.unwrap_or(ops.len() as u64));
                for op in ops {
                    leb128::write_u64(&mut ctrl, op.diagonal_code.value());
                }
                for op in ops {
                    leb128::write_u64(&mut ctrl, op.copy.value());
                }
                for op in ops {
                    leb128::write_u64(&mut ctrl, op.extra.value());
                }
                ctrl.extend_from_slice(ctrl_tail);
                let copied = ops.iter().fold(0u64, |t, o| t.saturating_add(o.copy.value()));
                let added = ops.iter().fold(0u64, |t, o| t.saturating_add(o.extra.value()));
                let diff = vec![*fill; copied.min(MAX_STREAM) as usize];
                let extra: Vec<u8> = (0..added.min(MAX_STREAM)).map(|i| (i as u8) ^ fill).collect();
                let (cc, dc) = (compress(&ctrl), compress(&diff));
                let mut ec = compress(&extra);
                if *second_frame && !ec.is_empty() {
                    ec.extend_from_slice(&compress(b"more"));
                }
                let new_len = copied.saturating_add(added);
                let f = [new_len, ctrl.len() as u64, cc.len() as u64, copied, dc.len() as u64, added, ec.len() as u64];
                p.push(b'S');
                for (v, o) in f.iter().zip(header) {
                    leb128::write_u64(&mut p, o.unwrap_or(*v));
                }
                p.extend_from_slice(&cc);
                p.extend_from_slice(&dc);
                p.extend_from_slice(&ec);
                produced = produced.saturating_add(header[0].unwrap_or(new_len));
            }
            SegmentPlan::Window { spans, span_count, back_len, content, repeat, new_len, comp_len } => {
                let mut data = Vec::new();
                for _ in 0..=(*repeat as usize).min(1 << 12) {
                    data.extend_from_slice(content);
                }
                if data.is_empty() {
                    data.push(0);
                }
                let frame = compress(&data);
                p.push(b'W');
                leb128::write_u64(&mut p, new_len.unwrap_or(data.len() as u64));
                leb128::write_u64(&mut p, span_count.unwrap_or(spans.len() as u64));
                for &(gap, len) in spans {
                    leb128::write_u64(&mut p, gap.into());
                    leb128::write_u64(&mut p, len.into());
                }
                leb128::write_u64(&mut p, back_len.value());
                leb128::write_u64(&mut p, comp_len.unwrap_or(frame.len() as u64));
                p.extend_from_slice(&frame);
                produced = produced.saturating_add(new_len.unwrap_or(data.len() as u64));
            }
            SegmentPlan::Raw(bytes) => p.extend_from_slice(bytes),
        }
    }
    p.push(b'E');
    leb128::write_u64(&mut p, plan.end_count.unwrap_or(plan.segments.len() as u64));
    leb128::write_u64(&mut p, plan.end_total.unwrap_or(produced));
    let sum = blake3::hash(&p);
    p.extend_from_slice(sum.as_bytes());
    p
}
