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
}

impl FunctionShapes {
    pub fn count(&self) -> u64 {
        (self.imports.len() + self.bodies.len()) as u64
    }
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
    let ordered = super::longest_ascending(&anchors, |&(_, o)| o);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_function_keeps_the_others_numbers() {
        let old = FunctionShapes { imports: vec![b"env\0a".to_vec()], bodies: vec![1, 2, 3, 4] };
        let new = FunctionShapes { imports: vec![b"env\0a".to_vec()], bodies: vec![1, 9, 2, 3, 4] };
        assert_eq!(match_functions(&old, &new), vec![0, 1, 5, 2, 3, 4]);
    }

    #[test]
    fn edited_function_is_paired_by_position() {
        let old = FunctionShapes { imports: vec![], bodies: vec![1, 2, 3] };
        let new = FunctionShapes { imports: vec![], bodies: vec![1, 7, 3] };
        assert_eq!(match_functions(&old, &new), vec![0, 1, 2]);
    }
}
