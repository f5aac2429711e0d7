//! Every chapter keeps the book's shape: the problem, the walkthrough, one generated results
//! table, what surprised us, challenges; at most 5,000 words of prose; no run history (commit
//! hashes belong in the worklog appendix, and git keeps the rest).

use std::path::Path;

const CHAPTERS: [&str; 6] =
    ["01-double/README.md", "02-cpu-matrix/README.md", "03-gpu-matmul/README.md", "04-gpu-layers/README.md", "05-mnist/README.md", "benches/README.md"];
const SUB_CHAPTERS: [&str; 2] = ["05-mnist/SERVE.md", "05-mnist/WEB.md"];
const MAX_PROSE_WORDS: usize = 5000;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Words outside code blocks, tables, HTML comments and `{{#include}}` lines.
fn prose_words(text: &str) -> usize {
    let mut words = 0;
    let mut fence = false;
    let mut comment = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if comment || t.starts_with("<!--") {
            comment = !t.ends_with("-->");
            continue;
        }
        if fence || t.starts_with('|') || t.starts_with("{{#") {
            continue;
        }
        words += t.split_whitespace().count();
    }
    words
}

/// The level-2 headings, in order.
fn headings(text: &str) -> Vec<&str> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        } else if !fence {
            if let Some(h) = line.strip_prefix("## ") {
                out.push(h.trim());
            }
        }
    }
    out
}

/// Backticked runs of 7 to 40 hex digits with a letter and a digit: commit hashes.
fn commit_hashes(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| (7..=40).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
        .filter(|s| s.chars().any(|c| c.is_ascii_digit()) && s.chars().any(|c| c.is_ascii_alphabetic()))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_chapter_has_the_books_shape() {
    let want = ["The problem", "Walkthrough", "Results", "What surprised us", "Challenges"];
    for rel in CHAPTERS {
        let text = read(rel);
        let found: Vec<&str> = headings(&text).into_iter().filter(|h| want.contains(h)).collect();
        assert_eq!(found, want, "{rel}: its sections should be {want:?} in that order");
        let results = text.split("\n## Results").nth(1).unwrap().split("\n## ").next().unwrap();
        let regions = results.lines().filter(|l| l.trim_start().starts_with("<!-- table:")).count();
        assert_eq!(regions, 1, "{rel}: its Results section should hold exactly one generated table");
    }
    for rel in SUB_CHAPTERS {
        let text = read(rel);
        let h = headings(&text);
        for section in ["The problem", "Walkthrough", "Challenges"] {
            assert!(h.contains(&section), "{rel}: no `## {section}` section");
        }
    }
}

#[test]
fn every_chapter_is_at_most_5000_words_of_prose() {
    for rel in CHAPTERS.iter().chain(&SUB_CHAPTERS) {
        let n = prose_words(&read(rel));
        assert!(n <= MAX_PROSE_WORDS, "{rel}: {n} words of prose (at most {MAX_PROSE_WORDS}; move history to book/src/worklog/)");
        assert!(n >= 500, "{rel}: only {n} words of prose: is the chapter there?");
    }
}

#[test]
fn chapters_cite_no_commits() {
    for rel in CHAPTERS.iter().chain(&SUB_CHAPTERS) {
        let hashes = commit_hashes(&read(rel));
        assert!(hashes.is_empty(), "{rel} cites commits {hashes:?}: run history belongs in the worklog appendix");
    }
}

#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(prose_words("one two\n```\ncode code\n```\n| a | b |\n<!-- x\ny -->\n{{#include f}}\nthree"), 3);
    assert_eq!(headings("## A\n```\n## not\n```\n## B"), vec!["A", "B"]);
    assert_eq!(commit_hashes("the run of `44fbb70` and `--release` and `1024` and `deadbeef`"), vec!["44fbb70".to_string()]);
}
