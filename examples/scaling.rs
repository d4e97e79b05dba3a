//! Cost against node count: the hanging sheet from 529 to 31,329 nodes on one thread (about 20 s).
//!
//! Cost against node count: the hanging sheet (top row pinned) at 529 to 31,329 nodes, at the
//! default budget (2 substeps x 5 iterations of the default method per 1/60 s frame), one thread.
//!
//! For each size: nodes, factor nonzeros and bytes, build-and-factor time, frame time (median
//! of 30 frames after 30 frames of settling), time per iteration, and time per iteration per
//! thousand factor nonzeros (flat if the per-iteration cost grows no faster than the factor).
//! Prints a table, writes `target/isocloth/scaling.png` (and `.svg`), and ends with one JSON
//! line: `nodes`, `factor_nnz`, `factor_bytes`, `build_ms`, `step_ms_median`,
//! `iteration_us`, `iteration_ns_per_knnz` (arrays, one entry per size).
//!
//! Run: `cargo run --release --example scaling` (about 10 s).

#[path = "common/plot.rs"]
mod plot;

use std::path::PathBuf;
use std::time::Instant;

use isocloth::{BaseMesh, Cloth, ClothMesh, ClothModel, Material, SolverSettings};
use serde_json::json;

const CELLS: [usize; 7] = [11, 16, 22, 32, 44, 64, 88];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()?;
    let settings = SolverSettings::default();
    let iterations = (settings.substeps * settings.iterations) as f64;
    println!(
        "isocloth scaling: hanging sheet, {} x {} ({:?}) per frame, one thread",
        settings.substeps, settings.iterations, settings.method
    );
    println!();
    println!(
        "{:>7} {:>10} {:>11} {:>10} {:>10} {:>13} {:>16}",
        "nodes", "factor nnz", "factor MB", "build ms", "frame ms", "iteration us", "ns/iter/k nnz"
    );
    let (mut nodes, mut nnz, mut bytes, mut build, mut frame, mut per_it, mut per_nnz) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for cells in CELLS {
        let base = BaseMesh::rectangle(1.0, 1.0, cells, cells)?;
        let mesh = std::sync::Arc::new(ClothMesh::new(&base)?);
        let top: Vec<u32> = (0..=cells)
            .map(|i| BaseMesh::grid_index(cells, i, cells))
            .collect();
        let pins = mesh.nodes_for_vertices(&top, true);
        let start = Instant::now();
        let model = ClothModel::new(mesh, Material::default(), &pins, settings)?;
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let stats = *model.stats();
        let mut cloth = Cloth::new(model);
        for _ in 0..30 {
            cloth.step(1.0 / 60.0)?;
        }
        let mut times = Vec::new();
        for _ in 0..30 {
            let start = Instant::now();
            cloth.step(1.0 / 60.0)?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let ms = times[times.len() / 2];
        let it_us = ms * 1e3 / iterations;
        let ns_knnz = it_us * 1e3 / (stats.factor_nnz as f64 / 1e3);
        println!(
            "{:>7} {:>10} {:>11.2} {:>10.1} {:>10.3} {:>13.1} {:>16.1}",
            stats.nodes,
            stats.factor_nnz,
            stats.factor_bytes as f64 / 1e6,
            build_ms,
            ms,
            it_us,
            ns_knnz
        );
        nodes.push(stats.nodes);
        nnz.push(stats.factor_nnz);
        bytes.push(stats.factor_bytes);
        build.push(build_ms);
        frame.push(ms);
        per_it.push(it_us);
        per_nnz.push(ns_knnz);
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&dir)?;
    let stem = dir.join("scaling");
    let xs: Vec<f64> = nodes.iter().map(|&n| n as f64).collect();
    // Factor nonzeros scaled to meet the iteration time at the smallest size, for slope.
    let scale = per_it[0] / nnz[0] as f64;
    plot::log_log_panels(
        &stem,
        &[plot::Panel {
            title: "Hanging sheet, default budget, one thread".into(),
            x_label: "nodes".into(),
            y_label: "microseconds".into(),
            series: vec![
                plot::Series {
                    label: "one iteration".into(),
                    points: xs.iter().copied().zip(per_it.iter().copied()).collect(),
                },
                plot::Series {
                    label: "factor nonzeros (scaled)".into(),
                    points: xs
                        .iter()
                        .copied()
                        .zip(nnz.iter().map(|&z| z as f64 * scale))
                        .collect(),
                },
                plot::Series {
                    label: "build and factor / 10".into(),
                    points: xs
                        .iter()
                        .copied()
                        .zip(build.iter().map(|ms| ms * 100.0))
                        .collect(),
                },
            ],
            target: None,
            v_line: None,
            lines: true,
            mark: None,
        }],
    )?;
    println!();
    println!("plot: {}", stem.with_extension("png").display());
    println!(
        "{}",
        json!({
            "nodes": nodes,
            "factor_nnz": nnz,
            "factor_bytes": bytes,
            "build_ms": build,
            "step_ms_median": frame,
            "iteration_us": per_it,
            "iteration_ns_per_knnz": per_nnz,
            "plot": stem.with_extension("png").display().to_string(),
        })
    );
    Ok(())
}
