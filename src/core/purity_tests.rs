//! The core stays pure: no file of `src/core` uses the Redis module crate (`unsafe` is
//! forbidden by the compiler, see `core/mod.rs`).

use std::path::Path;

#[test]
fn core_does_not_use_the_redis_module_crate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("src/core is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "rs") || path.file_name().is_some_and(|n| n == "purity_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        assert!(!text.contains("redis_module"), "{} uses the Redis module crate", path.display());
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} core files found");
}
