//! `cargo xtask tidy`: the architecture, checked rather than only written.
//!
//! Three families of rules, each a pure function over file contents so the
//! tests can feed it fixtures:
//!
//! - **Dependencies** (from every member's `Cargo.toml`): each workspace
//!   crate may depend only on the workspace crates its layer allows
//!   ([`LAYERS`]); only `engine-rocks` names `rocksdb`, only `engine-redb`
//!   names `redb`, only `engine-postgres` names `postgres` (but for the
//!   dev-dependencies listed in [`OWNED_DEV_EXCEPTIONS`]); nothing depends on the simulation except through a
//!   listed dev-dependency exception ([`SIM_DEV_EXCEPTIONS`]).
//! - **Doc paths**: every relative link target in a Markdown file or a doc
//!   comment, and every path-like code span in `ARCHITECTURE.md` and the
//!   READMEs, exists inside the repository; none points outside it.
//! - **Doc comments** that only repeat the item's name (`/// Key.` on a
//!   field `key`) say nothing and are refused.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The workspace crates each crate may depend on in `[dependencies]`, by
/// folder. A folder missing here may depend on nothing of the workspace.
pub const LAYERS: &[(&str, &[&str])] = &[
    ("engine", &[]),
    ("keys", &["engine"]),
    ("codec", &["keys", "engine"]),
    ("engine-testkit", &["engine"]),
    ("engine-redb", &["engine"]),
    ("engine-rocks", &["engine"]),
    ("engine-postgres", &["engine"]),
    ("store", &["keys", "codec", "engine"]),
    (
        "test-support",
        &[
            "engine",
            "engine-redb",
            "engine-rocks",
            "engine-postgres",
            "store",
        ],
    ),
    ("outbox", &["keys", "codec", "engine", "store"]),
    ("search", &["keys", "codec", "engine", "store", "outbox"]),
    ("universaldb", &["keys", "codec", "engine", "store"]),
    (
        "actor-kv",
        &["keys", "codec", "engine", "store", "universaldb"],
    ),
    ("code-sous", &["keys", "codec", "engine", "store"]),
    ("nokv", &["keys", "codec", "engine", "store"]),
    (
        "agent-memory",
        &["keys", "codec", "engine", "store", "outbox", "search"],
    ),
    (
        "schemas",
        &[
            "universaldb",
            "actor-kv",
            "code-sous",
            "nokv",
            "agent-memory",
        ],
    ),
    (
        "cli",
        &[
            "keys",
            "codec",
            "engine",
            "engine-redb",
            "engine-rocks",
            "engine-postgres",
            "store",
            "outbox",
            "search",
            "schemas",
        ],
    ),
    (
        "examples",
        &[
            "keys",
            "codec",
            "engine",
            "engine-redb",
            "store",
            "outbox",
            "search",
            "schemas",
        ],
    ),
    (
        "sim",
        &[
            "keys",
            "codec",
            "engine",
            "engine-testkit",
            "engine-redb",
            "engine-rocks",
            "engine-postgres",
            "store",
            "outbox",
            "search",
            "schemas",
        ],
    ),
    ("xtask", &[]),
];

/// Third-party crates only one folder may name, in any dependency section.
pub const OWNED: &[(&str, &str)] = &[
    ("rocksdb", "engine-rocks"),
    ("redb", "engine-redb"),
    ("postgres", "engine-postgres"),
    ("tantivy", "search"),
];

/// Owned crates another folder may name as a dev-dependency, and why:
/// `(crate, folder, why)`.
pub const OWNED_DEV_EXCEPTIONS: &[(&str, &str, &str)] = &[(
    "rocksdb",
    "schemas",
    "the agent-memory benchmark's anchor: the original crate's ingest on rust-rocksdb itself",
)];

/// Crates that may dev-depend on the simulation, and why.
pub const SIM_DEV_EXCEPTIONS: &[(&str, &str)] = &[(
    "engine-rocks",
    "runs the simulation's workload on RocksDB in its own tests, so RocksDB is built once",
)];

