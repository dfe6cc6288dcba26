//! The tidy rules, each shown refusing what it must and passing the rest.

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
        // The listed exception: a benchmark's anchor.
        ("schemas", "[dev-dependencies]\nrocksdb = \"1\"\n"),
    ]);
    assert_eq!(check_dependencies(&ok), []);
    let bad = manifests(&[
        ("engine", "[dependencies]\nstrata-keys.workspace = true\n"),
        ("store", "[dev-dependencies]\nrocksdb = \"1\"\n"),
        // The exception is for dev-dependencies only.
        ("schemas", "[dependencies]\nrocksdb = \"1\"\n"),
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
    assert_eq!(found.len(), 6, "{found:#?}");
    assert!(found[0].starts_with("codec/Cargo.toml:0: depends on the simulation"));
    assert!(found[1].contains("engine/ may depend on no workspace crate"));
    assert!(
        found[2].contains("`strata-store` in [dependencies]: engine-redb/ may depend on engine")
    );
    assert!(
        found[3].starts_with("keys/Cargo.toml:0: depends on the simulation in [dev-dependencies]")
    );
    assert!(
        found[4]
            .starts_with("schemas/Cargo.toml:0: `rocksdb` in [dependencies]: only engine-rocks/")
    );
    assert!(found[5].contains("`rocksdb` in [dev-dependencies]: only engine-rocks/"));
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

#[test]
fn planted_bugs_are_switched_one_way_and_catalogued() {
    // Another switch than a fault point is refused, outside the faults
    // module; comments are not code.
    let switched = "\
// a PlantedBug in a comment is fine
pub enum PlantedBug { A }
thread_local! { static ON: Cell<bool> = Cell::new(false); }
pub fn plant(name: Option<&str>) {}
    if strata_engine::fault_point!(\"a-bug\") { return; }
    let x = fault_point!(\"d-bug\" | \"e-bug\");
";
    let found: Vec<usize> = check_one_mechanism("store/src/x.rs", switched)
        .iter()
        .map(|f| f.line)
        .collect();
    assert_eq!(found, [2, 3, 4]);
    assert!(check_one_mechanism(FAULTS_MODULE, switched).is_empty());
    // Exempt when the line above says why; only that line.
    let exempt = "\
// tidy: not a planted bug: the panic hook's depth
thread_local! { static DEPTH: Cell<u32> = Cell::new(0); }
thread_local! { static ON: Cell<bool> = Cell::new(false); }
";
    let found: Vec<usize> = check_one_mechanism("engine/src/x.rs", exempt)
        .iter()
        .map(|f| f.line)
        .collect();
    assert_eq!(found, [3]);
    assert_eq!(
        fault_points(switched),
        [
            (5, "a-bug".to_owned()),
            (6, "d-bug".to_owned()),
            (6, "e-bug".to_owned())
        ],
        "the points' names, on their lines"
    );
    // The catalogue against the points: one missing each way, one
    // listed twice.
    let catalogue = "\
    p(\"a-bug\", Workload::Store, 0),
    p(\"b-bug\", Workload::Store, 1),
    p(\"a-bug\", Workload::Outbox, 0),
";
    let points = [
        ("store/src/x.rs".to_owned(), 5, "a-bug".to_owned()),
        ("outbox/src/y.rs".to_owned(), 9, "c-bug".to_owned()),
    ];
    let findings = check_catalogue(&points, catalogue);
    let lines: Vec<(String, usize)> = findings.iter().map(|f| (f.file.clone(), f.line)).collect();
    assert_eq!(
        lines,
        [
            (CATALOGUE.to_owned(), 2),
            (CATALOGUE.to_owned(), 3),
            ("outbox/src/y.rs".to_owned(), 9),
        ],
        "{findings:?}"
    );
    assert!(findings[0].what.contains("no `fault_point!"));
    assert!(findings[1].what.contains("twice"));
    assert!(findings[2].what.contains("not in the catalogue"));
}
