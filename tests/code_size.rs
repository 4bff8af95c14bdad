//! Size limits that keep the code readable (ARCHITECTURE.md, "Crates"): no source file of the
//! workspace's crates, the binaries or the benchmarks over 1,000 lines, and no function over
//! 100. Test files (`tests/` directories) are exempt: their vectors are data.

use std::path::Path;

use sources::rust_sources;

#[path = "support/sources.rs"]
mod sources;

const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 100;

/// The braces of one line of Rust, in order, with comments, strings and character literals
/// removed. `in_block` carries a `/* */` comment across lines; raw strings are assumed to fit
/// on one line (the code has no multi-line ones with braces).
fn braces(line: &str, in_block: &mut bool) -> Vec<char> {
    let c: Vec<char> = line.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < c.len() {
        if *in_block {
            if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                *in_block = false;
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            break;
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            *in_block = true;
            i += 1;
        } else if c[i] == 'r' && matches!(c.get(i + 1), Some('"') | Some('#')) {
            // A raw string: r"…" or r#"…"#.
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) == Some(&'"') {
                let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                let rest: String = c[i + 2 + hashes..].iter().collect();
                i += 2
                    + hashes
                    + rest.find(&close).map_or(rest.chars().count(), |at| rest[..at].chars().count());
                i += hashes;
            }
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
        } else if c[i] == '\'' {
            // A character literal ('{', '\n', '\''), or a lifetime ('a), which has no closing quote.
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
            } else if c.get(i + 2) == Some(&'\'') {
                i += 2;
            }
        } else if c[i] == '{' || c[i] == '}' {
            out.push(c[i]);
        }
        i += 1;
    }
    out
}

/// Whether `code` starts a function item: `fn name`, after visibility and qualifiers.
fn starts_fn(code: &str) -> Option<String> {
    let mut rest = code.trim_start();
    if let Some(r) = rest.strip_prefix("pub") {
        rest = r.trim_start();
        if rest.starts_with('(') {
            rest = rest.split_once(')').map_or("", |(_, r)| r).trim_start();
        }
    }
    for q in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(q).unwrap_or(rest).trim_start();
    }
    let name = rest.strip_prefix("fn ")?;
    Some(name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
}

/// Functions of `text` longer than [`MAX_FN_LINES`]: (first line, name, lines).
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut in_block = false;
    let per_line: Vec<Vec<char>> = lines.iter().map(|l| braces(l, &mut in_block)).collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = starts_fn(line.split("//").next().unwrap_or_default()) else { continue };
        let (mut depth, mut opened) = (0i64, false);
        for (i, braces) in per_line.iter().enumerate().skip(start) {
            for b in braces {
                depth += if *b == '{' { 1 } else { -1 };
                opened = true;
            }
            let ends_declaration =
                !opened && lines[i].split("//").next().unwrap_or_default().trim_end().ends_with(';');
            if ends_declaration {
                break;
            }
            if opened && depth == 0 {
                let len = i - start + 1;
                if len > MAX_FN_LINES {
                    out.push((start + 1, name.clone(), len));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn no_file_or_function_is_too_long() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = rust_sources(&root.join("src"));
    files.extend(rust_sources(&root.join("bench")));
    files.sort();
    assert!(files.len() > 50, "sources found: {}", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        let at = file.strip_prefix(root).unwrap_or(file).display().to_string();
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            found.push(format!("{at}: {n} lines (at most {MAX_FILE_LINES})"));
        }
        for (line, name, len) in long_functions(&text) {
            found.push(format!("{at}:{line}: fn {name} is {len} lines (at most {MAX_FN_LINES})"));
        }
    }
    assert!(found.is_empty(), "too long:\n{}", found.join("\n"));
}

#[test]
fn the_check_measures_functions() {
    let short = "fn a() {\n    let s = \"}\";\n    let c = '{';\n}\n";
    assert!(long_functions(short).is_empty());
    let body: String = (0..120).map(|i| format!("    let x{i} = '}}'; // }}\n")).collect();
    let long = format!("pub(crate) async fn b<'a>(x: &'a u8) {{\n{body}}}\nfn c();\n");
    assert_eq!(long_functions(&long), vec![(1, "b".to_string(), 122)]);
}
