//! ARCHITECTURE.md stays short and true: under 600 lines, and every path and item it names in
//! backticks exists. Std only, so it also builds with plain `rustc --test`.
//!
//! The rules, applied to each `backticked` span outside fenced code blocks:
//!
//! - **Paths.** A span without whitespace that contains `/` (and no `://`, and does not start
//!   with `/`, `@`, `<` or `~`) is a path when its first segment is a top-level directory of
//!   the repository (`src`, `bench`, `deploy`, `perf`, `web`, `tests`, `fuzz`, `.ci`) or a
//!   directory directly under `src/` (a layer: `relay/directory.rs`, `host/events.rs`), or
//!   when it ends in `/` or a file extension (`.rs`, `.md`, `.toml`, …). It must exist either
//!   at the repository root or under `src/` (so a layer's files may be named relative to
//!   `src/`). A trailing `/` means a directory; a `:line` suffix and a `::test` suffix after a
//!   `.rs` file are ignored. A top-level file named alone (`Cargo.toml`, `Makefile`,
//!   `README.md`, …) must exist too.
//! - **Items.** A span of the form `a::b::c` (generic arguments, `(..)` and `{ .. }` removed,
//!   a trailing `!` or `()` ignored) is checked when its first segment is a crate of the
//!   workspace (`wire`, `session`, `webtransport`, `qmux`, `auth`, `relay`, `runtime`, `moqt`,
//!   `media`, `client`, `moq_edge`) or a module of the root package (`host`, `web`,
//!   `metrics`): each later segment must be declared somewhere under that crate's directory
//!   (`moq_edge`: all of `src/`). A span whose first segment is a type name (upper case, as in
//!   `Session::send_object`) is checked the same way against all of `src/`. A lower-case
//!   segment before the last must be a module (`mod seg`, a file `seg.rs` or a directory
//!   `seg/`); any other segment must be declared as a `fn`, `struct`, `enum`, `trait`, `type`,
//!   `const`, `static`, `mod`, `macro_rules!`, an enum variant or a struct field, or be a file
//!   or directory of that name. A `*` segment matches anything. The search is textual.
//!
//! Every failure is printed with its line number, and the test fails if there is any.

use std::fs;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;
const ROOT_DIRS: &[&str] = &["src", "bench", "deploy", "perf", "web", "tests", "fuzz", ".ci"];
const ROOT_FILES: &[&str] =
    &["Cargo.toml", "Cargo.lock", "Makefile", "README.md", "ARCHITECTURE.md", "rustfmt.toml"];
const EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "json", "sh", "js", "mjs", "html", "css", "yml", "yaml", "lock", "txt", "service",
    "conf", "py",
];
const CRATES: &[(&str, &str)] = &[
    ("wire", "src/wire"),
    ("session", "src/session"),
    ("webtransport", "src/webtransport"),
    ("qmux", "src/qmux"),
    ("auth", "src/auth"),
    ("relay", "src/relay"),
    ("runtime", "src/runtime"),
    ("moqt", "src/moqt"),
    ("media", "src/media"),
    ("client", "src/client"),
    ("moq_edge", "src"),
    ("host", "src/host"),
    ("web", "src/web"),
    ("metrics", "src/metrics.rs"),
];

fn root() -> PathBuf {
    PathBuf::from(option_env!("CARGO_MANIFEST_DIR").unwrap_or("."))
}

/// The document under test: ARCHITECTURE.md, or the file named by `ARCHITECTURE_MD` (to try
/// the rules on another version of it).
fn document() -> (PathBuf, String) {
    let path = std::env::var_os("ARCHITECTURE_MD")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("ARCHITECTURE.md"));
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, text)
}

/// Each backticked span with its 1-based line number, outside fenced code blocks.
fn spans(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push((i + 1, inside.to_string()));
        }
    }
    out
}

fn src_layer_dirs(root: &Path) -> Vec<String> {
    let mut dirs = Vec::new();
    if let Ok(entries) = fs::read_dir(root.join("src")) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                dirs.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    dirs
}

/// The path a span claims, if it claims one.
fn path_claim(span: &str, layer_dirs: &[String]) -> Option<String> {
    let span = span.trim();
    if ROOT_FILES.contains(&span) {
        return Some(span.to_string());
    }
    if span.is_empty()
        || span.chars().any(char::is_whitespace)
        || !span.contains('/')
        || span.contains("://")
        || span.contains("::") && !span.contains(".rs::")
        || ["/", "@", "<", "~"].iter().any(|p| span.starts_with(p))
    {
        return None;
    }
    let mut path = span;
    if let Some(at) = path.find(".rs::") {
        path = &path[..at + 3];
    }
    if let Some((head, tail)) = path.rsplit_once(':') {
        if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) {
            path = head;
        }
    }
    let first = path.split('/').next().unwrap_or("");
    let last = path.rsplit('/').next().unwrap_or("");
    let known_dir = ROOT_DIRS.contains(&first) || layer_dirs.iter().any(|d| d == first);
    let has_ext = last.rsplit_once('.').is_some_and(|(_, ext)| EXTENSIONS.contains(&ext));
    if known_dir || path.ends_with('/') || has_ext {
        Some(path.to_string())
    } else {
        None
    }
}

fn path_exists(root: &Path, path: &str) -> bool {
    let check = |p: PathBuf| if path.ends_with('/') { p.is_dir() } else { p.exists() };
    check(root.join(path)) || check(root.join("src").join(path))
}

