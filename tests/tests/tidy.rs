//! Rules of the repository that a reviewer would otherwise have to remember (rust-analyzer's
//! `tidy` habit). They read the files with `std::fs` and use nothing of ferrocuda, so they need
//! no GPU, and a broken rule is reported by its file and line.
//!
//! - Every `tests/tests/gpu_*.rs` is a `[[test]]` with `harness = false`: without it cargo
//!   builds the file with libtest, which finds no `#[test]` and passes with 0 tests.
//! - The modules of the host library import one way: no module reaches, through any chain of
//!   `crate::`/`super::` paths, back to itself.
//! - The library does not depend on its command line: its dependencies are the four it needs,
//!   and the CLI's crates (clap, serde, anyhow) appear nowhere in it.
//! - The driver trampolines define exactly what `cust_raw` declares.
//! - The builder compiles kernels with the nightly `rust-toolchain.toml` pins.
//! - The repository speaks of the project only: no tracker numbers, machine labels or paths of
//!   the machines a run was made on, and the notes named by book and chapter.
//! - Every results file the docs cite exists, and every measured number of a paragraph that
//!   cites curated results appears in one of the files it cites.
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The `.rs` files below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

// ---------------------------------------------------------------------------------------------
// tests/Cargo.toml

/// One `[[test]]` table of a `Cargo.toml`: its keys with their values, quotes removed.
type TestTarget = BTreeMap<String, String>;

/// The `[[test]]` tables of a `Cargo.toml` (enough TOML for `key = value` lines).
fn test_targets(manifest: &str) -> Vec<TestTarget> {
    let mut targets = Vec::new();
    let mut in_test = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
            if in_test {
                targets.push(TestTarget::new());
            }
        } else if in_test && let Some((key, value)) = line.split_once('=') {
            let value = value.split('#').next().unwrap().trim().trim_matches('"');
            let target = targets.last_mut().unwrap();
            target.insert(key.trim().to_string(), value.to_string());
        }
    }
    targets
}

