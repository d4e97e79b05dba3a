//! The bad-input corpus: every file under `tests/corpus/<target>/` replayed through the same
//! harness as the cargo-fuzz target of that name (`fuzz/`). Hand-written hostile inputs start
//! with `bad_` and must be refused with an error; inputs the fuzzer found keep their fuzzer
//! names and must not panic, hang or leave a cloth non-finite.
#![cfg(feature = "ecs")]

mod fuzz_harness;

use fuzz_harness::{Outcome, replay};

/// Hostile base meshes (raw bytes: see `fuzz_harness::mesh_builder`) are refused or make a
/// finite cloth.
#[test]
fn mesh_corpus_is_refused_or_stays_finite() {
    assert!(replay("mesh_builder", fuzz_harness::mesh_builder) > 0);
}

/// Hostile OBJ files are refused or make a finite cloth.
#[test]
fn obj_corpus_is_refused_or_stays_finite() {
    assert!(replay("obj_loader", fuzz_harness::obj_loader) > 0);
}

/// Polygons from raw bytes are refused or triangulated into n - 2 triangles wound like the
/// polygon, none flat, none overlapping another.
#[test]
fn polygon_corpus_is_refused_or_covered() {
    assert!(replay("polygon", fuzz_harness::polygon) > 0);
}

/// Hostile scenario files are refused with one error or run two frames without NaN.
#[test]
fn scenario_corpus_is_refused_or_runs() {
    assert!(replay("scenario_loader", fuzz_harness::scenario_loader) > 0);
}

/// Hostile presets and configurations are refused with a typed error.
#[test]
fn preset_corpus_is_refused() {
    assert!(replay("preset_loader", fuzz_harness::preset_loader) > 0);
}

/// Hostile snapshots are refused and leave the cloth untouched, or restore and stay finite.
#[test]
fn snapshot_corpus_is_refused_or_stays_finite() {
    assert!(replay("snapshot_restore", fuzz_harness::snapshot_restore) > 0);
}

/// A real snapshot of the harness's cloth restores and steps (so the snapshot target's seed
/// reaches past the fingerprint check).
#[test]
fn own_snapshot_is_accepted() {
    let mut cloth = fuzz_harness::snapshot_cloth();
    cloth.step(1.0 / 60.0).unwrap();
    let json = serde_json::to_vec(&cloth.snapshot()).unwrap();
    assert_eq!(fuzz_harness::snapshot_restore(&json), Outcome::Accepted);
}
