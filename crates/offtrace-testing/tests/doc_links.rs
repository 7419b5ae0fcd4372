//! Every path the user-facing documentation names exists: the relative links (`](path)`) and the
//! repository paths written in code (`docs/...`, `scripts/...`, `crates/...`, `examples/...`,
//! `tools/...`, `fuzz/...`) of `README.md` and of every Markdown file under `docs/`, except
//! `docs/history/`, which records the repository as it was. A renamed or removed file then fails
//! tier 1 instead of leaving a dead reference behind.
//!
//! The sources (`crates/`, `scripts/`, `tools/`, `examples/`, `fuzz/`: comments, scripts' usage)
//! are held to the same for the documents they cite (`docs/...`).
//!
//! A section named after a document (`` `docs/overhead.md`, *Tool API* ``, `"Reading at scale"`,
//! `` `## Agent` ``) must be one of that document's headings or bold run-in titles (the name found
//! in it, case aside), wherever the reference is: a moved section then fails where its readers
//! point.
//!
//! A link's fragment (`#section`, `file.md#section`) must name a heading of its Markdown file, by
//! the anchor GitHub gives it.
//!
//! A path with a placeholder or a pattern (`<hash>`, `cost-*`, `{,-main}`, `...`) names no one
//! file and is skipped; so are links with a scheme (`https:`), fragments alone (`#section`) and
//! build outputs (a path through a `target/` folder). A crate's example may be named from its
//! crate's folder (`examples/cost_so.rs` in a section about `offtrace-core`): an `examples/` path
//! that is not the repository's is looked for in every crate.

use std::path::{Path, PathBuf};

/// Where repository paths start: a path written in code is checked when it begins with one of
/// these and is not part of a longer path (`/tmp/docs/x` is not one).
const ROOTS: [&str; 6] = ["docs/", "scripts/", "crates/", "examples/", "tools/", "fuzz/"];

fn repository_root() -> PathBuf {
    // This crate is crates/offtrace-testing.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.ends_with("docs/history") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Names no single file: a placeholder, a glob, a brace list or an elision; or a build output.
fn is_pattern(path: &str) -> bool {
    path.contains(['<', '>', '*', '{', '}', '?', '$'])
        || path.contains("...")
        || path.split('/').any(|part| part == "target")
}

/// `written` (a repository path) exists at the root, or, for an example, in a crate.
fn repository_path_exists(root: &Path, written: &str) -> bool {
    if root.join(written).exists() {
        return true;
    }
    written.starts_with("examples/")
        && std::fs::read_dir(root.join("crates"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|krate| krate.path().join(written).exists())
}

/// The targets of the Markdown links `[text](target)` in `line`.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].trim().to_owned());
        rest = &after[end..];
    }
    out
}

/// The repository paths in `text` (code spans and code blocks): tokens starting with one of
/// [`ROOTS`] at a word boundary, up to the first character that cannot be part of a path.
fn repository_paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "._-/+".contains(c);
    let mut out = Vec::new();
    for root in ROOTS {
        let mut from = 0;
        while let Some(at) = text[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| is_path_char(c) || c == '~' || c == ':') {
                continue;
            }
            let token: String = text[start..].chars().take_while(|&c| is_path_char(c)).collect();
            let next = text[start + token.len()..].chars().next();
            if next.is_some_and(|c| "<*{$".contains(c)) {
                continue;
            }
            let token = token.trim_end_matches(['.', ',']);
            if token.len() > root.len() {
                out.push(token.to_owned());
            }
        }
    }
    out
}

/// The anchors GitHub gives a Markdown file's headings: lower case, letters, digits, `-` and `_`
/// kept, spaces made `-`, everything else dropped; a repeated anchor gets `-1`, `-2`, ...
fn heading_anchors(text: &str) -> Vec<String> {
    let mut anchors: Vec<String> = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let Some(title) = line.strip_prefix('#') else { continue };
        if in_block {
            continue;
        }
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let anchor: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let repeats = anchors.iter().filter(|a| **a == anchor || a.starts_with(&format!("{anchor}-"))).count();
        anchors.push(if repeats == 0 { anchor } else { format!("{anchor}-{repeats}") });
    }
    anchors
}