#[test]
fn every_gpu_test_file_has_harness_false() {
    let tests = workspace().join("tests");
    let targets = test_targets(&read(&tests.join("Cargo.toml")));
    let mut problems = Vec::new();
    for target in &targets {
        let name = target.get("name").map_or("(no name)", String::as_str);
        match target.get("path") {
            None => problems.push(format!("[[test]] `{name}` has no `path`")),
            Some(path) if !tests.join(path).is_file() => {
                problems.push(format!("[[test]] `{name}`: `{path}` does not exist"))
            }
            Some(_) => {}
        }
    }
    for file in rust_files(&tests.join("tests")) {
        let file_name = file.file_name().unwrap().to_str().unwrap();
        if !file_name.starts_with("gpu_") {
            continue;
        }
        let path = format!("tests/{file_name}");
        let entry = targets.iter().find(|t| {
            t.get("path")
                .is_some_and(|p| p.trim_start_matches("./") == path)
        });
        match entry {
            None => problems.push(format!(
                "{path} has no [[test]] entry in tests/Cargo.toml: cargo runs it with libtest, \
                 which finds no #[test] and reports 0 tests"
            )),
            Some(t) if t.get("harness").map(String::as_str) != Some("false") => {
                problems.push(format!(
                    "the [[test]] entry of {path} lacks `harness = false`: libtest finds no \
                     #[test] there and reports 0 tests"
                ))
            }
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// A small Rust reader: tokens without comments, enough to follow paths and `use` trees.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    /// A string literal's contents (escapes left as written).
    Str(String),
    Punct(char),
}

/// The tokens of `src` with their line numbers. Comments are dropped; numbers and character
/// literals too; a lifetime leaves its name as an identifier.
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    while i < c.len() {
        let start_line = line;
        match (c[i], at(i + 1)) {
            ('\n', _) => {
                line += 1;
                i += 1;
            }
            (ch, _) if ch.is_whitespace() => i += 1,
            ('/', '/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            ('/', '*') => {
                let mut depth = 0;
                loop {
                    match (at(i), at(i + 1)) {
                        ('\0', _) => break,
                        ('/', '*') => (depth, i) = (depth + 1, i + 2),
                        ('*', '/') => {
                            (depth, i) = (depth - 1, i + 2);
                            if depth == 0 {
                                break;
                            }
                        }
                        (ch, _) => (line, i) = (line + (ch == '\n') as usize, i + 1),
                    }
                }
            }
            ('"', _) => {
                let (text, end) = string_at(&c, i + 1, None);
                line += text.matches('\n').count();
                out.push((Tok::Str(text), start_line));
                i = end;
            }
            // A char literal, or the quote of a lifetime (`'a`), whose name is left as an ident.
            ('\'', _) => i = char_literal_end(&c, i).unwrap_or(i + 1),
            (':', ':') => {
                out.push((Tok::PathSep, line));
                i += 2;
            }
            (ch, _) if ch.is_ascii_digit() => {
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
            (ch, _) if ch.is_alphabetic() || ch == '_' => {
                let begin = i;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
                let word: String = c[begin..i].iter().collect();
                let hashes = c[i..].iter().take_while(|&&ch| ch == '#').count();
                if matches!(word.as_str(), "r" | "br" | "cr") && at(i + hashes) == '"' {
                    let (text, end) = string_at(&c, i + hashes + 1, Some(hashes));
                    line += text.matches('\n').count();
                    out.push((Tok::Str(text), start_line));
                    i = end;
                } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                    let (text, end) = string_at(&c, i + 1, None);
                    line += text.matches('\n').count();
                    out.push((Tok::Str(text), start_line));
                    i = end;
                } else if let Some(end) = char_literal_end(&c, i).filter(|_| word == "b") {
                    i = end;
                } else {
                    out.push((Tok::Ident(word), line));
                }
            }
            (ch, _) => {
                out.push((Tok::Punct(ch), line));
                i += 1;
            }
        }
    }
    out
}

/// The contents of a string literal whose text starts at `c[i]`, and the index after it. A raw
/// string (`raw` gives its number of `#`) has no escapes; in a plain one a backslash escapes the
/// next character.
fn string_at(c: &[char], mut i: usize, raw: Option<usize>) -> (String, usize) {
    let (begin, hashes) = (i, raw.unwrap_or(0));
    while i < c.len() {
        if c[i] == '\\' && raw.is_none() {
            i += 2;
        } else if c[i] == '"' && c[i + 1..].iter().take_while(|&&h| h == '#').count() >= hashes {
            return (c[begin..i].iter().collect(), i + 1 + hashes);
        } else {
            i += 1;
        }
    }
    (c[begin..].iter().collect(), c.len())
}

/// The index after the char literal whose quote is `c[i]` (`'x'`, `'\n'`, `'\u{7f}'`); `None`
/// where the quote starts a lifetime.
fn char_literal_end(c: &[char], i: usize) -> Option<usize> {
    match (c.get(i + 1)?, c.get(i + 2)?) {
        ('\\', _) => Some(i + 3 + c.get(i + 3..)?.iter().position(|&ch| ch == '\'')? + 1),
        (_, '\'') => Some(i + 3),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The module graph of the host library.

/// A module's path below the crate root, `bench::report`; the root is the empty path.
type ModPath = Vec<String>;

fn display(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The module a file of `src/` is: `lib.rs` the root, `foo.rs` and `foo/mod.rs` `foo`,
/// `foo/bar.rs` `foo::bar`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
        parts.pop();
    }
    parts
}

/// A path of the crate that a file names, resolved to start at the crate root.
#[derive(Debug)]
struct Reference {
    path: ModPath,
    /// `path` names a macro (`crate::with_elem_type!`).
    is_macro: bool,
    line: usize,
}

/// What one file says about the crate's paths.
#[derive(Debug, Default)]
struct FileFacts {
    references: Vec<Reference>,
    /// The names its `use` items bring in, with the paths they stand for.
    imports: BTreeMap<String, ModPath>,
    /// The `macro_rules!` it defines (exported ones live at the root but are named here).
    macros: Vec<String>,
}

/// The references of a file of module `module`: every path that starts with `crate::`,
/// `$crate::`, `super::`, `self::` or a child module's name, in `use` trees and in code.
/// `children` are the names of `module`'s child modules.
fn read_facts(src: &str, module: &[String], children: &BTreeSet<String>) -> FileFacts {
    let toks = tokenize(src);
    let tok = |i: usize| toks.get(i).map(|(t, _)| t);
    let ident = |i: usize, s: &str| matches!(tok(i), Some(Tok::Ident(w)) if w == s);
    let mut facts = FileFacts::default();
    // For each open `{`: whether it opens an inline `mod name {` (where `super` stays in the file).
    let mut braces: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let (t, line) = &toks[i];
        let after_path_sep = i > 0 && matches!(tok(i - 1), Some(Tok::PathSep | Tok::Punct('.')));
        match t {
            Tok::Punct('{') => braces.push(i >= 2 && ident(i - 2, "mod")),
            Tok::Punct('}') => {
                braces.pop();
            }
            Tok::Ident(w) if w == "macro_rules" && tok(i + 1) == Some(&Tok::Punct('!')) => {
                if let Some(Tok::Ident(name)) = tok(i + 2) {
                    facts.macros.push(name.clone());
                }
            }
            Tok::Ident(w) if !after_path_sep && tok(i + 1) == Some(&Tok::PathSep) => {
                let (base, start) = match w.as_str() {
                    "crate" => (Vec::new(), i + 2),
                    "self" => (module.to_vec(), i + 2),
                    "super" => {
                        let mut base = module.to_vec();
                        let mut inline = braces.iter().filter(|&&m| m).count();
                        let mut j = i;
                        while ident(j, "super") && tok(j + 1) == Some(&Tok::PathSep) {
                            if inline > 0 {
                                inline -= 1;
                            } else {
                                base.pop();
                            }
                            j += 2;
                        }
                        (base, j)
                    }
                    _ if children.contains(w) => (module.to_vec(), i),
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                let in_use = i > 0 && ident(i - 1, "use");
                let mut leaves = Vec::new();
                i = use_tree(&toks, start, base, &mut leaves);
                for Leaf {
                    path,
                    name,
                    is_macro,
                } in leaves
                {
                    if in_use && let Some(name) = name {
                        facts.imports.insert(name, path.clone());
                    }
                    facts.references.push(Reference {
                        path,
                        is_macro,
                        line: *line,
                    });
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    facts
}

/// One complete path of a `use` tree or of an expression.
struct Leaf {
    path: ModPath,
    /// The name it is known by after a `use` (the last segment, or what follows `as`); `None`
    /// for a glob.
    name: Option<String>,
    is_macro: bool,
}

/// Reads the path or `use` tree at `toks[i]`, below `prefix`: `a::b`, `a::{b, c::d}`, `a::*`,
/// `a::{self, b as c}`. Pushes each complete path to `out`; returns the index after the tree.
fn use_tree(toks: &[(Tok, usize)], mut i: usize, mut path: ModPath, out: &mut Vec<Leaf>) -> usize {
    let tok = |i: usize| toks.get(i).map(|(t, _)| t);
    loop {
        match tok(i) {
            Some(Tok::Ident(segment)) => {
                match segment.as_str() {
                    "self" => {}
                    "super" => {
                        path.pop();
                    }
                    _ => path.push(segment.clone()),
                }
                i += 1;
                if tok(i) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                let is_macro = tok(i) == Some(&Tok::Punct('!'));
                let mut name = path.last().cloned();
                if let (Some(Tok::Ident(as_)), Some(Tok::Ident(alias))) = (tok(i), tok(i + 1))
                    && as_ == "as"
                {
                    name = Some(alias.clone());
                    i += 2;
                }
                out.push(Leaf {
                    path,
                    name,
                    is_macro,
                });
                return i;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while tok(i).is_some_and(|t| *t != Tok::Punct('}')) {
                    i = use_tree(toks, i, path.clone(), out);
                    if tok(i) == Some(&Tok::Punct(',')) {
                        i += 1;
                    } else if tok(i) != Some(&Tok::Punct('}')) {
                        return i;
                    }
                }
                return i + 1;
            }
            Some(Tok::Punct('*')) => {
                out.push(Leaf {
                    path,
                    name: None,
                    is_macro: false,
                });
                return i + 1;
            }
            // `Type::<T>` and the like: the path ends before the generics.
            _ => {
                out.push(Leaf {
                    path,
                    name: None,
                    is_macro: false,
                });
                return i;
            }
        }
    }
}

/// An edge of the module graph with the first reference that makes it.
type Edges = BTreeMap<(ModPath, ModPath), String>;

/// The modules of `src` (each a file; `src/bin/` left out) and the edges between them: module
/// `a` -> module `b` when a file of `a` names a path in `b`. A path is mapped to the longest
/// module it starts with, through the `use` items of the modules it passes (`crate::Error` ->
/// `runtime::error`, where the root re-exports it); an exported macro to the module defining it.
fn module_graph(src: &Path) -> (BTreeSet<ModPath>, Edges) {
    let files: Vec<PathBuf> = rust_files(src)
        .into_iter()
        .filter(|f| !f.starts_with(src.join("bin")))
        .collect();
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_of(src, f)).collect();
    let mut facts = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let children = modules
            .iter()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(&module))
            .map(|m| m.last().unwrap().clone())
            .collect();
        let rel = format!("src/{}", file.strip_prefix(src).unwrap().display());
        facts.insert(
            module.clone(),
            (rel, read_facts(&read(file), &module, &children)),
        );
    }
    let macros: BTreeMap<&String, &ModPath> = facts
        .iter()
        .flat_map(|(m, (_, f))| f.macros.iter().map(move |name| (name, m)))
        .collect();
    let resolve = |reference: &Reference| -> ModPath {
        let mut path = reference.path.clone();
        // Following at most a few re-exports (a `use` that names itself ends the walk).
        let mut hops = 0;
        loop {
            let k = (0..=path.len())
                .rev()
                .find(|&k| modules.contains(&path[..k]))
                .expect("the root is a module");
            let module = path[..k].to_vec();
            let Some(next) = path.get(k) else {
                return module;
            };
            if reference.is_macro
                && k + 1 == path.len()
                && let Some(definer) = macros.get(next)
            {
                return (*definer).clone();
            }
            match facts[&module].1.imports.get(next) {
                Some(target) if *target != path[..=k] && hops < 8 => {
                    path = target.iter().chain(&path[k + 1..]).cloned().collect();
                    hops += 1;
                }
                _ => return module,
            }
        }
    };
    let mut edges = Edges::new();
    for (module, (file, facts)) in &facts {
        for reference in &facts.references {
            let target = resolve(reference);
            if target != *module {
                let bang = if reference.is_macro { "!" } else { "" };
                let named = format!("crate::{}{bang}", reference.path.join("::"));
                edges
                    .entry((module.clone(), target))
                    .or_insert_with(|| format!("{file}:{} refers to `{named}`", reference.line));
            }
        }
    }
    (modules, edges)
}

/// Every cycle that a depth-first search of `graph` closes (one per edge back to a node still
/// on the search's path), each as its nodes with the first repeated at the end.
fn cycles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    fn visit<N: Ord + Clone>(
        node: &N,
        graph: &BTreeMap<N, BTreeSet<N>>,
        done: &mut BTreeSet<N>,
        path: &mut Vec<N>,
        found: &mut Vec<Vec<N>>,
    ) {
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(start) = path.iter().position(|n| n == next) {
                let mut cycle = path[start..].to_vec();
                cycle.push(next.clone());
                found.push(cycle);
            } else if !done.contains(next) {
                visit(next, graph, done, path, found);
            }
        }
        path.pop();
        done.insert(node.clone());
    }
    let (mut done, mut found) = (BTreeSet::new(), Vec::new());
    for node in graph.keys() {
        if !done.contains(node) {
            visit(node, graph, &mut done, &mut Vec::new(), &mut found);
        }
    }
    found
}

#[test]
fn host_crate_modules_import_one_way() {
    let (modules, edges) = module_graph(&workspace().join("host-crate/src"));
    assert!(modules.len() > 10, "found only {modules:?}");
    let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from.clone()).or_default().insert(to.clone());
    }
    let found = cycles(&graph);
    let report: Vec<String> = found
        .iter()
        .map(|cycle| {
            let names: Vec<String> = cycle.iter().map(|m| display(m)).collect();
            let why: Vec<String> = cycle
                .windows(2)
                .map(|pair| format!("    {}", edges[&(pair[0].clone(), pair[1].clone())]))
                .collect();
            format!("{}\n{}", names.join(" -> "), why.join("\n"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the host crate's modules import each other in a circle:\n{}\n",
        report.join("\n")
    );
}

/// The `name = ...` keys of one `[section]` of a `Cargo.toml` (dependency names).
fn section_keys(manifest: &str, section: &str) -> Vec<String> {
    let mut inside = false;
    let mut keys = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == section;
        } else if inside
            && !line.starts_with('#')
            && let Some((key, _)) = line.split_once('=')
        {
            keys.push(key.trim().trim_end_matches(".workspace").to_owned());
        }
    }
    keys
}

