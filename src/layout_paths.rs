//! What the layout tests of both crates (src/layout_tests.rs and the gateway's
//! gateway_layout_tests.rs, which includes this file by path) read from sources: the module
//! paths a `use`/path expression names, and the import circles of a file graph.

use std::collections::{BTreeMap, BTreeSet};

/// The identifier at the start of `s`, and what follows it.
fn ident(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    s.split_at(end)
}

/// The module paths a path starting at `s` names, below `prefix` (a `{...}` list names
/// several).
pub fn paths(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
    let (name, rest) = ident(s);
    let mut path = prefix.to_vec();
    if !name.is_empty() && name != "self" {
        path.push(name.to_string());
    }
    let Some(rest) = rest.strip_prefix("::") else {
        out.push(path);
        return;
    };
    let Some(list) = rest.strip_prefix('{') else {
        return paths(&path, rest, out);
    };
    // The items of the list up to its closing brace, split at top-level commas.
    let (mut depth, mut start) = (0, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                paths(&path, list[start..i].trim(), out);
                return;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                paths(&path, list[start..i].trim(), out);
                start = i + 1;
            }
            _ => {}
        }
    }
}

/// The circles in `g` (file -> the files it depends on), each as the files around it.
pub fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    // Depth-first, keeping the path: a file met again on it closes a circle.
    fn visit<'a>(
        f: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        out: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| *p == f) {
            out.push(format!("{} -> {f}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(f) {
            return;
        }
        path.push(f);
        for d in g.get(f).into_iter().flatten() {
            visit(d, g, path, done, out);
        }
        path.pop();
    }
    let (mut done, mut out) = (BTreeSet::new(), Vec::new());
    for f in g.keys() {
        visit(f, g, &mut Vec::new(), &mut done, &mut out);
    }
    out
}