/// The section names a document may be cited by: its headings and its bold phrases, lower case.
fn section_titles(text: &str) -> Vec<String> {
    let mut titles: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().replace('`', "").to_lowercase())
        .collect();
    titles.extend(text.split("**").skip(1).step_by(2).map(|b| b.replace('`', "").to_lowercase()));
    titles
}

/// The section named right after each `docs/*.md` path in `text` (comment markers and line ends
/// already folded into spaces): `*Name*`, `"Name"`, `` `## Name` `` or `(## Name)`, after an
/// optional `` ` ``, `,` and "section(s) ". Returns (document, section).
fn section_references(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in repository_paths(text) {
        if !path.starts_with("docs/") || !path.ends_with(".md") {
            continue;
        }
        let mut from = 0;
        while let Some(at) = text[from..].find(&path) {
            let mut rest = &text[from + at + path.len()..];
            from += at + path.len();
            if rest.starts_with(['/', '-', '.']) && !rest.starts_with(". ") && !rest.starts_with(".)") {
                continue; // a longer path
            }
            rest = rest.strip_prefix('`').unwrap_or(rest);
            rest = rest.strip_prefix(',').unwrap_or(rest);
            rest = rest.strip_prefix(' ').unwrap_or(rest);
            for word in ["sections ", "section "] {
                rest = rest.strip_prefix(word).unwrap_or(rest);
            }
            let (open, close) = if rest.starts_with("*") && !rest.starts_with("**") {
                ("*", '*')
            } else if rest.starts_with('"') {
                ("\"", '"')
            } else if rest.starts_with("`##") {
                ("`", '`')
            } else if rest.starts_with("(##") {
                ("(", ')')
            } else {
                continue;
            };
            let inner = &rest[open.len()..];
            let Some(end) = inner.find(close) else { continue };
            let name = inner[..end].trim_start_matches('#').replace('`', "");
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            if !name.is_empty() {
                out.push((path.clone(), name));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `text` with comment markers at line starts and line ends folded into single spaces, so that a
/// reference broken over comment lines reads whole.
fn folded(text: &str) -> String {
    text.lines()
        .map(|l| {
            let l = l.trim_start();
            ["//!", "///", "//", "#", "*"].iter().find_map(|m| l.strip_prefix(m)).unwrap_or(l).trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_section_named_after_a_document_is_in_it() {
    let root = repository_root();
    let mut files = markdown_files(&root);
    for dir in ["crates", "scripts", "tools", "examples", "fuzz"] {
        source_files(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        for (document, section) in section_references(&folded(&text)) {
            let Ok(target) = std::fs::read_to_string(root.join(&document)) else { continue };
            checked += 1;
            let wanted = section.to_lowercase();
            if !section_titles(&target).iter().any(|t| t.contains(&wanted)) {
                missing.push(format!("{name}: {document}, \"{section}\""));
            }
        }
    }
    assert!(checked > 40, "only {checked} section references found: the scan is broken");
    assert!(missing.is_empty(), "sections cited that their document does not have:\n{}", missing.join("\n"));
}

/// The code spans (`...`) of a line outside code blocks.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_path_the_documentation_names_exists() {
    let root = repository_root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let dir = file.parent().expect("a file's folder");
        let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        let mut in_block = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            // (the path, as written; whether it exists)
            let mut paths: Vec<(String, bool)> = Vec::new();
            let in_repository = |p: String| {
                let exists = repository_path_exists(&root, &p);
                (p, exists)
            };
            if in_block {
                paths.extend(repository_paths(line).into_iter().map(in_repository));
            } else {
                for link in link_targets(line) {
                    let (target, fragment) = link.split_once('#').unwrap_or((&link, ""));
                    if target.contains(':') || is_pattern(target) {
                        continue;
                    }
                    let linked = if target.is_empty() { file.clone() } else { dir.join(target) };
                    if !target.is_empty() {
                        paths.push((target.to_owned(), linked.exists()));
                    }
                    if !fragment.is_empty() && linked.extension().is_some_and(|e| e == "md") {
                        let anchors = std::fs::read_to_string(&linked).map(|t| heading_anchors(&t)).unwrap_or_default();
                        paths.push((link.clone(), anchors.iter().any(|a| a == fragment)));
                    }
                }
                for span in code_spans(line) {
                    paths.extend(repository_paths(span).into_iter().map(in_repository));
                }
            }
            for (written, exists) in paths {
                if is_pattern(&written) {
                    continue;
                }
                checked += 1;
                if !exists {
                    missing.push(format!("{name}:{}: {written}", n + 1));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} paths found: the scan is broken");
    assert!(missing.is_empty(), "paths named in the documentation that do not exist:\n{}", missing.join("\n"));
}

/// The files under `dir` that are sources (not build outputs, not this file, which names missing
/// paths on purpose).
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != "corpus" && name != "artifacts" {
                source_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| ["rs", "sh", "py", "c", "h", "cpp", "toml"].iter().any(|x| e == *x))
            && !path.ends_with("offtrace-testing/tests/doc_links.rs")
        {
            out.push(path);
        }
    }
}

#[test]
fn every_document_the_sources_cite_exists() {
    let root = repository_root();
    let mut files = Vec::new();
    for dir in ["crates", "scripts", "tools", "examples", "fuzz"] {
        source_files(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        for (n, line) in text.lines().enumerate() {
            for written in repository_paths(line) {
                if !written.starts_with("docs/") || is_pattern(&written) {
                    continue;
                }
                checked += 1;
                if !root.join(&written).exists() {
                    missing.push(format!("{name}:{}: {written}", n + 1));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} citations found: the scan is broken");
    assert!(missing.is_empty(), "documents cited in the sources that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_scan_finds_links_and_code_paths_and_skips_patterns() {
    assert_eq!(link_targets("see [a](docs/a.md) and [b](../b.md#x)."), ["docs/a.md", "../b.md#x"]);
    assert_eq!(repository_paths("run scripts/x.sh, then docs/y.md."), ["docs/y.md", "scripts/x.sh"]);
    assert!(repository_paths("/tmp/docs/x.md target/release/deps/cost-<hash>").is_empty());
    assert!(repository_paths("docs/read-runs/device-2026-11-26{,-main}/run.sh").is_empty());
    assert_eq!(code_spans("a `b` c `d e` f"), ["b", "d e"]);
    assert_eq!(
        heading_anchors("# A b\n\n## Metrics sampling (`record --metrics`)\n```\n# not\n```\n## A b\n#x"),
        ["a-b", "metrics-sampling-record---metrics", "a-b-1"]
    );
    assert!(is_pattern("target/release/deps/cost-*"));
    assert_eq!(
        section_references("see `docs/a.md`, *The writer* and docs/b.md, \"Reading\"; `docs/c.md` (## Agent)."),
        [
            ("docs/a.md".to_owned(), "The writer".to_owned()),
            ("docs/b.md".to_owned(), "Reading".to_owned()),
            ("docs/c.md".to_owned(), "Agent".to_owned())
        ]
    );
    assert!(section_references("docs/a.md and docs/a-runs/x.txt").is_empty());
    assert_eq!(folded("x (`docs/a.md`, \"Long\n/// name\")"), "x (`docs/a.md`, \"Long name\")");
    assert!(section_titles("# Agent: cost\n**Under SYCL: the calls**").contains(&"under sycl: the calls".to_owned()));
    assert!(is_pattern("fuzz/target"));
    let root = repository_root();
    assert!(repository_path_exists(&root, "examples/cost_so.rs"), "offtrace-core's example");
    assert!(!repository_path_exists(&root, "examples/no_such_example.rs"));
    assert!(!repository_path_exists(&root, "docs/no-such-file.md"));
}
