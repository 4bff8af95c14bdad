//! The layer rules of ARCHITECTURE.md ("Crates") that Cargo does not hold by itself. Which
//! layer may use which is each crate's manifest: checked here so that a new dependency that
//! breaks the order fails. What no manifest can say is checked in the source: the relay names
//! no draft (the session and `wire` map every difference: typed codes, session verbs) and reads
//! no clock; the runtime's code names no MoQT.

use std::path::Path;

use sources::rust_sources;

#[path = "support/sources.rs"]
mod sources;

/// The code of each line (comments, which cite the drafts, removed), with its place; `dir`
/// may also name one file.
fn code_lines(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let files = if root.is_file() { vec![root] } else { rust_sources(&root) };
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
/// wall clock (`Input::WallClock`); its unit tests (after `#[cfg(test)]`) may.
#[test]
fn the_relay_reads_no_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay");
    let mut found = Vec::new();
    for file in rust_sources(&root) {
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

/// ARCHITECTURE.md, "The relay layer": the roles' shared plumbing (`Cx`, the mail,
/// `unheeded`) lives in `cx.rs` below them, so a role imports the modules it uses and never
/// the crate root, which imports every role. Only the shard's own files (those that
/// `impl RelayShard`) may name what the root declares.
#[test]
fn no_relay_role_imports_the_crate_root() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/relay");
    let lib = std::fs::read_to_string(root.join("lib.rs")).expect("relay lib.rs");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
        .filter_map(|l| l.strip_suffix(';'))
        .collect();
    assert!(modules.contains(&"cx") && modules.contains(&"owner"), "modules read from lib.rs: {modules:?}");
    let mut found = Vec::new();
    for file in rust_sources(&root) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        let top_level = file.parent() == Some(root.as_path());
        if file.ends_with("lib.rs") || text.contains("impl RelayShard") {
            continue;
        }
        for (i, line) in text.lines().enumerate().take_while(|(_, l)| !l.contains("#[cfg(test)]")) {
            let line = line.trim();
            let path = match (line.strip_prefix("use crate::"), line.strip_prefix("use super::")) {
                (Some(p), _) => p,
                (None, Some(p)) if top_level => p,
                _ => continue,
            };
            let first: Vec<&str> = match path.strip_prefix('{') {
                Some(list) => {
                    list.split(',').map(|p| p.trim().split("::").next().unwrap_or_default()).collect()
                }
                None => vec![path.split("::").next().unwrap_or_default()],
            };
            for name in first.iter().map(|n| n.trim_end_matches([';', '}'])).filter(|n| !n.is_empty()) {
                if !modules.contains(&name) {
                    found.push(format!(
                        "{}:{}: {line} (names `{name}` of the crate root)",
                        file.display(),
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "a relay role imports the crate root:\n{}", found.join("\n"));
}

/// The workspace crates each layer crate may use (ARCHITECTURE.md, "Crates"): only layers
/// below it.
const LAYERS: &[(&str, &[&str])] = &[
    ("src/wire", &[]),
    ("src/session", &["wire"]),
    ("src/webtransport", &[]),
    // QMux is a transport beside quiche: it knows streams and frames, no MoQT.
    ("src/qmux", &[]),
    ("src/auth", &["wire"]),
    ("src/relay", &["wire", "session", "auth"]),
    ("src/runtime", &["qmux"]),
    ("src/moqt", &["wire", "session", "webtransport", "qmux", "runtime"]),
    ("src/client", &["wire", "session", "webtransport", "qmux", "runtime", "moqt"]),
    // Media import (fMP4 into a hang broadcast) knows nothing of MoQT: no layer at all.
    ("src/media", &[]),
];

/// The names of the `[dependencies]` of the crate in `dir` (its manifest's keys).
fn dependencies(dir: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).expect("a crate manifest");
    let mut section = "";
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            let key = line.split(['=', '.']).next().unwrap_or_default().trim();
            out.push(key.to_string());
        }
    }
    out
}

#[test]
fn each_layer_uses_only_layers_below_it() {
    let layers: Vec<&str> = LAYERS.iter().map(|(dir, _)| dir.trim_start_matches("src/")).collect();
    let mut found = Vec::new();
    for (dir, allowed) in LAYERS {
        for dep in dependencies(dir) {
            if layers.contains(&dep.as_str()) && !allowed.contains(&dep.as_str()) {
                found.push(format!("{dir} uses {dep}"));
            }
        }
    }
    assert!(found.is_empty(), "a layer uses one it must not:\n{}", found.join("\n"));
    // The codecs and the session build without QUIC or TLS.
    for dir in ["src/wire", "src/session", "src/webtransport", "src/relay", "src/media"] {
        let deps = dependencies(dir);
        assert!(
            !deps.iter().any(|d| ["quiche", "boring", "glommio"].contains(&d.as_str())),
            "{dir}: {deps:?}"
        );
    }
    // Media import is sans-IO and MoQT-free: no async runtime, no transport, no MoQT crate.
    let deps = dependencies("src/media");
    let transport = ["tokio", "web-transport-proto", "moq-lite", "moq-net", "moq-transport", "hang"];
    assert!(!deps.iter().any(|d| transport.contains(&d.as_str())), "src/media: {deps:?}");
}

/// The runtime knows connections by ALPN only: its code (comments aside) names no MoQT
/// draft, message or code, nor WebTransport (QMux's own wire version, `qmux::Version`, is a
/// transport's and allowed).
#[test]
fn the_runtime_names_no_moqt() {
    let forbidden = ["moqt", "MoQT", "draft", "Draft", "GOAWAY", "webtransport", "WebTransport"];
    let found: Vec<String> = code_lines("src/runtime")
        .into_iter()
        .filter(|(_, code)| {
            (names(code, "Version") && !code.contains("qmux::Version"))
                || forbidden.iter().any(|w| code.contains(w))
        })
        .map(|(at, code)| format!("{at}: {}", code.trim()))
        .collect();
    assert!(found.is_empty(), "src/runtime names MoQT:\n{}", found.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert!(names("match s.version() { Version::Draft16 => 1 }", "Draft16"));
    assert!(names("let v = Version::Draft22;", "Version"));
    assert!(!names("let conversion = 1;", "Version"));
    assert!("code::DONE_EXPIRED_D16".contains("_D16"));
    assert!(dependencies("src/relay").contains(&"session".to_string()));
    assert!(dependencies("src/media").contains(&"mp4-atom".to_string()));
}
