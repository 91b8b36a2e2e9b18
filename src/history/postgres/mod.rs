//! The PostgreSQL history: one database a team's runners share. The URL
//! comes from the environment (`SERVEGATE_HISTORY`, a CI secret), never a
//! suite file; its password, or `PGPASSWORD`'s, is registered as a secret
//! and never printed. The store itself (`store.rs`) is built with the
//! `postgres` feature (on by default); without it, a PostgreSQL history
//! is an error that says so, and its URL is still never shown whole.

#[cfg(feature = "postgres")]
mod store;

use super::{HistoryError, Store};

/// Opens the PostgreSQL history at `url`.
#[cfg(feature = "postgres")]
pub(super) fn open(url: &PostgresUrl) -> Result<Box<dyn Store>, HistoryError> {
    Ok(Box::new(store::Postgres::open(url)?))
}

/// A PostgreSQL history, in a servegate built without one.
#[cfg(not(feature = "postgres"))]
pub(super) fn open(url: &PostgresUrl) -> Result<Box<dyn Store>, HistoryError> {
    Err(HistoryError::NotBuilt {
        at: url.to_string(),
    })
}

/// A PostgreSQL history's URL (`postgres://user@host/db?…`): the one
/// value that holds its password, parsed once. Whatever shows it
/// ([`std::fmt::Display`], [`std::fmt::Debug`], every message built from
/// it) shows no password in any form libpq's URI takes — `user:pw@`,
/// `?password=pw` (its key percent-encoded too) — and the passwords it
/// holds, `PGPASSWORD`'s with them, are registered with the scrubber as
/// it is made, so a driver's or server's message that repeats one is
/// scrubbed too.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

impl PostgresUrl {
    /// The URL, its passwords registered as secrets.
    pub fn new(url: &str) -> PostgresUrl {
        for raw in url_passwords(url) {
            crate::secrets::add(raw);
            crate::secrets::add(&percent_encoding::percent_decode_str(raw).decode_utf8_lossy());
        }
        if let Ok(password) = std::env::var("PGPASSWORD") {
            crate::secrets::add(&password);
        }
        PostgresUrl(url.to_owned())
    }

    /// The URL with its password, for the driver only.
    #[cfg(feature = "postgres")]
    fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&without_password(&self.0))
    }
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PostgresUrl({self})")
    }
}

/// A URL split as servegate reads it to hide its passwords: the scheme,
/// the credentials (up to the last `@` before the query), the rest of
/// what comes before the query, and the query. Hiding is safer than the
/// driver's parse: it ends the credentials at the first `@` anywhere (a
/// password with an `@` would leave its tail shown), so both readings are
/// hidden where it differs: the driver's password then is this one's head.
fn url_parts(url: &str) -> Option<(&str, Option<&str>, &str, Option<&str>)> {
    let (scheme, rest) = url.split_once("://")?;
    let (base, query) = match rest.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (rest, None),
    };
    let (creds, host) = match base.rsplit_once('@') {
        Some((creds, host)) => (Some(creds), host),
        None => (None, base),
    };
    Some((scheme, creds, host, query))
}

/// The parts of a URL that are passwords, as written in it: after the
/// user's `:` in the credentials, and the value of each `password`
/// parameter.
fn url_passwords(url: &str) -> Vec<&str> {
    let Some((_, creds, _, query)) = url_parts(url) else {
        return Vec::new();
    };
    let mut found: Vec<&str> = creds
        .and_then(|c| c.split_once(':'))
        .map(|(_, password)| password)
        .into_iter()
        .collect();
    found.extend(
        query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter_map(|pair| pair.split_once('='))
            .filter(|(key, _)| is_password_key(key))
            .map(|(_, value)| value),
    );
    found
}

/// Whether a URL parameter's key, percent-decoded as the driver decodes
/// it, is `password`.
fn is_password_key(key: &str) -> bool {
    percent_encoding::percent_decode_str(key).decode_utf8_lossy() == "password"
}

/// `url` as messages show it: the password after the user's `:` and every
/// `password` parameter's value replaced by `***`, and any registered
/// secret scrubbed from what is left.
fn without_password(url: &str) -> String {
    let Some((scheme, creds, host, query)) = url_parts(url) else {
        return crate::secrets::scrub(url).into_owned();
    };
    let creds = creds.map_or_else(String::new, |c| {
        format!("{}:***@", c.split_once(':').map_or(c, |(user, _)| user))
    });
    let query = query.map_or_else(String::new, |q| {
        let params: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if is_password_key(key) => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        format!("?{}", params.join("&"))
    });
    crate::secrets::scrub(&format!("{scheme}://{creds}{host}{query}")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::PostgresUrl;

    #[test]
    fn a_url_is_shown_without_its_password_in_any_form() {
        let shown = |url: &str| PostgresUrl::new(url).to_string();
        assert_eq!(
            shown("postgres://sg:hunter2@db.example:5432/h?sslmode=require"),
            "postgres://sg:***@db.example:5432/h?sslmode=require"
        );
        assert_eq!(shown("postgresql://sg@db/h"), "postgresql://sg:***@db/h");
        assert_eq!(shown("postgres://db/h"), "postgres://db/h");
        // libpq's URI takes the password as a parameter too, its key
        // percent-encoded or not; the driver ends the credentials at the
        // first `@`.
        assert_eq!(
            shown("postgres://sg@db/h?sslmode=disable&password=pw-query-canary"),
            "postgres://sg:***@db/h?sslmode=disable&password=***"
        );
        assert_eq!(
            shown("postgres://db/h?pass%77ord=pw-encoded-key&application_name=x"),
            "postgres://db/h?pass%77ord=***&application_name=x"
        );
        // An `@` in the password, or in the query, leaves nothing shown.
        assert_eq!(
            shown("postgres://sg:p@ss-word-at@db/h"),
            "postgres://sg:***@db/h"
        );
        assert_eq!(
            shown("postgres://db:1/h?application_name=a@b&password=abc12"),
            "postgres://db:1/h?application_name=a@b&password=***"
        );
        let url = PostgresUrl::new("postgres://sg@db/h?password=pw-debug-canary");
        assert!(!format!("{url:?}").contains("pw-debug-canary"), "{url:?}");
        // Registered: a message that repeats one is scrubbed.
        assert_eq!(
            crate::secrets::scrub("auth pw-query-canary failed"),
            "auth <redacted> failed"
        );
    }

    /// Without the store, naming it is an error that names the feature
    /// (and never the password).
    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_build_without_the_store_says_so() {
        let Err(e) = super::open(&PostgresUrl::new("postgres://sg:pw-nb-canary@db/h")) else {
            panic!("opened a PostgreSQL history without its store");
        };
        let shown = e.to_string();
        assert!(shown.contains("`postgres` feature"), "{shown}");
        assert!(!shown.contains("pw-nb-canary"), "{shown}");
    }
}
