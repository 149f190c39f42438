//! `EDGEPATCH_TIMING`: set (to anything), the diffs print what each of their steps took to
//! stderr, one line per step (suffix arrays, segments matched, window forms tried).

use edgepatch_core::trace::Trace;

/// The trace a diff gets: lines to stderr when `EDGEPATCH_TIMING` is set, else off.
pub fn from_env() -> Trace {
    if std::env::var_os("EDGEPATCH_TIMING").is_some() {
        Trace::new(|line| eprintln!("{line}"))
    } else {
        Trace::default()
    }
}
