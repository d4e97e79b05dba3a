//! Peer bench: bevy_silk 0.10 (Verlet with Gauss-Seidel stick passes) and isocloth on the same
//! sheet, timed alternately in one process so that the machine's speed of the moment cancels in
//! the ratio.
//!
//! The sheet: 45 x 45 points 5 cm apart (2.2 m square), hanging from its top row, 1/60 s
//! frames, released from rest in its vertical plane. bevy_silk's points are its mesh vertices;
//! isocloth's are the nodes of a 22 x 22-cell base mesh after its 4:1 red/black subdivision
//! (the same 45 x 45 grid of points). Each run steps 120 frames untimed, then times 300 frames
//! one by one and keeps the median.
//!
//! `elongation` is the lowest point's drop below the top row over the sheet's rest height, minus
//! one (0 for an inextensible sheet).
//!
//! Run (from the repository root): `cargo run --release --manifest-path
//! peers/silk_bench/Cargo.toml [-- --passes 10 --substeps 2 --iterations 5 --rounds 3 --plain]`
//! (`--plain`: isocloth's plain local-global, without Anderson mixing).
//! Prints a row per run, then one JSON line: `points`, `passes`, `budget`, `rounds` (per round
//! `silk_step_us`, `isocloth_step_us`), `silk_step_us_median`, `isocloth_step_us_median`,
//! `ratio` (isocloth over silk, the median of the rounds' ratios), `silk_elongation`,
//! `isocloth_elongation`.

use std::time::Instant;

use bevy::mesh::{Indices, VertexAttributeValues};
use bevy::platform::collections::HashMap;
use bevy::prelude::{GlobalTransform, Mat4, Mesh, Vec3};
use bevy_silk::components::cloth::Cloth as SilkCloth;
use bevy_silk::prelude::{
    ClothConfig, StickGeneration, StickLen, StickMode, VertexAnchor, rectangle_mesh,
};
use isocloth::glam::Vec3 as IsoVec3;
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverMethod, SolverSettings};

/// Points per side.
const N: usize = 45;
/// Spacing of the points (m).
const SPACING: f64 = 0.05;
const WARM_UP: usize = 120;
const TIMED: usize = 300;
const DT: f64 = 1.0 / 60.0;