#[test]
fn the_library_pulls_only_what_it_needs_and_the_cli_lives_apart() {
    let manifest = read(&workspace().join("host-crate/Cargo.toml"));
    let mut deps = section_keys(&manifest, "[dependencies]");
    deps.sort();
    assert_eq!(
        deps,
        [
            "cust",
            "ferrocuda-device",
            "ferrocuda-kernels",
            "libc",
            "thiserror"
        ],
        "host-crate/Cargo.toml: the library's dependencies grew; tools belong in host-crate/cli"
    );
    assert!(
        !manifest.contains("[[bin]]"),
        "the library package has a binary"
    );
    let src = workspace().join("host-crate/src");
    let mut problems = Vec::new();
    for file in rust_files(&src) {
        let toks = tokenize(&read(&file));
        let rel = file.strip_prefix(&src).unwrap().display();
        for (t, line) in &toks {
            if let Tok::Ident(w) = t
                && ["clap", "serde", "serde_json", "anyhow", "ferrocuda_cli"].contains(&w.as_str())
            {
                problems.push(format!("src/{rel}:{line} names `{w}`"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the library must not use the command line's crates:\n{}\n",
        problems.join("\n")
    );
}

/// The `pub fn cu...(..) -> CUresult;` declarations of a bindgen file, as
/// `name(args)` with whitespace collapsed and `::std::os::raw::` dropped.
fn driver_functions(bindings: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = bindings;
    while let Some(at) = rest.find("pub fn cu") {
        let decl = &rest[at + "pub fn ".len()..];
        let end = decl.find(';').expect("a declaration ends with `;`");
        let text: String = decl[..end]
            .replace("::std::os::raw::", "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace("( ", "(")
            .replace(", )", ")")
            .replace(",)", ")");
        found.insert(text.trim_end_matches(" -> CUresult").to_owned());
        rest = &decl[end..];
    }
    found
}

/// `$CARGO_HOME/registry/src/*/<crate>/`, the registry's unpacked copy of a dependency.
fn registry_source(krate: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let registries = home.join("registry/src");
    fs::read_dir(&registries)
        .unwrap_or_else(|e| panic!("{}: {e}", registries.display()))
        .map(|entry| entry.unwrap().path().join(krate))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| panic!("{krate} is not unpacked under {}", registries.display()))
}

/// The version of cust_raw in `Cargo.lock` and its driver API bindings (`src/cuda.rs`).
fn cust_raw_bindings() -> (String, String) {
    let lock = read(&workspace().join("Cargo.lock"));
    let version = lock
        .split("[[package]]")
        .find(|package| package.contains("name = \"cust_raw\""))
        .and_then(|package| package.lines().find_map(|l| l.strip_prefix("version = ")))
        .map(|v| v.trim_matches('"').to_owned())
        .expect("Cargo.lock has cust_raw");
    let source = read(&registry_source(&format!("cust_raw-{version}")).join("src/cuda.rs"));
    (version, source)
}

/// `runtime::driver::status::STATUSES` lists every status of cust_raw's `cudaError_enum`, in
/// its order: `DriverError::from_code` finds a status by number there, never by a cast.
#[test]
fn the_driver_status_list_is_cust_raws() {
    let (version, source) = cust_raw_bindings();
    let body = source
        .split("pub enum cudaError_enum {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("cust_raw declares cudaError_enum");
    let declared: Vec<&str> = body
        .lines()
        .filter_map(|line| line.trim().split(" = ").next())
        .filter(|name| name.starts_with("CUDA_"))
        .collect();
    let ours = read(&workspace().join("host-crate/src/runtime/driver/status.rs"));
    let listed: Vec<&str> = ours
        .lines()
        .filter_map(|line| line.trim().strip_prefix("CUresult::"))
        .map(|name| name.trim_end_matches(','))
        .collect();
    assert!(declared.len() > 80, "read only {} statuses", declared.len());
    assert_eq!(
        listed, declared,
        "driver/status.rs and cust_raw {version} disagree"
    );
}

/// `host-crate/src/runtime/driver` defines every driver function cust_raw declares (else a
/// binary that calls the missing one would not link without a real libcuda), with the same
/// signature (else the trampoline would pass its arguments wrongly).
#[test]
fn the_driver_trampolines_match_cust_raw_declaration_for_declaration() {
    let (version, source) = cust_raw_bindings();
    let declared = driver_functions(&source);
    let driver = workspace().join("host-crate/src/runtime/driver");
    let api = read(&driver.join("api.rs"));
    let mut defined: BTreeSet<String> = api
        .lines()
        .filter_map(|line| line.trim().strip_prefix("fn "))
        .map(|decl| decl.trim_end_matches(';').replace(",)", ")").to_owned())
        .collect();
    // The two error-text functions are written by hand in mod.rs, with this signature.
    let by_hand = read(&driver.join("mod.rs"));
    assert!(by_hand.contains("error_text!(cuGetErrorString, cuGetErrorName);"));
    for name in ["cuGetErrorString", "cuGetErrorName"] {
        defined.insert(format!("{name}(error: CUresult, pStr: *mut *const c_char)"));
    }
    let missing: Vec<_> = declared.difference(&defined).collect();
    let extra: Vec<_> = defined.difference(&declared).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "driver/api.rs and cust_raw {version} disagree.\nnot defined: {missing:#?}\nnot declared: {extra:#?}"
    );
    assert!(
        declared.len() > 300,
        "read only {} declarations",
        declared.len()
    );
}

/// The builder compiles kernels with the nightly the workspace pins.
#[test]
fn the_builder_uses_the_pinned_nightly() {
    let toolchain = read(&workspace().join("rust-toolchain.toml"));
    let builder = read(&workspace().join("builder/src/toolchain.rs"));
    let pinned = toolchain
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel = "))
        .expect("a channel")
        .trim_matches('"');
    assert!(
        builder.contains(&format!("pub const NIGHTLY: &str = \"{pinned}\";")),
        "builder/src/toolchain.rs's NIGHTLY is not rust-toolchain.toml's {pinned}"
    );
}

// ---------------------------------------------------------------------------------------------
// The checkers themselves, on small inputs.

#[test]
fn the_cycle_finder_finds_circles_and_only_circles() {
    let graph = |edges: &[(&'static str, &'static str)]| {
        let mut g: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for &(a, b) in edges {
            g.entry(a).or_default().insert(b);
        }
        g
    };
    let diamond = graph(&[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]);
    assert!(cycles(&diamond).is_empty());
    let circle = graph(&[("bench", "cpu"), ("cpu", "reduce"), ("reduce", "cpu")]);
    assert_eq!(cycles(&circle), [vec!["cpu", "reduce", "cpu"]]);
    let long = graph(&[("a", "b"), ("b", "c"), ("c", "a")]);
    assert_eq!(cycles(&long), [vec!["a", "b", "c", "a"]]);
}

#[test]
fn the_reference_reader_follows_use_trees_super_and_skips_comments_and_strings() {
    let src = r#"
//! Links in docs do not count: [`x`](crate::not_this).
use crate::{cpu::{self, Check}, runtime::error::Error as E};
use super::sibling::*;
/* crate::nor_this */
fn f() -> crate::reduce::ReduceRun::<u8> {
    let s = "crate::not_a_path {";
    let c = '{';
    report::markdown(); // crate::nor_this_either
    crate::with_elem_type!(x);
}
#[cfg(test)]
mod tests {
    use super::*;
    use super::super::up;
}
"#;
    let module: ModPath = vec!["bench".into(), "chart".into()];
    let children = BTreeSet::from(["report".to_string()]);
    let facts = read_facts(src, &module, &children);
    let paths: Vec<String> = facts.references.iter().map(|r| display(&r.path)).collect();
    assert_eq!(
        paths,
        [
            "cpu",
            "cpu::Check",
            "runtime::error::Error",
            "bench::sibling",
            "reduce::ReduceRun",
            "bench::chart::report::markdown",
            "with_elem_type",
            "bench::chart",
            "bench::up",
        ]
    );
    assert!(facts.references[6].is_macro);
    assert_eq!(facts.references[4].line, 6);
    assert_eq!(facts.imports["E"], ["runtime", "error", "Error"]);
    assert_eq!(facts.imports["cpu"], ["cpu"]);
}

#[test]
fn manifest_reader_sees_every_test_table() {
    let manifest = "[package]\nname = \"x\"\n\n[[test]]\nname = \"gpu_a\"\npath = \"tests/gpu_a.rs\"\nharness = false # libtest-mimic\n\n[dependencies]\nharness = \"no\"\n";
    let targets = test_targets(manifest);
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0]["path"], "tests/gpu_a.rs");
    assert_eq!(targets[0]["harness"], "false");
}

// ---------------------------------------------------------------------------------------------
// What the repository says

/// Directories that hold no file of the project: build outputs and caches (`.gitignore`).
const NOT_THE_PROJECT: [&str; 4] = ["target", ".git", ".gpu", ".cache"];

/// Every file of the workspace that is text, with its path relative to the root, sorted.
fn text_files() -> Vec<(String, String)> {
    let root = workspace();
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !NOT_THE_PROJECT.contains(&name.as_str()) {
                    dirs.push(path);
                }
            } else if let Ok(text) = fs::read_to_string(&path) {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.push((rel.replace('\\', "/"), text));
            }
        }
    }
    files.sort();
    files
}

/// What in `line` speaks of how the work was organised rather than of the project, if
/// anything: a tracker number ("issue 12", "issue-3", "issues #4", "PR #7"), a machine label
/// ("lease A", "lease-b"), a path on the machines runs were made on (`/root/...`, `/work/...`,
/// `/tmp/...`, `~/...`, also after `file://`), or the notes' file names instead of their books
/// ("seed 003", "seeds/", "004_9fa46204fa95f569").
fn organisational_words(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    let b = lower.as_bytes();
    let word_start = |at: usize| at == 0 || !b[at - 1].is_ascii_alphanumeric();
    // The index after `i` and any run of separators.
    let skip_separators = |mut i: usize| {
        while i < b.len() && matches!(b[i], b' ' | b'#' | b'-' | b'_') {
            i += 1;
        }
        i
    };
    let digit_at = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    for word in ["issues", "issue", "pr"] {
        for (at, _) in lower.match_indices(word) {
            let after = at + word.len();
            let separated = word != "pr" || matches!(b.get(after), Some(b' ' | b'#'));
            if word_start(at) && separated && digit_at(skip_separators(after)) {
                return Some("a tracker number");
            }
        }
    }
    if lower.contains("runs/issue") {
        return Some("a run folder named after a tracker number");
    }
    for (at, _) in lower.match_indices("lease") {
        let i = skip_separators(at + 5);
        let label = i > at + 5
            && b.get(i).is_some_and(u8::is_ascii_lowercase)
            && !b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric);
        if word_start(at) && label {
            return Some("a machine label");
        }
    }
    const MACHINE_DIRS: [&str; 9] = [
        "root",
        "work",
        "home",
        "tmp",
        "mnt",
        "scratch",
        "workspace",
        "data",
        "users",
    ];
    for (at, _) in lower.match_indices('/') {
        let before = if at == 0 { b' ' } else { b[at - 1] };
        let path_start = matches!(
            before,
            b' ' | b'`' | b'"' | b'\'' | b'(' | b'[' | b'=' | b'\t'
        ) || lower[..at].ends_with("file://");
        let first: String = lower[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        let is_dir = lower[at + 1 + first.len()..].starts_with('/');
        if path_start && is_dir && MACHINE_DIRS.contains(&first.as_str()) {
            return Some("a path on the machine a run was made on");
        }
    }
    if lower.match_indices("~/").any(|(at, _)| word_start(at)) {
        return Some("a path in a home directory");
    }
    for (at, _) in lower.match_indices("seed") {
        let i = skip_separators(at + 4);
        if i > at + 4 && lower[i..].starts_with("00") && digit_at(i + 2) {
            return Some("a note by file number instead of book and chapter");
        }
        if lower[at + 4..].starts_with("s/") {
            return Some("the notes' folder instead of their books");
        }
    }
    for (at, _) in lower.match_indices("00") {
        let name = &b[at..];
        let hex = name.len() >= 20 && name[4..20].iter().all(u8::is_ascii_hexdigit);
        if word_start(at) && digit_at(at + 2) && name.get(3) == Some(&b'_') && hex {
            return Some("a note's file name instead of its book");
        }
    }
    if lower.contains("given to the project") {
        return Some("how the notes came");
    }
    None
}

#[test]
fn the_repository_speaks_of_the_project_only() {
    let this_file = "tests/tests/tidy.rs";
    let mut problems = Vec::new();
    for (path, text) in text_files() {
        if path == this_file {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = organisational_words(line) {
                problems.push(format!("{path}:{}: {what}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_organisational_word_finder_finds_each_kind_and_nothing_else() {
    let tracker = [
        "see issue 14",
        "Issue #3 says",
        "(issue12)",
        "runs/issue15/final",
        "issue-14",
        "issues 12 and 13",
        "PR #7",
    ];
    let label = [
        "on lease A, then",
        "Lease B (the bundle)",
        "bench-compare-lease-a.txt",
        "lease D",
    ];
    let paths = [
        "in /work/main/.gpu/bin",
        "(/root/ferro/target)",
        "`/tmp/run-3/logs`",
        "/home/user/x",
        "/mnt/data/x",
        "/workspace/ferro/",
        "/scratch/a/b",
        "file:///root/x",
        "~/runs/x",
    ];
    let notes = [
        "seed 002's table",
        "Seed 000",
        "seed 004",
        "seed-003",
        "seeds/004_9fa46204fa95f569.txt",
        "004_9fa46204fa95f569.txt",
    ];
    for line in tracker.iter().chain(&label).chain(&paths).chain(&notes) {
        assert!(organisational_words(line).is_some(), "missed: {line}");
    }
    assert!(organisational_words("as the given to the project notes").is_some());
    let fine = [
        "tissue 3",
        "the issue is the tail",
        "issues with 0 elements",
        "lease-free",
        "a lease is held",
        "please",
        "/usr/local/cuda/bin",
        "/dev/null",
        "std::env::temp_dir()",
        "target/tmp/x",
        "docs/results/h100/x",
        "express #7",
        "0x0000ffff",
        "1000_000 elements",
        "a release-acquire atomic",
        "--seed 1",
        "the seed of the random input",
        "seed 42",
        "a scratch copy of the input",
    ];
    for line in fine {
        assert_eq!(organisational_words(line), None, "flagged: {line}");
    }
}

/// The Markdown files of the guide: the root README and `docs/` (the curated results aside).
fn guide_pages() -> Vec<(String, String)> {
    text_files()
        .into_iter()
        .filter(|(path, _)| {
            path.ends_with(".md")
                && (path == "README.md"
                    || (path.starts_with("docs/") && !path.starts_with("docs/results/")))
        })
        .collect()
}

/// The curated results files a piece of text names, `results/<gpu>/<file>` (optionally
/// preceded by `docs/`), as paths from the root.
fn cited_results(text: &str) -> Vec<String> {
    let mut cited = Vec::new();
    for (at, _) in text.match_indices("results/") {
        let before = &text[..at];
        // `docs/results/...`, `results/...` and, from `docs/en/`, `../results/...`; not a
        // longer path that merely holds a `results/` folder.
        if before.ends_with("docs/results/")
            || before.ends_with('/') && !before.ends_with("docs/") && !before.ends_with("../")
        {
            continue;
        }
        let path: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'))
            .collect();
        let path = path.trim_end_matches('.');
        if path.matches('/').count() >= 2 && !path.ends_with('/') {
            cited.push(format!("docs/{path}"));
        }
    }
    cited.sort();
    cited.dedup();
    cited
}

/// What a quoted number measures, as far as matching it needs: a ratio (`1.09x`, `1.83 times`)
/// must stand in its source as a ratio; anything else as a number.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Quantity {
    Ratio,
    Measure,
}

/// Units after which a number is a measurement: time, bandwidth, size per second, share, ratio.
/// The Chinese pages write the same units (`微秒`, `毫秒`, `％`, `倍`).
const UNITS: [(&str, Quantity); 16] = [
    ("us", Quantity::Measure),
    ("µs", Quantity::Measure),
    ("ns", Quantity::Measure),
    ("ms", Quantity::Measure),
    ("GB/s", Quantity::Measure),
    ("TB/s", Quantity::Measure),
    ("GiB/s", Quantity::Measure),
    ("MB/s", Quantity::Measure),
    ("%", Quantity::Measure),
    ("x", Quantity::Ratio),
    ("×", Quantity::Ratio),
    ("times", Quantity::Ratio),
    ("微秒", Quantity::Measure),
    ("毫秒", Quantity::Measure),
    ("％", Quantity::Measure),
    ("倍", Quantity::Ratio),
];

/// The measured numbers of a piece of text: each number followed by a unit of time,
/// bandwidth, share or ratio (`238.46 us`, `4503 GB/s`, `93 %`, `1.09x`, `1.83 times`), both
/// ends of a range (`1.02-1.20x`), as written; and every number of a table cell in a table
/// whose header names a unit (`| median us |`), cell by cell.
fn measured_numbers(text: &str) -> Vec<(String, Quantity)> {
    let mut found = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with('|') {
            for cell in line.split('|') {
                found.extend(numbers_with_units(cell));
            }
        } else {
            found.extend(numbers_with_units(line));
        }
    }
    found.extend(table_numbers(text));
    let mut seen = BTreeSet::new();
    found.retain(|(number, _)| seen.insert(number.clone()));
    found
}

fn numbers_with_units(text: &str) -> Vec<(String, Quantity)> {
    // Inline code (`--blocks 1x`, a command or a literal) quotes no measurement.
    let c: Vec<char> = text
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                " ".repeat(part.chars().count())
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .collect();
    let mut found = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let starts = c[i].is_ascii_digit()
            && (i == 0
                // A number right after a Chinese character (`耗时238 us`) is a number; after
                // a Latin letter or digit (`sm_90`, `x86`) it is part of a word.
                || !(c[i - 1].is_ascii_alphanumeric()
                    || matches!(c[i - 1], '^' | '.' | '_')
                    || (c[i - 1] == ',' && i >= 2 && c[i - 2].is_ascii_digit())));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < c.len()
            && (c[j].is_ascii_digit()
                || (matches!(c[j], '.' | ',') && c.get(j + 1).is_some_and(char::is_ascii_digit)))
        {
            j += 1;
        }
        let number: String = c[i..j].iter().filter(|&&c| c != ',').collect();
        let mut k = j;
        while k < c.len() && c[k] == ' ' {
            k += 1;
        }
        let rest: String = c[k..c.len().min(k + 6)].iter().collect();
        // A ratio's `x` follows its number directly (`1.09x`); `16 x 16` is a product; "101
        // times" counts, "1.83 times" compares.
        let unit = UNITS.into_iter().find(|(u, _)| {
            rest.starts_with(u)
                && (*u != "x" || j == k)
                && (!matches!(*u, "times" | "倍") || number.contains('.'))
                && !rest[u.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric())
        });
        pending.push(number);
        if let Some((_, quantity)) = unit {
            found.extend(pending.drain(..).map(|n| (n, quantity)));
        } else if matches!(c.get(j), Some('-' | '–'))
            && c.get(j + 1).is_some_and(char::is_ascii_digit)
        {
            // the first end of a range: kept if the range ends in a unit
        } else if !(matches!(c.get(j), Some(' ')) && matches!(c.get(j + 1), Some('/'))) {
            pending.clear();
        }
        i = j.max(i + 1);
    }
    found
}

/// The numbers of the cells of every Markdown table in `text` whose column header names a
/// unit (`us`, `ms`, `GB/s`, `%`, `x`): a cell holding one number, or a range `a..b`, or `a / b`.
fn table_numbers(text: &str) -> Vec<(String, Quantity)> {
    let mut found = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for line in text.lines().map(str::trim) {
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        let Some(head) = &header else {
            header = Some(cells);
            continue;
        };
        if cells
            .iter()
            .all(|c| c.chars().all(|c| matches!(c, '-' | ':')))
        {
            continue;
        }
        for (cell, title) in cells.iter().zip(head) {
            let title = title.to_lowercase();
            if title.starts_with("notes") || title.contains("the notes") {
                continue;
            }
            let unit = [" us", "(us)", " ms", "gb/s", "%", "ratio", " x"]
                .iter()
                .any(|u| {
                    title.ends_with(u.trim_start()) && (title.contains(u) || title == u.trim())
                })
                || title.starts_with("vs ")
                || title.starts_with('x');
            if !unit {
                continue;
            }
            let quantity =
                if title.starts_with("vs ") || title.starts_with('x') || title.ends_with(" x") {
                    Quantity::Ratio
                } else {
                    Quantity::Measure
                };
            for part in cell.split(['/', ' ']).flat_map(|p| p.split("..")) {
                let number = part.trim().trim_end_matches(['%', 'x']);
                let numeric = !number.is_empty()
                    && number.chars().all(|c| c.is_ascii_digit() || c == '.')
                    && number.chars().next().is_some_and(|c| c.is_ascii_digit());
                if numeric {
                    found.push((number.to_string(), quantity));
                }
            }
        }
    }
    found
}

/// Whether `number` stands in `source` as a number of its own (not inside a longer one), as a
/// ratio (followed by `x`) where it is one, and, in JSON, as a value.
fn stands_in(source: &str, json: bool, number: &str, quantity: Quantity) -> bool {
    source.match_indices(number).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let rest = &source[at + number.len()..];
        let mut after = rest.chars();
        let (next, second) = (after.next(), after.next());
        let longer = before.is_some_and(|c| c.is_ascii_digit() || c == '.')
            || next.is_some_and(|c| c.is_ascii_digit())
            || (next == Some('.') && second.is_some_and(|c| c.is_ascii_digit()));
        let as_ratio = quantity == Quantity::Measure || json || next == Some('x');
        let as_value = !json || source[..at].trim_end().ends_with(':');
        !longer && as_ratio && as_value
    })
}

/// The paragraphs of a Markdown page with their first line: blocks between blank lines, code
/// blocks left out; a table is one block with the paragraph just before it (its caption).
fn paragraphs(page: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut in_code = false;
    let mut previous_was_table = false;
    for (n, line) in page.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.trim().is_empty() {
            if let Some(p) = current.take() {
                out.push(p);
            }
            continue;
        }
        let is_table = line.trim_start().starts_with('|');
        if is_table
            && !previous_was_table
            && current.is_none()
            && let Some(caption) = out.pop()
        {
            current = Some(caption);
        }
        previous_was_table = is_table;
        match &mut current {
            Some((_, text)) => {
                text.push('\n');
                text.push_str(line);
            }
            None => current = Some((n + 1, line.to_string())),
        }
    }
    out.extend(current);
    out
}

