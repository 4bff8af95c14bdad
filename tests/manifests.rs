//! Every dependency a manifest of the workspace lists is used by the code it builds
//! (ARCHITECTURE.md, "Dependencies": the list is deliberate): a `[dependencies]` entry is
//! named in the crate's own sources (its library and binaries), a `[dev-dependencies]` entry
//! in its sources, tests or benchmarks. Named means the crate's library name (the key, `-`
//! as `_`) appears as a word, as every `use` and path does.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file under `dir`, leaving out the directories in `skip`.
fn rust_files(dir: &Path, skip: &[PathBuf], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !skip.contains(&path) && path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, skip, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn text(files: &[PathBuf]) -> String {
    files.iter().map(|f| std::fs::read_to_string(f).expect("a source file")).collect()
}

/// Whether `word` occurs in `text` with no identifier character on either side.
fn names(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

fn table_keys(manifest: &toml::Value, table: &str) -> Vec<String> {
    manifest
        .get(table)
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn every_dependency_is_used() {
    let root = Path::new(ROOT);
    let workspace: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml")).expect("TOML");
    let members: Vec<PathBuf> = workspace["workspace"]["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| match m.as_str().expect("a path") {
            "." => root.to_path_buf(),
            m => root.join(m),
        })
        .collect();
    let mut unused = Vec::new();
    let mut checked = 0;
    for member in &members {
        let manifest: toml::Value =
            toml::from_str(&std::fs::read_to_string(member.join("Cargo.toml")).expect("a manifest"))
                .expect("TOML");
        // The root package's code is src/ and its binaries' directories, without the other
        // members (under src/ and bench/), its tests and benchmarks.
        let others: Vec<PathBuf> =
            members.iter().filter(|m| *m != member && m.as_path() != root).cloned().collect();
        let (mut own, mut dev) = (Vec::new(), Vec::new());
        if member.as_path() == root {
            let skip =
                [others.clone(), vec![root.join("fuzz"), root.join("tests"), root.join("bench")]].concat();
            rust_files(&root.join("src"), &skip, &mut own);
            rust_files(&root.join("bench/moq-bench"), &skip, &mut own);
            rust_files(&root.join("tests"), &[], &mut dev);
            for bench in ["bench/wire.rs", "bench/bulk.rs"] {
                dev.push(root.join(bench));
            }
        } else {
            rust_files(member, &others, &mut own);
        }
        let own = text(&own);
        let all = own.clone() + &text(&dev);
        for (table, code) in [("dependencies", &own), ("dev-dependencies", &all)] {
            for dep in table_keys(&manifest, table) {
                checked += 1;
                if !names(code, &dep.replace('-', "_")) {
                    unused.push(format!("{}: [{table}] {dep}", member.display()));
                }
            }
        }
    }
    assert!(unused.is_empty(), "dependencies no code of their crate names:\n{}", unused.join("\n"));
    assert!(checked > 100, "only {checked} dependencies checked");
}

#[test]
fn the_check_sees_words_not_parts() {
    assert!(names("use ahash::HashMap;", "ahash"));
    assert!(!names("use xahash::HashMap;", "ahash"));
    assert!(!names("ahash_like", "ahash"));
}