struct Args {
    /// Plain local-global (no Anderson mixing) for isocloth.
    plain: bool,
    passes: u8,
    substeps: u32,
    iterations: u32,
    rounds: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        plain: false,
        passes: 10,
        substeps: 2,
        iterations: 5,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--plain" {
            a.plain = true;
            continue;
        }
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        let bad = |_| format!("{k}: {v:?} is not a positive whole number");
        match k.as_str() {
            "--passes" => a.passes = v.parse().map_err(bad)?,
            "--substeps" => a.substeps = v.parse().map_err(bad)?,
            "--iterations" => a.iterations = v.parse().map_err(bad)?,
            "--rounds" => a.rounds = v.parse().map_err(bad)?,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if a.passes == 0 || a.substeps == 0 || a.iterations == 0 || a.rounds == 0 {
        return Err("every count must be positive".into());
    }
    Ok(a)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// bevy_silk's sheet at `passes` stick passes a frame: (median step in us, elongation).
fn silk(passes: u8) -> (f64, f64) {
    let spacing = SPACING as f32;
    let mesh = rectangle_mesh((N, N), (Vec3::X * spacing, -Vec3::Y * spacing), Vec3::Z);
    let Some(VertexAttributeValues::Float32x3(points)) =
        mesh.attribute(Mesh::ATTRIBUTE_POSITION).cloned()
    else {
        unreachable!("rectangle_mesh writes Float32x3 positions")
    };
    let Some(Indices::U32(indices)) = mesh.indices().cloned() else {
        unreachable!("rectangle_mesh writes u32 indices")
    };
    let points: Vec<Vec3> = points.into_iter().map(Vec3::from).collect();
    // The first row of the mesh is the top row.
    let pinned: HashMap<usize, VertexAnchor> =
        (0..N).map(|i| (i, VertexAnchor::default())).collect();
    let mut cloth = SilkCloth::new(
        &points,
        &indices,
        pinned,
        StickGeneration::default(),
        StickLen::default(),
        StickMode::default(),
        &Mat4::IDENTITY,
    );
    let config = ClothConfig::default();
    let transform = GlobalTransform::default();
    let dt = DT as f32;
    let mut times = Vec::with_capacity(TIMED);
    for frame in 0..WARM_UP + TIMED {
        let start = Instant::now();
        cloth.update_points(0.99, config.smoothed_acceleration(config.gravity, dt));
        cloth.update_anchored_points(&transform, |_| None);
        cloth.update_sticks(passes);
        if frame >= WARM_UP {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let p = &cloth.current_point_positions;
    let top = p[0].y;
    let low = p.iter().map(|p| p.y).fold(f32::MAX, f32::min);
    let rest = spacing * (N - 1) as f32;
    (median(times), ((top - low) / rest - 1.0) as f64)
}

/// isocloth's sheet at `substeps` x `iterations`: (median step in us, elongation).
fn isocloth(
    substeps: u32,
    iterations: u32,
    plain: bool,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    // The 4:1 subdivision puts a red node on every edge: 22 cells give 45 points per side.
    let cells = (N - 1) / 2;
    let size = SPACING * (N - 1) as f64;
    let base = BaseMesh::rectangle(size as f32, size as f32, cells, cells)?
        .map_positions(|p| IsoVec3::new(p.x, p.y, 0.0));
    let mesh = ClothMesh::new(&base)?;
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let mut settings = SolverSettings {
        substeps,
        iterations,
        ..SolverSettings::default()
    };
    if plain {
        settings.method = SolverMethod::LocalGlobal;
    }
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings)?;
    if cloth.positions().len() != N * N {
        return Err(format!("{} nodes, not {}", cloth.positions().len(), N * N).into());
    }
    let mut times = Vec::with_capacity(TIMED);
    for frame in 0..WARM_UP + TIMED {
        let start = Instant::now();
        cloth.step(DT)?;
        if frame >= WARM_UP {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let p = cloth.positions();
    let top = p.iter().map(|p| p.y).fold(f64::MIN, f64::max);
    let low = p.iter().map(|p| p.y).fold(f64::MAX, f64::min);
    Ok((median(times), (top - low) / size - 1.0))
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "peer bench: {N} x {N} points {SPACING} m apart hanging from the top row; bevy_silk at \
         {} passes against isocloth at {} x {}, {} rounds, alternating",
        a.passes, a.substeps, a.iterations, a.rounds
    );
    println!(
        "{:>6} {:>16} {:>20} {:>8}",
        "round", "bevy_silk (us)", "isocloth (us)", "ratio"
    );
    let (mut rounds, mut ratios) = (Vec::new(), Vec::new());
    let (mut silk_elongation, mut iso_elongation) = (0.0, 0.0);
    for r in 0..a.rounds {
        let (s, se) = silk(a.passes);
        let (i, ie) = isocloth(a.substeps, a.iterations, a.plain)?;
        println!("{:>6} {:>16.1} {:>20.1} {:>8.2}", r + 1, s, i, i / s);
        (silk_elongation, iso_elongation) = (se, ie);
        ratios.push(i / s);
        rounds.push((s, i));
    }
    let silk_med = median(rounds.iter().map(|r| r.0).collect());
    let iso_med = median(rounds.iter().map(|r| r.1).collect());
    let ratio = median(ratios);
    println!(
        "elongation: bevy_silk {:.2} %, isocloth {:.4} %; isocloth takes {ratio:.2}x bevy_silk's step",
        100.0 * silk_elongation,
        100.0 * iso_elongation
    );
    let rounds_json: Vec<String> = rounds
        .iter()
        .map(|(s, i)| format!("{{\"silk_step_us\":{s:.1},\"isocloth_step_us\":{i:.1}}}"))
        .collect();
    println!(
        "{{\"points\":{},\"passes\":{},\"budget\":\"{}x{}\",\"plain\":{},\"rounds\":[{}],\"silk_step_us_median\":{silk_med:.1},\"isocloth_step_us_median\":{iso_med:.1},\"ratio\":{ratio:.3},\"silk_elongation\":{silk_elongation:.5},\"isocloth_elongation\":{iso_elongation:.6}}}",
        N * N,
        a.passes,
        a.substeps,
        a.iterations,
        a.plain,
        rounds_json.join(",")
    );
    Ok(())
}
