//! A throwaway PostgreSQL cluster for a test (`scripts/postgres.sh`):
//! started on a free loopback port, stopped and removed when dropped.
//! Where PostgreSQL is not installed, or servegate is built without its
//! `postgres` feature, the test says so and proves nothing of it — unless
//! `SERVEGATE_REQUIRE_POSTGRES` is set (`.ci/run`, once it installed
//! PostgreSQL), where that fails the test.

use std::path::PathBuf;

/// A running cluster.
pub struct Postgres {
    dir: PathBuf,
    /// Its URL, without the password.
    pub url: String,
    /// The password of its user (`PGPASSWORD`).
    pub password: String,
}

impl Postgres {
    /// A new cluster, or `None` (said on stderr) where there can be none.
    pub fn start(test: &str) -> Option<Postgres> {
        Self::start_with(test, false)
    }

    /// A new cluster taking TLS connections only, its server certificate
    /// from a CA made for it: its URL asks for TLS and names the CA
    /// (`sslrootcert`).
    pub fn start_tls(test: &str) -> Option<Postgres> {
        Self::start_with(test, true)
    }

    fn start_with(test: &str, tls: bool) -> Option<Postgres> {
        if !cfg!(feature = "postgres") {
            return skipped(test, "servegate is built without its `postgres` feature");
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres.sh");
        let installed = std::process::Command::new("bash")
            .args([script, "bin"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            return skipped(
                test,
                "PostgreSQL is not installed (no initdb; `bash scripts/postgres.sh install`)",
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = std::process::Command::new("bash")
            .args([script, "start", &port.to_string()])
            .args(tls.then_some("tls"))
            .output()
            .expect("bash runs");
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{test}: the PostgreSQL cluster did not start:\n{printed}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines = printed.lines();
        let dir = PathBuf::from(lines.next().expect("its directory"));
        let url = lines.next().expect("its URL").to_owned();
        let password = std::fs::read_to_string(dir.join("password")).expect("its password");
        Some(Postgres { dir, url, password })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres.sh");
        let _ = std::process::Command::new("bash")
            .args([script, "stop"])
            .arg(&self.dir)
            .status();
    }
}

/// A test that cannot have its cluster says `why` and proves nothing of
/// the PostgreSQL history; where `SERVEGATE_REQUIRE_POSTGRES` is set, it
/// fails.
fn skipped(test: &str, why: &str) -> Option<Postgres> {
    assert!(
        std::env::var_os("SERVEGATE_REQUIRE_POSTGRES").is_none(),
        "{test}: SERVEGATE_REQUIRE_POSTGRES is set but {why}"
    );
    eprintln!("{test}: skipped: {why}: the PostgreSQL history was not exercised");
    None
}
