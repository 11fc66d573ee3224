//! The documentation is held to the repository: every relative link in README.md, deploy's
//! README and docs/ points to a file that exists (and, with `#anchor`, to a heading of it), and
//! the command-line reference (docs/reference/cli.md) carries the `--help` of every command,
//! verbatim, so a flag cannot be added, renamed or dropped without the reference following.
//!
//! `GITFLEET_BLESS_DOCS=1 cargo test --test docs` rewrites the `--help` blocks of the reference
//! from the binary; read the diff, and update the prose around a block when a flag's meaning
//! changed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, deploy/README.md and every Markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("docs/ is readable") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = vec![root().join("README.md"), root().join("deploy/README.md")];
    walk(&root().join("docs"), &mut docs);
    docs.sort();
    docs
}

/// The lines of a Markdown text outside fenced code blocks (``` or ````, as opened).
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fence: Option<String> = None;
    let mut out = vec![];
    for line in text.lines() {
        let trimmed = line.trim_start();
        let ticks: String = trimmed.chars().take_while(|c| *c == '`').collect();
        match &fence {
            Some(open) if ticks.len() >= open.len() && trimmed[ticks.len()..].trim().is_empty() => {
                fence = None
            }
            Some(_) => {}
            None if ticks.len() >= 3 => fence = Some(ticks),
            None => out.push(line),
        }
    }
    out
}

/// Link targets of `[text](target)` in prose, inline code spans left out.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = vec![];
    for line in prose_lines(text) {
        // Inline code may hold `[x](y)`-looking text that is no link.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as
/// `-`, a repeated heading numbered (`-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose_lines(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            continue;
        };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

#[test]
fn every_relative_link_in_the_documentation_resolves() {
    let mut broken = vec![];
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a document is readable");
        let name = doc.strip_prefix(root()).unwrap().display().to_string();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            if !file.exists() {
                broken.push(format!("{name}: ({target}): no file {}", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let headings = std::fs::read_to_string(&file).map(|t| anchors(&t));
                if !headings.is_ok_and(|h| h.contains(anchor)) {
                    broken.push(format!(
                        "{name}: ({target}): no heading #{anchor} in {path}"
                    ));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# `gitfleet run`\n## A, b (c)\n```\n# not a heading\n```\n## A, b (c)\n";
    let want: BTreeSet<String> = ["gitfleet-run", "a-b-c", "a-b-c-1"]
        .map(String::from)
        .into();
    assert_eq!(anchors(text), want);
    assert_eq!(
        link_targets("[a](x.md#y) `[no](z.md)` [b](../c.md)\n```\n[d](e.md)\n```"),
        ["x.md#y", "../c.md"]
    );
}

/// Every command of the binary, as its own `--help` lists them.
fn commands() -> Vec<String> {
    let help = help(&[]);
    let mut in_commands = false;
    let mut out = vec![];
    for line in help.lines() {
        if line == "Commands:" {
            in_commands = true;
        } else if in_commands {
            match line.split_whitespace().next() {
                Some("help") => {}
                Some(name) if line.starts_with("  ") => out.push(name.to_string()),
                _ => break,
            }
        }
    }
    assert!(out.len() > 10, "commands not found in --help:\n{help}");
    out
}

/// `gitfleet [COMMAND] --help`, as a user without `GITFLEET_*` variables sees it.
fn help(command: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gitfleet"));
    cmd.args(command).arg("--help").env_remove("COLUMNS");
    for (key, _) in std::env::vars() {
        if key.starts_with("GITFLEET_") {
            cmd.env_remove(key);
        }
    }
    let out = cmd.output().expect("gitfleet runs");
    assert!(out.status.success(), "gitfleet {command:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

const BEGIN: &str = "<!-- help: ";
const END: &str = "<!-- end help -->";

/// The reference with each `<!-- help: CMD -->` … `<!-- end help -->` block replaced by the
/// current `--help` of CMD, and the commands that have a block.
fn with_current_help(reference: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut covered = vec![];
    let mut rest = reference;
    while let Some(at) = rest.find(BEGIN) {
        let after = &rest[at + BEGIN.len()..];
        let name_end = after.find(" -->").expect("a help marker ends with -->");
        let name = &after[..name_end];
        let end = after.find(END).expect("every help block has an end marker");
        out.push_str(&rest[..at]);
        let args: Vec<&str> = if name == "gitfleet" {
            vec![]
        } else {
            vec![name]
        };
        out.push_str(&format!(
            "{BEGIN}{name} -->\n```text\n{}\n```\n{END}",
            help(&args).trim_end()
        ));
        covered.push(name.to_string());
        rest = &after[end + END.len()..];
    }
    out.push_str(rest);
    (out, covered)
}

#[test]
fn the_command_line_reference_carries_every_commands_help() {
    let path = root().join("docs/reference/cli.md");
    let reference = std::fs::read_to_string(&path).expect("docs/reference/cli.md is readable");
    let (current, covered) = with_current_help(&reference);
    let bless = std::env::var_os("GITFLEET_BLESS_DOCS").is_some();
    if bless {
        std::fs::write(&path, &current).expect("docs/reference/cli.md is writable");
    }
    let missing: Vec<String> = commands()
        .into_iter()
        .filter(|c| !covered.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/reference/cli.md has no `{BEGIN}CMD -->` block for {missing:?}"
    );
    assert!(
        covered.iter().any(|c| c == "gitfleet"),
        "no block for gitfleet --help itself"
    );
    if current != reference && !bless {
        let first = current
            .lines()
            .zip(reference.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "docs/reference/cli.md differs from the binary's --help from line {}:\n  doc:    {:?}\n  binary: {:?}\n\
             Run `GITFLEET_BLESS_DOCS=1 cargo test --test docs` to take the binary's, then read the diff \
             and update the prose around it.",
            first + 1,
            reference.lines().nth(first).unwrap_or(""),
            current.lines().nth(first).unwrap_or(""),
        );
    }
}
