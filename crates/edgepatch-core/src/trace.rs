//! Where a diff or a generator reports what its steps took (one line per step: a suffix
//! array built, a segment matched, a window form tried). The caller chooses: the CLI prints
//! the lines to stderr when asked, the default drops them and measures nothing.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// Takes one timing line, without its newline.
type Sink = dyn Fn(&str) + Send + Sync;

/// A sink for timing lines, off by default. Cheap to clone (one shared callback); usable
/// from the diff's worker threads.
#[derive(Clone, Default)]
pub struct Trace(Option<Arc<Sink>>);

impl Trace {
    /// Hands every timing line, without its newline, to `sink`.
    pub fn new(sink: impl Fn(&str) + Send + Sync + 'static) -> Trace {
        Trace(Some(Arc::new(sink)))
    }

    /// Whether lines go anywhere.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Now, if the trace is on; None otherwise (`Instant::now` panics on
    /// wasm32-unknown-unknown, where nothing is traced).
    pub(crate) fn start(&self) -> Option<Instant> {
        self.0.as_ref().map(|_| Instant::now())
    }

    /// Reports one line.
    pub(crate) fn line(&self, line: &str) {
        if let Some(sink) = &self.0 {
            sink(line);
        }
    }
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_on() { "Trace(on)" } else { "Trace(off)" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn the_default_is_off_and_a_sink_gets_each_line() {
        let off = Trace::default();
        assert!(!off.is_on() && off.start().is_none());
        off.line("dropped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let on = Trace::new(move |l| sink.lock().unwrap().push(l.to_string()));
        assert!(on.is_on() && on.start().is_some());
        on.clone().line("one");
        assert_eq!(*lines.lock().unwrap(), ["one"]);
        assert_eq!(format!("{on:?} {off:?}"), "Trace(on) Trace(off)");
    }
}