/// One broken rule: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the repository.
    pub file: String,
    /// The line (1-based), 0 when the rule is about the whole file.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

/// The dependency sections of a manifest: `(section, dependency name)`
/// pairs, where section is `dependencies`, `dev-dependencies` or
/// `build-dependencies` (target-specific tables count as their kind).
pub fn dependencies(manifest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    for raw in manifest.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let header = header.trim_matches(['[', ']']);
            let parts: Vec<&str> = header.split('.').collect();
            section = None;
            for (i, part) in parts.iter().enumerate() {
                if matches!(
                    *part,
                    "dependencies" | "dev-dependencies" | "build-dependencies"
                ) {
                    // `[dependencies.foo]` names one dependency in its header.
                    if let Some(name) = parts.get(i + 1) {
                        out.push(((*part).to_owned(), name.trim_matches('"').to_owned()));
                    } else {
                        section = Some((*part).to_owned());
                    }
                }
            }
            if parts.first() == Some(&"workspace") {
                section = None;
            }
            continue;
        }
        let Some(kind) = &section else { continue };
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let name = key.trim().split('.').next().unwrap_or("").trim_matches('"');
        if !name.is_empty() {
            out.push((kind.clone(), name.to_owned()));
        }
    }
    out
}

/// Checks the dependency rules over `manifests`: folder → manifest text.
pub fn check_dependencies(manifests: &BTreeMap<String, String>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let folder_of = |dep: &str| dep.strip_prefix("strata-").map(str::to_owned);
    for (folder, text) in manifests {
        let file = format!("{folder}/Cargo.toml");
        let allowed: &[&str] = LAYERS
            .iter()
            .find(|(f, _)| f == folder)
            .map_or(&[], |(_, a)| a);
        for (kind, dep) in dependencies(text) {
            let excepted = kind == "dev-dependencies"
                && OWNED_DEV_EXCEPTIONS
                    .iter()
                    .any(|(name, f, _)| *name == dep && f == folder);
            if let Some((_, owner)) = OWNED.iter().find(|(name, _)| *name == dep)
                && owner != folder
                && !excepted
            {
                findings.push(Finding {
                    file: file.clone(),
                    line: 0,
                    what: format!("`{dep}` in [{kind}]: only {owner}/ may depend on it"),
                });
            }
            let Some(target) = folder_of(&dep) else {
                continue;
            };
            if target == *folder {
                continue;
            }
            if target == "sim" {
                let excepted = kind == "dev-dependencies"
                    && SIM_DEV_EXCEPTIONS.iter().any(|(f, _)| f == folder);
                if !excepted {
                    findings.push(Finding {
                        file: file.clone(),
                        line: 0,
                        what: format!("depends on the simulation in [{kind}]: nothing may"),
                    });
                }
                continue;
            }
            if kind != "dev-dependencies" && !allowed.contains(&target.as_str()) {
                findings.push(Finding {
                    file: file.clone(),
                    line: 0,
                    what: format!(
                        "`{dep}` in [{kind}]: {folder}/ may depend on {}",
                        if allowed.is_empty() {
                            "no workspace crate".to_owned()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                });
            }
        }
    }
    findings
}

/// Relative link targets of Markdown links `[text](target)` in `text`,
/// with their line numbers; web links, mail links and anchors are skipped.
pub fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split('#').next().unwrap_or("").trim();
            let target = target.split_whitespace().next().unwrap_or("");
            // Rustdoc's intra-doc links (`crate::Engine`, `self`) are not paths.
            let is_path = (target.contains('/') || target.contains('.')) && !target.contains("::");
            if is_path && !target.contains("://") && !target.starts_with("mailto:") {
                out.push((i + 1, target.to_owned()));
            }
            rest = &rest[end..];
        }
    }
    out
}

