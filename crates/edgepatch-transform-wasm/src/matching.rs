//! Which function of the new module is which function of the old one, so that
//! references to a function that merely moved get the same number in both
//! normalized forms. Without a name section (Go and release Emscripten builds
//! have none) functions are recognised by a hash of their body in which the
//! references themselves are blanked out.

use std::collections::{HashMap, VecDeque};

/// The shape of a module's functions, as matching needs it.
#[derive(Debug, Clone, Default)]
pub(crate) struct FunctionShapes {
    /// (module, field) of each imported function.
    pub imports: Vec<Vec<u8>>,
    /// One hash per defined function (raw bodies hash their bytes).
    pub bodies: Vec<u64>,
    /// The blanked constants (data addresses and memarg offsets, in code
    /// order) of every body, one after the other; body k's are
    /// `constants[constant_ends[k - 1]..constant_ends[k]]`. Two bodies of one
    /// hash pair theirs up one to one: (new, old) address pairs.
    pub constants: Vec<i64>,
    pub constant_ends: Vec<u32>,
    /// The function indices each body refers to (calls, `ref.func`), in code order, laid out
    /// as `constants` are: two bodies of one hash pair theirs up one to one.
    pub calls: Vec<u32>,
    pub call_ends: Vec<u32>,
    /// (hash of a name, function index): the function exports and the name section's
    /// function names, sorted.
    pub names: Vec<(u64, u64)>,
}

impl FunctionShapes {
    pub fn count(&self) -> u64 {
        (self.imports.len() + self.bodies.len()) as u64
    }

    /// The function indices defined function `body` refers to (empty without a list).
    pub fn calls_of(&self, body: usize) -> &[u32] {
        if self.call_ends.len() != self.bodies.len() {
            return &[];
        }
        let start = body.checked_sub(1).map_or(0, |b| self.call_ends[b] as usize);
        &self.calls[start..self.call_ends[body] as usize]
    }

    /// The blanked constants of defined function `body`.
    pub fn constants_of(&self, body: usize) -> &[i64] {
        let start = body.checked_sub(1).map_or(0, |b| self.constant_ends[b] as usize);
        &self.constants[start..self.constant_ends[body] as usize]
    }
}

/// (new address, old address) pairs read off matched bodies of one shape:
/// such a body differs from its old one only in blanked references, so its
/// k-th blanked constant is the old one's k-th. `map` is [`match_functions`]'
/// result; `keep` filters the pairs (addresses inside the data).
pub(crate) fn address_pairs(old: &FunctionShapes, new: &FunctionShapes, map: &[u64], keep: &dyn Fn(i64, i64) -> bool) -> Vec<(u64, u64)> {
    let (old_imports, new_imports) = (old.imports.len() as u64, new.imports.len());
    let mut pairs = Vec::new();
    for (j, &hash) in new.bodies.iter().enumerate() {
        let Some(o) = map.get(new_imports + j).and_then(|&m| m.checked_sub(old_imports)).filter(|&o| o < old.bodies.len() as u64) else {
            continue;
        };
        let o = o as usize;
        if old.bodies[o] != hash || old.constant_ends.is_empty() || new.constant_ends.is_empty() {
            continue;
        }
        let (ours, theirs) = (new.constants_of(j), old.constants_of(o));
        if ours.len() != theirs.len() {
            continue;
        }
        pairs.extend(ours.iter().zip(theirs).filter(|&(&n, &o)| keep(n, o)).map(|(&n, &o)| (n as u64, o as u64)));
    }
    pairs
}

