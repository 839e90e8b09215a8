//! Benchmarks of iox. The criterion benches live in `benches/`; run them with
//! `cargo bench -p iox_benches`.
