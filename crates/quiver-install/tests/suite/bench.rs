//! The benchmark's figures in an optimized build:
//! `cargo test --release -p quiver-install --test all bench -- --ignored --nocapture`.

#[test]
#[ignore = "a benchmark: run it in release mode, as the module documentation says"]
fn bench_verify_and_install() {
    let scratch = tempfile::tempdir().unwrap();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/weather");
    let report = quiver_install::bench::run(scratch.path(), 1000, &example, 5).unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
