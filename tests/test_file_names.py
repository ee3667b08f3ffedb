"""Every file name in the repository is unique, so a name alone says which file is meant
(in a stack trace, a review, a search). Names that tools fix are exempt: manifests, READMEs,
Rust's mod.rs/lib.rs/main.rs, Python's __init__.py and pytest's conftest.py."""

import subprocess
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXED_BY_TOOLS = {"README.md", "Cargo.toml", "Cargo.lock", "pom.xml", "package.json",
                  "package-lock.json", ".gitignore", "mod.rs", "lib.rs", "main.rs",
                  "__init__.py", "conftest.py", "go.mod", "go.sum"}


def duplicates(paths):
    by_name = defaultdict(list)
    for p in paths:
        name = p.rsplit("/", 1)[-1]
        if name not in FIXED_BY_TOOLS:
            by_name[name].append(p)
    return {n: ps for n, ps in by_name.items() if len(ps) > 1}


def test_file_names_are_unique():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True,
                           text=True).stdout.split()
    assert len(files) > 300, "git ls-files found the repository"
    assert duplicates(files) == {}


def test_a_duplicate_is_reported():
    found = duplicates(["src/core/store.rs", "gateway/src/store.rs", "src/mod.rs", "x/mod.rs"])
    assert found == {"store.rs": ["src/core/store.rs", "gateway/src/store.rs"]}
