//! Step and factorisation benchmarks.
//!
//! * `step/hanging_sheet/{cells}`: one 1/60 s frame of a hanging sheet, top row pinned, with a
//!   budget of 10 iterations (2 substeps x 5), at three sizes. 22 cells is the 45x45-node sheet
//!   (23x23 base grid, 2,025 nodes).
//! * `factor/{cells}`: building the model (assembly, ordering, both numeric factors).
//!
//! Run: `cargo bench --bench step`.

use std::hint::black_box;
use std::time::Duration;

mod common;

use common::hanging_sheet;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use isocloth::{Cloth, ClothModel, Material, SolverMethod, SolverSettings};

const SIZES: [usize; 3] = [11, 22, 44];

fn bench_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("step");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    for cells in SIZES {
        for (name, method) in [
            ("anderson", SolverMethod::Anderson { history: 5 }),
            ("local_global", SolverMethod::LocalGlobal),
        ] {
            let (mesh, pins) = hanging_sheet(cells);
            let settings = SolverSettings {
                substeps: 2,
                iterations: 5,
                method,
                ..Default::default()
            };
            let model =
                ClothModel::new(mesh, Material::default(), &pins, settings).expect("valid model");
            let nodes = model.stats().nodes;
            let mut cloth = Cloth::new(model);
            // Let it fall and swing for a second so the bench measures a moving cloth.
            for _ in 0..60 {
                cloth.step(1.0 / 60.0).expect("finite step");
            }
            group.bench_function(
                BenchmarkId::new(format!("hanging_sheet_{name}"), format!("{nodes}_nodes")),
                |b| b.iter(|| cloth.step(black_box(1.0 / 60.0)).expect("finite step")),
            );
        }
    }
    group.finish();
}

fn bench_factor(c: &mut Criterion) {
    let mut group = c.benchmark_group("factor");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for cells in SIZES {
        let (mesh, pins) = hanging_sheet(cells);
        group.bench_function(
            BenchmarkId::from_parameter(format!("{}_nodes", mesh.node_count())),
            |b| {
                b.iter(|| {
                    ClothModel::new(
                        mesh.clone(),
                        Material::default(),
                        &pins,
                        SolverSettings::default(),
                    )
                    .expect("valid model")
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_step, bench_factor);
criterion_main!(benches);
