//! The per-stage benchmarks' entry points (`isocloth::stages`) on fresh cloths: a bench that
//! panics is found here, in the test run, not when someone next runs `cargo bench`.

use isocloth::stages::Stages;

mod common;

/// Every stage runs on a cloth that has not stepped (its step-sized buffers, such as the
/// constant right-hand side, not yet sized by a step) and on one that has; the streaming floor
/// reads every byte it reports (a finite sum over a positive byte count). Before the stages
/// sized the constant right-hand side themselves, `local_step` panicked on a length mismatch.
#[test]
fn bench_stages_run_on_fresh_and_stepped_cloths() {
    for stepped in [false, true] {
        let mut cloth = common::hanging_cape(1.0, 1.0, 11);
        if stepped {
            cloth.step(1.0 / 60.0).unwrap();
        }
        let mut stages = Stages::new(&cloth);
        stages.local_step();
        stages.global_solve();
        assert!(stages.factor_bytes_per_solve() > 0);
        assert!(stages.stream_factor().is_finite());
    }
}
