//! Reliability: snapshots that continue bit-identically, determinism across thread counts and
//! runs, and recovery from a non-finite state. Each test states the behaviour it pins down.

use glam::DVec3;
use isocloth::{Cloth, ClothError, ColliderSet};

mod common;

fn cape() -> Cloth {
    common::hanging_cape(0.6, 0.8, 10)
}

/// Sets the cape swinging and runs it `frames` frames against a capsule it hits.
fn run(cloth: &mut Cloth, colliders: &ColliderSet, frames: usize) {
    for _ in 0..frames {
        cloth.step_with(1.0 / 60.0, colliders).unwrap();
    }
}

fn scene() -> (Cloth, ColliderSet) {
    let mut cloth = cape();
    let v: Vec<DVec3> = cloth
        .positions()
        .iter()
        .map(|p| DVec3::new(0.0, 0.0, -2.0 * (1.5 - p.y)))
        .collect();
    cloth.set_velocities(&v).unwrap();
    let colliders = common::capsule_at(-0.25);
    (cloth, colliders)
}

/// A snapshot taken mid-run (through serde, as JSON) and restored into a fresh cloth of the
/// same asset continues bit-identically to the run that was never interrupted, contacts
/// included.
#[test]
fn snapshot_restores_and_continues_bit_identically() {
    let (mut a, colliders) = scene();
    run(&mut a, &colliders, 40);
    let json = serde_json::to_string(&a.snapshot()).unwrap();
    run(&mut a, &colliders, 40);
    let (mut b, _) = scene();
    b.restore(&serde_json::from_str(&json).unwrap()).unwrap();
    run(&mut b, &colliders, 40);
    assert_eq!(a.positions(), b.positions());
    assert_eq!(a.velocities(), b.velocities());
}

/// A snapshot of another mesh, or with a NaN in it, is refused with a typed error and the
/// cloth is left as it was.
#[test]
fn snapshot_from_another_mesh_is_refused() {
    let other = common::hanging_cape(0.6, 0.8, 8);
    let mut cloth = cape();
    let before = cloth.positions().to_vec();
    assert!(matches!(
        cloth.restore(&other.snapshot()),
        Err(ClothError::SnapshotMismatch { .. })
    ));
    let mut bad = cloth.snapshot();
    bad.state.positions[3].x = f64::NAN;
    assert!(matches!(
        cloth.restore(&bad),
        Err(ClothError::SnapshotMismatch { .. })
    ));
    assert_eq!(cloth.positions(), before.as_slice());
}

/// The same inputs give bit-identical positions with 1 worker thread and with 4, and across
/// two runs.
#[test]
fn results_are_bit_identical_across_thread_counts_and_runs() {
    let go = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let (mut c, colliders) = scene();
            run(&mut c, &colliders, 60);
            c.positions().to_vec()
        })
    };
    let one = go(1);
    assert_eq!(one, go(4));
    assert_eq!(one, go(1));
}

/// A non-finite value inside the cloth (injected here as a solver fault would leave it) is
/// detected at the end of the step: the cloth goes back to its state before the step, at rest,
/// reports the recovery, and keeps running finite.
#[test]
fn non_finite_state_is_detected_and_recovered() {
    let (mut cloth, colliders) = scene();
    run(&mut cloth, &colliders, 10);
    let before = cloth.positions().to_vec();
    cloth.poison_velocity_for_tests(5);
    let report = cloth.step_with(1.0 / 60.0, &colliders).unwrap();
    assert!(report.recovered);
    assert_eq!(cloth.recoveries(), 1);
    assert_eq!(cloth.positions(), before.as_slice());
    run(&mut cloth, &colliders, 60);
    assert!(cloth.positions().iter().all(|p| p.is_finite()));
    assert_eq!(cloth.recoveries(), 1);
}

/// Sixteen capes of one shared model stepped in parallel (one rayon task per cape) end
/// bit-identical to the same capes stepped one after another, and they share one factor.
#[test]
fn parallel_capes_match_serial_ones() {
    use rayon::prelude::*;
    let first = cape();
    let model = first.model().clone();
    let make = || -> Vec<Cloth> {
        (0..16)
            .map(|k| {
                let mut c = Cloth::new(model.clone());
                let v: Vec<DVec3> = c
                    .positions()
                    .iter()
                    .map(|p| DVec3::new(0.0, 0.0, 0.1 * k as f64 * (1.5 - p.y)))
                    .collect();
                c.set_velocities(&v).unwrap();
                c
            })
            .collect()
    };
    let (mut serial, mut parallel) = (make(), make());
    for _ in 0..30 {
        for c in serial.iter_mut() {
            c.step(1.0 / 60.0).unwrap();
        }
        parallel.par_iter_mut().for_each(|c| {
            c.step(1.0 / 60.0).unwrap();
        });
    }
    for (a, b) in serial.iter().zip(&parallel) {
        assert_eq!(a.positions(), b.positions());
        assert!(std::sync::Arc::ptr_eq(a.model(), &model));
    }
}