/// Whether a paragraph quotes numbers that are not ours to check: the notes' own (it names a
/// book or the notes), the tuning log's history, or an outside source it links.
fn quotes_another_source(paragraph: &str) -> bool {
    [
        "《",
        "the notes'",
        "the book's",
        "笔记",
        "tuning-notes.md",
        "https://",
    ]
    .iter()
    .any(|s| paragraph.contains(s))
}

/// Every problem of the guide's citations: a cited results file that does not exist, and a
/// measured number that none of the files it cites holds. A paragraph cites the results files
/// it names; one that names none is held to the files its page names (a chapter's "Numbers:"
/// line), or, on a page that names none, to every curated file; a paragraph quoting the notes,
/// the tuning log or an outside source is held to nothing but its own citations. The tuning
/// log itself is history, its numbers from runs not kept.
fn citation_problems(
    pages: &[(String, String)],
    read_result: &dyn Fn(&str) -> Option<String>,
    every_result: &[String],
) -> Vec<String> {
    let mut problems = Vec::new();
    for (page, text) in pages {
        if page.ends_with("tuning-notes.md") {
            continue;
        }
        let page_cites = cited_results(text);
        for (line, paragraph) in paragraphs(text) {
            let own = cited_results(&paragraph);
            let cited = if !own.is_empty() {
                own
            } else if quotes_another_source(&paragraph) {
                continue;
            } else if !page_cites.is_empty() {
                page_cites.clone()
            } else {
                every_result.to_vec()
            };
            let mut sources = Vec::new();
            for file in &cited {
                match read_result(file) {
                    Some(text) => sources.push((file.ends_with(".json"), text)),
                    None => {
                        problems.push(format!("{page}:{line}: cites {file}, which does not exist"))
                    }
                }
            }
            for (number, quantity) in measured_numbers(&paragraph) {
                let found = sources
                    .iter()
                    .any(|(json, text)| stands_in(text, *json, &number, quantity));
                if !found {
                    let files = if cited.len() > 4 {
                        "the curated results".to_string()
                    } else {
                        cited.join(", ")
                    };
                    problems.push(format!("{page}:{line}: {number} is in none of {files}"));
                }
            }
        }
    }
    problems
}

