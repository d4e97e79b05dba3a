//! Fidelity at the default budget (2 substeps x 5 L-BFGS iterations per 1/60 s frame): the
//! parts of the fidelity issue's targets that are met, pinned so that they do not regress.
//! The same scenes, and the targets not met yet (trajectory error, the clamped strip's strain),
//! are measured by `cargo run --release --example budget_sweep` (docs/fidelity.md section 6).

use glam::Vec3;
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};

/// Worst max and mean render-mesh strain over 2 s of the 1 m two-pin square (12 x 12 base
/// cells) released from horizontal, pinned at two corners 1 m apart, at the default budget.
fn two_pin_square_strain(bending_stiffness: f64) -> (f64, f64) {
    let c = 12;
    let base = BaseMesh::rectangle(1.0, 1.0, c, c)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x, 1.0, -p.y));
    let mesh = ClothMesh::new(&base).unwrap();
    let corners = [BaseMesh::grid_index(c, 0, 0), BaseMesh::grid_index(c, c, 0)];
    let pins = mesh.nodes_for_vertices(&corners, false);
    let material = Material {
        bending_stiffness,
        ..Default::default()
    };
    let mut cloth = Cloth::from_mesh(mesh, material, &pins, SolverSettings::default()).unwrap();
    let (mut max, mut mean) = (0.0f64, 0.0f64);
    for _ in 0..120 {
        cloth.step(1.0 / 60.0).unwrap();
        let m = cloth.measures();
        max = max.max(m.max_strain);
        mean = mean.max(m.mean_strain);
    }
    (max, mean)
}

/// From silk (k_b = 1e-6) through the default (1e-4) to leather (1e-2), the falling, swinging
/// two-pin square keeps its worst max strain under the 1 % target and its worst mean strain
/// under the 0.1 % target at the default budget (measured: 0.67 / 0.67 / 0.62 % max and 0.059 /
/// 0.058 / 0.078 % mean).
#[test]
fn two_pin_square_stays_inextensible_at_the_default_budget_from_silk_to_leather() {
    for kb in [1e-6, 1e-4, 1e-2] {
        let (max, mean) = two_pin_square_strain(kb);
        assert!(max < 0.01, "k_b {kb}: max strain {max}");
        assert!(mean < 0.001, "k_b {kb}: mean strain {mean}");
    }
}
