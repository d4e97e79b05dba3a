//! The speed benchmark scene, set beside other crates' numbers: a 1 m sheet of 45x45 nodes
//! (23x23 base vertices, 22x22 cells) hanging from its top row, at the default 60 Hz budget for
//! 10 s of frames, released from the vertical rest shape.
//!
//! `elongation` is the lowest point's drop below the top row over the sheet's rest height,
//! minus one: 0 for an inextensible sheet, 0.24 for one hanging 24 % longer than its rest length.
//!
//! Run: `cargo run --release --example hanging_sheet`. Prints a table, then one JSON line.

use std::time::Instant;

use glam::Vec3;
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cells = 22;
    let base =
        BaseMesh::rectangle(1.0, 1.0, cells, cells)?.map_positions(|p| Vec3::new(p.x, p.y, 0.0));
    let mesh = ClothMesh::new(&base)?;
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let settings = SolverSettings::default();
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings)?;
    let nodes = cloth.positions().len();
    let stats = *cloth.model().stats();
    let elongation = |cloth: &Cloth| {
        let lowest = cloth
            .positions()
            .iter()
            .map(|p| p.y)
            .fold(f64::INFINITY, f64::min);
        (1.0 - lowest) / 1.0 - 1.0
    };
    println!(
        "isocloth hanging_sheet: {nodes} nodes, top row pinned, budget {} x {} ({:?}), 60 Hz",
        settings.substeps, settings.iterations, settings.method
    );
    println!(
        "factor nnz {}, {:.1} KiB; model build {:.2} ms",
        stats.factor_nnz,
        stats.factor_bytes as f64 / 1024.0,
        stats.build_seconds * 1e3
    );
    println!();
    println!(
        "{:>6} {:>11} {:>11} {:>11} {:>10}",
        "t (s)", "max strain", "mean strain", "elongation", "step (ms)"
    );
    let mut times = Vec::with_capacity(600);
    let (mut max_strain, mut mean_strain) = (0.0f64, 0.0f64);
    let mut iterations = 0;
    for frame in 0..600 {
        let t0 = Instant::now();
        let report = cloth.step(1.0 / 60.0)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        iterations = report.iterations;
        if (frame + 1) % 60 == 0 {
            let m = cloth.measures();
            max_strain = max_strain.max(m.max_strain);
            mean_strain = mean_strain.max(m.mean_strain);
            println!(
                "{:>6.1} {:>11.2e} {:>11.2e} {:>11.2e} {:>10.3}",
                (frame + 1) as f64 / 60.0,
                m.max_strain,
                m.mean_strain,
                elongation(&cloth),
                times[frame]
            );
        }
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let p99 = sorted[(sorted.len() * 99) / 100];
    println!();
    println!("step: median {median:.3} ms, p99 {p99:.3} ms ({iterations} iterations per frame)");
    let json = serde_json::json!({
        "nodes": nodes,
        "iterations": iterations,
        "step_ms_median": median,
        "step_ms_p99": p99,
        "max_strain": max_strain,
        "mean_strain": mean_strain,
        "elongation": elongation(&cloth),
        "factor_nnz": stats.factor_nnz,
        "factor_bytes": stats.factor_bytes,
    });
    println!("{json}");
    Ok(())
}