/// The curated results files, as paths from the root.
fn curated_results() -> Vec<String> {
    text_files()
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| {
            path.starts_with("docs/results/") && (path.ends_with(".md") || path.ends_with(".json"))
        })
        .collect()
}

#[test]
fn every_number_the_guide_quotes_is_in_the_results_it_cites() {
    let root = workspace();
    let problems = citation_problems(
        &guide_pages(),
        &|file| fs::read_to_string(root.join(file)).ok(),
        &curated_results(),
    );
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_citation_check_rejects_a_wrong_number_and_a_missing_file() {
    let report = "| variant | n | median us | GB/s | %copy | vs CUB |\n|---|---|---:|---:|---:|---:|\n\
                  | fast | 2^28 | 233.98 | 4589 | 108% | 1.02x |\n| shared | 2^28 | 87.5 | 3313 | 8% | 1.20x |";
    let results = |file: &str| match file {
        "docs/results/h200/bench-report.md" => Some(report.to_string()),
        "docs/results/h200/bench-results.json" => {
            Some("{\"median_us\": 517.872, \"name\": \"reduce 9.12\"}".into())
        }
        _ => None,
    };
    let every = ["docs/results/h200/bench-report.md".to_string()];
    let check = |text: &str| {
        let page = vec![("docs/x.md".to_string(), text.to_string())];
        citation_problems(&page, &results, &every)
    };
    let right = "The fast sum takes 233.98 us at 2^28, 4589 GB/s, 108 % of the copy, 1.02x CUB\n(`results/h200/bench-report.md`).";
    assert_eq!(check(right), Vec::<String>::new());
    let wrong = [
        "233.89 us",
        "4598 GB/s",
        "180 %",
        "1.2x",
        "0.98-1.02x",
        "331 GB/s",
        "4.59 TB/s",
        "1.83 times",
        "233.98x",
        "9.9 µs",
    ];
    for wrong in wrong {
        let text = format!("The fast sum: {wrong} (`results/h200/bench-report.md`).");
        assert_eq!(check(&text).len(), 1, "{wrong}");
    }
    let json = "CUB takes 9.12 us (`results/h200/bench-results.json`).";
    assert_eq!(check(json).len(), 1, "a JSON key's number is not a value");
    assert!(check("517.872 us (`results/h200/bench-results.json`)").is_empty());
    let missing = "4589 GB/s (`results/h100/bench-report.md`).";
    assert!(check(missing)[0].contains("does not exist"));
    let table = "From the H200 run (`results/h200/bench-report.md`):\n\n| n | median us | GB/s | vs CUB |\n|---|---:|---:|---:|\n| 2^28 | 233.99 | 4589 | 1.02x |\n| 2^28 | 233.98 | 4598 | 1.03x |";
    assert_eq!(check(table).len(), 3, "{:?}", check(table));
    let cells = "(`results/h200/bench-report.md`)\n\n| | H200 |\n|---|---|\n| fast | 233.99 us, 4589 GB/s |";
    assert_eq!(
        check(cells).len(),
        1,
        "a unit inside a cell: {:?}",
        check(cells)
    );
    let page_cited = "Numbers: `results/h200/bench-report.md`.\n\nThe fast sum takes 233.98 us.\n\nThe shared one 99.99 us.";
    assert_eq!(
        check(page_cited).len(),
        1,
        "a paragraph without citations is held to its page's"
    );
    let uncited = "A page that cites nothing: 99.99 us.";
    assert_eq!(
        check(uncited).len(),
        1,
        "and a page without any to every curated file"
    );
    assert!(check("《CUDA C编程权威指南》 prints 0.465551 ms.").is_empty());
    assert!(
        check("`ferrocuda bench --blocks 1x` is refused (`results/h200/bench-report.md`).")
            .is_empty()
    );
    // The Chinese pages: a number right after a Chinese character, Chinese units, and a
    // citation from the English tree (`docs/en/`).
    for wrong in ["耗时233.89 us", "快1.2倍", "为180％", "用时9.9微秒"] {
        let text = format!("快速求和{wrong}（`results/h200/bench-report.md`）。");
        assert_eq!(check(&text).len(), 1, "{wrong}");
    }
    assert!(check("快速求和耗时233.98 us，为复制的108％，是 CUB 的1.02倍（`results/h200/bench-report.md`）。").is_empty());
    let en = |text: &str| {
        let page = vec![("docs/en/x.md".to_string(), text.to_string())];
        citation_problems(&page, &results, &every)
    };
    assert!(en("233.98 us ([run](../results/h200/bench-report.md)).").is_empty());
    assert_eq!(
        en("233.89 us ([run](../results/h200/bench-report.md)).").len(),
        1
    );
    assert_eq!(
        numbers_with_units("2^20 elements, 5.5 us, 1.09-1.18x, sm_90, 16 x 16")
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        ["5.5", "1.09", "1.18"]
    );
}

/// Chinese characters (CJK ideographs) and English words (runs of Latin letters) of a page.
fn han_and_english_words(text: &str) -> (usize, usize) {
    let han = text
        .chars()
        .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
        .count();
    let words = text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .count();
    (han, words)
}

/// The lesson pages are Chinese first: every page of `docs/` with an English twin in
/// `docs/en/` has more Chinese characters than English words (code, commands and outputs
/// included), and every English page has its Chinese one.
#[test]
fn every_lesson_page_is_chinese_first_with_its_english_twin() {
    let files = text_files();
    let page = |path: &str| files.iter().find(|(p, _)| p == path).map(|(_, t)| t);
    let mut twins = 0;
    let mut problems = Vec::new();
    for (path, _) in files
        .iter()
        .filter(|(p, _)| p.starts_with("docs/en/") && p.ends_with(".md"))
    {
        let chinese = path.replacen("docs/en/", "docs/", 1);
        match page(&chinese) {
            None => problems.push(format!("{path} has no Chinese page {chinese}")),
            Some(text) => {
                twins += 1;
                let (han, words) = han_and_english_words(text);
                if han <= words {
                    problems.push(format!(
                        "{chinese}: {han} Chinese characters, {words} English words"
                    ));
                }
            }
        }
    }
    assert!(twins >= 12, "only {twins} lesson pages have both languages");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        han_and_english_words("共享内存 shared memory, `__syncthreads()`"),
        (4, 3)
    );
}

