//! The layout holds (README, "For contributors"): files depend on each other one way only
//! (no import circle, even inside a layer), each layer only on those before it
//! (`core ← ffi ← storage ← runtime ← cmd ← module`), and `unsafe` appears only in `ffi/`.
//! Read from the sources, so a change that breaks the layout fails `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::layout_paths::{circles, paths};

/// The layers in order; `module.rs` and `lib.rs` sit above them all.
const LAYERS: [&str; 7] = ["core", "ffi", "storage", "runtime", "cmd", "module.rs", "lib.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as a path relative to `src/`.
fn files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("layout_tests.rs") && !path.ends_with("layout_paths.rs") {
            out.push(path.strip_prefix(src()).expect("under src").to_string_lossy().into_owned());
        }
    }
}

/// The file a module path (`["storage", "keys", "queue_of"]`) is in: the longest prefix
/// that names a file.
fn file_of(path: &[String], known: &BTreeSet<String>) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let dir = path[..n].join("/");
        [format!("{dir}.rs"), format!("{dir}/mod.rs")].into_iter().find(|f| known.contains(f))
    })
}

/// Which files each file names through `crate::` paths.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let known: BTreeSet<String> = all.iter().cloned().collect();
    let mut g = BTreeMap::new();
    for f in &all {
        let text = std::fs::read_to_string(src().join(f)).expect("a readable source file");
        let mut named = Vec::new();
        for (at, _) in text.match_indices("crate::") {
            paths(&[], &text[at + "crate::".len()..], &mut named);
        }
        let deps = named.iter().filter_map(|p| file_of(p, &known)).filter(|d| d != f).collect();
        g.insert(f.clone(), deps);
    }
    g
}

fn layer(file: &str) -> usize {
    let top = file.split('/').next().unwrap_or(file);
    LAYERS.iter().position(|l| *l == top).unwrap_or_else(|| panic!("{file} is in no layer"))
}

#[test]
fn layers_depend_only_on_those_before_them() {
    let g = graph();
    assert!(g.len() > 50, "only {} files found", g.len());
    for (f, deps) in &g {
        for d in deps {
            assert!(layer(d) <= layer(f), "{f} uses {d}, a layer above it");
        }
    }
}

#[test]
fn no_file_depends_on_itself_through_others() {
    let found = circles(&graph());
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn unsafe_is_only_in_ffi() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    for f in all.iter().filter(|f| !f.starts_with("ffi/")) {
        let text = std::fs::read_to_string(src().join(f)).expect("a readable source file");
        let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
        assert!(!code.into_iter().any(|l| l.contains("unsafe ") || l.contains("unsafe{")), "{f} has `unsafe`");
    }
}

#[test]
fn the_reader_follows_nested_lists() {
    let mut out = Vec::new();
    paths(&[], "runtime::{acl, derived::{found, Scope}, self};", &mut out);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        out,
        vec![s(&["runtime", "acl"]), s(&["runtime", "derived", "found"]), s(&["runtime", "derived", "Scope"]), s(&["runtime"])]
    );
}
