//! Nothing here: the example is its `tests/my_server.rs` and `suites/`.
