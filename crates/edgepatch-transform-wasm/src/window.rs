//! A window on bytes that are not in memory (an applier's scratch space): the module read
//! back a part at a time by the inverse, the split of an old module, and each field stream of
//! a join. One type, so the three readers share the rule of what a refill reads.

/// Bytes `start..start + bytes.len()` of something read through a callback.
#[derive(Debug, Default)]
pub(crate) struct Window {
    pub start: usize,
    pub bytes: Vec<u8>,
}

impl Window {
    /// Whether the window holds `at..at + n`.
    #[inline(always)]
    pub fn holds(&self, at: usize, n: usize) -> bool {
        at >= self.start && at + n <= self.start + self.bytes.len()
    }

    /// Reads from `at` on into the window: `n` bytes, or more, up to `size`, where the bytes
    /// before `limit` allow. A failed read leaves the window empty.
    #[cold]
    pub fn refill<E>(&mut self, at: usize, n: usize, size: usize, limit: usize, read: impl FnOnce(usize, &mut [u8]) -> Result<(), E>) -> Result<(), E> {
        let len = n.max(size.min(limit.saturating_sub(at)));
        self.bytes.clear();
        self.bytes.resize(len, 0);
        if let Err(e) = read(at, &mut self.bytes) {
            self.bytes.clear();
            return Err(e);
        }
        self.start = at;
        Ok(())
    }

    /// Bytes `at..at + n`, read as [`Window::refill`] reads unless the window holds them.
    #[inline(always)]
    pub fn get<E>(&mut self, at: usize, n: usize, size: usize, limit: usize, read: impl FnOnce(usize, &mut [u8]) -> Result<(), E>) -> Result<&[u8], E> {
        if !self.holds(at, n) {
            self.refill(at, n, size, limit, read)?;
        }
        Ok(&self.bytes[at - self.start..at - self.start + n])
    }
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn reads_a_window_ahead_and_no_further_than_the_limit() {
        let data: Vec<u8> = (0..100).collect();
        let mut reads = Vec::new();
        let mut w = Window::default();
        let mut get = |w: &mut Window, at: usize, n: usize| {
            w.get(at, n, 16, 40, |at, buf: &mut [u8]| {
                reads.push((at, buf.len()));
                buf.copy_from_slice(&data[at..at + buf.len()]);
                Ok::<(), ()>(())
            })
            .map(|b| b.to_vec())
        };
        assert_eq!(get(&mut w, 0, 4).unwrap(), [0, 1, 2, 3]);
        assert_eq!(get(&mut w, 10, 6).unwrap(), [10, 11, 12, 13, 14, 15]);
        assert_eq!(get(&mut w, 30, 4).unwrap(), [30, 31, 32, 33]);
        assert_eq!(get(&mut w, 36, 20).unwrap().len(), 20, "more than the window when asked");
        assert_eq!(reads, [(0, 16), (30, 10), (36, 20)]);
        assert!(w.get(0, 1, 16, 40, |_, _| Err("failed")).is_err());
        assert!(!w.holds(36, 1), "a failed read leaves nothing");
    }
}
