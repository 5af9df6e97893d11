//! The server's layout rules, checked on its source (the crate docs' "Layout" section):
//! no two files import each other, directly or through others (in every crate of the
//! workspace, too); each layer uses only the layers below it; and no file grows past 600
//! lines of non-test code.
//!
//! Imports are read from `use` declarations and from `crate::`/`super::` paths in code,
//! resolved to the file that defines the module they name (a path through a parent module
//! to a child names the child's file). Test modules (`#[cfg(test)] mod tests`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate's source folder, found at run time (see the tests crate's `suite_dir` for why).
fn src_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .filter(|d| d.join("src/lib.rs").is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    dir.join("src")
}

/// A module path (`["raft", "driver"]`) and its file.
type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("read the source folder")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands a use tree (`super::{a, b::{c, d}}`) into paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or(tree).trim().to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| {
            if p == "self" {
                prefix.trim_end_matches("::").to_string()
            } else {
                format!("{prefix}{p}")
            }
        })
        .collect()
}

/// Every `crate::`/`super::` path a file's code names.
fn paths_in(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let Some(end) = rest[i..].find(';') else {
            break;
        };
        if before_ok {
            paths.extend(expand(&rest[i + 4..i + end]));
        }
        rest = &rest[i + end..];
    }
    for start in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(i) = rest.find(start) {
            let tail = &rest[i..];
            let len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            paths.push(tail[..len].trim_end_matches(':').to_string());
            rest = &rest[i + len.max(1)..];
        }
    }
    paths
        .into_iter()
        .filter(|p| p.starts_with("crate::") || p.starts_with("super::"))
        .collect()
}

/// The module a path names, as far as modules go (items after it are dropped).
fn resolve(from: &Module, from_is_dir: bool, path: &str, modules: &BTreeSet<Module>) -> Module {
    let mut segments = path.split("::").peekable();
    let mut base: Module = Vec::new();
    match segments.peek() {
        Some(&"crate") => {
            segments.next();
        }
        _ => {
            // `super` of a file module is its parent; of a `mod.rs`, the parent's parent.
            base = from.clone();
            if !from_is_dir {
                base.pop();
            }
            while segments.peek() == Some(&"super") {
                segments.next();
                if segments.peek() == Some(&"super") {
                    base.pop();
                }
            }
        }
    }
    for s in segments {
        let mut next = base.clone();
        next.push(s.to_string());
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    base
}

struct Crate {
    /// File → the files it imports.
    imports: BTreeMap<Module, BTreeSet<Module>>,
    /// Non-test lines per file.
    lines: BTreeMap<Module, usize>,
}

fn read_crate() -> Crate {
    read_crate_at(&src_dir())
}

/// The workspace's other crates' source folders (beside this one's).
fn other_crates() -> Vec<PathBuf> {
    let src = src_dir();
    let root = src
        .parent()
        .and_then(Path::parent)
        .expect("the workspace root");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("read the workspace root")
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|d| {
            d.is_dir() && d != &src && d.parent().is_some_and(|c| c.join("Cargo.toml").is_file())
        })
        .collect();
    dirs.sort();
    dirs
}

fn read_crate_at(src: &Path) -> Crate {
    let src = src.to_path_buf();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut imports = BTreeMap::new();
    let mut lines = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let is_dir = matches!(
            file.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs" | "main.rs")
        );
        let text = std::fs::read_to_string(file).expect("read a source file");
        let code = code_of(&text);
        lines.insert(module.clone(), code.lines().count());
        let targets: BTreeSet<Module> = paths_in(&code)
            .iter()
            .map(|p| resolve(&module, is_dir, p, &modules))
            .filter(|m| *m != module)
            .collect();
        imports.insert(module, targets);
    }
    Crate { imports, lines }
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "lib".into()
    } else {
        m.join("/")
    }
}

#[test]
fn no_two_files_import_each_other() {
    let c = read_crate();
    if let Some(cycle) = first_cycle(&c) {
        panic!("import cycle: {cycle}");
    }
    assert!(c.imports.len() > 40, "only {} files read", c.imports.len());
}

/// The same rule in every other crate of the workspace (jute, zkdata, recipes, the tests'
/// harness, bench, faultshim).
#[test]
fn no_two_files_import_each_other_in_any_crate() {
    let crates = other_crates();
    assert!(crates.len() >= 5, "only {crates:?}");
    let cycles: Vec<String> = crates
        .iter()
        .filter_map(|src| {
            let cycle = first_cycle(&read_crate_at(src))?;
            Some(format!("{}: {cycle}", src.display()))
        })
        .collect();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// An import cycle among a crate's files, if there is one, as `a -> b -> a`.
fn first_cycle(c: &Crate) -> Option<String> {
    // Depth-first search for a back edge.
    fn visit(
        m: &Module,
        c: &Crate,
        stack: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(m.clone());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.clone());
        for next in c.imports.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(next, c, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(m.clone());
        None
    }
    let mut done = BTreeSet::new();
    for m in c.imports.keys() {
        if let Some(cycle) = visit(m, c, &mut Vec::new(), &mut done) {
            let names: Vec<String> = cycle.iter().map(name).collect();
            return Some(names.join(" -> "));
        }
    }
    None
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    let c = read_crate();
    // What each top-level module may import besides itself. The leaves below config are
    // open to every layer above `state`; `tls` and `sasl` only where listed.
    let leaves = ["config", "critical", "stats", "allocator"];
    let layer = |extra: &[&'static str]| -> Vec<&'static str> {
        extra.iter().chain(&leaves).copied().collect()
    };
    let allowed: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        ("allocator", vec![]),
        ("config", vec![]),
        ("critical", vec![]),
        ("stats", vec![]),
        ("tls", vec!["config"]),
        ("sasl", vec!["config"]),
        ("state", vec![]),
        ("raft", layer(&["state", "tls"])),
        ("net", layer(&["raft", "state", "tls", "sasl"])),
        (
            "ops",
            layer(&["net", "raft", "state", "tls", "sasl", "migrate"]),
        ),
        ("migrate", layer(&["raft", "state"])),
        ("zab", layer(&["migrate", "raft", "state", "sasl"])),
    ]);
    let mut violations = Vec::new();
    for (m, targets) in &c.imports {
        let Some(layer) = m.first() else { continue };
        let Some(may) = allowed.get(layer.as_str()) else {
            continue; // lib.rs, main.rs, server.rs sit on top
        };
        for t in targets {
            let Some(target_layer) = t.first() else {
                violations.push(format!("{} imports the crate root", name(m)));
                continue;
            };
            if target_layer != layer && !may.contains(&target_layer.as_str()) {
                violations.push(format!("{} imports {}", name(m), name(t)));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layer rule broken:\n{}",
        violations.join("\n")
    );
}

#[test]
fn no_file_has_more_than_600_lines_of_non_test_code() {
    let c = read_crate();
    let long: Vec<String> = c
        .lines
        .iter()
        .filter(|(m, n)| **n > 600 && m.last().map(String::as_str) != Some("sim"))
        .map(|(m, n)| format!("{}: {n}", name(m)))
        .collect();
    assert!(long.is_empty(), "{long:?}");
}
