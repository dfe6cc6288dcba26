//! `cargo xtask tidy`: the architecture, checked rather than only written.
//!
//! Three families of rules, each a pure function over file contents so the
//! tests can feed it fixtures:
//!
//! - **Dependencies** (from every member's `Cargo.toml`): each workspace
//!   crate may depend only on the workspace crates its layer allows
//!   ([`LAYERS`]); only `engine-rocks` names `rocksdb`, only `engine-redb`
//!   names `redb`, only `engine-postgres` names `postgres`; nothing depends on the simulation except through a
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
    ("codec", &["keys"]),
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
    (
        "schemas",
        &["keys", "codec", "engine", "store", "outbox", "search"],
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
            if let Some((_, owner)) = OWNED.iter().find(|(name, _)| *name == dep)
                && owner != folder
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
            }
        }
    }
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
mod tests {
    use super::*;

    fn manifests(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(f, t)| ((*f).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn reads_every_dependency_form() {
        let text = "[package]\nname = \"x\"\n\n[dependencies]\nstrata-engine.workspace = true\nredb = { workspace = true }\n# rocksdb = \"1\"\n\n[dev-dependencies]\nstrata-sim = { path = \"../sim\" }\n\n[dependencies.serde]\nversion = \"1\"\n\n[target.'cfg(unix)'.build-dependencies]\ncc = \"1\"\n\n[features]\nfoo = []\n";
        let got = dependencies(text);
        let want = [
            ("dependencies", "strata-engine"),
            ("dependencies", "redb"),
            ("dev-dependencies", "strata-sim"),
            ("dependencies", "serde"),
            ("build-dependencies", "cc"),
        ];
        assert_eq!(
            got,
            want.map(|(k, n)| (k.to_owned(), n.to_owned())).to_vec()
        );
    }

    #[test]
    fn layering_is_enforced() {
        let ok = manifests(&[
            (
                "engine",
                "[dependencies]\nthiserror.workspace = true\n[dev-dependencies]\ncriterion = \"1\"\n",
            ),
            (
                "store",
                "[dependencies]\nstrata-keys.workspace = true\nstrata-engine.workspace = true\n[dev-dependencies]\nstrata-engine-rocks.workspace = true\n",
            ),
            (
                "engine-rocks",
                "[dependencies]\nrocksdb = \"1\"\n[dev-dependencies]\nstrata-sim = { path = \"../sim\" }\n",
            ),
        ]);
        assert_eq!(check_dependencies(&ok), []);
        let bad = manifests(&[
            ("engine", "[dependencies]\nstrata-keys.workspace = true\n"),
            ("store", "[dev-dependencies]\nrocksdb = \"1\"\n"),
            (
                "codec",
                "[dependencies]\nstrata-sim = { path = \"../sim\" }\n",
            ),
            (
                "keys",
                "[dev-dependencies]\nstrata-sim = { path = \"../sim\" }\n",
            ),
            (
                "engine-redb",
                "[dependencies]\nstrata-store.workspace = true\n",
            ),
        ]);
        let found: Vec<String> = check_dependencies(&bad)
            .into_iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(found.len(), 5, "{found:#?}");
        assert!(found[0].starts_with("codec/Cargo.toml:0: depends on the simulation"));
        assert!(found[1].contains("engine/ may depend on no workspace crate"));
        assert!(
            found[2]
                .contains("`strata-store` in [dependencies]: engine-redb/ may depend on engine")
        );
        assert!(
            found[3]
                .starts_with("keys/Cargo.toml:0: depends on the simulation in [dev-dependencies]")
        );
        assert!(found[4].contains("`rocksdb` in [dev-dependencies]: only engine-rocks/"));
    }

    #[test]
    fn doc_paths_must_exist_inside_the_repository() {
        let present = [
            "engine/README.md",
            "keys/src/lib.rs",
            "engine-testkit/README.md",
            "keys",
        ];
        let exists = |p: &Path| present.iter().any(|q| Path::new(q) == p);
        let text = "See [the kit](../engine-testkit/README.md), [web](https://x.y/z), [anchor](#a), [`E`](crate::E).\n\
                    Gone: [old](../engine/src/conformance.rs). Outside: [d](../../shared/DESIGN.md).\n\
                    | `keys/src/lib.rs` | `keys/` | `engine/src/gone.rs` | `../shared/x.md` | `a/b` | `Vec<u8>` |\n";
        let found: Vec<String> = check_doc_paths("engine/README.md", text, true, &exists)
            .into_iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "engine/README.md:2: link `../engine/src/conformance.rs` points at nothing",
                "engine/README.md:2: link `../../shared/DESIGN.md` points outside the repository",
                "engine/README.md:3: path `engine/src/gone.rs` names nothing in the repository",
                "engine/README.md:3: path `../shared/x.md` names nothing in the repository",
            ]
        );
        let root_doc = check_doc_paths(
            "ARCHITECTURE.md",
            "Method: `../shared/BENCHMARKS.md`.\n",
            true,
            &exists,
        );
        assert_eq!(root_doc.len(), 1);
        assert!(root_doc[0].what.contains("points outside the repository"));
    }

