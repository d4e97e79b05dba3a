//! The speed scene: a 45 x 45-node sheet hanging from its top row for 10 s, with frame time, strain and memory (about 3 s).
//!
//! The speed benchmark scene, set beside other crates' numbers: a 1 m sheet of 45x45 nodes
//! (23x23 base vertices, 22x22 cells) hanging from its top row, at the default 60 Hz budget for
//! 10 s of frames, released from the vertical rest shape.
//!
//! `elongation` is the lowest point's drop below the top row over the sheet's rest height,
//! minus one: 0 for an inextensible sheet, 0.24 for one hanging 24 % longer than its rest length.
//!
//! Memory is measured with a counting allocator (live heap bytes): `model_bytes` is what the
//! shared prepared form holds (mesh, terms, matrices, the factor), `instance_bytes` what one
//! cloth of it adds after a second of stepping (state, pins, workspace), and
//! `further_instance_bytes` what a second cloth of the same model adds.
//!
//! Run: `cargo run --release --example hanging_sheet`. Prints a table, then one JSON line.
//! Another budget: `cargo run --release --example hanging_sheet -- 1 2` (substeps, then
//! iterations per substep of the default method, the accelerated local-global map), and
//! `-- 2 5 lg` for plain local-global; the JSON's `budget` and
//! `method` name the one run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use glam::Vec3;
use isocloth::{BaseMesh, Cloth, ClothMesh, ClothModel, Material, SolverMethod, SolverSettings};

/// Live heap bytes, counted by the global allocator below.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: forwards every call to the system allocator unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cells = 22;
    let before_model = live();
    let base =
        BaseMesh::rectangle(1.0, 1.0, cells, cells)?.map_positions(|p| Vec3::new(p.x, p.y, 0.0));
    let mesh = ClothMesh::new(&base)?;
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let settings = match args.as_slice() {
        [] => SolverSettings::default(),
        [substeps, iterations, method @ ..] if method.len() <= 1 => SolverSettings {
            substeps: substeps.parse()?,
            iterations: iterations.parse()?,
            method: match method.first().map(String::as_str) {
                None | Some("aa") => SolverSettings::default().method,
                Some("lg") => SolverMethod::LocalGlobal,
                Some(other) => {
                    return Err(format!("unknown method {other:?}: lg or aa").into());
                }
            },
            ..Default::default()
        },
        _ => return Err("usage: hanging_sheet [SUBSTEPS ITERATIONS [aa|lg]]".into()),
    };
    let model = ClothModel::new(Arc::new(mesh), Material::default(), &pins, settings)?;
    drop(base);
    let model_bytes = live() - before_model;
    let mut cloth = Cloth::new(model.clone());
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
        "factor nnz {}, {:.1} KiB; model build {:.2} ms, of which factorisation {:.2} ms",
        stats.factor_nnz,
        stats.factor_bytes as f64 / 1024.0,
        stats.build_seconds * 1e3,
        stats.factor_seconds * 1e3
    );
    println!();
    println!(
        "{:>6} {:>11} {:>11} {:>11} {:>10}",
        "t (s)", "max strain", "mean strain", "elongation", "step (ms)"
    );
    let mut times = Vec::with_capacity(600);
    let (mut max_strain, mut mean_strain, mut pinned_max_strain) = (0.0f64, 0.0f64, 0.0f64);
    let mut iterations = 0;
    let mut instance_bytes = 0;
    for frame in 0..600 {
        let t0 = Instant::now();
        let report = cloth.step(1.0 / 60.0)?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        iterations = report.iterations;
        if frame == 59 {
            instance_bytes = live() - before_model - model_bytes;
        }
        if (frame + 1) % 60 == 0 {
            let m = cloth.measures();
            max_strain = max_strain.max(m.max_strain);
            mean_strain = mean_strain.max(m.mean_strain);
            pinned_max_strain = pinned_max_strain.max(m.pinned_max_strain);
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
    let further_instance_bytes = {
        let before = live();
        let mut second = Cloth::new(model.clone());
        for _ in 0..60 {
            second.step(1.0 / 60.0)?;
        }
        live() - before
    };
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let p99 = sorted[(sorted.len() * 99) / 100];
    println!();
    println!("step: median {median:.3} ms, p99 {p99:.3} ms ({iterations} iterations per frame)");
    println!(
        "memory: model {:.1} KiB (factors {:.1} KiB), first cloth {:.1} KiB, each further cloth \
         {:.1} KiB",
        model_bytes as f64 / 1024.0,
        stats.factor_bytes as f64 / 1024.0,
        instance_bytes as f64 / 1024.0,
        further_instance_bytes as f64 / 1024.0
    );
    let json = serde_json::json!({
        "budget": format!("{}x{}", settings.substeps, settings.iterations),
        "method": format!("{:?}", settings.method),
        "nodes": nodes,
        "iterations": iterations,
        "step_ms_median": median,
        "step_ms_p99": p99,
        "max_strain": max_strain,
        "pinned_max_strain": pinned_max_strain,
        "mean_strain": mean_strain,
        "elongation": elongation(&cloth),
        "factor_nnz": stats.factor_nnz,
        "factor_bytes": stats.factor_bytes,
        "factor_ms": stats.factor_seconds * 1e3,
        "build_ms": stats.build_seconds * 1e3,
        "model_bytes": model_bytes,
        "instance_bytes": instance_bytes,
        "further_instance_bytes": further_instance_bytes,
    });
    println!("{json}");
    Ok(())
}
