//! The two-pin square: a 1 m cloth pinned at its top corners must not sag between them (about 1.5 s).
//!
//! The two-pin square: a 1 m cloth pinned at its top corners, 1 m apart, hanging under gravity
//! at 60 Hz with the default budget. Inextensible cloth cannot sag between pins its own width
//! apart, so the top edge must stay straight.
//!
//! Run: `cargo run --release --example pinned_square`. Prints a table, then one JSON line.

use std::time::Instant;

use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cells = 16;
    let frames = 600;
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells)?;
    let mesh = ClothMesh::new(&base)?;
    let corners = [
        BaseMesh::grid_index(cells, 0, cells),
        BaseMesh::grid_index(cells, cells, cells),
    ];
    let pins = mesh.nodes_for_vertices(&corners, false);
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let settings = SolverSettings::default();
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings)?;
    let stats = *cloth.model().stats();

    let mut times = Vec::with_capacity(frames);
    println!("isocloth pinned_square: 1 m square, pins 1 m apart, {cells}x{cells} base cells");
    println!(
        "budget: {} substeps x {} iterations per 1/60 s frame ({:?})",
        settings.substeps, settings.iterations, settings.method
    );
    println!(
        "nodes {}  factor nnz {}  factorisation {:.2} ms",
        stats.nodes,
        stats.factor_nnz,
        stats.build_seconds * 1e3
    );
    println!();
    println!(
        "{:>6} {:>11} {:>11} {:>10} {:>12} {:>10}",
        "t (s)", "max strain", "mean strain", "sag (mm)", "conformity", "step (ms)"
    );
    let sag = |cloth: &Cloth| {
        top.iter()
            .map(|&v| 1.0 - cloth.positions()[v as usize].y)
            .fold(0.0f64, f64::max)
    };
    for f in 0..frames {
        let t0 = Instant::now();
        cloth.step(1.0 / 60.0)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        if (f + 1) % 60 == 0 {
            let m = cloth.measures();
            println!(
                "{:>6.1} {:>11.2e} {:>11.2e} {:>10.3} {:>12.2e} {:>10.3}",
                (f + 1) as f64 / 60.0,
                m.max_strain,
                m.mean_strain,
                sag(&cloth) * 1e3,
                m.conformity_residual,
                times[f]
            );
        }
    }
    let m = cloth.measures();
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let p99 = times[(times.len() * 99) / 100];
    println!();
    println!("step median {median:.3} ms, p99 {p99:.3} ms over {frames} frames");
    let json = serde_json::json!({
        "frames": frames,
        "nodes": stats.nodes,
        "substeps": settings.substeps,
        "iterations": settings.substeps * settings.iterations,
        "max_strain": m.max_strain,
        "pinned_max_strain": m.pinned_max_strain,
        "mean_strain": m.mean_strain,
        "isometry_residual": m.isometry_residual,
        "top_sag_mm": sag(&cloth) * 1e3,
        "conformity_residual": m.conformity_residual,
        "step_ms_median": median,
        "step_ms_p99": p99,
        "factor_nnz": stats.factor_nnz,
    });
    println!("{json}");
    Ok(())
}