/// The Rust code of a Markdown page: the lines of its ```rust blocks.
fn rust_block_lines(page: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside && line.trim_start().starts_with("```rust");
            continue;
        }
        if inside && !line.trim().is_empty() {
            lines.push(line.to_string());
        }
    }
    lines
}

/// The side-by-side listings quote the kernels as they are: every line of their Rust blocks is
/// a line of the kernels' sources (so a kernel that changes without its listing fails here).
#[test]
fn the_listings_quote_the_rust_kernels_as_they_are() {
    let root = workspace();
    let mut source_lines = BTreeSet::new();
    for dir in [
        "kernels-crate/lessons/src",
        "kernels-crate/src",
        "kernels-crate/device/src",
    ] {
        for file in rust_files(&root.join(dir)) {
            source_lines.extend(read(&file).lines().map(String::from));
        }
    }
    let mut quoted = 0;
    let mut stale = Vec::new();
    for page in ["docs/listings.md", "docs/en/listings.md"] {
        for line in rust_block_lines(&read(&root.join(page))) {
            quoted += 1;
            if !source_lines.contains(&line) {
                stale.push(format!("{page}: `{line}`"));
            }
        }
    }
    assert!(quoted > 200, "only {quoted} lines of Rust quoted");
    assert!(
        stale.is_empty(),
        "lines the kernels no longer have:\n{}",
        stale.join("\n")
    );
    assert_eq!(
        rust_block_lines("a\n```rust\nfn f() {}\n\n```\n```c\nint x;\n```"),
        ["fn f() {}"]
    );
}