/// Path-like code spans (`` `keys/src/lib.rs` ``, `` `engine/` ``) in
/// `text`, with their line numbers: a span of path characters holding a
/// `/` and ending in `/` or a known file extension.
pub fn path_spans(text: &str) -> Vec<(usize, String)> {
    const EXTENSIONS: &[&str] = &[".rs", ".md", ".toml", ".sh", ".json", ".yml"];
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (n, span) in line.split('`').enumerate() {
            if n % 2 == 0 {
                continue;
            }
            let pathy = !span.is_empty()
                && span.contains('/')
                && span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
                && !span.starts_with('/')
                && (span.ends_with('/') || EXTENSIONS.iter().any(|e| span.ends_with(e)));
            if pathy {
                out.push((i + 1, span.to_owned()));
            }
        }
    }
    out
}

/// Resolves `target` (relative to the directory `from`, both relative to
/// the repository root) lexically; `None` when it leaves the repository.
pub fn resolve(from: &Path, target: &str) -> Option<PathBuf> {
    let mut out = Vec::new();
    for c in from.join(target).components() {
        match c {
            Component::Normal(p) => out.push(p.to_owned()),
            Component::ParentDir => {
                out.pop()?;
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out.iter().collect())
}

/// Checks the paths a document at `file` (relative to the root) names:
/// link targets relative to its directory, and (when `spans`) path-like
/// code spans relative to its directory or to the root. `exists` answers
/// for a path relative to the root.
pub fn check_doc_paths(
    file: &str,
    text: &str,
    spans: bool,
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<Finding> {
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut findings = Vec::new();
    for (line, target) in link_targets(text) {
        match resolve(dir, &target) {
            None => findings.push(Finding {
                file: file.to_owned(),
                line,
                what: format!("link `{target}` points outside the repository"),
            }),
            Some(p) if !exists(&p) => findings.push(Finding {
                file: file.to_owned(),
                line,
                what: format!("link `{target}` points at nothing"),
            }),
            Some(_) => {}
        }
    }
    if spans {
        for (line, span) in path_spans(text) {
            let here = resolve(dir, &span);
            let from_root = resolve(Path::new(""), &span);
            let found = [here.as_deref(), from_root.as_deref()]
                .into_iter()
                .flatten()
                .any(exists);
            if here.is_none() && from_root.is_none() {
                findings.push(Finding {
                    file: file.to_owned(),
                    line,
                    what: format!("path `{span}` points outside the repository"),
                });
            } else if !found {
                findings.push(Finding {
                    file: file.to_owned(),
                    line,
                    what: format!("path `{span}` names nothing in the repository"),
                });
            }
        }
    }
    findings
}

/// The lowercase words of an identifier (`snake_case` or `CamelCase`).
fn words(ident: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in ident.chars() {
        if c == '_' {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        } else if c.is_uppercase() && !word.is_empty() {
            out.push(std::mem::take(&mut word));
            word.extend(c.to_lowercase());
        } else {
            word.extend(c.to_lowercase());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The name a line declares (a field, function, type, constant, variant
/// with fields), if it declares one.
fn declared_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub "] {
        if let Some(r) = rest.strip_prefix(prefix) {
            rest = r;
            break;
        }
    }
    for kw in [
        "const fn ",
        "fn ",
        "struct ",
        "enum ",
        "trait ",
        "type ",
        "const ",
        "static ",
        "mod ",
    ] {
        if let Some(r) = rest.strip_prefix(kw) {
            rest = r;
            break;
        }
    }
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..end];
    let after = rest[end..].trim_start();
    let declares = after.starts_with(':')
        || after.starts_with('(')
        || after.starts_with('<')
        || after.starts_with('{')
        || after.starts_with('=')
        || after.starts_with(',')
        || after.starts_with(';')
        || after.is_empty();
    (!name.is_empty() && declares && !name.starts_with(char::is_numeric)).then_some(name)
}

/// Doc comments in Rust source `text` that say nothing but the name of the
/// item they document: a one-line `///` whose words, without articles,
/// are the item name's words.
pub fn check_echo_docs(file: &str, text: &str) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let mut findings = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = i;
        let mut doc = Vec::new();
        while i < lines.len() && lines[i].trim_start().starts_with("///") {
            doc.push(lines[i].trim_start().trim_start_matches('/').trim());
            i += 1;
        }
        if doc.len() == 1 {
            // Skip attributes between the doc and the item.
            let mut j = i;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            if let Some(name) = lines.get(j).and_then(|l| declared_name(l)) {
                let said: Vec<String> = doc[0]
                    .trim_end_matches('.')
                    .split(|c: char| c.is_whitespace() || c == '`')
                    .filter(|w| !w.is_empty())
                    .map(str::to_lowercase)
                    .filter(|w| !matches!(w.as_str(), "the" | "a" | "an" | "its"))
                    .collect();
                if !said.is_empty() && said == words(name) {
                    findings.push(Finding {
                        file: file.to_owned(),
                        line: start + 1,
                        what: format!("doc comment `{}` only repeats the name `{name}`", doc[0]),
                    });
                }
            }
        }
        if i == start {
            i += 1;
        }
    }
    findings
}

/// The folders of the library crates, whose errors [`check_errors`]
/// reads.
pub const LIBRARY_CRATES: &[&str] = &[
    "engine",
    "keys",
    "codec",
    "engine-testkit",
    "engine-redb",
    "engine-rocks",
    "engine-postgres",
    "store",
    "outbox",
    "search",
    "universaldb",
    "actor-kv",
    "code-sous",
    "nokv",
    "agent-memory",
    "schemas",
];

/// Error enums (`thiserror`'s `#[error(...)]` variants) in Rust source
/// `text` that break the errors' two rules:
///
/// - **typed, not text**: no variant whose only field is a `String`
///   (`Query(String)`): say what failed in fields and types (an enum of
///   the problems, the key, the cause as the source);
/// - **each thing once**: a message prints its own layer, *or* forwards
///   its source with `#[error(transparent)]`, never both: no message that
///   interpolates the field `#[source]` or `#[from]` marks (`{0}`,
///   `{source}`). `ErrorChain` shows the whole chain.
pub fn check_errors(file: &str, text: &str) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let mut findings = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if !t.starts_with("#[error(") || t.starts_with("#[error(transparent") {
            continue;
        }
        // The attribute may span lines; the variant follows it, after
        // other attributes and doc comments.
        let mut j = i;
        let mut message = String::new();
        while j < lines.len() {
            message.push_str(lines[j]);
            if lines[j].trim_end().ends_with(")]") {
                break;
            }
            j += 1;
        }
        j += 1;
        while j < lines.len() {
            let l = lines[j].trim_start();
            if l.starts_with("#[") || l.starts_with("///") {
                j += 1;
            } else {
                break;
            }
        }
        let Some(variant) = lines.get(j).map(|l| l.trim()) else {
            continue;
        };
        let compact: String = variant.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.ends_with("(String),") || compact.ends_with("(String)") {
            findings.push(Finding {
                file: file.to_owned(),
                line: j + 1,
                what: format!(
                    "error variant `{variant}` carries only a String: give it typed fields"
                ),
            });
        }
        // The fields of the variant: a tuple on the same line, or the
        // named fields up to the closing brace.
        let mut body = variant.to_owned();
        if variant.ends_with('{') {
            let mut k = j + 1;
            while k < lines.len() && !lines[k].trim_start().starts_with('}') {
                body.push('\n');
                body.push_str(lines[k]);
                k += 1;
            }
        }
        let tuple_source = compact.contains("(#[source]") || compact.contains("(#[from]");
        let mut named_sources: Vec<String> = Vec::new();
        let body_lines: Vec<&str> = body.lines().collect();
        for (n, l) in body_lines.iter().enumerate() {
            let marked = l.contains("#[source]") || l.contains("#[from]");
            let field = |s: &str| {
                s.trim()
                    .split(':')
                    .next()
                    .map(|f| f.trim().trim_start_matches("pub ").to_owned())
            };
            if marked && !l.trim().ends_with(']') {
                // `#[source] field: Type` on one line.
                if let Some(f) = field(l.rsplit(']').next().unwrap_or("")) {
                    named_sources.push(f);
                }
            } else if marked {
                if let Some(f) = body_lines.get(n + 1).and_then(|next| field(next)) {
                    named_sources.push(f);
                }
            } else if l.trim_start().starts_with("source:") {
                named_sources.push("source".to_owned());
            }
        }
        let repeats = (tuple_source && message.contains("{0"))
            || named_sources
                .iter()
                .any(|f| !f.is_empty() && message.contains(&format!("{{{f}")));
        if repeats {
            findings.push(Finding {
                file: file.to_owned(),
                line: i + 1,
                what: format!(
                    "error variant `{}` prints its source in its message: print this layer's \
                     message only (or use #[error(transparent)])",
                    variant.trim_end_matches(['{', ',', ' '])
                ),
            });
        }
    }
    findings
}

