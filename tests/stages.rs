//! The per-stage benchmarks' entry points (`isocloth::stages`) on fresh cloths: a bench that
//! panics is found here, in the test run, not when someone next runs `cargo bench`.

use glam::Vec3;
use isocloth::stages::Stages;
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};

/// A 1 m sheet of `cells` x `cells` base cells hanging from its top row, never stepped.
fn hanging(cells: usize) -> Cloth {
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x, p.y, 0.0));
    let mesh = ClothMesh::new(&base).unwrap();
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap()
}

/// Every stage runs on a cloth that has not stepped (its step-sized buffers, such as the
/// constant right-hand side, not yet sized by a step) and on one that has; the streaming floor
/// reads every byte it reports (a finite sum over a positive byte count). Before the stages
/// sized the constant right-hand side themselves, `local_step` panicked on a length mismatch.
#[test]
fn bench_stages_run_on_fresh_and_stepped_cloths() {
    for stepped in [false, true] {
        let mut cloth = hanging(11);
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
