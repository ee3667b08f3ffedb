//! The gateway's layout holds: its files depend on each other one way only (no import
//! circle: a file that declares a module, or names another through `crate::` or `super::`
//! paths in its code, depends on it), RMQ's commands are spelled only in crate::rmq_client and the
//! gateway's key names only in crate::gateway_keys. Read from the sources, so a change that
//! breaks the layout fails `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::layout_paths::{circles, paths};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir` but this one, as a path relative to `src/`, with its text.
fn files(dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("gateway_layout_tests.rs") {
            let name = path.strip_prefix(src()).expect("under src").to_string_lossy().into_owned();
            out.insert(name, std::fs::read_to_string(&path).expect("a readable source file"));
        }
    }
}

/// The module path of a file (`actions/caller.rs` → `["actions", "caller"]`; a crate root's
/// is empty).
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    match stem {
        "lib" | "main" => Vec::new(),
        _ => stem.split('/').map(str::to_string).collect(),
    }
}

/// The file a module path names: the longest prefix that is a file.
fn file_of(path: &[String], known: &BTreeMap<String, String>) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| Some(format!("{}.rs", path[..n].join("/"))).filter(|f| known.contains_key(f)))
}

/// The code of a file: its lines that are not comments.
fn code(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim_start().starts_with("//"))
}

/// Which files each file depends on.
fn graph(all: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut g = BTreeMap::new();
    for (f, text) in all {
        let here = module_of(f);
        let parent = &here[..here.len().saturating_sub(1)];
        let mut named = Vec::new();
        for line in code(text) {
            let line = line.trim_start();
            if let Some(rest) = line.strip_prefix("mod ").or_else(|| line.strip_prefix("pub mod ")) {
                if let Some(child) = rest.strip_suffix(';') {
                    let mut p = here.clone();
                    p.push(child.to_string());
                    named.push(p);
                }
            }
        }
        // Code only: a comment that points at another file is no dependency.
        let code: String = code(text).collect::<Vec<_>>().join("\n");
        for (at, _) in code.match_indices("crate::") {
            paths(&[], &code[at + "crate::".len()..], &mut named);
        }
        for (at, _) in code.match_indices("super::") {
            // `super::*` in a file's tests names the file itself.
            paths(parent, &code[at + "super::".len()..], &mut named);
        }
        let deps = named.iter().filter_map(|p| file_of(p, all)).filter(|d| d != f).collect();
        g.insert(f.clone(), deps);
    }
    g
}

/// The files (other than `owner`) whose code spells `word`, with the first such line.
fn spelled_outside(all: &BTreeMap<String, String>, word: &str, owner: &str) -> Vec<String> {
    all.iter()
        .filter(|(f, _)| *f != owner)
        .filter_map(|(f, text)| code(text).find(|l| l.contains(word)).map(|l| format!("{f}: {}", l.trim())))
        .collect()
}

#[test]
fn no_file_depends_on_itself_through_others() {
    let mut all = BTreeMap::new();
    files(&src(), &mut all);
    let g = graph(&all);
    assert!(g.len() > 25, "only {} files found", g.len());
    assert!(g["actions.rs"].contains("actions/caller.rs"), "a declared module is a dependency");
    assert!(g["actions/queue_actions.rs"].contains("actions/caller.rs"), "super:: paths are dependencies");
    assert!(g["server.rs"].contains("gateway_state.rs"), "crate:: paths are dependencies");
    let found = circles(&g);
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn a_circle_is_found() {
    let g = BTreeMap::from([
        ("a.rs".to_string(), BTreeSet::from(["b.rs".to_string()])),
        ("b.rs".to_string(), BTreeSet::from(["c.rs".to_string()])),
        ("c.rs".to_string(), BTreeSet::from(["a.rs".to_string()])),
    ]);
    assert_eq!(circles(&g), ["a.rs -> b.rs -> c.rs -> a.rs"]);
}

#[test]
fn rmq_commands_are_spelled_only_by_the_rmq_client() {
    let mut all = BTreeMap::new();
    files(&src(), &mut all);
    let found = spelled_outside(&all, "RMQ.", "rmq_client.rs");
    assert!(found.is_empty(), "RMQ commands spelled outside rmq_client.rs:\n{}", found.join("\n"));
}

#[test]
fn key_names_are_spelled_only_by_gateway_keys() {
    let mut all = BTreeMap::new();
    files(&src(), &mut all);
    let found = spelled_outside(&all, "rmqgw:", "gateway_keys.rs");
    assert!(found.is_empty(), "rmqgw: keys spelled outside gateway_keys.rs:\n{}", found.join("\n"));
}
