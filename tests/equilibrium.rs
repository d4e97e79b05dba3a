//! The static equilibrium solver (`Cloth::relax`) and what it measures: that the budgeted stepper
//! settles where the forces balance, how the droop of an irregular clamped strip depends on the
//! isometry weight (locking), and that the render-edge term holds the rendered mesh together.
//! Each test states the expected behaviour and its tolerance.

mod common;

use std::sync::Arc;

use glam::Vec3;
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ClothModel, Integrator, Material, SolverMethod, SolverSettings,
    SolverWeights,
};

/// The strip's base grid for the stepper test and the coarse locking contrast.
const CELLS: (usize, usize) = (12, 4);

/// A finer base grid for the 5 % locking bound: the coarse grid's red/black droop still moves 6 %
/// between W and 100 W through discretisation error, which shrinks with refinement (3.3 % here,
/// 2.6 % at 21 x 7).
const FINE_CELLS: (usize, usize) = (18, 6);

/// A 0.5 x 0.15 m strip on a jittered Delaunay-like triangulation in the horizontal plane,
/// clamped along its short edge (two columns of vertices and the edges between them pinned).
/// Returns the mesh, the pins and the tip vertices.
fn clamped_strip(plain: bool, cells: (usize, usize)) -> (Arc<ClothMesh>, Vec<u32>, Vec<u32>) {
    let (cx, cy) = cells;
    let base = BaseMesh::jittered_rectangle(0.5, 0.15, cx, cy, 0.3, 7)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x, 0.0, p.y));
    let mesh = if plain {
        ClothMesh::plain(&base).unwrap()
    } else {
        ClothMesh::new(&base).unwrap()
    };
    let clamp: Vec<u32> = (0..=cy)
        .flat_map(|j| {
            [
                BaseMesh::grid_index(cx, 0, j),
                BaseMesh::grid_index(cx, 1, j),
            ]
        })
        .collect();
    let pins = mesh.nodes_for_vertices(&clamp, true);
    let tip = (0..=cy).map(|j| BaseMesh::grid_index(cx, cx, j)).collect();
    (Arc::new(mesh), pins, tip)
}

fn droop(cloth: &Cloth, tip: &[u32]) -> f64 {
    -tip.iter()
        .map(|&v| cloth.positions()[v as usize].y)
        .sum::<f64>()
        / tip.len() as f64
}

fn strip_cloth(plain: bool, material: Material, settings: SolverSettings) -> (Cloth, Vec<u32>) {
    strip_cloth_on(plain, CELLS, material, settings)
}

fn strip_cloth_on(
    plain: bool,
    cells: (usize, usize),
    material: Material,
    settings: SolverSettings,
) -> (Cloth, Vec<u32>) {
    let (mesh, pins, tip) = clamped_strip(plain, cells);
    let model = ClothModel::new(mesh, material, &pins, settings).unwrap();
    (Cloth::new(model), tip)
}

/// Newton's method reaches a true equilibrium (largest nodal force below 1e-7 N, the strip
/// weighs 0.15 N), and the budgeted stepper, run until a step moves no node by more than 1e-9 m
/// (backward Euler, 1/60 s, Anderson mixing with 16 differences, 200 iterations), settles at the same droop to
/// within 1 % (measured: 59.3 mm both ways). Its leftover force stays below 3e-3 N (2 % of the
/// weight; measured 1.7e-3 N): a local-global step that moves nothing is not yet an equilibrium.
#[test]
fn stepper_settles_at_the_newton_equilibrium() {
    let material = Material {
        bending_stiffness: 0.2,
        ..Default::default()
    };
    let (mut reference, tip) = strip_cloth(false, material, SolverSettings::default());
    let report = reference.relax(1e-7, 500).unwrap();
    assert!(report.converged, "{report:?}");
    assert!(reference.force_residual() < 1e-7);
    let settings = SolverSettings {
        substeps: 1,
        iterations: 200,
        integrator: Integrator::BackwardEuler,
        method: SolverMethod::Anderson { history: 16 },
        ..Default::default()
    };
    let (mut cloth, _) = strip_cloth(false, material, settings);
    let mut prev = cloth.positions().to_vec();
    for _ in 0..3000 {
        cloth.step(1.0 / 60.0).unwrap();
        let change = cloth
            .positions()
            .iter()
            .zip(&prev)
            .map(|(p, q)| p.distance(*q))
            .fold(0.0, f64::max);
        prev.copy_from_slice(cloth.positions());
        if change < 1e-9 {
            break;
        }
    }
    let (a, b) = (droop(&reference, &tip), droop(&cloth, &tip));
    assert!((a - b).abs() < 0.01 * a, "newton {a} stepper {b}");
    assert!(cloth.force_residual() < 3e-3, "{}", cloth.force_residual());
}