/// The one fault-point mechanism: the module that switches planted bugs.
pub const FAULTS_MODULE: &str = "engine/src/faults.rs";

/// The one catalogue of planted bugs, which `cargo xtask sim --plant all`
/// reads.
pub const CATALOGUE: &str = "sim/src/planted.rs";

/// Whether a Rust source line is a comment (its fault points are examples,
/// not code).
fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with("//")
}

/// The quoted names that follow `marker` on the code lines of `text`
/// (one, or several joined by `|`): `(line, name)`, lines counted from 1.
fn quoted_after(text: &str, marker: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !is_comment(l)) {
        let mut rest = line;
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            let mut names = rest;
            while let Some((name, after)) = names
                .trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split_once('"'))
            {
                out.push((i + 1, name.to_owned()));
                match after.trim_start().strip_prefix('|') {
                    Some(next) => names = next,
                    None => break,
                }
            }
        }
    }
    out
}

/// The fault points (`fault_point!("name")`) in Rust source `text`.
pub fn fault_points(text: &str) -> Vec<(usize, String)> {
    quoted_after(text, "fault_point!(")
}

/// The names the catalogue lists (its entries are written `p("name", ...)`).
pub fn catalogue_names(text: &str) -> Vec<(usize, String)> {
    quoted_after(text, "p(")
}

