//! The public API baseline: every published library crate's public items,
//! with their declarations and the signatures of their methods and impls,
//! read from the API docs `cargo doc` wrote, compared with the snapshot
//! committed under `api/`. A removed or changed line is a possible breaking
//! change and fails `cargo xtask test`; an added one fails too until the
//! snapshot is updated (`cargo xtask api --bless`), so the committed
//! baseline is always the API of the commit.
//!
//! What it sees is what rustdoc renders: names, declarations (public
//! fields, variants), signatures, trait impls (auto traits included;
//! blanket impls left out, they are the standard library's and other
//! crates'). It
//! does not judge compatibility the way `cargo-semver-checks` does (a
//! changed line may be a compatible change); a person decides, and blesses.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The published library crates, by library name (the published crates
/// with a `src/lib.rs`).
pub fn crates() -> Vec<String> {
    crate::release::published()
        .into_iter()
        .filter(|folder| Path::new(folder).join("src/lib.rs").exists())
        .filter_map(|folder| {
            let manifest = std::fs::read_to_string(Path::new(folder).join("Cargo.toml")).ok()?;
            crate::release::package_name(&manifest).map(|n| n.replace('-', "_"))
        })
        .collect()
}

const KINDS: &[&str] = &[
    "struct", "enum", "trait", "fn", "macro", "constant", "type", "static", "union", "derive",
    "attr",
];

/// The directory `cargo doc` wrote to.
pub fn doc_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("doc")
}

