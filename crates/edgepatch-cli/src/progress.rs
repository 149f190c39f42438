//! Progress of a long command on stderr: a bar on a terminal, plain lines elsewhere (a CI
//! log), nothing with `--quiet` or `--json`. Every command that reports progress goes
//! through [`Progress`].
//!
//! A line is printed when the work advanced by a tenth of the total or when
//! [`LINE_INTERVAL`] passed since the last line, never more often than that, and once more
//! when the phase ends:
//!
//! ```text
//! edgepatch: apply: 12.0 MiB of 40.0 MiB (30%), 5.1 MiB/s
//! ```

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::Cli;

/// The longest time between two lines while the work advances.
pub(crate) const LINE_INTERVAL: Duration = Duration::from_secs(2);

/// The share of the total (in tenths of a percent) that also earns a line.
const LINE_STEP_PERMILLE: u64 = 100;

pub(crate) struct Progress {
    output: Output,
}

enum Output {
    Hidden,
    Bar(ProgressBar),
    Lines(Mutex<Lines>),
}

/// What the plain-line output remembers between reports.
struct Lines {
    phase: String,
    total: u64,
    /// The furthest position reported (reports from threads can arrive out of order).
    done: u64,
    started: Instant,
    /// When the last line was printed and at what position; None before the first.
    last_line: Option<(Instant, u64)>,
    finished: bool,
}

impl Progress {
    /// Progress of `phase` over `total` bytes (0: not known yet, see [`Progress::set_length`]).
    pub(crate) fn new(cli: &Cli, total: u64, phase: &str) -> Progress {
        let output = if cli.quiet || cli.json {
            Output::Hidden
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("{msg:8} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar.set_message(phase.to_string());
            Output::Bar(bar)
        } else {
            Output::Lines(Mutex::new(Lines::new(phase, total)))
        };
        Progress { output }
    }

    pub(crate) fn set_length(&self, total: u64) {
        match &self.output {
            Output::Hidden => {}
            Output::Bar(bar) => bar.set_length(total),
            Output::Lines(lines) => lines.lock().expect("progress lock").total = total,
        }
    }

    pub(crate) fn set_position(&self, done: u64) {
        match &self.output {
            Output::Hidden => {}
            Output::Bar(bar) => bar.set_position(done),
            Output::Lines(lines) => {
                let mut lines = lines.lock().expect("progress lock");
                lines.done = lines.done.max(done);
                if lines.line_due(Instant::now()) {
                    lines.print();
                }
            }
        }
    }

    /// Ends this phase and starts `phase` over `total` bytes.
    pub(crate) fn start_phase(&self, phase: &str, total: u64) {
        match &self.output {
            Output::Hidden => {}
            Output::Bar(bar) => {
                bar.set_message(phase.to_string());
                bar.set_length(total);
                bar.reset();
            }
            Output::Lines(lines) => {
                let mut lines = lines.lock().expect("progress lock");
                lines.finish();
                *lines = Lines::new(phase, total);
            }
        }
    }

    /// Ends the phase: the bar is cleared, a last line says where it ended.
    pub(crate) fn finish(&self) {
        match &self.output {
            Output::Hidden => {}
            Output::Bar(bar) => bar.finish_and_clear(),
            Output::Lines(lines) => lines.lock().expect("progress lock").finish(),
        }
    }
}

impl Lines {
    fn new(phase: &str, total: u64) -> Lines {
        Lines { phase: phase.to_string(), total, done: 0, started: Instant::now(), last_line: None, finished: false }
    }

    fn line_due(&self, now: Instant) -> bool {
        let Some((at, done)) = self.last_line else { return self.done > 0 };
        if self.done == done {
            return false;
        }
        let step = self.total.saturating_mul(LINE_STEP_PERMILLE) / 1000;
        now.duration_since(at) >= LINE_INTERVAL || (step > 0 && self.done - done >= step)
    }

    fn print(&mut self) {
        let now = Instant::now();
        let secs = now.duration_since(self.started).as_secs_f64();
        let rate = if secs > 0.0 { format!("{}/s", mib(self.done as f64 / secs)) } else { "-".to_string() };
        let line = match (100 * self.done.min(self.total)).checked_div(self.total) {
            Some(pct) => format!("edgepatch: {}: {} of {} ({pct}%), {rate}", self.phase, mib(self.done as f64), mib(self.total as f64)),
            None => format!("edgepatch: {}: {}, {rate}", self.phase, mib(self.done as f64)),
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
        self.last_line = Some((now, self.done));
    }

    /// The last line of the phase, unless one already said where it ended.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let started = self.done > 0 || self.last_line.is_some();
        if started && self.last_line.map(|(_, done)| done) != Some(self.done) {
            self.print();
        }
    }
}

/// Bytes as MiB with one decimal.
fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_due_every_tenth_of_the_total_or_after_the_interval() {
        let mut l = Lines::new("apply", 1000);
        let t0 = Instant::now();
        assert!(!l.line_due(t0), "nothing done yet");
        l.done = 1;
        assert!(l.line_due(t0), "the first advance");
        l.last_line = Some((t0, 1));
        l.done = 100;
        assert!(!l.line_due(t0), "less than a tenth since the last line");
        l.done = 101;
        assert!(l.line_due(t0), "a tenth since the last line");
        l.done = 50;
        l.last_line = Some((t0, 40));
        assert!(l.line_due(t0 + LINE_INTERVAL), "the interval passed");
        l.last_line = Some((t0, 50));
        assert!(!l.line_due(t0 + LINE_INTERVAL), "no advance, no line");
    }

    #[test]
    fn an_unknown_total_gets_lines_by_time_only() {
        let mut l = Lines::new("update", 0);
        let t0 = Instant::now();
        l.done = 10;
        l.last_line = Some((t0, 5));
        assert!(!l.line_due(t0 + Duration::from_millis(100)));
        assert!(l.line_due(t0 + LINE_INTERVAL));
    }
}
