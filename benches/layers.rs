//! Cost of layers (cloth against cloth) on a frame.
//!
//! * `layers/cape_on_sheet/{alone,layers}`: 30 frames (1/60 s each) of a 0.5 m cape (10 x 10
//!   cells) lying on a 1 m sheet (14 x 14 cells) draped over a sphere on the ground, both at
//!   the default budget: the two cloths stepped each on its own (they pass through each other)
//!   and as layers (`ClothLayers::step`, the sheet the inner layer, thickness 5 mm). Both start
//!   every iteration from the same snapshots, taken after the cape has settled on the sheet
//!   for 3 s with layers on. Divide by 30 for a frame.
//! * `layers/cape_landing/{alone,layers}`: the same cloths in motion: 30 frames from 0.1 s
//!   before the cape, dropped from 0.3 m, lands on the draped sheet (the impact, the pairs of
//!   the whole cape coming and going) to 0.4 s after.
//!
//! Run: `cargo bench --bench layers`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use glam::{DQuat, DVec3};
use isocloth::{
    BaseMesh, Cloth, ClothLayers, ClothMesh, ClothSnapshot, ColliderSet, ColliderShape,
    LayerSettings, Material, Pose, SolverSettings,
};

const DT: f64 = 1.0 / 60.0;

fn sheet(size: f32, cells: usize, turn: f64, centre: DVec3) -> Cloth {
    let tilt = DQuat::from_rotation_y(turn);
    let base = BaseMesh::rectangle(size, size, cells, cells)
        .expect("mesh")
        .map_positions(|p| {
            let q = DVec3::new(
                f64::from(p.x - 0.5 * size),
                0.0,
                f64::from(p.y - 0.5 * size),
            );
            (tilt * q + centre).as_vec3()
        });
    let mesh = ClothMesh::new(&base).expect("mesh");
    Cloth::from_mesh(mesh, Material::default(), &[], SolverSettings::default()).expect("cloth")
}

/// The scene: the bodies and the two cloths' snapshots, after the cape (dropped from 0.3 m
/// on the draped sheet) has fallen for `frames` frames with layers on.
fn scene(frames: usize) -> (ColliderSet, Vec<Cloth>, Vec<ClothSnapshot>) {
    let mut colliders = ColliderSet::new();
    colliders
        .add(ColliderShape::Plane, Pose::IDENTITY)
        .expect("ground");
    colliders
        .add(
            ColliderShape::Sphere { radius: 0.3 },
            Pose::from_translation(DVec3::new(0.0, 0.3, 0.0)),
        )
        .expect("sphere");
    let mut drape = sheet(1.0, 14, 0.0, DVec3::new(0.0, 0.65, 0.0));
    for _ in 0..120 {
        drape.step_with(DT, &colliders).expect("step");
    }
    let cape = sheet(0.5, 10, 0.5, DVec3::new(0.05, 0.95, 0.02));
    let mut cloths = vec![drape, cape];
    let mut layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]]).expect("layers");
    let mut reports = Vec::new();
    for _ in 0..frames {
        layers
            .step(&mut cloths, DT, &colliders, &mut reports)
            .expect("step");
    }
    let snaps = cloths.iter().map(Cloth::snapshot).collect();
    (colliders, cloths, snaps)
}

fn bench_layers(c: &mut Criterion) {
    // Settled for 3 s, and in motion from 0.1 s before the landing (at about 0.25 s).
    for (name, frames) in [("layers/cape_on_sheet", 180), ("layers/cape_landing", 9)] {
        let (colliders, mut cloths, snaps) = scene(frames);
        let mut group = c.benchmark_group(name);
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(8));
        group.bench_function("alone", |b| {
            b.iter(|| {
                for (c, s) in cloths.iter_mut().zip(&snaps) {
                    c.restore(s).expect("restore");
                }
                for _ in 0..30 {
                    for c in cloths.iter_mut() {
                        c.step_with(DT, &colliders).expect("step");
                    }
                }
            })
        });
        let mut layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]]).expect("layers");
        let mut reports = Vec::new();
        group.bench_function("layers", |b| {
            b.iter(|| {
                for (c, s) in cloths.iter_mut().zip(&snaps) {
                    c.restore(s).expect("restore");
                }
                for _ in 0..30 {
                    layers
                        .step(&mut cloths, DT, &colliders, &mut reports)
                        .expect("step");
                }
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_layers);
criterion_main!(benches);