/// Text of an HTML fragment: tags removed, the entities rustdoc writes
/// decoded, whitespace collapsed.
pub fn text_of(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The contents of every element that opens with `open` (an exact start
/// tag prefix, like `<h4 class="code-header"`) up to the matching `close`.
fn elements<'h>(html: &'h str, open: &str, close: &str) -> Vec<&'h str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(open) {
        let after = &rest[i..];
        let Some(start) = after.find('>') else { break };
        let body = &after[start + 1..];
        let Some(end) = body.find(close) else { break };
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

/// The item pages `all.html` of a crate links to.
fn item_pages(all: &str) -> BTreeSet<String> {
    let mut pages = BTreeSet::new();
    for part in all.split("href=\"").skip(1) {
        let Some(href) = part.split('"').next() else {
            continue;
        };
        let file = href.rsplit('/').next().unwrap_or(href);
        let is_item = KINDS
            .iter()
            .any(|k| file.starts_with(&format!("{k}.")) && file.rsplit('.').next() == Some("html"));
        if is_item && !href.starts_with("..") && !href.contains("://") {
            pages.insert(href.to_owned());
        }
    }
    pages
}

/// The API lines of crate `krate` from the docs in `doc`.
///
/// # Errors
/// A page that does not read (the docs not built).
pub fn snapshot(doc: &Path, krate: &str) -> Result<Vec<String>, String> {
    let root = doc.join(krate);
    let all = std::fs::read_to_string(root.join("all.html")).map_err(|e| {
        format!(
            "{}: {e} (run `cargo doc --no-deps --workspace` first)",
            root.join("all.html").display()
        )
    })?;
    let mut lines = BTreeSet::new();
    for page in item_pages(&all) {
        let html = std::fs::read_to_string(root.join(&page))
            .map_err(|e| format!("{}: {e}", root.join(&page).display()))?;
        // Blanket implementations (`impl<T> From<T> for T`, other crates'
        // extension traits) are not this crate's API and change with
        // dependencies: left out.
        let html = html
            .find("id=\"blanket-implementations\"")
            .map_or(html.as_str(), |i| &html[..i]);
        let item = page.trim_end_matches(".html").replace('/', "::");
        // An item of another crate re-exported here (its page has no source
        // in this crate): its path is this crate's API, its details are
        // the other crate's (and its features').
        let heading = elements(html, "<span class=\"sub-heading\"", "</span>");
        let own = format!("src/{krate}/");
        if !heading.iter().any(|h| h.contains(&own)) {
            lines.insert(format!("{item}: re-exported from another crate"));
            continue;
        }
        for decl in elements(html, "<pre class=\"rust item-decl\"", "</pre>") {
            lines.insert(format!("{item}: {}", text_of(decl)));
        }
        for tag in ["h3", "h4"] {
            let open = format!("<{tag} class=\"code-header\"");
            for header in elements(html, &open, &format!("</{tag}>")) {
                lines.insert(format!("{item}: {}", text_of(header)));
            }
        }
    }
    Ok(lines.into_iter().collect())
}

/// The committed snapshot of `krate`.
pub fn baseline_path(krate: &str) -> PathBuf {
    Path::new("api").join(format!("{krate}.txt"))
}

/// What differs between `baseline` and `now`: the lines gone and the lines
/// new.
pub fn diff(baseline: &str, now: &[String]) -> (Vec<String>, Vec<String>) {
    let old: BTreeSet<&str> = baseline.lines().filter(|l| !l.is_empty()).collect();
    let new: BTreeSet<&str> = now.iter().map(String::as_str).collect();
    (
        old.difference(&new).map(|s| (*s).to_owned()).collect(),
        new.difference(&old).map(|s| (*s).to_owned()).collect(),
    )
}

/// Compares every crate's API with its committed snapshot, or (`bless`)
/// writes the snapshots.
///
/// # Errors
/// A difference (listed), or docs that do not read.
pub fn check(bless: bool) -> Result<(), String> {
    let doc = doc_dir();
    let mut report = String::new();
    for krate in crates() {
        let now = snapshot(&doc, &krate)?;
        let path = baseline_path(&krate);
        if bless {
            std::fs::create_dir_all("api").map_err(|e| format!("api/: {e}"))?;
            std::fs::write(&path, now.join("\n") + "\n")
                .map_err(|e| format!("{}: {e}", path.display()))?;
            continue;
        }
        let baseline = std::fs::read_to_string(&path).unwrap_or_default();
        let (gone, new) = diff(&baseline, &now);
        for l in &gone {
            let _ = writeln!(report, "  - {l}");
        }
        for l in &new {
            let _ = writeln!(report, "  + {l}");
        }
    }
    if bless {
        println!("api: snapshots written under api/");
        return Ok(());
    }
    if report.is_empty() {
        println!("api: every published crate's API matches api/");
        Ok(())
    } else {
        Err(format!(
            "the public API differs from the snapshot in api/ (- gone or changed: possibly breaking; + new):\n{report}\
             if the change is meant, run `cargo xtask api --bless` and commit api/ (and note it in CHANGELOG.md)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_drops_tags_and_decodes_entities() {
        assert_eq!(
            text_of("<a href=\"x\">pub fn</a> get&lt;K&gt;(&amp;self,\n   k: &amp;K)"),
            "pub fn get<K>(&self, k: &K)"
        );
    }

    #[test]
    fn elements_and_item_pages_are_found() {
        let html = "<h4 class=\"code-header\" id=\"a\">fn <b>a</b>()</h4><p>x</p><h4 class=\"code-header\">fn b()</h4>";
        assert_eq!(
            elements(html, "<h4 class=\"code-header\"", "</h4>"),
            ["fn <b>a</b>()", "fn b()"]
        );
        let all = "<a href=\"struct.Store.html\">Store</a><a href=\"../other/struct.X.html\">X</a><a href=\"tx/fn.run.html\">run</a><a href=\"index.html\">i</a>";
        assert_eq!(
            item_pages(all).into_iter().collect::<Vec<_>>(),
            ["struct.Store.html", "tx/fn.run.html"]
        );
    }

    #[test]
    fn a_changed_signature_is_a_line_gone_and_one_new() {
        let (gone, new) = diff(
            "a: fn f(x: u8)\nb: struct B\n",
            &["a: fn f(x: u16)".to_owned(), "b: struct B".to_owned()],
        );
        assert_eq!(gone, ["a: fn f(x: u8)"]);
        assert_eq!(new, ["a: fn f(x: u16)"]);
    }
}