/// Planted bugs switched in library source `text` some other way than by a
/// fault point: an enum of bugs, a switch of its own (a thread-local, a
/// `plant` function, a `planted` field or method). A line right below
/// `// tidy: not a planted bug: <why>` is exempt (a thread-local kept for
/// another purpose).
pub fn check_one_mechanism(file: &str, text: &str) -> Vec<Finding> {
    const OTHERS: [&str; 6] = [
        "PlantedBug",
        "thread_local!",
        "fn plant(",
        "fn planted(",
        "planted: Option",
        "planted_",
    ];
    if file == FAULTS_MODULE {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !is_comment(l))
        .filter(|(i, _)| {
            !i.checked_sub(1).is_some_and(|above| {
                lines[above]
                    .trim_start()
                    .starts_with("// tidy: not a planted bug:")
            })
        })
        .filter_map(|(i, l)| {
            let other = OTHERS.iter().find(|o| l.contains(**o))?;
            Some(Finding {
                file: file.to_owned(),
                line: i + 1,
                what: format!(
                    "`{other}`: planted bugs are switched by `strata_engine::fault_point!(\"name\")` \
                     only (see {FAULTS_MODULE}), listed in {CATALOGUE}"
                ),
            })
        })
        .collect()
}

/// The fault points of the library crates (`(file, line, name)`) against
/// the catalogue's entries: each point is in the catalogue, each entry has
/// a point, and no entry is listed twice.
pub fn check_catalogue(points: &[(String, usize, String)], catalogue: &str) -> Vec<Finding> {
    let listed = catalogue_names(catalogue);
    let mut findings = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (line, name) in &listed {
        if !seen.insert(name.as_str()) {
            findings.push(Finding {
                file: CATALOGUE.to_owned(),
                line: *line,
                what: format!("planted bug `{name}` is listed twice"),
            });
        }
        if !points.iter().any(|(_, _, n)| n == name) {
            findings.push(Finding {
                file: CATALOGUE.to_owned(),
                line: *line,
                what: format!(
                    "planted bug `{name}` has no `fault_point!(\"{name}\")` in any library crate"
                ),
            });
        }
    }
    for (file, line, name) in points {
        if !seen.contains(name.as_str()) {
            findings.push(Finding {
                file: file.clone(),
                line: *line,
                what: format!("fault point `{name}` is not in the catalogue ({CATALOGUE})"),
            });
        }
    }
    findings
}

