//! The guide (`docs/guide/`, an mdBook) holds together without mdBook: every page is
//! in `SUMMARY.md` and every entry there is a page; every page opens with its title and
//! lists its sections (a "Contents" list whose entries are its `##`/`###` headings, in
//! order); and every relative link of the guide, the README, the changelog and the
//! design documents resolves to a file or directory and, with an anchor, to a heading
//! of that file (GitHub's anchors: lower case, punctuation dropped, spaces as `-`).
//! The pages' code blocks are run by the tests that read them (see the guide's index).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fence = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fence = !fence;
                return false;
            }
            !fence
        })
        .collect()
}

/// GitHub's anchor of a heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The `##` and deeper headings of a page (text after the hashes).
fn headings(text: &str) -> Vec<String> {
    prose(text)
        .into_iter()
        .filter_map(|l| {
            let hashes = l.chars().take_while(|&c| c == '#').count();
            (hashes >= 1 && l[hashes..].starts_with(' ')).then(|| l[hashes + 1..].to_string())
        })
        .collect()
}

/// The `[label](target)` links of `text` outside code blocks and inline code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        // Inline code may hold brackets that are no link.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(open) = rest.find("](") {
            let after = &rest[open + 2..];
            let Some(close) = after.find(')') else { break };
            out.push(after[..close].to_string());
            rest = &after[close..];
        }
    }
    out
}

fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs/guide"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

#[test]
fn every_page_is_in_the_summary_and_lists_its_sections() {
    let guide = repo().join("docs/guide");
    let summary = std::fs::read_to_string(guide.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for page in pages() {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        if name == "SUMMARY.md" {
            continue;
        }
        assert!(listed.contains(&name), "{name} is not in SUMMARY.md");
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(text.starts_with("# "), "{name} does not open with its title");
        let Some(at) = text.find("**Contents**") else {
            panic!("{name} has no contents list");
        };
        // The contents: the list right after the marker.
        let contents: Vec<String> = text[at..]
            .lines()
            .skip(1)
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| l.trim_start().starts_with("- ["))
            .flat_map(links)
            .collect();
        if name == "README.md" {
            // The index lists the pages.
            for page in &contents {
                assert!(
                    guide.join(page).exists(),
                    "the index lists {page}, which is no page"
                );
            }
            continue;
        }
        let sections: Vec<String> = headings(&text)
            .iter()
            .skip(1) // the title
            .map(|h| format!("#{}", slug(h)))
            .collect();
        assert_eq!(contents, sections, "{name}'s contents are not its sections");
    }
    for entry in &listed {
        assert!(
            guide.join(entry).exists(),
            "SUMMARY.md lists {entry}, which is no page"
        );
    }
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let mut documents = pages();
    for extra in ["README.md", "CHANGELOG.md"] {
        documents.push(repo().join(extra));
    }
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    let mut checked = 0;
    for doc in &documents {
        let text = std::fs::read_to_string(doc).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            assert!(
                file.exists(),
                "{}: the link {target:?} names {}, which does not exist",
                doc.display(),
                file.display()
            );
            if !anchor.is_empty() {
                let there = std::fs::read_to_string(&file).unwrap();
                let anchors: Vec<String> = headings(&there).iter().map(|h| slug(h)).collect();
                assert!(
                    anchors.iter().any(|a| a == anchor),
                    "{}: the link {target:?}: {} has no heading #{anchor}",
                    doc.display(),
                    file.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked} links checked");
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md is {lines} lines: move detail into docs/guide"
    );
    // No dated history on the front page: dates belong in docs/measurements.md.
    let dated = readme
        .lines()
        .filter(|l| l.contains("2026-") || l.contains("2025-"))
        .count();
    assert_eq!(dated, 0, "the README carries dates");
}
