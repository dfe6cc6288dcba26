//! `cargo xtask release-check`: what a release needs beyond `cargo xtask
//! test`, too slow for every CI run. Each published crate alone: its tests
//! with its default features; its library without features and with each
//! feature on its own, and its tests with each feature (what `cargo hack
//! --each-feature` does); then every published crate packaged and built
//! from its package, in dependency order.
//!
//! Building each crate alone compiles its dependencies again in the
//! configurations it asks for (RocksDB once more for the crates that use
//! it, in the package check too): plan on an hour on two cores.

use std::path::Path;
use std::process::Command;

/// The published crates, by folder, in dependency order: the folders of
/// the layering rules ([`crate::tidy::LAYERS`], which list every crate
/// after the crates it may depend on) whose manifest does not say
/// `publish = false` (`examples`, `sim`, `test-support` and `xtask`).
pub fn published() -> Vec<&'static str> {
    published_in(Path::new("."))
}

/// [`published`] for the workspace at `root`.
pub fn published_in(root: &Path) -> Vec<&'static str> {
    crate::tidy::LAYERS
        .iter()
        .map(|(folder, _)| *folder)
        .filter(|folder| {
            std::fs::read_to_string(root.join(folder).join("Cargo.toml"))
                .is_ok_and(|m| !m.contains("publish = false"))
        })
        .collect()
}

/// The features a `Cargo.toml` declares (its `[features]` table), without
/// `default`.
pub fn features(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[features]";
            continue;
        }
        if !inside || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            if name != "default" && !name.is_empty() {
                out.push(name.to_owned());
            }
        }
    }
    out
}

/// The package name a `Cargo.toml` declares (the first `name`, which is
/// the package's in a manifest that starts with `[package]`).
pub fn package_name(manifest: &str) -> Option<String> {
    manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("name = "))
        .map(|n| n.trim().trim_matches('"').to_owned())
}

/// The published crates that may build RocksDB: the engine on it, and
/// the tool that opens every engine.
pub const MAY_BUILD_ROCKSDB: &[&str] = &["strata-engine-rocks", "strata-cli"];

/// The quick feature check of `cargo xtask test` (no build): every
/// published crate resolves with no features and with each feature on its
/// own (`cargo tree`), and none but [`MAY_BUILD_ROCKSDB`] pulls RocksDB in
/// whatever its features.
///
/// # Errors
/// A feature that does not resolve, or RocksDB where it must not be.
pub fn features_check() -> Result<(), String> {
    let mut checked = 0;
    for folder in published() {
        let manifest = std::fs::read_to_string(Path::new(folder).join("Cargo.toml"))
            .map_err(|e| format!("{folder}/Cargo.toml: {e}"))?;
        let name = package_name(&manifest)
            .ok_or_else(|| format!("{folder}/Cargo.toml names no package"))?;
        let mut sets: Vec<Vec<String>> = vec![Vec::new()];
        sets.extend(features(&manifest).into_iter().map(|f| vec![f]));
        for set in sets {
            let mut args = vec![
                "tree",
                "--locked",
                "-p",
                &name,
                "-e",
                "normal",
                "--prefix",
                "none",
                "--no-default-features",
            ];
            let joined = set.join(",");
            if !set.is_empty() {
                args.extend(["--features", joined.as_str()]);
            }
            let out = Command::new(crate::cargo())
                .args(&args)
                .output()
                .map_err(|e| format!("could not start cargo: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{name} with features [{joined}] does not resolve: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let tree = String::from_utf8_lossy(&out.stdout);
            if tree.contains("librocksdb-sys") && !MAY_BUILD_ROCKSDB.contains(&name.as_str()) {
                return Err(format!(
                    "{name} with features [{joined}] pulls in RocksDB (librocksdb-sys)"
                ));
            }
            checked += 1;
        }
    }
    println!("features: {checked} crate and feature sets resolve; RocksDB only where asked for");
    Ok(())
}

fn cargo(args: &[&str]) -> Result<(), String> {
    println!("$ cargo {}", args.join(" "));
    let status = Command::new(crate::cargo())
        .args(args)
        .status()
        .map_err(|e| format!("could not start cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

/// Runs the release checks; the first failure stops them.
pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!(
            "`cargo xtask release-check` takes no arguments, got `{extra}`"
        ));
    }
    crate::prereq::ensure(&crate::prereq::LIBCLANG)?;
    crate::prereq::ensure(&crate::prereq::LIBSSL)?;
    crate::prereq::ensure(&crate::prereq::PKG_CONFIG)?;
    crate::prereq::ensure(&crate::prereq::POSTGRES)?;
    for folder in published() {
        let manifest = std::fs::read_to_string(Path::new(folder).join("Cargo.toml"))
            .map_err(|e| format!("{folder}/Cargo.toml: {e}"))?;
        let name = package_name(&manifest)
            .ok_or_else(|| format!("{folder}/Cargo.toml names no package"))?;
        cargo(&["test", "--locked", "-p", &name])?;
        let target = if Path::new(folder).join("src/lib.rs").exists() {
            "--lib"
        } else {
            "--bins"
        };
        // The library (the tool's binary) alone, without its dev-dependencies (a crate's tests
        // may enable more of it, as the schemas' do): no features, then
        // each feature on its own.
        let alone = [
            "check",
            "--locked",
            "-p",
            &name,
            target,
            "--no-default-features",
        ];
        cargo(&alone)?;
        for feature in features(&manifest) {
            cargo(&[&alone[..], &["--features", &feature]].concat())?;
            cargo(&[
                "test",
                "--locked",
                "-p",
                &name,
                "--no-default-features",
                "--features",
                &feature,
            ])?;
        }
    }
    // Packaged and built from the packages, the workspace's crates
    // resolved from the packages made in the same run.
    cargo(&[
        "package",
        "--locked",
        "--workspace",
        "--exclude",
        "strata-sim",
        "--exclude",
        "xtask",
    ])?;
    println!(
        "release-check: every published crate passed alone and with each feature, and packaged"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_features_table_only() {
        let manifest = "[package]\nname = \"strata-x\"\n\n[features]\ndefault = []\n# a comment\ntls = [\"dep:a\"]\nplanted-bugs = []\n\n[dependencies]\nfoo = \"1\"\n";
        assert_eq!(features(manifest), ["tls", "planted-bugs"]);
        assert_eq!(package_name(manifest).as_deref(), Some("strata-x"));
        assert!(features("[package]\nname = \"y\"\n").is_empty());
    }

    #[test]
    fn the_published_crates_are_the_layered_ones_but_examples_sim_test_support_and_xtask() {
        let published = published_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        assert_eq!(published.len(), crate::tidy::LAYERS.len() - 4);
        assert!(
            !published.contains(&"test-support")
                && !published.contains(&"sim")
                && !published.contains(&"xtask")
                && !published.contains(&"examples")
        );
        // The engine contract depends on no workspace crate; the keys build
        // on it.
        assert_eq!(published.first(), Some(&"engine"));
        let at = |c: &str| published.iter().position(|p| *p == c);
        assert!(at("engine") < at("keys") && at("keys") < at("codec"));
        assert!(published.contains(&"cli") && published.contains(&"engine-rocks"));
    }
}
