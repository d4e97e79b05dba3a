//! Per-stage benchmarks of one substep, and the factor's streaming floor, at four sizes of the
//! hanging sheet (about 500, 2k, 8k and 32k nodes):
//!
//! * `local_step/{nodes}`: every term projected and the right-hand side assembled.
//! * `global_solve/{nodes}`: one solve with the factor, three right-hand sides.
//! * `stream_factor/{nodes}`: reading the factor's values and row indices forward and backward
//!   with independent multiply-adds, the memory-traffic floor of a solve.
//! * `frame/{nodes}`: a whole 1/60 s frame at the default budget (2 substeps x 5 iterations of
//!   the accelerated local-global map).
//! * `iteration_aa/{nodes}` (up to 8k nodes): one substep-iteration of the local-global map
//!   accelerated by Anderson mixing (`SolverMethod::Anderson`, history 5: local step, solve,
//!   contact step, mixing), what one more iteration adds to a frame: each sample times as many
//!   frames at 1 substep x 5 iterations and at 1 x 1, alternating, and reports their
//!   difference over 4.
//! * `iteration_lg/{nodes}`: the same for plain local-global.
//! * `global_solve_lg/{nodes}` (up to 8k nodes): one solve with a plain local-global model's
//!   factor (the same as the default's).
//!
//! Collision stages are in `benches/collide.rs`, many cloths in `benches/many.rs`.
//! Run: `cargo bench --bench stages`.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use common::hanging_sheet;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use isocloth::stages::Stages;
use isocloth::{Cloth, ClothModel, Material, SolverMethod, SolverSettings};

/// Base cells per side: 2k nodes is the 45x45-node sheet of the speed issue.
const SIZES: [usize; 4] = [11, 22, 44, 88];

fn settled_sheet(cells: usize) -> Cloth {
    settled_sheet_with(cells, SolverSettings::default())
}

fn settled_sheet_with(cells: usize, settings: SolverSettings) -> Cloth {
    let (mesh, pins) = hanging_sheet(cells);
    let model = ClothModel::new(mesh, Material::default(), &pins, settings).expect("valid model");
    let mut cloth = Cloth::new(model);
    for _ in 0..30 {
        cloth.step(1.0 / 60.0).expect("finite step");
    }
    cloth
}

fn bench_stages(c: &mut Criterion) {
    let mut group = c.benchmark_group("stages");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for cells in SIZES {
        let mut cloth = settled_sheet(cells);
        let nodes = cloth.positions().len();
        let mut stages = Stages::new(&cloth);
        let id = |name: &str| BenchmarkId::new(name, format!("{nodes}_nodes"));
        group.bench_function(id("local_step"), |b| b.iter(|| stages.local_step()));
        group.bench_function(id("global_solve"), |b| b.iter(|| stages.global_solve()));
        group.bench_function(id("stream_factor"), |b| {
            b.iter(|| black_box(stages.stream_factor()))
        });
        group.bench_function(id("frame"), |b| {
            b.iter(|| cloth.step(black_box(1.0 / 60.0)).expect("finite step"))
        });
        if cells <= 44 {
            let lg = settled_sheet_with(
                cells,
                SolverSettings {
                    method: SolverMethod::LocalGlobal,
                    ..SolverSettings::default()
                },
            );
            let mut lg_stages = Stages::new(&lg);
            group.bench_function(id("global_solve_lg"), |b| {
                b.iter(|| lg_stages.global_solve())
            });
            for method in [
                SolverMethod::Anderson { history: 5 },
                SolverMethod::LocalGlobal,
            ] {
                let split = |iterations| SolverSettings {
                    substeps: 1,
                    iterations,
                    method,
                    ..SolverSettings::default()
                };
                let (mut five, mut one) = (
                    settled_sheet_with(cells, split(5)),
                    settled_sheet_with(cells, split(1)),
                );
                let name = match method {
                    SolverMethod::Anderson { .. } => "iteration_aa",
                    _ => "iteration_lg",
                };
                group.bench_function(id(name), |b| {
                    b.iter_custom(|n| {
                        let time = |cloth: &mut Cloth| {
                            let start = Instant::now();
                            for _ in 0..n {
                                cloth.step(black_box(1.0 / 60.0)).expect("finite step");
                            }
                            start.elapsed()
                        };
                        let t5 = time(&mut five);
                        let t1 = time(&mut one);
                        t5.saturating_sub(t1) / 4
                    })
                });
            }
        }
        println!(
            "{nodes} nodes: factor nnz {}, {} bytes read per solve",
            cloth.model().stats().factor_nnz,
            stages.factor_bytes_per_solve()
        );
    }
    group.finish();
}

criterion_group!(benches, bench_stages);
criterion_main!(benches);