/// The segments of an item span, if it is one: `a::B<T>::c()` → `[a, B, c]`.
fn item_claim(span: &str) -> Option<Vec<String>> {
    let mut s = String::new();
    let mut depth = 0usize;
    for c in span.trim().chars() {
        match c {
            '<' | '(' | '{' => depth += 1,
            '>' | ')' | '}' => depth = depth.checked_sub(1)?,
            _ if depth == 0 => s.push(c),
            _ => {}
        }
    }
    let s = s.trim().trim_end_matches('!').trim();
    if !s.contains("::") {
        return None;
    }
    let segs: Vec<String> = s.split("::").map(str::to_string).collect();
    let ident = |x: &str| {
        x == "*"
            || (!x.is_empty()
                && x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !x.starts_with(|c: char| c.is_ascii_digit()))
    };
    segs.iter().all(|x| ident(x)).then_some(segs)
}

fn rust_files(at: &Path, out: &mut Vec<PathBuf>) {
    if at.is_file() {
        if at.extension().is_some_and(|e| e == "rs") {
            out.push(at.to_path_buf());
        }
        return;
    }
    if let Ok(entries) = fs::read_dir(at) {
        for e in entries.flatten() {
            rust_files(&e.path(), out);
        }
    }
}

/// The Rust sources under one crate's directory, read once.
struct Crate {
    dir: PathBuf,
    files: Vec<(PathBuf, String)>,
}

impl Crate {
    fn load(dir: PathBuf) -> Crate {
        let mut paths = Vec::new();
        rust_files(&dir, &mut paths);
        let files = paths.into_iter().filter_map(|p| fs::read_to_string(&p).ok().map(|t| (p, t))).collect();
        Crate { dir, files }
    }

    fn has_file_named(&self, name: &str) -> bool {
        let rs = format!("{name}.rs");
        let mut stack = vec![self.dir.clone()];
        while let Some(d) = stack.pop() {
            if d.file_name().is_some_and(|f| f == name || f == rs.as_str()) && d != self.dir {
                return true;
            }
            if let Ok(entries) = fs::read_dir(&d) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
        false
    }

    fn is_module(&self, name: &str) -> bool {
        self.has_file_named(name) || self.files.iter().any(|(_, t)| keyword_decl(t, "mod", name))
    }

    fn is_declared(&self, name: &str) -> bool {
        if name == "*" || self.has_file_named(name) {
            return true;
        }
        const KEYWORDS: &[&str] =
            &["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "macro_rules!"];
        self.files.iter().any(|(_, text)| {
            KEYWORDS.iter().any(|kw| keyword_decl(text, kw, name))
                || text.lines().any(|line| member_decl(line.trim_start(), name))
        })
    }
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `kw NAME` followed by a non-identifier character, at a word boundary.
fn keyword_decl(text: &str, kw: &str, name: &str) -> bool {
    let needle = format!("{kw} {name}");
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle) {
        let start = from + at;
        let end = start + needle.len();
        let before_ok = text[..start].chars().next_back().is_none_or(|c| !ident_char(c));
        let after_ok = text[end..].chars().next().is_none_or(|c| !ident_char(c));
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

/// An enum variant (`NAME`, `NAME(`, `NAME {`, `NAME =`) or a struct field (`NAME:`, with an
/// optional `pub`), at the start of a trimmed line.
fn member_decl(line: &str, name: &str) -> bool {
    let line = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub(super) "))
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let Some(rest) = line.strip_prefix(name) else { return false };
    let rest = rest.trim_start();
    rest.is_empty()
        || rest.starts_with(',')
        || rest.starts_with('(')
        || rest.starts_with('{')
        || rest.starts_with('=') && !rest.starts_with("==")
        || rest.starts_with(':') && !rest.starts_with("::")
}

fn check_item(segs: &[String], crates: &mut Vec<(String, Crate)>, root: &Path) -> Option<String> {
    let first = segs[0].as_str();
    let (dir, rest) = if let Some((_, dir)) = CRATES.iter().find(|(c, _)| *c == first) {
        (root.join(dir), &segs[1..])
    } else if first.starts_with(|c: char| c.is_ascii_uppercase()) {
        (root.join("src"), segs)
    } else {
        return None;
    };
    let key = dir.to_string_lossy().into_owned();
    if !crates.iter().any(|(k, _)| *k == key) {
        crates.push((key.clone(), Crate::load(dir)));
    }
    let krate = &crates.iter().find(|(k, _)| *k == key)?.1;
    for (i, seg) in rest.iter().enumerate() {
        let last = i + 1 == rest.len();
        let module = !last && seg.starts_with(|c: char| c.is_ascii_lowercase());
        let ok = if module { krate.is_module(seg) } else { krate.is_declared(seg) };
        if !ok {
            let what = if module { "module" } else { "item" };
            return Some(format!("no {what} `{seg}` under {}", krate.dir.display()));
        }
    }
    None
}

#[test]
fn architecture_md_is_short_and_names_what_exists() {
    let root = root();
    let (path, text) = document();
    let mut failures = Vec::new();
    let lines = text.lines().count();
    if lines >= MAX_LINES {
        failures.push(format!("{} has {lines} lines, the limit is {MAX_LINES}", path.display()));
    }
    let layer_dirs = src_layer_dirs(&root);
    let mut crates = Vec::new();
    for (line, span) in spans(&text) {
        if let Some(p) = path_claim(&span, &layer_dirs) {
            if !path_exists(&root, &p) {
                failures.push(format!("line {line}: `{span}`: no such path {p}"));
            }
        } else if let Some(segs) = item_claim(&span) {
            if let Some(why) = check_item(&segs, &mut crates, &root) {
                failures.push(format!("line {line}: `{span}`: {why}"));
            }
        }
    }
    for f in &failures {
        eprintln!("{f}");
    }
    assert!(failures.is_empty(), "{} stale claims in {}", failures.len(), path.display());
}