/// The most lines a Rust file may have without a reason.
pub const MAX_LINES: usize = 1_000;

/// A Rust file longer than [`MAX_LINES`] without a reason: a comment
/// `// tidy: long file: <why>` among its first 40 lines, saying why its
/// length is one concept (a test suite of one subject, a table).
pub fn check_length(file: &str, text: &str) -> Option<Finding> {
    let n = text.lines().count();
    let reason = text
        .lines()
        .take(40)
        .any(|l| l.trim_start().starts_with("// tidy: long file:"));
    (n > MAX_LINES && !reason).then(|| Finding {
        file: file.to_owned(),
        line: 0,
        what: format!(
            "{n} lines, above {MAX_LINES}: split it along its concepts, or say why it is one \
             (`// tidy: long file: <why>` in its first 40 lines)"
        ),
    })
}

/// Runs every rule over the repository at `root`.
pub fn run(root: &Path) -> Vec<Finding> {
    let files = tracked_files(root);
    let exists = |p: &Path| root.join(p).exists();
    let mut findings = Vec::new();

    let mut manifests = BTreeMap::new();
    for file in files.iter().filter(|f| f.ends_with("/Cargo.toml")) {
        let folder = file.trim_end_matches("/Cargo.toml");
        if !folder.contains('/')
            && let Ok(text) = std::fs::read_to_string(root.join(file))
        {
            manifests.insert(folder.to_owned(), text);
        }
    }
    findings.extend(check_dependencies(&manifests));
    let mut points = Vec::new();

    for file in &files {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        if Path::new(file).extension().is_some_and(|e| e == "md") {
            let spans = file == "ARCHITECTURE.md" || file.ends_with("README.md");
            findings.extend(check_doc_paths(file, &text, spans, &exists));
        } else if Path::new(file).extension().is_some_and(|e| e == "rs") {
            let docs: String = text
                .lines()
                .map(|l| {
                    let t = l.trim_start();
                    if t.starts_with("///") || t.starts_with("//!") {
                        t
                    } else {
                        ""
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            findings.extend(check_doc_paths(file, &docs, false, &exists));
            findings.extend(check_echo_docs(file, &text));
            findings.extend(check_length(file, &text));
            let library = LIBRARY_CRATES
                .iter()
                .any(|c| file.starts_with(&format!("{c}/src/")));
            if library {
                findings.extend(check_errors(file, &text));
                findings.extend(check_one_mechanism(file, &text));
                points.extend(
                    fault_points(&text)
                        .into_iter()
                        .map(|(line, name)| (file.clone(), line, name)),
                );
            }
        }
    }
    let catalogue = std::fs::read_to_string(root.join(CATALOGUE)).unwrap_or_default();
    findings.extend(check_catalogue(&points, &catalogue));
    findings
}

/// The files git tracks, relative to `root` (every file, when git cannot
/// say: a source tarball).
fn tracked_files(root: &Path) -> Vec<String> {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success());
    if let Some(out) = listed {
        return String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| root.join(l).is_file())
            .map(str::to_owned)
            .collect();
    }
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name();
            if name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
