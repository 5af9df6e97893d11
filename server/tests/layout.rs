//! The server's layout rules, checked on its source (the crate docs' "Layout" section):
//! no two files import each other, directly or through others (in every crate of the
//! workspace, too); each layer uses only the layers below it; and no file grows past 600
//! lines of non-test code (in every crate too, but for the listed long files of the test
//! kit and the bench).
//!
//! Imports are read from `use` declarations and from `crate::`/`super::` paths in code,
//! resolved to the file that defines the module they name (a path through a parent module
//! to a child names the child's file). Test modules (`#[cfg(test)] mod tests`) are left out.
//!
//! An inherent `impl` of a type in another file than the type's is a dependency of the
//! type's file on it: whoever uses the type uses those methods. So a type's methods spread
//! over files that each import the type (a god object split by file) is a cycle, the
//! one kind that `use` lines alone do not show. A trait's `impl ... for` a type is not.

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
    /// File → the files it imports (and, for a type's file, the files with inherent
    /// `impl`s of the type).
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
    let mut defined: BTreeMap<String, BTreeSet<Module>> = BTreeMap::new();
    let mut inherent = Vec::new();
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
        for name in types_defined_in(&code) {
            defined.entry(name).or_default().insert(module.clone());
        }
        inherent.push((module.clone(), inherent_impls_in(&code)));
        imports.insert(module, targets);
    }
    // A type's file depends on every other file with an inherent `impl` of it. A name
    // defined in several files is taken to be the one the implementing file imports.
    for (module, names) in inherent {
        for name in names {
            let Some(homes) = defined.get(&name) else {
                continue; // a type of another crate (impossible for inherent impls) or a macro's
            };
            if homes.contains(&module) {
                continue;
            }
            let imported = &imports[&module];
            let home = match homes.len() {
                1 => homes.iter().next(),
                _ => homes.iter().find(|h| imported.contains(*h)),
            };
            let Some(home) = home.cloned() else { continue };
            imports.entry(home).or_default().insert(module.clone());
        }
    }
    Crate { imports, lines }
}

/// The names of the types (structs, enums, unions, traits, aliases) a file's code defines.
fn types_defined_in(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in code.lines() {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            if matches!(pair[0], "struct" | "enum" | "union" | "trait" | "type")
                && pair[1].starts_with(|c: char| c.is_ascii_uppercase())
            {
                names.push(pair[1].to_string());
            }
        }
    }
    names
}

/// The types a file's code gives inherent methods: `impl Name {`, `impl<T> Name<T> {`,
/// `impl super::x::Name {` (not `impl Trait for Name`).
fn inherent_impls_in(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("impl") {
        let before_ok = i == 0 || {
            let b = rest.as_bytes()[i - 1];
            !(b.is_ascii_alphanumeric() || b == b'_')
        };
        let tail = &rest[i + 4..];
        rest = tail;
        if !before_ok || !tail.starts_with(['<', ' ', '\n']) {
            continue;
        }
        let Some(open) = tail.find('{') else { break };
        let head = strip_generics(&tail[..open]);
        if head.split_whitespace().any(|w| w == "for") || head.contains(';') {
            continue;
        }
        let path = head.trim();
        let name = path.rsplit("::").next().unwrap_or(path).trim();
        if name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            names.push(name.to_string());
        }
    }
    names
}

/// `text` without what is inside angle brackets (generics), and without a where clause.
fn strip_generics(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    match out.find(" where") {
        Some(i) => out[..i].to_string(),
        None => out,
    }
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

/// Every crate's files stay under 600 lines of non-test code, as the server's do.
#[test]
fn no_file_of_any_crate_has_more_than_600_lines() {
    let mut long = Vec::new();
    for src in other_crates() {
        let dir = src
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        for (m, n) in read_crate_at(&src).lines {
            if n > 600 {
                long.push(format!("{dir}/{}: {n}", name(&m)));
            }
        }
    }
    assert!(long.is_empty(), "over 600 lines: {long:?}");
}

/// A throwaway crate source folder with the given files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str, files: &[(&str, &str)]) -> Scratch {
        let dir = std::env::temp_dir().join(format!("layout-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn an_inherent_impl_in_another_file_is_a_cycle() {
    let split = Scratch::new(
        "split",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a.rs",
                "pub struct Thing;\nimpl Thing {\n    fn one(&self) {}\n}\n",
            ),
            (
                "b.rs",
                "use crate::a::Thing;\nimpl<'x> Thing {\n    pub fn two(&self) {}\n}\n",
            ),
        ],
    );
    let cycle = first_cycle(&read_crate_at(&split.0));
    assert!(
        cycle
            .as_deref()
            .is_some_and(|c| c.contains('a') && c.contains('b')),
        "{cycle:?}"
    );
    // A trait implemented for the type elsewhere, or an impl of a type the file defines
    // itself, is no dependency of the type's file.
    let fine = Scratch::new(
        "fine",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "pub struct Thing;\nimpl Thing {\n    fn one(&self) {}\n}\n"),
            (
                "b.rs",
                "use crate::a::Thing;\nstruct Other;\nimpl Other {}\n\
                 impl std::fmt::Debug for Thing {\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { Ok(()) }\n}\n\
                 impl<T: Clone> From<T>\n    for Other\n{\n    fn from(_: T) -> Other { Other }\n}\n",
            ),
        ],
    );
    assert_eq!(first_cycle(&read_crate_at(&fine.0)), None);
}
