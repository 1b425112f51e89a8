//! The layers of `crates/dapl/src` (docs/architecture.md, "Layers"), checked on the source:
//!
//! - `mem/` (registered memory, the memory table) names only `mem` and `types`;
//! - `engine/` (queue pairs, SRQ, the port links plug into) names only `engine`, `mem`, `types`;
//! - `link/` (loopback, tcp, shm) names only `link`, `engine`, `mem`, `types` and `pace` (the
//!   poll pacer, a leaf that names nothing of the crate: checked here too);
//! - the DAT layer (everything else) may name anything.
//!
//! So the engine and the links never name the DAT objects (endpoints, EVDs, the IA, service
//! points, `DatError`), and a provider over other hardware can take the DAT layer's place
//! above the same engine port. `unsafe` code lives in `mem/` only, plus the one public entry
//! point that registers caller memory (`Pz::lmr_register` in lmr.rs).

use std::fs;
use std::path::{Path, PathBuf};

/// What each lower layer may name as `crate::<module>`.
const LAYERS: &[(&str, &[&str])] = &[
    ("mem", &["mem", "types"]),
    ("engine", &["engine", "mem", "types"]),
    ("link", &["link", "engine", "mem", "types", "pace"]),
];

/// Modules outside the layers' directories that a lower layer may name: each must name no
/// other module of the crate.
const LEAVES: &[&str] = &["pace.rs"];

/// Files outside `mem/` allowed to contain `unsafe`, and why.
const UNSAFE_OUTSIDE_MEM: &[&str] = &[
    // `pub unsafe fn Pz::lmr_register`: the caller's contract for lending memory.
    "lmr.rs",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without comments (line comments, doc comments, block comments) and string
/// literals, so that prose naming a module is not mistaken for a dependency.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// Every `crate::<module>` a source names, with the line it is on; a grouped `crate::{...}`
/// import is reported as the module `{` (lower layers spell their paths out).
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue; // `$crate::`, `dapl_crate::` and the like
            }
            let name: String = if rest.starts_with('{') {
                "{".into()
            } else {
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            };
            found.push((n + 1, name));
        }
    }
    found
}

/// Every `super::` path of a source that climbs to the crate root (`depth` is the file's
/// module depth below it: 2 for `engine/qp/mod.rs` or `engine/port.rs`), as the module it
/// then names, with the line it is on: `super::super::ep` in `engine/port.rs` is `crate::ep`.
fn super_paths(code: &str, depth: usize) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("super::") {
            let before = rest[..at].chars().next_back();
            let mut k = 0;
            rest = &rest[at..];
            while let Some(r) = rest.strip_prefix("super::") {
                k += 1;
                rest = r;
            }
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') || k < depth {
                continue;
            }
            let name: String = if rest.starts_with('{') {
                "{".into()
            } else {
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            };
            found.push((n + 1, name));
        }
    }
    found
}

/// The module depth below the crate root of the file at `path` (relative to `src/`).
fn module_depth(path: &str) -> usize {
    let parts = path.split('/').count();
    if path.ends_with("/mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The violations of one lower-layer file's source.
fn violations(layer: &str, allowed: &[&str], path: &str, src: &str) -> Vec<String> {
    let code = code_only(src);
    let mut paths = crate_paths(&code);
    paths.extend(super_paths(&code, module_depth(path)));
    paths.sort();
    paths
        .into_iter()
        .filter(|(_, m)| !allowed.contains(&m.as_str()))
        .map(|(line, m)| format!("{path}:{line}: the {layer} layer names crate::{m}"))
        .collect()
}

#[test]
fn engine_links_and_memory_never_name_the_dat_layer() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for (layer, allowed) in LAYERS {
        let mut files = Vec::new();
        rust_files(&src().join(layer), &mut files);
        assert!(!files.is_empty(), "no files under src/{layer}");
        for f in files {
            let text = fs::read_to_string(&f).expect("read");
            let name = f.strip_prefix(src()).unwrap().display().to_string();
            bad.extend(violations(layer, allowed, &name, &text));
            checked += 1;
        }
    }
    for leaf in LEAVES {
        // `crate::` paths only: a leaf at the crate root climbs with `super::` only from its
        // inline test module, back to itself.
        let text = fs::read_to_string(src().join(leaf)).expect("read");
        for (line, m) in crate_paths(&code_only(&text)) {
            bad.push(format!("{leaf}:{line}: a leaf names crate::{m}"));
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} files checked");
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn layer_check_catches_a_dat_name_and_ignores_prose() {
    let src = "use crate::engine::qp::Qp;\n\
               // see crate::ep for the endpoint\n\
               /// or `crate::evd`\n\
               let s = \"crate::ia\";\n\
               fn f(e: &crate::ep::EpInner) {}\n\
               use crate::{ia, mem};\n\
               let x = $crate::cptr::In::new(p);\n";
    let v = violations("engine", &["engine", "mem", "types"], "x.rs", src);
    assert_eq!(
        v,
        [
            "x.rs:5: the engine layer names crate::ep",
            "x.rs:6: the engine layer names crate::{",
        ]
    );
}

#[test]
fn layer_check_follows_super_paths_that_climb_out_of_the_layer() {
    // engine/qp/tx.rs is at depth 3: two `super::` stay inside engine, three reach the root.
    let src = "use super::super::port::Connection;\n\
               use super::super::super::ep::EpInner;\n\
               use super::super::super::mem::Seg;\n\
               use super::super::super::{ia, types};\n";
    let v = violations(
        "engine",
        &["engine", "mem", "types"],
        "engine/qp/tx.rs",
        src,
    );
    assert_eq!(
        v,
        [
            "engine/qp/tx.rs:2: the engine layer names crate::ep",
            "engine/qp/tx.rs:4: the engine layer names crate::{",
        ]
    );
    assert_eq!(module_depth("engine/qp/mod.rs"), 2);
    assert_eq!(module_depth("engine/port.rs"), 2);
    assert_eq!(module_depth("link/tcp/conn/rx.rs"), 4);
}

#[test]
fn unsafe_code_lives_in_mem_only() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut outside = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap();
        if rel.starts_with("mem") {
            continue;
        }
        let code = code_only(&fs::read_to_string(&f).expect("read"));
        let has_unsafe = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == "unsafe");
        if has_unsafe {
            outside.push(rel.display().to_string());
        }
    }
    outside.sort();
    assert_eq!(
        outside, UNSAFE_OUTSIDE_MEM,
        "files outside mem/ with unsafe code"
    );
}
