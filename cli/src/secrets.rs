//! Passwords of the PostgreSQL connection strings given on the command
//! line, kept out of everything the tool prints: its output (text and
//! JSON), its messages and errors. Each connection string given is shown
//! as [`strata_engine_postgres::redact`] shows it, and its password
//! anywhere else (a server's message quoting it) as `***`.

use std::sync::OnceLock;

use strata_engine_postgres::{postgres, redact};

/// The connection strings given, each with its redacted form, longest
/// first; then the passwords found in them.
struct Secrets {
    strings: Vec<(String, String)>,
    passwords: Vec<String>,
}

static SECRETS: OnceLock<Secrets> = OnceLock::new();

/// Whether `arg` names a PostgreSQL database (as `open::detect` decides).
pub fn is_conninfo(arg: &str) -> bool {
    let lower = arg.to_ascii_lowercase();
    lower.starts_with("postgres://")
        || lower.starts_with("postgresql://")
        || arg.contains("host=")
        || arg.contains("dbname=")
}

/// Learns the connection strings among `args` (the command line), once.
pub fn learn(args: impl IntoIterator<Item = String>) {
    let mut strings = Vec::new();
    let mut passwords = Vec::new();
    for arg in args {
        // `--dest=URL` and the like.
        let value = arg
            .strip_prefix("--")
            .and_then(|a| a.split_once('=').map(|(_, v)| v.to_owned()))
            .filter(|v| is_conninfo(v))
            .unwrap_or(arg);
        if !is_conninfo(&value) {
            continue;
        }
        if let Some(pw) = value
            .parse::<postgres::Config>()
            .ok()
            .and_then(|c| {
                c.get_password()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
            })
            .filter(|p| !p.is_empty())
        {
            passwords.push(percent_encoded(&pw));
            passwords.push(pw);
        }
        let shown = redact(&value);
        if shown != value {
            strings.push((value, shown));
        }
    }
    strings.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    passwords.sort_by_key(|p| std::cmp::Reverse(p.len()));
    passwords.dedup();
    let _ = SECRETS.set(Secrets { strings, passwords });
}

/// `text` with every connection string given shown redacted, and every
/// password of at least four characters replaced (a shorter one would
/// replace ordinary words, and guards nothing).
pub fn scrub(text: &str) -> String {
    let Some(secrets) = SECRETS.get() else {
        return text.to_owned();
    };
    let mut out = text.to_owned();
    for (given, shown) in &secrets.strings {
        out = out.replace(given.as_str(), shown);
    }
    for pw in &secrets.passwords {
        if pw.chars().count() >= 4 {
            out = out.replace(pw.as_str(), "***");
        }
    }
    out
}

/// How a password may appear inside a URL.
fn percent_encoded(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_strings_and_their_passwords_are_scrubbed() {
        learn(
            [
                "strata",
                "copy",
                "a.redb",
                "postgres://app:Top%20Secret!@db/app",
                "--dest=host=/run password=hunter22 dbname=x",
            ]
            .map(String::from),
        );
        // The password also alone, percent-encoded as a URL would carry it
        // (`!` is `%21` there).
        let text = "cannot open postgres://app:Top%20Secret!@db/app: server said \
                    'Top Secret!' and hunter22 in host=/run password=hunter22 dbname=x; \
                    retried with Top%20Secret%21";
        let shown = scrub(text);
        for secret in [
            "Top Secret!",
            "Top%20Secret!",
            "Top%20Secret%21",
            "hunter22",
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("postgres://app:***@db/app"), "{shown}");
        assert!(shown.contains("host=/run password=*** dbname=x"), "{shown}");
        assert_eq!(scrub("a.redb is fine"), "a.redb is fine");
    }

    #[test]
    fn connection_strings_are_told_from_paths() {
        for yes in [
            "postgres://u@h/db",
            "POSTGRESQL://u@h/db",
            "host=/run/postgresql",
            "dbname=app",
            "user=u dbname=app",
        ] {
            assert!(is_conninfo(yes), "{yes}");
        }
        for no in ["a.redb", "data/rocks", "postgres.redb", ""] {
            assert!(!is_conninfo(no), "{no}");
        }
        assert_eq!(percent_encoded("a-b._~Z9"), "a-b._~Z9");
        assert_eq!(percent_encoded("p w/é"), "p%20w%2F%C3%A9");
    }
}
