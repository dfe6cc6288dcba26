//! What the build needs that cargo cannot fetch, checked the way the build
//! itself will look for it, and installed where the process may.
//!
//! Each [`Prerequisite`] has a check that mirrors what the consuming build
//! step really loads (a look-alike file is not enough: `libclang-cpp.so.14`
//! is not libclang), an install action (apt as root, or `cargo install`),
//! and a message naming what to install by hand when neither works.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How a missing prerequisite is installed.
#[derive(Debug, Clone, Copy)]
pub enum Install {
    /// A Debian package, installed with `apt-get` when running as root.
    Apt(&'static str),
    /// A crate installed with `cargo install --locked`.
    Cargo(&'static str),
}

/// A tool or library a step of `cargo xtask` needs.
#[derive(Debug, Clone, Copy)]
pub struct Prerequisite {
    /// What it is, for messages.
    pub name: &'static str,
    /// Who needs it, for messages.
    pub needed_by: &'static str,
    /// Whether it is present, in the form the consumer loads it.
    pub present: fn() -> bool,
    /// How to install it.
    pub install: Install,
    /// What to tell a user who must install it by hand.
    pub by_hand: &'static str,
}

/// libclang, loaded at build time by bindgen (through clang-sys) to
/// generate RocksDB's bindings.
pub const LIBCLANG: Prerequisite = Prerequisite {
    name: "libclang",
    needed_by: "RocksDB's bindings (bindgen)",
    present: || find_libclang().is_some(),
    install: Install::Apt("libclang-dev"),
    by_hand: "install it (Debian/Ubuntu: `apt-get install -y libclang-dev`) or point LIBCLANG_PATH at the directory holding libclang.so",
};

/// cargo-nextest, the test runner of `cargo xtask test`.
pub const NEXTEST: Prerequisite = Prerequisite {
    name: "cargo-nextest",
    needed_by: "the test steps",
    present: nextest_present,
    install: Install::Cargo("cargo-nextest"),
    by_hand: "install it with `cargo install cargo-nextest --locked`",
};

/// PostgreSQL's server programs (initdb, pg_ctl, postgres), which the
/// PostgreSQL engine's tests and simulation run as throwaway servers. The
/// test harness looks in `STRATA_PG_BIN`, then in Debian's
/// `/usr/lib/postgresql/<version>/bin`; so does this check.
pub const POSTGRES: Prerequisite = Prerequisite {
    name: "postgresql",
    needed_by: "the PostgreSQL engine's tests and simulation",
    present: postgres_present,
    install: Install::Apt("postgresql-15"),
    by_hand: "install PostgreSQL's server (Debian/Ubuntu: `apt-get install -y postgresql-15`) or point STRATA_PG_BIN at the directory holding initdb and pg_ctl",
};

/// OpenSSL's headers, which `openssl-sys` (under native-tls, the PostgreSQL
/// engine's TLS, tested in the suite) compiles against.
pub const LIBSSL: Prerequisite = Prerequisite {
    name: "libssl-dev",
    needed_by: "the PostgreSQL engine's TLS (openssl-sys)",
    present: || {
        Path::new("/usr/include/openssl/ssl.h").is_file()
            || std::env::var_os("OPENSSL_DIR").is_some()
    },
    install: Install::Apt("libssl-dev"),
    by_hand: "install OpenSSL's headers (Debian/Ubuntu: `apt-get install -y libssl-dev`) or point OPENSSL_DIR at an OpenSSL installation",
};

/// pkg-config, which `openssl-sys` asks where OpenSSL is.
pub const PKG_CONFIG: Prerequisite = Prerequisite {
    name: "pkg-config",
    needed_by: "the PostgreSQL engine's TLS (openssl-sys)",
    present: || {
        Command::new("pkg-config")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            || std::env::var_os("OPENSSL_DIR").is_some()
    },
    install: Install::Apt("pkg-config"),
    by_hand: "install pkg-config (Debian/Ubuntu: `apt-get install -y pkg-config`) or point OPENSSL_DIR at an OpenSSL installation",
};

/// Every prerequisite, for `cargo xtask prereqs`.
pub const ALL: &[Prerequisite] = &[LIBCLANG, NEXTEST, POSTGRES, LIBSSL, PKG_CONFIG];

fn postgres_present() -> bool {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("STRATA_PG_BIN") {
        return has(Path::new(&dir));
    }
    std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| has(&e.path().join("bin")))
}

/// Makes sure `p` is present: installs it when missing and possible,
/// otherwise returns a message naming what to install.
pub fn ensure(p: &Prerequisite) -> Result<(), String> {
    if (p.present)() {
        return Ok(());
    }
    let missing = format!("{} is missing; {} need it", p.name, p.needed_by);
    match p.install {
        Install::Apt(package) => {
            if !(is_root() && apt_available()) {
                return Err(format!("{missing}: {}", p.by_hand));
            }
            println!("xtask: {missing}; installing the Debian package {package} with apt-get");
            for args in [
                &["update", "-qq"][..],
                &["install", "-y", "-qq", package][..],
            ] {
                let ok = Command::new("apt-get")
                    .args(args)
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    return Err(format!(
                        "{missing}, and `apt-get {}` failed: {}",
                        args.join(" "),
                        p.by_hand
                    ));
                }
            }
        }
        Install::Cargo(krate) => {
            println!("xtask: {missing}; installing {krate} from crates.io");
            let ok = Command::new(crate::cargo())
                .args(["install", krate, "--locked"])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(format!(
                    "{missing}, and `cargo install {krate}` failed: {}",
                    p.by_hand
                ));
            }
        }
    }
    if (p.present)() {
        Ok(())
    } else {
        Err(format!(
            "{} was installed but is still not found where {} look: {}",
            p.name, p.needed_by, p.by_hand
        ))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn apt_available() -> bool {
    Command::new("apt-get")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn nextest_present() -> bool {
    Command::new(crate::cargo())
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// --- libclang, searched as clang-sys 1.x searches when loading at run time --

/// File names clang-sys accepts for libclang on Linux when it loads the
/// library at run time (the `runtime` feature bindgen is built with here).
const LIBCLANG_FILES: &[&str] = &[
    "libclang.so",
    "libclang-*.so",
    "libclang.so.*",
    "libclang-*.so.*",
];

/// Directory patterns clang-sys searches on Linux when no variable names one.
const LIBCLANG_DIRS: &[&str] = &[
    "/usr/local/llvm*/lib*",
    "/usr/local/lib*/*/*",
    "/usr/local/lib*/*",
    "/usr/local/lib*",
    "/usr/lib*/*/*",
    "/usr/lib*/*",
    "/usr/lib*",
];

/// Whether `name` is a file name bindgen would load as libclang. The C++
/// library `libclang-cpp` matches the patterns but is not libclang.
pub fn is_libclang_name(name: &str) -> bool {
    !name.contains("-cpp.") && LIBCLANG_FILES.iter().any(|p| wildcard(p, name))
}

/// The libclang bindgen would load on this machine, if any.
pub fn find_libclang() -> Option<PathBuf> {
    let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    if let Some(path) = env("LIBCLANG_PATH") {
        // The variable is the only place searched when it is set.
        if path.is_file() {
            let name = path.file_name()?.to_string_lossy().into_owned();
            return (is_libclang_name(&name) && is_native_elf(&path)).then_some(path);
        }
        return libclang_in(&[path]);
    }
    let mut dirs = Vec::new();
    if let Ok(out) =
        Command::new(std::env::var("LLVM_CONFIG_PATH").unwrap_or_else(|_| "llvm-config".into()))
            .arg("--prefix")
            .stderr(Stdio::null())
            .output()
        && out.status.success()
        && let Some(prefix) = String::from_utf8_lossy(&out.stdout).lines().next()
    {
        let prefix = Path::new(prefix.trim());
        dirs.extend(["bin", "lib", "lib64"].map(|d| prefix.join(d)));
    }
    for var in ["LD_LIBRARY_PATH", "LIBRARY_PATH"] {
        if let Some(list) = std::env::var_os(var) {
            dirs.extend(std::env::split_paths(&list));
        }
    }
    dirs.extend(standard_dirs(Path::new("/")));
    libclang_in(&dirs)
}

/// The directories clang-sys's patterns name under `root` (the machine's
/// `/`, or a fixture in tests).
pub fn standard_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for pattern in LIBCLANG_DIRS {
        let parts: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
        expand(root.to_path_buf(), &parts, &mut out);
    }
    out
}

/// The first libclang in `dirs`: a file with an accepted name that is a
/// shared object of this machine's word size (a dangling link is not).
pub fn libclang_in(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().find_map(|dir| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| is_libclang_name(n))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|n| dir.join(n))
            .find(|p| is_native_elf(p))
    })
}

