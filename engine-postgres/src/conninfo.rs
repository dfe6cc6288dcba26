//! Connection strings as they may be shown: the password taken out.

/// What a password is replaced with.
const HIDDEN: &str = "***";

/// `conninfo` with every password replaced by `***`, for messages and
/// output: the password of a URL's user (`postgres://app:secret@host/db`),
/// a URL's `password` parameter (`?password=secret`), and a key=value
/// string's `password` (plain or quoted). Anything else is kept as it was.
///
/// ```
/// use strata_engine_postgres::redact;
/// assert_eq!(redact("postgres://app:s3cret@db:5432/app"), "postgres://app:***@db:5432/app");
/// assert_eq!(redact("host=/run dbname=app password='a b'"), "host=/run dbname=app password=***");
/// assert_eq!(redact("postgresql://db/app?user=app&password=x&sslmode=disable"),
///            "postgresql://db/app?user=app&password=***&sslmode=disable");
/// ```
pub fn redact(conninfo: &str) -> String {
    let lower = conninfo.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        redact_url(conninfo)
    } else {
        redact_key_values(conninfo)
    }
}

fn redact_url(url: &str) -> String {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    // The authority (users, passwords, hosts) ends at the path, the query
    // or the fragment; a password may hold '@', so the last one ends it.
    let rest = &url[after_scheme..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..after_scheme]);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..=colon]);
                    out.push_str(HIDDEN);
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_len..];
    match tail.find('?') {
        Some(q) => {
            out.push_str(&tail[..=q]);
            let query = &tail[q + 1..];
            let (params, fragment) = match query.find('#') {
                Some(h) => (&query[..h], &query[h..]),
                None => (query, ""),
            };
            let redacted: Vec<String> = params
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}={HIDDEN}"),
                    _ => p.to_owned(),
                })
                .collect();
            out.push_str(&redacted.join("&"));
            out.push_str(fragment);
        }
        None => out.push_str(tail),
    }
    out
}

/// A key=value string, as libpq reads it: `key = value` pairs separated by
/// white space, a value plain (up to white space, `\` escaping) or quoted
/// in single quotes (`\` escaping).
fn redact_key_values(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            out.push(c);
            chars.next();
            continue;
        }
        // A keyword, up to '=' or white space.
        let mut end = start;
        while let Some(&(i, c)) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            end = i + c.len_utf8();
            chars.next();
        }
        let keyword = &s[start..end];
        out.push_str(keyword);
        // White space, '=', white space.
        let mut saw_equals = false;
        while let Some(&(_, c)) = chars.peek() {
            if c == '=' && !saw_equals {
                saw_equals = true;
            } else if !c.is_whitespace() {
                break;
            }
            out.push(c);
            chars.next();
        }
        if !saw_equals {
            continue;
        }
        // The value.
        let value_start = chars.peek().map_or(s.len(), |&(i, _)| i);
        let mut value_end = value_start;
        if chars.peek().is_some_and(|&(_, c)| c == '\'') {
            chars.next();
            value_end += 1;
            while let Some((i, c)) = chars.next() {
                value_end = i + c.len_utf8();
                if c == '\\' {
                    if let Some((j, e)) = chars.next() {
                        value_end = j + e.len_utf8();
                    }
                } else if c == '\'' {
                    break;
                }
            }
        } else {
            while let Some(&(i, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                value_end = i + c.len_utf8();
                if c == '\\'
                    && let Some((j, e)) = chars.next()
                {
                    value_end = j + e.len_utf8();
                }
            }
        }
        if keyword.eq_ignore_ascii_case("password") {
            out.push_str(HIDDEN);
        } else {
            out.push_str(&s[value_start..value_end]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn url_passwords_are_hidden_and_the_rest_kept() {
        let cases = [
            ("postgres://app:pw@h/db", "postgres://app:***@h/db"),
            (
                "postgresql://app:p@w:rd@h:5432/db?x=1",
                "postgresql://app:***@h:5432/db?x=1",
            ),
            ("POSTGRES://app:pw@h", "POSTGRES://app:***@h"),
            ("postgres://app@h/db", "postgres://app@h/db"),
            ("postgres://h/db", "postgres://h/db"),
            ("postgres://app:@h/db", "postgres://app:***@h/db"),
            (
                "postgres://%2Frun/db?password=pw&user=u#frag",
                "postgres://%2Frun/db?password=***&user=u#frag",
            ),
            (
                "postgres://h/db?PASSWORD=pw",
                "postgres://h/db?PASSWORD=***",
            ),
            (
                "postgres://app:pw@h1:5432,h2:5433/db",
                "postgres://app:***@h1:5432,h2:5433/db",
            ),
        ];
        for (given, shown) in cases {
            assert_eq!(redact(given), shown, "{given}");
        }
    }

    #[test]
    fn key_value_passwords_are_hidden_and_the_rest_kept() {
        let cases = [
            (
                "host=/tmp password=pw dbname=db",
                "host=/tmp password=*** dbname=db",
            ),
            ("password = pw", "password = ***"),
            ("password='p w' user=u", "password=*** user=u"),
            (r"password='it\'s' user=u", "password=*** user=u"),
            (r"password=a\ b user=u", "password=*** user=u"),
            ("user=password dbname=x", "user=password dbname=x"),
            ("host=h  user=u", "host=h  user=u"),
            ("PassWord=pw", "PassWord=***"),
            ("dbname=db password=", "dbname=db password=***"),
            // Quoted values of other keywords are kept whole, an
            // unterminated quote included.
            (
                "application_name='my app' password=pw",
                "application_name='my app' password=***",
            ),
            ("dbname=db user='", "dbname=db user='"),
            (
                r"options='-c x=\'y\'' host=h",
                r"options='-c x=\'y\'' host=h",
            ),
            // A value ending in an escaped character, quoted or not.
            (r"host=h user=a\b", r"host=h user=a\b"),
            (r"host=h user='a\b", r"host=h user='a\b"),
        ];
        for (given, shown) in cases {
            assert_eq!(redact(given), shown, "{given}");
        }
    }
}
