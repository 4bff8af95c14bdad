//! The layer rules of ARCHITECTURE.md that a reading of the source can check: the relay names
//! no draft (the session and `wire` map every difference: typed codes, session verbs), the
//! relay never imports the runtime, the configuration imports neither (config ← relay ←
//! runtime), the wire layer imports no other layer, and the WebTransport layer stands alone.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The code of each line (comments, which cite the drafts, removed), with its place; `dir`
/// may also name one file.
fn code_lines(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let files = if root.is_file() { vec![root] } else { sources(&root) };
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            out.push((format!("{}:{}", file.display(), i + 1), code.to_string()));
        }
    }
    assert!(!out.is_empty(), "no sources under {dir}");
    out
}

/// Whether `code` has `word` as a whole identifier (or identifier part after `_`/before `_`
/// for the `_D16` style suffixes).
fn names(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        !ident(before) && !ident(after)
    })
}

#[test]
fn the_relay_names_no_draft() {
    let forbidden = ["Version", "Draft16", "Draft22", "d16", "d22", "D16", "D22"];
    let found: Vec<String> = code_lines("src/relay")
        .into_iter()
        .filter(|(_, code)| forbidden.iter().any(|w| names(code, w) || code.contains(&format!("_{w}"))))
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "src/relay names a draft (map it in wire/ or session/):\n{}", found.join("\n"));
}

/// ARCHITECTURE.md: the relay reads no clock. The runtime gives it the time (`now`) and the
/// wall clock (`RelayShard::set_wall_clock`); its unit tests (after `#[cfg(test)]`) may.
#[test]
fn the_relay_reads_no_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay");
    let mut found = Vec::new();
    for file in sources(&root) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (i, line) in text.lines().enumerate().take_while(|(_, l)| !l.contains("#[cfg(test)]")) {
            let code = line.split("//").next().unwrap_or_default();
            if ["Instant::now", "SystemTime", "unix_now"].iter().any(|w| code.contains(w)) {
                found.push(format!("{}:{}: {}", file.display(), i + 1, code.trim()));
            }
        }
    }
    assert!(found.is_empty(), "src/relay reads a clock:\n{}", found.join("\n"));
}

#[test]
fn the_relay_never_imports_the_runtime() {
    let found: Vec<String> = code_lines("src/relay")
        .into_iter()
        .filter(|(_, code)| code.contains("crate::runtime") || code.contains("moq_edge::runtime"))
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "src/relay imports the runtime:\n{}", found.join("\n"));
}

#[test]
fn the_config_imports_neither_the_relay_nor_the_runtime() {
    let found: Vec<String> = code_lines("src/config.rs")
        .into_iter()
        .filter(|(_, code)| ["relay", "runtime"].iter().any(|l| code.contains(&format!("crate::{l}"))))
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "src/config.rs imports the relay or the runtime:\n{}", found.join("\n"));
}

#[test]
fn the_wire_layer_imports_no_other_layer() {
    let found: Vec<String> = code_lines("src/wire")
        .into_iter()
        .filter(|(_, code)| {
            code.match_indices("crate::").any(|(at, _)| {
                let rest = &code[at + "crate::".len()..];
                !rest.starts_with("wire")
            })
        })
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "src/wire imports another layer:\n{}", found.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert!(names("match s.version() { Version::Draft16 => 1 }", "Draft16"));
    assert!(names("let v = Version::Draft22;", "Version"));
    assert!(!names("let conversion = 1;", "Version"));
    assert!("code::DONE_EXPIRED_D16".contains("_D16"));
}

/// The WebTransport layer knows neither MoQT nor the runtime: it imports no other module of
/// this crate, and the session and relay never import it (ARCHITECTURE.md, "Transports").
#[test]
fn webtransport_is_a_layer_of_its_own() {
    let found: Vec<String> = code_lines("src/webtransport.rs")
        .into_iter()
        .filter(|(_, code)| code.contains("crate::"))
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "src/webtransport.rs imports another module:\n{}", found.join("\n"));
    let found: Vec<String> = ["src/session", "src/relay"]
        .into_iter()
        .flat_map(code_lines)
        .filter(|(_, code)| code.contains("webtransport"))
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "the session or relay knows the transport:\n{}", found.join("\n"));
}