/// Whether `path` opens (following links) as an ELF file of this target's
/// pointer width, as clang-sys checks before it accepts a library.
fn is_native_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 5];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
    let class = if cfg!(target_pointer_width = "64") {
        2
    } else {
        1
    };
    read.is_ok() && header[..4] == *b"\x7fELF" && header[4] == class
}

/// Expands a path pattern whose components may hold `*`, one directory
/// level per component.
fn expand(base: PathBuf, parts: &[&str], out: &mut Vec<PathBuf>) {
    let Some((first, rest)) = parts.split_first() else {
        if base.is_dir() {
            out.push(base);
        }
        return;
    };
    if !first.contains('*') {
        expand(base.join(first), rest, out);
        return;
    }
    let Ok(entries) = std::fs::read_dir(&base) else {
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| wildcard(first, n))
        .collect();
    names.sort();
    for name in names {
        expand(base.join(name), rest, out);
    }
}

/// Shell-style match where `*` stands for any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| wildcard(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test, removed by the caller.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-prereq-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn elf(path: &Path, class: u8) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        let mut bytes = b"\x7fELF".to_vec();
        bytes.push(class);
        bytes.extend([1, 1, 0]);
        std::fs::write(path, bytes).expect("write");
    }

    #[test]
    fn names_bindgen_loads() {
        for yes in [
            "libclang.so",
            "libclang-14.so",
            "libclang.so.1",
            "libclang-14.so.1",
            "libclang.so.14.0.6",
        ] {
            assert!(is_libclang_name(yes), "{yes} is libclang");
        }
        for no in [
            "libclang-cpp.so.14",
            "libclang-cpp.so",
            "libclangBasic.a",
            "libclang_rt.asan-x86_64.so",
            "libclang.a",
            "clang.so",
            "libclang-14.a",
        ] {
            assert!(!is_libclang_name(no), "{no} is not libclang");
        }
    }

    #[test]
    fn wildcard_matches_runs() {
        assert!(wildcard("lib*", "lib"));
        assert!(wildcard("lib*", "lib64"));
        assert!(wildcard("*", ""));
        assert!(wildcard("a*b*c", "aXXbYc"));
        assert!(!wildcard("a*b*c", "aXXcYb"));
        assert!(!wildcard("llvm*", "xllvm"));
    }

    /// The machine of the bug report: only the C++ library is installed.
    #[test]
    fn only_libclang_cpp_is_missing() {
        let root = scratch("cpp-only");
        elf(&root.join("usr/lib/x86_64-linux-gnu/libclang-cpp.so.14"), 2);
        elf(&root.join("usr/lib/llvm-14/lib/libclang-cpp.so.14"), 2);
        assert_eq!(libclang_in(&standard_dirs(&root)), None);
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    /// `libclang-dev` on Debian 12: the versioned library under llvm-14.
    #[test]
    fn versioned_library_is_present() {
        let root = scratch("versioned");
        elf(&root.join("usr/lib/x86_64-linux-gnu/libclang-cpp.so.14"), 2);
        let lib = root.join("usr/lib/llvm-14/lib/libclang-14.so.1");
        elf(&lib, 2);
        assert_eq!(libclang_in(&standard_dirs(&root)), Some(lib));
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn plain_library_is_present() {
        let root = scratch("plain");
        let lib = root.join("usr/local/lib/libclang.so");
        elf(&lib, 2);
        assert_eq!(libclang_in(&standard_dirs(&root)), Some(lib));
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    /// A right name is not enough: not ELF, the wrong word size, or a link
    /// to nothing are all missing, as clang-sys would reject them.
    #[test]
    fn look_alikes_are_missing() {
        let root = scratch("lookalike");
        let dir = root.join("usr/lib");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("libclang.so"), b"INPUT(libclang-14.so.1)\n").expect("write");
        let other_width = if cfg!(target_pointer_width = "64") {
            1
        } else {
            2
        };
        elf(&dir.join("libclang-14.so"), other_width);
        std::os::unix::fs::symlink(dir.join("gone.so.1"), dir.join("libclang.so.1")).expect("link");
        assert_eq!(libclang_in(&standard_dirs(&root)), None);
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn standard_dirs_follow_the_patterns() {
        let root = scratch("dirs");
        for d in [
            "usr/lib/llvm-14/lib",
            "usr/lib64",
            "usr/local/llvm15/lib64",
            "usr/share/x",
        ] {
            std::fs::create_dir_all(root.join(d)).expect("dir");
        }
        let dirs = standard_dirs(&root);
        for d in [
            "usr/lib/llvm-14/lib",
            "usr/lib64",
            "usr/local/llvm15/lib64",
            "usr/lib",
        ] {
            assert!(dirs.contains(&root.join(d)), "{d} searched");
        }
        assert!(!dirs.iter().any(|d| d.starts_with(root.join("usr/share"))));
        std::fs::remove_dir_all(root).expect("cleanup");
    }
}
