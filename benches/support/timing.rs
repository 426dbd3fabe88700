//! Shared timing helper for the project's `harness = false` benchmarks.
//!
//! Each benchmark measures an operation and its raw baseline in the same run,
//! alternating the two so drift on a noisy machine hits both alike, and writes
//! a Markdown section to `target/bench-results/<name>.md`. `benches/run.sh`
//! gathers those sections into `docs/benchmarks.md`.
//!
//! Include it from a bench file with
//! `#[path = "../../../benches/support/timing.rs"] mod timing;`.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Median of the samples (sorted in place).
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Times `f` `rounds` times after one warm-up call; returns the median.
pub fn time<F: FnMut()>(rounds: usize, mut f: F) -> Duration {
    f();
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        f();
        samples.push(start.elapsed());
    }
    median(&mut samples)
}

/// Times `subject` and `baseline` in alternation; returns both medians.
pub fn pair<A: FnMut(), B: FnMut()>(
    rounds: usize,
    mut subject: A,
    mut baseline: B,
) -> (Duration, Duration) {
    subject();
    baseline();
    let mut s = Vec::with_capacity(rounds);
    let mut b = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        subject();
        s.push(t.elapsed());
        let t = Instant::now();
        baseline();
        b.push(t.elapsed());
    }
    (median(&mut s), median(&mut b))
}

/// Human form of a duration (µs below 10 ms, ms above).
pub fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10_000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// One row of a benchmark table.
pub struct Row {
    /// What was measured.
    pub case: String,
    /// Median of the measured operation.
    pub subject: Duration,
    /// Median of the raw baseline.
    pub baseline: Duration,
    /// The goal for subject / baseline, if any.
    pub goal: Option<f64>,
}

/// A Markdown section: a title, a note, and a table of rows.
pub struct Report {
    name: String,
    title: String,
    note: String,
    rows: Vec<Row>,
    extra: String,
}

impl Report {
    /// Starts a section named `name` (the results file stem).
    pub fn new(name: &str, title: &str, note: &str) -> Self {
        Self {
            name: name.into(),
            title: title.into(),
            note: note.into(),
            rows: Vec::new(),
            extra: String::new(),
        }
    }
    /// Adds a subject-vs-baseline row and prints it.
    pub fn row(&mut self, case: &str, subject: Duration, baseline: Duration, goal: Option<f64>) {
        let ratio = subject.as_secs_f64() / baseline.as_secs_f64().max(1e-12);
        println!(
            "{case}: {} vs {} = {ratio:.2}x",
            fmt(subject),
            fmt(baseline)
        );
        self.rows.push(Row {
            case: case.into(),
            subject,
            baseline,
            goal,
        });
    }
    /// Adds free Markdown text after the table (for memory figures and the like).
    pub fn text(&mut self, line: &str) {
        println!("{line}");
        self.extra.push_str(line);
        self.extra.push('\n');
    }
    /// Writes the section to `target/bench-results/<name>.md`.
    pub fn write(&self) {
        let mut out = String::new();
        let _ = writeln!(out, "## {}\n\n{}\n", self.title, self.note);
        if !self.rows.is_empty() {
            out.push_str("| case | measured (median) | raw baseline (median) | ratio | goal | met |\n|---|---:|---:|---:|---:|:-:|\n");
            for r in &self.rows {
                let ratio = r.subject.as_secs_f64() / r.baseline.as_secs_f64().max(1e-12);
                let (goal, met) = match r.goal {
                    Some(g) => (format!("≤ {g}×"), if ratio <= g { "yes" } else { "**no**" }),
                    None => ("—".to_string(), "—"),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {ratio:.2}× | {goal} | {met} |",
                    r.case,
                    fmt(r.subject),
                    fmt(r.baseline)
                );
            }
            out.push('\n');
        }
        out.push_str(&self.extra);
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-results");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{}.md", self.name));
        if let Err(e) = std::fs::write(&path, out) {
            eprintln!("could not write {}: {e}", path.display());
        }
    }
}
