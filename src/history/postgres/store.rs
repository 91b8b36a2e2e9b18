//! The PostgreSQL store (the `postgres` feature): TLS where the URL asks
//! (`sslmode=require`; the default `prefer` uses it where the server
//! offers it), the server's certificate always verified: against the
//! system's roots, or the certificates of `sslrootcert=FILE`. Migrations
//! run under a transaction-scoped advisory lock, so runners that start at
//! once on a new database create it once; each run is one transaction.

use std::str::FromStr as _;

use postgres::{Client, NoTls, Transaction, config::SslMode};

use super::PostgresUrl;
use crate::history::schema::{self, MIGRATIONS, VERSION};
use crate::history::{HistoryError, Point, PointRow, RunRow, SeriesKey};

/// The advisory lock key migrations hold ("sg" and the schema's table).
const MIGRATION_LOCK: i64 = 0x7367_5f73_6368_656d;

/// An open PostgreSQL history.
pub struct Postgres {
    client: Client,
    at: String,
}

/// The URL without `sslrootcert=FILE` (which the driver does not read),
/// and that file.
fn root_file(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let (mut kept, mut file) = (Vec::new(), None);
    for pair in query.split('&') {
        match pair.strip_prefix("sslrootcert=") {
            Some(f) => file = Some(f.to_owned()),
            None => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, file)
}

/// The TLS client: the roots of `file`, else the system's.
fn tls(file: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match file {
        None => {
            use rustls_platform_verifier::ConfigVerifierExt as _;
            rustls::ClientConfig::with_platform_verifier().map_err(|e| e.to_string())
        }
        Some(file) => {
            use rustls::pki_types::{CertificateDer, pem::PemObject as _};
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(file)
                .map_err(|e| format!("sslrootcert {file}: {e}"))?
            {
                roots
                    .add(cert.map_err(|e| format!("sslrootcert {file}: {e}"))?)
                    .map_err(|e| format!("sslrootcert {file}: {e}"))?;
            }
            Ok(rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth())
        }
    }
}

impl Postgres {
    /// Connects and brings the database to [`VERSION`].
    pub fn open(url: &PostgresUrl) -> Result<Postgres, HistoryError> {
        let at = url.to_string();
        let fail = |e: String| HistoryError::Store {
            at: at.clone(),
            source: e.into(),
        };
        let (plain, roots) = root_file(url.secret());
        let mut config = postgres::Config::from_str(&plain).map_err(|e| fail(explained(&e)))?;
        if config.get_password().is_none()
            && let Ok(password) = std::env::var("PGPASSWORD")
        {
            config.password(password);
        }
        if let Some(password) = config.get_password() {
            crate::secrets::add(&String::from_utf8_lossy(password));
        }
        config.connect_timeout(std::time::Duration::from_secs(10));
        let client = if config.get_ssl_mode() == SslMode::Disable {
            config.connect(NoTls)
        } else {
            let tls = tls(roots.as_deref()).map_err(fail)?;
            config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        }
        .map_err(|e| fail(explained(&e)))?;
        let mut store = Postgres { client, at };
        store.migrate()?;
        Ok(store)
    }

    fn error(&self, e: &postgres::Error) -> HistoryError {
        HistoryError::Store {
            at: self.at.clone(),
            source: explained(e).into(),
        }
    }

    fn migrate(&mut self) -> Result<(), HistoryError> {
        let at = self.at.clone();
        let fail = |e: postgres::Error| HistoryError::Store {
            at: at.clone(),
            source: explained(&e).into(),
        };
        let mut tx = self.client.transaction().map_err(fail)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(fail)?;
        tx.batch_execute(schema::SCHEMA_TABLE).map_err(fail)?;
        let found: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM servegate_schema",
                &[],
            )
            .map_err(fail)?
            .get(0);
        if found > VERSION {
            return Err(HistoryError::Newer {
                at: at.clone(),
                found,
            });
        }
        for (version, statements) in (1i64..)
            .zip(MIGRATIONS.iter())
            .skip(usize::try_from(found).unwrap_or(0))
        {
            for statement in *statements {
                tx.batch_execute(statement).map_err(fail)?;
            }
            tx.execute(
                "INSERT INTO servegate_schema (version, applied_unix, servegate) VALUES ($1, $2, $3)",
                &[&version, &now(), &env!("CARGO_PKG_VERSION")],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }
}

fn insert_points(
    tx: &mut Transaction<'_>,
    run: &RunRow,
    points: &[PointRow],
) -> Result<(), postgres::Error> {
    let insert = tx.prepare(schema::INSERT_POINT)?;
    for p in points {
        tx.execute(
            &insert,
            &[
                &run.run_uid,
                &p.suite,
                &p.variant,
                &p.gate,
                &p.key.metric,
                &p.key.stat.as_deref().unwrap_or(""),
                &p.key.to_string(),
                &p.value,
                &p.unit,
                &i64::from(p.repeats),
                &p.fingerprint,
                &p.model,
                &p.server_version,
                &p.suite_commit,
                &i32::from(p.gate_passed),
                &i32::from(p.client_limited),
                &p.load,
                &p.served_model,
                &i32::from(p.model_pinned),
            ],
        )?;
    }
    Ok(())
}

impl crate::history::Store for Postgres {
    fn insert(&mut self, runs: &[(&RunRow, &[PointRow])]) -> Result<Vec<bool>, HistoryError> {
        let written = (|| {
            let mut tx = self.client.transaction()?;
            let mut written = Vec::with_capacity(runs.len());
            for &(run, points) in runs {
                let inserted = tx.execute(
                    schema::INSERT_RUN,
                    &[
                        &run.run_uid,
                        &run.run_id,
                        &run.node,
                        &run.started_unix,
                        &run.finished_unix,
                        &run.servegate,
                        &run.gpus,
                        &run.hardware,
                        &run.source,
                        &now(),
                    ],
                )?;
                if inserted > 0 {
                    insert_points(&mut tx, run, points)?;
                    for (fingerprint, json) in &run.configs {
                        tx.execute(schema::INSERT_CONFIG, &[fingerprint, json])?;
                    }
                }
                written.push(inserted > 0);
            }
            tx.commit()?;
            Ok(written)
        })();
        written.map_err(|e| self.error(&e))
    }

    fn groups(&mut self) -> Result<Vec<(SeriesKey, u64)>, HistoryError> {
        let rows = self
            .client
            .query(schema::SERIES, &[])
            .map_err(|e| self.error(&e))?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    SeriesKey {
                        suite: r.get(0),
                        gate: r.get(1),
                        key: r.get(2),
                        model: r.get(3),
                        hardware: r.get(4),
                    },
                    u64::try_from(r.get::<_, i64>(5)).unwrap_or(0),
                )
            })
            .collect())
    }

    fn select(&mut self, s: &SeriesKey, newest: bool) -> Result<Vec<Point>, HistoryError> {
        let rows = self
            .client
            .query(
                &schema::points(newest),
                &[&s.suite, &s.gate, &s.key, &s.model, &s.hardware],
            )
            .map_err(|e| self.error(&e))?;
        Ok(rows.iter().map(point).collect())
    }

    fn newest_of_node(
        &mut self,
        s: &SeriesKey,
        pinned: bool,
        node: &str,
    ) -> Result<Option<Point>, HistoryError> {
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            vec![&s.suite, &s.gate, &s.key, &s.hardware, &node];
        if pinned {
            params.push(&s.model);
        }
        let rows = self
            .client
            .query(&schema::newest_of_node(pinned), &params)
            .map_err(|e| self.error(&e))?;
        Ok(rows.first().map(point))
    }

    fn config(&mut self, fingerprint: &str) -> Result<Option<String>, HistoryError> {
        let rows = self
            .client
            .query(schema::SELECT_CONFIG, &[&fingerprint])
            .map_err(|e| self.error(&e))?;
        Ok(rows.first().map(|r| r.get(0)))
    }
}

/// A point as the schema's queries read it.
fn point(r: &postgres::Row) -> Point {
    Point {
        run_uid: r.get(0),
        node: r.get(1),
        finished_unix: r.get(2),
        value: r.get(3),
        unit: r.get(4),
        suite_commit: r.get(5),
        fingerprint: r.get(6),
        server_version: r.get(7),
        servegate: r.get(8),
        gate_passed: r.get::<_, i32>(9) != 0,
        client_limited: r.get::<_, i32>(10) != 0,
        served_model: r.get(11),
    }
}

/// An error with its causes: the driver's own says `invalid
/// configuration` or `db error`, its source what (`password missing`, the
/// server's message).
fn explained(e: &postgres::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

fn now() -> i64 {
    i64::try_from(crate::record::now_unix()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::root_file;

    #[test]
    fn sslrootcert_is_taken_out_of_the_url() {
        assert_eq!(
            root_file("postgres://db/h?sslmode=require&sslrootcert=/ca.pem"),
            (
                "postgres://db/h?sslmode=require".to_owned(),
                Some("/ca.pem".to_owned())
            )
        );
        assert_eq!(
            root_file("postgres://db/h"),
            ("postgres://db/h".to_owned(), None)
        );
    }
}
