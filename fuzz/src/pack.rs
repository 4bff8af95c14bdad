//! Committed fuzzing corpora. A target's hand-written seeds (`seed-*`) and the inputs that
//! once broke an invariant (`regress-*`) are files in `fuzz/corpus/<target>/`
//! ([`committed_files`], [`check_seeds`]). What a fuzzing run adds is one file per target:
//! `fuzz/packs/<target>.pack` holds what
//! `cargo fuzz cmin` kept of a fuzzing run (thousands of small inputs) as one file, each input
//! a 4-byte little-endian length and its bytes. The main crate's corpus tests replay every
//! input of a pack and, on request, move a pack to and from the target's corpus directory:
//!
//! - `MOQ_UNPACK_CORPUS=1`: write the pack's inputs into `fuzz/corpus/<target>/` (named
//!   `pack-<n>`), to resume fuzzing from them;
//! - `MOQ_PACK_CORPUS=1`: rebuild the pack from `fuzz/corpus/<target>/` after a run and
//!   `cargo fuzz cmin` (committed seeds, `seed-*` and `regress-*`, stay out of it).
//!
//! Only `std` is used, so the file compiles in every crate that includes it.

use std::path::{Path, PathBuf};

/// The repository's `fuzz/` directory, from a crate root at the repository's top.
pub fn fuzz_dir(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("fuzz")
}

/// The committed files of corpus directory `dir`: seeds and regressions, sorted.
pub fn committed_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("seed-") || n.starts_with("regress-"))
    });
    files.sort();
    files
}

/// Checks that the seed files in `dir` are what `seeds` makes (with `MOQ_WRITE_SEEDS` set,
/// writes them first).
pub fn check_seeds(dir: &Path, seeds: Vec<(String, Vec<u8>)>) {
    let write = std::env::var_os("MOQ_WRITE_SEEDS").is_some();
    if write {
        std::fs::create_dir_all(dir).expect("the corpus directory");
    }
    for (name, bytes) in seeds {
        let path = dir.join(&name);
        if write {
            std::fs::write(&path, &bytes).expect("writing a seed");
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(committed, bytes, "{name} differs from what the seed writer makes");
    }
}

/// The inputs of `target`'s pack (empty when there is none).
pub fn read(fuzz: &Path, target: &str) -> Vec<Vec<u8>> {
    let Ok(bytes) = std::fs::read(fuzz.join("packs").join(format!("{target}.pack"))) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut rest = bytes.as_slice();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let n = (u32::from_le_bytes(*len) as usize).min(tail.len());
        out.push(tail[..n].to_vec());
        rest = &tail[n..];
    }
    out
}

/// Applies the `MOQ_PACK_CORPUS` / `MOQ_UNPACK_CORPUS` requests for `target` (see the module
/// header), then returns its pack's inputs.
pub fn load(fuzz: &Path, target: &str) -> Vec<Vec<u8>> {
    let dir = fuzz.join("corpus").join(target);
    if std::env::var_os("MOQ_PACK_CORPUS").is_some() {
        let committed = committed_files(&dir);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|p| p.is_file() && !committed.contains(p));
        files.sort();
        let mut pack = Vec::new();
        for f in files {
            let Ok(input) = std::fs::read(&f) else { continue };
            pack.extend_from_slice(&(input.len() as u32).to_le_bytes());
            pack.extend_from_slice(&input);
        }
        std::fs::create_dir_all(fuzz.join("packs")).expect("fuzz/packs");
        std::fs::write(fuzz.join("packs").join(format!("{target}.pack")), pack).expect("writing the pack");
    }
    let inputs = read(fuzz, target);
    if std::env::var_os("MOQ_UNPACK_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("the corpus directory");
        for (n, input) in inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("pack-{n}")), input).expect("writing an input");
        }
    }
    inputs
}