/// For each function index of `new`, its index in the normalized space: the
/// old index of the function it matches, or `old.count() + k` for the k-th
/// function that matches nothing.
pub(crate) fn match_functions(old: &FunctionShapes, new: &FunctionShapes) -> Vec<u64> {
    let unmatched = u64::MAX;
    let mut map = vec![unmatched; new.count() as usize];

    // Imports: by name, in order.
    let mut by_name: HashMap<&[u8], VecDeque<usize>> = HashMap::new();
    for (i, key) in old.imports.iter().enumerate() {
        by_name.entry(key).or_default().push_back(i);
    }
    for (i, key) in new.imports.iter().enumerate() {
        if let Some(old_index) = by_name.get_mut(key.as_slice()).and_then(|q| q.pop_front()) {
            map[i] = old_index as u64;
        }
    }

    // Defined functions: bodies whose hash is unique on both sides are anchors.
    let mut old_count: HashMap<u64, (u32, usize)> = HashMap::new();
    for (j, h) in old.bodies.iter().enumerate() {
        let e = old_count.entry(*h).or_insert((0, j));
        e.0 += 1;
    }
    let mut new_count: HashMap<u64, u32> = HashMap::new();
    for h in &new.bodies {
        *new_count.entry(*h).or_insert(0) += 1;
    }
    let mut old_taken = vec![false; old.bodies.len()];
    let mut new_match: Vec<Option<usize>> = vec![None; new.bodies.len()];
    let mut anchors = Vec::new();
    for (j, h) in new.bodies.iter().enumerate() {
        if new_count[h] == 1 {
            if let Some(&(1, old_j)) = old_count.get(h) {
                new_match[j] = Some(old_j);
                old_taken[old_j] = true;
                anchors.push((j, old_j));
            }
        }
    }

    // Between the anchors that keep their order, pair the rest: equal hashes
    // first, then by position (a function edited in place).
    match_by_names(old, new, &mut new_match, &mut old_taken);

    let ordered = longest_ascending(&anchors, |&(_, o)| o);
    let mut prev = (0usize, 0usize);
    let bounds = ordered.iter().map(|&(n, o)| (n, o)).chain(std::iter::once((new.bodies.len(), old.bodies.len())));
    for (next_new, next_old) in bounds {
        if next_new > prev.0 && next_old > prev.1 {
            let new_gap: Vec<usize> = (prev.0..next_new).filter(|&j| new_match[j].is_none()).collect();
            let old_gap: Vec<usize> = (prev.1..next_old).filter(|&j| !old_taken[j]).collect();
            if new_gap.len() <= 4096 && old_gap.len() <= 4096 {
                let mut from = 0;
                for &j in &new_gap {
                    if let Some(k) = (from..old_gap.len()).find(|&k| !old_taken[old_gap[k]] && old.bodies[old_gap[k]] == new.bodies[j]) {
                        new_match[j] = Some(old_gap[k]);
                        old_taken[old_gap[k]] = true;
                        from = k + 1;
                    }
                }
            }
            let rest_new: Vec<usize> = new_gap.iter().copied().filter(|&j| new_match[j].is_none()).collect();
            let rest_old: Vec<usize> = old_gap.iter().copied().filter(|&j| !old_taken[j]).collect();
            for (&j, &o) in rest_new.iter().zip(rest_old.iter()) {
                new_match[j] = Some(o);
                old_taken[o] = true;
            }
        }
        prev = (next_new + 1, next_old + 1);
    }

    for _ in 0..VOTE_ROUNDS {
        if !match_by_calls(old, new, &mut new_match, &mut old_taken) {
            break;
        }
    }

    let (old_imports, new_imports) = (old.imports.len() as u64, new.imports.len());
    for (j, m) in new_match.iter().enumerate() {
        if let Some(o) = m {
            map[new_imports + j] = old_imports + *o as u64;
        }
    }
    for (fresh, slot) in (old.count()..).zip(map.iter_mut().filter(|s| **s == unmatched)) {
        *slot = fresh;
    }
    map
}

/// Rounds of [`match_by_calls`] (each can give the next more matched bodies to read).
const VOTE_ROUNDS: usize = 2;

