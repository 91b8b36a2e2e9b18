//! `golden!`: `insta::assert_snapshot!` with the project's own golden files
//! in `tests/goldens/`, apart from `snapshots/` (model answers) so that a
//! suite under `tests/` belongs to the project at the repository's root.

/// `insta::assert_snapshot!`, stored in `tests/goldens/` (named from the
/// repository's root: insta takes a relative path from the asserting file's
/// own directory, and tests/cli/'s modules are one level down).
macro_rules! golden {
    ($($arg:tt)*) => {
        insta::with_settings!({ snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/tests/goldens") }, {
            insta::assert_snapshot!($($arg)*);
        })
    };
}
pub(crate) use golden;