/// Droop of the clamped strip at Newton equilibrium (force residual below 1e-4 N; the strip
/// weighs 0.15 N), with weak bending (k_b = 0.002) so that it hangs.
fn strip_equilibrium(plain: bool, cells: (usize, usize), w: f64) -> f64 {
    let material = Material {
        bending_stiffness: 0.002,
        ..Default::default()
    };
    let settings = SolverSettings {
        weights: SolverWeights {
            isometry: w,
            ..SolverWeights::STIFF
        },
        ..Default::default()
    };
    let (mut cloth, tip) = strip_cloth_on(plain, cells, material, settings);
    let report = cloth.relax(1e-5, 3000).unwrap();
    assert!(
        report.force_residual < 1e-4,
        "plain {plain} cells {cells:?} w {w}: {report:?}"
    );
    droop(&cloth, &tip)
}

/// No locking (the core issue's bound): on the 18 x 6 jittered strip, raising the isometry
/// weight 100x (the stiff 1e5 -> 1e7 N/m) changes the red/black droop by less than 5 % (measured:
/// 423.6 -> 409.9 mm, 3.3 %; at 1e9, 401 mm). The plain mesh on the same triangulation is
/// printed for comparison but not asserted: at 1e7 it is only starting to lock and has several
/// equilibria that Newton finds after rounding-level changes to the solve (measured 398.7 and
/// 417.7 mm against 439.4 at 1e5; 317 mm at 1e8 and 189 mm at 1e9). The coarse test below
/// asserts the contrast where it is stark.
#[test]
fn red_black_strip_droop_is_independent_of_the_isometry_weight() {
    let (rb, rb100) = (
        strip_equilibrium(false, FINE_CELLS, 1e5),
        strip_equilibrium(false, FINE_CELLS, 1e7),
    );
    let (pl, pl100) = (
        strip_equilibrium(true, FINE_CELLS, 1e5),
        strip_equilibrium(true, FINE_CELLS, 1e7),
    );
    println!("red/black {rb} -> {rb100}, plain {pl} -> {pl100}");
    let rb_loss = 1.0 - rb100 / rb;
    assert!(rb_loss.abs() < 0.05, "red/black {rb} -> {rb100}");
}

/// Locking contrast on the coarse 12 x 4 strip: at 100x the weight the red/black strip keeps
/// more than 90 % of its droop (measured: 400 -> 376 mm, 6 %: coarse-mesh discretisation error,
/// 3.3 % on the 18 x 6 strip above), while the plain mesh, every base triangle rigid, loses more
/// than twice that share and ends below the red/black strip. The locked plain strip has several
/// equilibria and Newton finds one or another after rounding-level changes to the assembly or
/// the solve (measured 410 -> 162, 242 and 346 mm), so only the contrast is asserted.
#[test]
fn red_black_strip_locks_far_less_than_the_plain_mesh() {
    let (rb, rb100) = (
        strip_equilibrium(false, CELLS, 1e5),
        strip_equilibrium(false, CELLS, 1e7),
    );
    let (pl, pl100) = (
        strip_equilibrium(true, CELLS, 1e5),
        strip_equilibrium(true, CELLS, 1e7),
    );
    let (rb_loss, pl_loss) = (1.0 - rb100 / rb, 1.0 - pl100 / pl);
    assert!(rb100 > 0.9 * rb, "red/black {rb} -> {rb100}");
    assert!(
        pl_loss > 2.0 * rb_loss,
        "plain {pl} -> {pl100}, red/black {rb} -> {rb100}"
    );
    assert!(pl100 < rb100, "plain {pl100} red/black {rb100}");
}