    #[test]
    fn echoing_doc_comments_are_found() {
        let src = "pub struct S {\n    /// Key.\n    pub key: Vec<u8>,\n    /// The key's keyspace.\n    pub ks: u32,\n    /// Keyspace.\n    pub ks2: u32,\n}\n\n/// The commit version.\n#[must_use]\npub fn commit_version() -> u64 { 0 }\n\n/// Commit version.\n#[inline]\npub const fn commit_version2() -> u64 { 0 }\n\n/// A range spec.\npub struct RangeSpec;\n\n/// Why.\n/// More words.\npub reason: u8,\n";
        let found: Vec<(usize, String)> = check_echo_docs("x.rs", src)
            .into_iter()
            .map(|f| (f.line, f.what))
            .collect();
        assert_eq!(
            found.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [2, 10, 18],
            "{found:#?}"
        );
    }

    #[test]
    fn string_only_error_variants_are_refused() {
        let text = "\
#[derive(Debug, thiserror::Error)]
pub enum E {
    /// Bad.
    #[error(\"query: {0}\")]
    Query(String),
    #[error(\"no name {name}\")]
    #[allow(dead_code)]
    Named {
        name: String,
    },
    #[error(\"pin {0} {1}\")]
    Pin(String, &'static str),
    #[error(\"text\")]
    Text(std::string::String),
}
";
        let found: Vec<usize> = check_errors("x/src/e.rs", text)
            .iter()
            .map(|f| f.line)
            .collect();
        // `Query(String)` only: a named field and a pair are typed enough.
        assert_eq!(found, [5], "{:#?}", check_errors("x/src/e.rs", text));
    }

    #[test]
    fn a_message_that_prints_its_source_is_refused() {
        let text = "\
pub enum E {
    #[error(\"tantivy: {0}\")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error(\"io failed\")]
    Io(#[source] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(\"{key_type}: {source}\")]
    Key {
        key_type: &'static str,
        #[source]
        source: KeyError,
    },
    #[error(\"gave up after {attempts}: {last}\")]
    Retries {
        attempts: u32,
        #[source]
        last: Box<E>,
    },
    #[error(\"bulk stopped at {}\", cursor.next)]
    Bulk {
        cursor: Cursor,
        #[source]
        source: E2,
    },
    #[error(\"key {key} of {len} bytes\")]
    Plain { key: String, len: usize },
}
";
        let found: Vec<usize> = check_errors("x/src/e.rs", text)
            .iter()
            .map(|f| f.line)
            .collect();
        assert_eq!(found, [2, 8, 14], "{:#?}", check_errors("x/src/e.rs", text));
    }

    #[test]
    fn long_files_need_a_reason() {
        let long = "fn f() {}\n".repeat(MAX_LINES + 1);
        assert!(check_length("a.rs", &long).is_some());
        assert!(check_length("a.rs", &"fn f() {}\n".repeat(MAX_LINES)).is_none());
        let reasoned = format!("//! A suite.\n// tidy: long file: one case per function\n{long}");
        assert!(check_length("a.rs", &reasoned).is_none());
        let late = format!("{}// tidy: long file: too late\n{long}", "\n".repeat(40));
        assert!(check_length("a.rs", &late).is_some());
    }
}