/// Pairs functions unmatched on both sides that one name (an export's, or the name section's)
/// names in both builds: a function whose body changed keeps its name. Names are trusted only
/// where the functions already paired by their bodies mostly keep theirs (at least 9 in 10 of
/// at least 8): a toolchain that minifies export names can give a name to another function
/// in the next build.
fn match_by_names(old: &FunctionShapes, new: &FunctionShapes, new_match: &mut [Option<usize>], old_taken: &mut [bool]) {
    // The names each build gives to exactly one function (body index).
    let unique = |shapes: &FunctionShapes| -> HashMap<u64, usize> {
        let imports = shapes.imports.len() as u64;
        let names = &shapes.names;
        (0..names.len())
            .filter(|&i| (i == 0 || names[i - 1].0 != names[i].0) && names.get(i + 1).is_none_or(|next| next.0 != names[i].0))
            .filter_map(|i| Some((names[i].0, usize::try_from(names[i].1.checked_sub(imports)?).ok()?)))
            .collect()
    };
    let (old_names, new_names) = (unique(old), unique(new));
    let mut pairs: Vec<(usize, usize)> =
        new_names.iter().filter_map(|(hash, &j)| Some((j, *old_names.get(hash)?))).filter(|&(j, o)| j < new_match.len() && o < old_taken.len()).collect();
    // A function may have two names (an export and a function name, or two exports): where its
    // names disagree on its partner, neither pair is made. Sorted, so that the result does not
    // depend on the maps' order.
    pairs.sort_unstable();
    pairs.dedup();
    let (mut new_partners, mut old_partners): (HashMap<usize, u32>, HashMap<usize, u32>) = (HashMap::new(), HashMap::new());
    for &(j, o) in &pairs {
        *new_partners.entry(j).or_insert(0) += 1;
        *old_partners.entry(o).or_insert(0) += 1;
    }
    pairs.retain(|&(j, o)| new_partners[&j] == 1 && old_partners[&o] == 1);
    let (mut agree, mut checked) = (0usize, 0usize);
    for &(j, o) in &pairs {
        if let Some(m) = new_match[j] {
            checked += 1;
            agree += usize::from(m == o);
        }
    }
    if checked < 8 || agree * 10 < checked * 9 {
        return;
    }
    for (j, o) in pairs {
        if new_match[j].is_none() && !old_taken[o] {
            new_match[j] = Some(o);
            old_taken[o] = true;
        }
    }
}

/// Pairs functions that are still unmatched on both sides by where matched bodies of one shape
/// call them: a body's k-th call and its old body's k-th call name the same function, so an
/// unmatched new callee and an unmatched old callee at the same place are one function that
/// the linker moved out of order (the gaps between anchors cannot see that). The pair most
/// call sites agree on first. Whether any pair was made.
fn match_by_calls(old: &FunctionShapes, new: &FunctionShapes, new_match: &mut [Option<usize>], old_taken: &mut [bool]) -> bool {
    let (old_imports, new_imports) = (old.imports.len(), new.imports.len());
    let mut votes: HashMap<(usize, usize), u32> = HashMap::new();
    for (j, m) in new_match.iter().enumerate() {
        let Some(o) = *m else { continue };
        if old.bodies[o] != new.bodies[j] {
            continue;
        }
        let (ours, theirs) = (new.calls_of(j), old.calls_of(o));
        if ours.len() != theirs.len() {
            continue;
        }
        for (&n, &t) in ours.iter().zip(theirs) {
            let (Some(n), Some(t)) = ((n as usize).checked_sub(new_imports), (t as usize).checked_sub(old_imports)) else { continue };
            if new_match.get(n) == Some(&None) && old_taken.get(t) == Some(&false) {
                *votes.entry((n, t)).or_insert(0) += 1;
            }
        }
    }
    let mut votes: Vec<((usize, usize), u32)> = votes.into_iter().collect();
    votes.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut made = false;
    for ((n, t), _) in votes {
        if new_match[n].is_none() && !old_taken[t] {
            new_match[n] = Some(t);
            old_taken[t] = true;
            made = true;
        }
    }
    made
}

