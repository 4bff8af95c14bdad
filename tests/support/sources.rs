//! The source files the project's own checks read (`code_size.rs`, `type_size.rs`,
//! `layers.rs`), included by path.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, sorted, skipping `tests/` directories (a crate's own test
/// harnesses are held to none of those checks).
pub fn rust_sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                if !path.ends_with("tests") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
