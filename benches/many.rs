//! Many cloths from one asset: 16 and 64 capes (777 nodes each, one shared `ClothModel`)
//! stepped one 1/60 s frame, one after another on one thread against in parallel with rayon
//! (one cloth per task). The parallel/serial ratio is the multi-core scaling.
//!
//! Run: `cargo bench --bench many`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use glam::{DVec3, Vec3};
use isocloth::{BaseMesh, Cloth, ClothMesh, ClothModel, Material, SolverSettings};
use rayon::prelude::*;

fn capes(count: usize) -> Vec<Cloth> {
    let base = BaseMesh::rectangle(0.5, 0.9, 10, 18)
        .expect("valid rectangle")
        .map_positions(|p| Vec3::new(p.x - 0.25, 0.56 + p.y, 0.0));
    let mesh = ClothMesh::new(&base).expect("valid mesh");
    let top: Vec<u32> = (0..=10).map(|i| BaseMesh::grid_index(10, i, 18)).collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let model = ClothModel::new(
        Arc::new(mesh),
        Material::default(),
        &pins,
        SolverSettings::default(),
    )
    .expect("valid model");
    (0..count)
        .map(|k| {
            let mut c = Cloth::new(model.clone());
            // Each cape swings differently.
            let v: Vec<DVec3> = c
                .positions()
                .iter()
                .map(|p| DVec3::new(0.0, 0.0, (k as f64 * 0.1) * (1.46 - p.y)))
                .collect();
            c.set_velocities(&v).expect("finite");
            c
        })
        .collect()
}

fn bench_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("many_capes");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    for count in [16, 64] {
        let mut serial = capes(count);
        group.bench_function(BenchmarkId::new("serial", count), |b| {
            b.iter(|| {
                for cape in serial.iter_mut() {
                    cape.step(black_box(1.0 / 60.0)).expect("finite step");
                }
            })
        });
        let mut parallel = capes(count);
        group.bench_function(BenchmarkId::new("parallel", count), |b| {
            b.iter(|| {
                parallel.par_iter_mut().for_each(|cape| {
                    cape.step(black_box(1.0 / 60.0)).expect("finite step");
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_many);
criterion_main!(benches);