/// The longest subsequence of `items` strictly ascending in `key` (patience
/// sorting, O(n log n)).
fn longest_ascending<T: Copy, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut tails: Vec<usize> = Vec::new(); // per length, the index of the smallest tail
    let mut parent = vec![usize::MAX; items.len()];
    for (i, item) in items.iter().enumerate() {
        let k = key(item);
        let len = tails.partition_point(|&t| key(&items[t]) < k);
        if len > 0 {
            parent[i] = tails[len - 1];
        }
        if len == tails.len() {
            tails.push(i);
        } else {
            tails[len] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied().unwrap_or(usize::MAX);
    while at != usize::MAX {
        out.push(items[at]);
        at = parent[at];
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_function_keeps_the_others_numbers() {
        let old = FunctionShapes { imports: vec![b"env\0a".to_vec()], bodies: vec![1, 2, 3, 4], ..Default::default() };
        let new = FunctionShapes { imports: vec![b"env\0a".to_vec()], bodies: vec![1, 9, 2, 3, 4], ..Default::default() };
        assert_eq!(match_functions(&old, &new), vec![0, 1, 5, 2, 3, 4]);
    }

    #[test]
    fn a_function_moved_out_of_order_is_paired_where_unchanged_callers_call_it() {
        // Old function 4 (hash 50) was edited (hash 60) and moved to the front; the unchanged
        // caller (hash 10) calls it at the same place in both builds.
        let old = FunctionShapes { bodies: vec![10, 20, 30, 40, 50], calls: vec![4], call_ends: vec![1, 1, 1, 1, 1], ..Default::default() };
        let new = FunctionShapes { bodies: vec![60, 10, 20, 30, 40], calls: vec![0], call_ends: vec![0, 1, 1, 1, 1], ..Default::default() };
        assert_eq!(match_functions(&old, &new), vec![4, 0, 1, 2, 3]);
        let uncalled = FunctionShapes { calls: vec![], call_ends: vec![0; 5], ..new };
        assert_eq!(match_functions(&old, &uncalled), vec![5, 0, 1, 2, 3], "without the call, nothing pairs them");
    }

    #[test]
    fn edited_function_is_paired_by_position() {
        let old = FunctionShapes { imports: vec![], bodies: vec![1, 2, 3], ..Default::default() };
        let new = FunctionShapes { imports: vec![], bodies: vec![1, 7, 3], ..Default::default() };
        assert_eq!(match_functions(&old, &new), vec![0, 1, 2]);
    }

    #[test]
    fn edited_functions_that_swapped_places_are_paired_by_their_names_when_names_are_kept() {
        // Ten unchanged bodies, then two edited ones whose places swapped (hashes 20, 21 became
        // 31 at place 10 and 30 at place 11). Position pairs them crosswise; their names do not.
        let named = |hashes: &[u64]| hashes.iter().enumerate().map(|(i, &h)| (h, i as u64)).collect::<Vec<_>>();
        let sorted = |mut names: Vec<(u64, u64)>| {
            names.sort_unstable();
            names
        };
        let old_bodies: Vec<u64> = (1..=10).chain([20, 21]).collect();
        let new_bodies: Vec<u64> = (1..=10).chain([31, 30]).collect();
        let old_names: Vec<u64> = (100..112).collect();
        let kept: Vec<u64> = (100..110).chain([111, 110]).collect();
        let old = FunctionShapes { bodies: old_bodies, names: sorted(named(&old_names)), ..Default::default() };
        let new = FunctionShapes { bodies: new_bodies.clone(), names: sorted(named(&kept)), ..Default::default() };
        let unchanged: Vec<u64> = (0..10).collect();
        assert_eq!(match_functions(&old, &new), [&unchanged[..], &[11, 10]].concat());
        // Names a toolchain reassigns (minified exports, shifted by one): the unchanged bodies
        // disagree with them, so they are not trusted and position decides.
        let shifted: Vec<u64> = (101..113).collect();
        let minified = FunctionShapes { bodies: new_bodies, names: sorted(named(&shifted)), ..Default::default() };
        assert_eq!(match_functions(&old, &minified), [&unchanged[..], &[10, 11]].concat());
        // A function whose two names (an export's, a function name) name different old
        // functions is not paired by them, nor is the old function another name pairs with
        // it: position decides, as without names.
        let with_second_name = |hashes: &[u64]| sorted([named(hashes), vec![(200, 11)]].concat());
        let old_two = FunctionShapes { names: with_second_name(&old_names), ..old.clone() };
        let two_names = FunctionShapes { bodies: (1..=10).chain([31, 30]).collect(), names: with_second_name(&kept), ..Default::default() };
        assert_eq!(match_functions(&old_two, &two_names), [&unchanged[..], &[10, 11]].concat());
    }
}
