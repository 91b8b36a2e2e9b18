//! The history's tables, as numbered migrations: a store at version `n`
//! has had `MIGRATIONS[..n]` applied, each in the transaction that records
//! it in `servegate_schema`, so a store is always at one version whole.
//! A migration is never edited once released; a change of schema is a
//! new one appended. The SQL is the subset SQLite and PostgreSQL share
//! (`BIGINT`, `DOUBLE PRECISION`, `TEXT`, `INTEGER` flags of 0 or 1), so a
//! dashboard's queries read either store alike.

/// The schema this servegate writes.
pub const VERSION: i64 = 3;

/// The table of applied migrations (its own, first of all).
pub(crate) const SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS servegate_schema (
    version BIGINT PRIMARY KEY,
    applied_unix BIGINT NOT NULL,
    servegate TEXT NOT NULL
)";

/// Migration `i + 1` is `MIGRATIONS[i]`: statements run in order.
pub(crate) const MIGRATIONS: &[&[&str]] = &[
    &[
        // One row per run: unique across runners by its node and id.
        "CREATE TABLE servegate_runs (
        run_uid TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        node TEXT NOT NULL,
        started_unix BIGINT NOT NULL,
        finished_unix BIGINT NOT NULL,
        servegate TEXT NOT NULL,
        gpus TEXT NOT NULL,
        hardware TEXT NOT NULL,
        source TEXT NOT NULL,
        recorded_unix BIGINT NOT NULL
    )",
        // One row per figure of a gate of a suite of a run.
        "CREATE TABLE servegate_points (
        run_uid TEXT NOT NULL REFERENCES servegate_runs (run_uid),
        suite TEXT NOT NULL,
        variant TEXT,
        gate TEXT NOT NULL,
        metric TEXT NOT NULL,
        stat TEXT NOT NULL,
        figure TEXT NOT NULL,
        value DOUBLE PRECISION NOT NULL,
        unit TEXT NOT NULL,
        repeats BIGINT NOT NULL,
        fingerprint TEXT NOT NULL,
        model TEXT NOT NULL,
        server_version TEXT,
        suite_commit TEXT,
        gate_passed INTEGER NOT NULL,
        client_limited INTEGER NOT NULL,
        load TEXT NOT NULL,
        PRIMARY KEY (run_uid, suite, gate, figure)
    )",
        "CREATE INDEX servegate_points_series ON servegate_points (suite, gate, figure, model)",
        // What a dashboard plots: every point with its run's time, machine
        // and hardware.
        "CREATE VIEW servegate_series AS
        SELECT p.suite, p.variant, p.gate, p.figure, p.metric, p.stat, p.model, r.hardware,
               p.value, p.unit, p.repeats, p.fingerprint, p.server_version, p.suite_commit,
               p.gate_passed, p.client_limited, p.load,
               r.run_uid, r.run_id, r.node, r.started_unix, r.finished_unix, r.servegate
        FROM servegate_points p JOIN servegate_runs r ON r.run_uid = p.run_uid",
    ],
    // 2: a series is keyed by the model the suite pins, where it pins one
    // (`model`), and the id the server said it served is kept beside it
    // (`served_model`: empty where it said none; NULL in a row of version
    // 1, whose `model` was it). The view `servegate_series` is left as it
    // is — a dashboard's own view may depend on it, and PostgreSQL
    // refuses to drop one that does — and servegate reads the tables.
    &[
        "ALTER TABLE servegate_points ADD COLUMN served_model TEXT",
        "ALTER TABLE servegate_points ADD COLUMN model_pinned INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX servegate_points_gate ON servegate_points (suite, gate, figure)",
    ],
    // 3: the whole configuration a fingerprint digests (JSON: field →
    // value), once a fingerprint, so a change of configuration is said by
    // name.
    &["CREATE TABLE servegate_configs (
        fingerprint TEXT PRIMARY KEY,
        config TEXT NOT NULL
    )"],
];

/// Keeps a fingerprint's configuration unless it is there (`$1`, `$2`).
pub(crate) const INSERT_CONFIG: &str = "INSERT INTO servegate_configs (fingerprint, config)
    VALUES ($1, $2) ON CONFLICT (fingerprint) DO NOTHING";

/// A fingerprint's configuration (`$1`).
pub(crate) const SELECT_CONFIG: &str =
    "SELECT config FROM servegate_configs WHERE fingerprint = $1";

/// Inserts a run's row unless its `run_uid` is there (`$1` … `$10`).
pub(crate) const INSERT_RUN: &str = "INSERT INTO servegate_runs
    (run_uid, run_id, node, started_unix, finished_unix, servegate, gpus, hardware, source, recorded_unix)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    ON CONFLICT (run_uid) DO NOTHING";

/// Inserts a figure's row (`$1` … `$19`).
pub(crate) const INSERT_POINT: &str = "INSERT INTO servegate_points
    (run_uid, suite, variant, gate, metric, stat, figure, value, unit, repeats, fingerprint,
     model, server_version, suite_commit, gate_passed, client_limited, load, served_model,
     model_pinned)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
     $19)";

/// A point's columns as [`points`] and [`newest_of_node`] read it, from
/// the tables (not the view, which version 1 made).
const POINT_COLUMNS: &str = "r.run_uid, r.node, r.finished_unix, p.value, p.unit, p.suite_commit,
    p.fingerprint, p.server_version, r.servegate, p.gate_passed, p.client_limited,
    COALESCE(p.served_model, p.model)";

/// The tables a point is read from.
const POINT_TABLES: &str = "servegate_points p JOIN servegate_runs r ON r.run_uid = p.run_uid";

/// The newest point of a machine's run of a suite's gate's figure on its
/// hardware (`$1` … `$4`: suite, gate, figure, hardware; `$5` the node):
/// where `pinned`, of the series' model (`$6`) keyed by a pin; else of any
/// model its server named.
pub(crate) fn newest_of_node(pinned: bool) -> String {
    format!(
        "SELECT {POINT_COLUMNS} FROM {POINT_TABLES}
        WHERE p.suite = $1 AND p.gate = $2 AND p.figure = $3 AND r.hardware = $4 AND r.node = $5
            AND {}
        ORDER BY r.finished_unix DESC, r.run_uid DESC LIMIT 1",
        if pinned {
            "p.model_pinned = 1 AND p.model = $6"
        } else {
            "p.model_pinned = 0"
        }
    )
}

/// Every series with its size, and the time of its newest point.
pub(crate) const SERIES: &str =
    "SELECT suite, gate, figure, model, hardware, COUNT(*), MAX(finished_unix), MIN(unit)
    FROM servegate_series GROUP BY suite, gate, figure, model, hardware";

/// A series' points, oldest first, or only its newest (`$1` … `$5`:
/// suite, gate, figure, model, hardware).
pub fn points(newest: bool) -> String {
    format!(
        "SELECT {POINT_COLUMNS}
        FROM {POINT_TABLES}
        WHERE p.suite = $1 AND p.gate = $2 AND p.figure = $3 AND p.model = $4 AND r.hardware = $5
        ORDER BY {}",
        if newest {
            "r.finished_unix DESC, r.run_uid DESC LIMIT 1"
        } else {
            "r.finished_unix, r.run_uid"
        }
    )
}

#[cfg(test)]
mod tests {
    /// [`super::VERSION`] is the number of migrations: a migration added
    /// without it (or it raised without one) fails here.
    #[test]
    fn the_version_counts_the_migrations() {
        assert_eq!(
            usize::try_from(super::VERSION).ok(),
            Some(super::MIGRATIONS.len())
        );
    }
}