/// Twist modes (at the stiff weights, [`SolverWeights::STIFF`]): with weak bending (the default
/// k_b = 1e-4) adjacent red triangles can turn against each other at almost no cost, and
/// without the render-edge term the rendered mesh of the
/// two-pin square released from horizontal stretches by tens of percent within 2 s (measured:
/// 65 % at the default 2 x 5 budget). With the default render-edge stiffness the worst max strain
/// over those 2 s stays below 1.5 % (measured 1.25 % with the accelerated local-global map; 0.58 %
/// with L-BFGS, the default before 2026-11-27, a worst frame accepted when L-BFGS left the crate)
/// and the worst mean below 0.1 % (0.066 %).
#[test]
fn render_edge_term_suppresses_twist_mode_strain() {
    let worst = |render_edge: f64| {
        let weights = SolverWeights {
            render_edge,
            ..SolverWeights::STIFF
        };
        common::released_two_pin_square_strain(16, Material::default(), weights)
    };
    let (off, _) = worst(0.0);
    let (on, on_mean) = worst(SolverWeights::STIFF.render_edge);
    assert!(off > 0.1, "without the term: {off}");
    assert!(
        on < 0.015 && on_mean < 1e-3,
        "with the term: {on} {on_mean}"
    );
}

/// Centre of mass per frame of a 0.5 m two-pin square (6 x 6 base cells, leather: k_b = 1e-2)
/// released from horizontal, over `frames` frames at 60 Hz.
fn released_square_path(settings: SolverSettings, frames: usize) -> Vec<glam::DVec3> {
    let c = 6;
    let base = BaseMesh::rectangle(0.5, 0.5, c, c)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x, 1.0, -p.y));
    let mesh = ClothMesh::new(&base).unwrap();
    let pins = mesh.nodes_for_vertices(
        &[BaseMesh::grid_index(c, 0, 0), BaseMesh::grid_index(c, c, 0)],
        false,
    );
    let material = Material {
        bending_stiffness: 1e-2,
        ..Default::default()
    };
    let mut cloth = Cloth::from_mesh(mesh, material, &pins, settings).unwrap();
    (0..frames)
        .map(|_| {
            cloth.step(1.0 / 60.0).unwrap();
            cloth.center_of_mass()
        })
        .collect()
}

/// Worst distance between two paths.
fn path_distance(a: &[glam::DVec3], b: &[glam::DVec3]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| p.distance(*q))
        .fold(0.0, f64::max)
}

/// `SolverMethod::Newton` is a converged reference in the sense: over 0.5 s of the
/// released leather square, doubling its substeps (4 -> 8 per frame) moves the centre of mass by
/// under 1 % of the cloth's size (measured 0.13 %), and the accelerated map iterated far past
/// any budget (8 substeps x 100 iterations) lands within 1 % of it too (measured 0.13 %). At the default
/// budget the same scene is far off (measured 71 % of the size by 0.5 s: the slow motion of
/// docs/lab/fidelity.md section 3, worse on this 0.5 m square than on the 1 m one). That figure is
/// asserted only to be above 5 %, to show the reference sees the gap, not to pin it.
#[test]
fn newton_reference_is_converged_in_time_and_matches_the_heavily_iterated_map() {
    let frames = 30;
    let size = 0.5;
    let settings = |substeps, iterations, method| SolverSettings {
        substeps,
        iterations,
        method,
        ..Default::default()
    };
    let newton = released_square_path(settings(4, 30, SolverMethod::Newton), frames);
    let doubled = released_square_path(settings(8, 30, SolverMethod::Newton), frames);
    let iterated = released_square_path(
        settings(8, 100, SolverMethod::Anderson { history: 5 }),
        frames,
    );
    let budget = released_square_path(SolverSettings::default(), frames);
    let doubling = path_distance(&newton, &doubled) / size;
    let iterated = path_distance(&newton, &iterated) / size;
    let default_budget = path_distance(&newton, &budget) / size;
    println!("doubling {doubling:.5}, 8 x 100 {iterated:.5}, 2 x 5 {default_budget:.4}");
    assert!(doubling < 0.01, "doubling substeps moved it {doubling}");
    assert!(iterated < 0.01, "8 x 100 is {iterated} away");
    assert!(default_budget > 0.05, "2 x 5 is only {default_budget} away");
}
