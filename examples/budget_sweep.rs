//! Fidelity against the iteration budget: five scenes at 1 to 40 iterations per frame against a Newton reference (about 3.5 minutes on two cores).
//!
//! Fidelity against the iteration budget: each scene runs 2 s at 1, 2, 3, 5, 8, 10, 15, 20 and
//! 40 solver iterations per 1/60 s frame (split into substeps of at most 5 iterations: 10 is the
//! default 2 x 5) and is compared with a converged run of the same scene: Newton's method to a
//! force residual of a thousandth of a node's weight on every one of 4 substeps per frame
//! ([`SolverMethod::Newton`]). The same at 8 substeps is run too: the frames before the two
//! first differ by 1 % of the cloth's size are the *converged window*, where the reference meets
//! the definition of converged (doubling moves it by under 1 %). After it, the scenes
//! that crumple are chaotic: no reference converges there, so the error over 2 s is reported
//! beside the error over the window.
//!
//! Scenes: the two-pin square released from horizontal (1 m, 12 x 12 base cells) at the default
//! bending stiffness and at silk and leather; the clamped irregular strip (0.5 x 0.15 m, 18 x 6
//! jittered cells, k_b = 0.002) released horizontal; a cape-sized sheet (0.5 x 0.9 m) hanging
//! from a bar that swings sideways and moves forward.
//!
//! Prints a table per scene, writes `target/isocloth/budget_sweep.png` (and `.svg`): max strain
//! and trajectory error against iterations, one line per scene. The last stdout line is one JSON
//! object: `iterations`, then per scene `max_strain`, `mean_strain`, `pinned_max_strain`, `trajectory_error` (worst
//! centre-of-mass distance over the cloth's size, over 2 s), `trajectory_error_converged` (the
//! same over the converged window), `converged_seconds` (the window's length), `droop_error`
//! where defined, and `step_ms_median` at the default budget; plus the overall `step_ms_median`.
//!
//! Run: `cargo run --release --example budget_sweep [-- --method lg|aa]` (about three minutes on two cores: the
//! Newton references refactor every iteration).

#[path = "common/plot.rs"]
mod plot;

use std::path::PathBuf;
use std::time::Instant;

use glam::{DVec3, Vec3};
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverMethod, SolverSettings};
use serde_json::{Map, Value, json};

const FRAMES: usize = 120;
const BUDGETS: [u32; 9] = [1, 2, 3, 5, 8, 10, 15, 20, 40];
const DEFAULT_BUDGET: u32 = 10;

/// Substeps and iterations per substep for `n` iterations per frame (at most 5 per substep).
fn split(n: u32) -> (u32, u32) {
    let substeps = n.div_ceil(5).max(1);
    (substeps, n / substeps)
}

#[derive(Clone, Copy)]
enum Kind {
    TwoPinSquare,
    ClampedStrip,
    BarCape,
}

#[derive(Clone, Copy)]
struct Scene {
    name: &'static str,
    kind: Kind,
    bending: f64,
    /// Cloth size (m) that trajectory errors are divided by.
    size: f64,
}

const SCENES: [Scene; 5] = [
    Scene {
        name: "two_pin_square",
        kind: Kind::TwoPinSquare,
        bending: 1e-4,
        size: 1.0,
    },
    Scene {
        name: "two_pin_square_silk",
        kind: Kind::TwoPinSquare,
        bending: 1e-6,
        size: 1.0,
    },
    Scene {
        name: "two_pin_square_leather",
        kind: Kind::TwoPinSquare,
        bending: 1e-2,
        size: 1.0,
    },
    Scene {
        name: "clamped_strip",
        kind: Kind::ClampedStrip,
        bending: 2e-3,
        size: 0.5,
    },
    Scene {
        name: "bar_cape",
        kind: Kind::BarCape,
        bending: 1e-4,
        size: 0.9,
    },
];

/// The cloth of `scene`, the vertices whose mean drop is its droop (strip tip), and the pinned
/// nodes' rest positions (moved by the bar scene).
fn build(scene: &Scene, settings: SolverSettings) -> (Cloth, Vec<u32>) {
    let material = Material {
        bending_stiffness: scene.bending,
        ..Default::default()
    };
    let (base, pinned, with_edges, tip) = match scene.kind {
        Kind::TwoPinSquare => {
            let c = 12;
            let base = BaseMesh::rectangle(1.0, 1.0, c, c)
                .expect("valid")
                .map_positions(|p| Vec3::new(p.x, 1.0, -p.y));
            let pins = vec![BaseMesh::grid_index(c, 0, 0), BaseMesh::grid_index(c, c, 0)];
            (base, pins, false, Vec::new())
        }
        Kind::ClampedStrip => {
            let (cx, cy) = (18, 6);
            let base = BaseMesh::jittered_rectangle(0.5, 0.15, cx, cy, 0.3, 7)
                .expect("valid")
                .map_positions(|p| Vec3::new(p.x, 0.0, p.y));
            let clamp = (0..=cy)
                .flat_map(|j| {
                    [
                        BaseMesh::grid_index(cx, 0, j),
                        BaseMesh::grid_index(cx, 1, j),
                    ]
                })
                .collect();
            let tip = (0..=cy).map(|j| BaseMesh::grid_index(cx, cx, j)).collect();
            (base, clamp, true, tip)
        }
        Kind::BarCape => {
            let (cx, cy) = (10, 18);
            let base = BaseMesh::rectangle(0.5, 0.9, cx, cy)
                .expect("valid")
                .map_positions(|p| Vec3::new(p.x - 0.25, 0.5 + p.y, 0.0));
            let top = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
            (base, top, true, Vec::new())
        }
    };
    let mesh = ClothMesh::new(&base).expect("valid mesh");
    let pins = mesh.nodes_for_vertices(&pinned, with_edges);
    let cloth = Cloth::from_mesh(mesh, material, &pins, settings).expect("valid cloth");
    (cloth, tip)
}

/// Where the bar has carried the pins at time `t`: 0.2 m sideways at 1 Hz, forward at 1 m/s.
fn bar_offset(t: f64) -> DVec3 {
    DVec3::new(0.2 * (std::f64::consts::TAU * t).sin(), 0.0, 1.0 * t)
}

struct Run {
    com: Vec<DVec3>,
    max_strain: f64,
    mean_strain: f64,
    pinned_max_strain: f64,
    droop: f64,
    step_ms: Vec<f64>,
}

/// Newton iterations allowed per reference substep (it converges in 3 to 5).
const NEWTON_ITERATIONS: u32 = 30;
/// Reference substeps per frame (and twice as many for the convergence check).
const REFERENCE_SUBSTEPS: u32 = 4;

fn run_with(scene: &Scene, substeps: u32, iterations: u32, method: SolverMethod) -> Run {
    let settings = SolverSettings {
        substeps,
        iterations,
        method,
        ..Default::default()
    };
    let (mut cloth, tip) = build(scene, settings);
    let rest: Vec<DVec3> = cloth
        .pins()
        .iter()
        .map(|&p| cloth.positions()[p as usize])
        .collect();
    let mut targets = rest.clone();
    let mut r = Run {
        com: Vec::with_capacity(FRAMES),
        max_strain: 0.0,
        mean_strain: 0.0,
        pinned_max_strain: 0.0,
        droop: 0.0,
        step_ms: Vec::with_capacity(FRAMES),
    };
    for frame in 0..FRAMES {
        if let Kind::BarCape = scene.kind {
            let offset = bar_offset((frame + 1) as f64 / 60.0);
            for (t, p) in targets.iter_mut().zip(&rest) {
                *t = *p + offset;
            }
            cloth.set_pin_targets(&targets).expect("finite targets");
        }
        let start = Instant::now();
        cloth.step(1.0 / 60.0).expect("finite step");
        r.step_ms.push(start.elapsed().as_secs_f64() * 1e3);
        let m = cloth.measures();
        r.max_strain = r.max_strain.max(m.max_strain);
        r.mean_strain = r.mean_strain.max(m.mean_strain);
        r.pinned_max_strain = r.pinned_max_strain.max(m.pinned_max_strain);
        r.com.push(cloth.center_of_mass());
    }
    if !tip.is_empty() {
        r.droop = -tip
            .iter()
            .map(|&v| cloth.positions()[v as usize].y)
            .sum::<f64>()
            / tip.len() as f64;
    }
    r
}

/// Worst centre-of-mass distance over the first `frames` frames, over `size`.
fn trajectory_error(a: &Run, b: &Run, size: f64, frames: usize) -> f64 {
    a.com
        .iter()
        .zip(&b.com)
        .take(frames)
        .map(|(p, q)| p.distance(*q))
        .fold(0.0, f64::max)
        / size
}

/// Frames before the centres of mass of `a` and `b` first differ by 1 % of `size`.
fn converged_frames(a: &Run, b: &Run, size: f64) -> usize {
    a.com
        .iter()
        .zip(&b.com)
        .position(|(p, q)| p.distance(*q) > 0.01 * size)
        .unwrap_or(a.com.len())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The solver from `--method lg|aa` (default: the crate's default method).
fn method_arg() -> Result<SolverMethod, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    Ok(
        match args
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            [] => SolverMethod::default(),
            ["--method", "lg"] => SolverMethod::LocalGlobal,
            ["--method", "aa"] => SolverMethod::Anderson { history: 5 },
            _ => return Err("usage: budget_sweep [--method lg|aa]".into()),
        },
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let method = method_arg()?;
    println!("isocloth budget sweep: {FRAMES} frames at 60 Hz per run, {method:?}");
    let mut out = Map::new();
    out.insert("iterations".into(), json!(BUDGETS));
    let mut strain_lines = Vec::new();
    let mut error_lines = Vec::new();
    let mut window_lines = Vec::new();
    let mut all_default_ms = Vec::new();
    for scene in &SCENES {
        // The two references on the two cores.
        let newton =
            |substeps| move || run_with(scene, substeps, NEWTON_ITERATIONS, SolverMethod::Newton);
        let (reference, finer) = std::thread::scope(|s| {
            let finer = s.spawn(newton(2 * REFERENCE_SUBSTEPS));
            let reference = newton(REFERENCE_SUBSTEPS)();
            (reference, finer.join().expect("reference run"))
        });
        let convergence = trajectory_error(&finer, &reference, scene.size, FRAMES);
        let window = converged_frames(&finer, &reference, scene.size);
        println!();
        println!(
            "{} (k_b = {:e}): converged = Newton, {REFERENCE_SUBSTEPS} substeps; \
             {} substeps differ by {:.2} % of the size over 2 s, under 1 % for the first {:.2} s{}",
            scene.name,
            scene.bending,
            2 * REFERENCE_SUBSTEPS,
            convergence * 100.0,
            window as f64 / 60.0,
            if scene.droop_defined() {
                format!(
                    "; droop {:.1} mm ({} substeps: {:.1} mm)",
                    reference.droop * 1e3,
                    2 * REFERENCE_SUBSTEPS,
                    finer.droop * 1e3
                )
            } else {
                String::new()
            }
        );
        println!(
            "{:>10} {:>8} {:>11} {:>12} {:>11} {:>11} {:>11} {:>9}",
            "iter/frame",
            "split",
            "max strain",
            "mean strain",
            "traj. 2 s",
            "traj. conv.",
            "droop err",
            "step ms"
        );
        let mut pinned_s = Vec::new();
        let (mut max_s, mut mean_s, mut traj, mut traj_conv, mut droop_err) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut default_ms = 0.0;
        for &n in &BUDGETS {
            let (sub, it) = split(n);
            let mut r = run_with(scene, sub, it, method);
            let err = trajectory_error(&r, &reference, scene.size, FRAMES);
            let err_conv = trajectory_error(&r, &reference, scene.size, window);
            let d = if scene.droop_defined() {
                (r.droop - reference.droop).abs() / reference.droop
            } else {
                0.0
            };
            let ms = median(&mut r.step_ms);
            if n == DEFAULT_BUDGET {
                default_ms = ms;
                all_default_ms.extend_from_slice(&r.step_ms);
            }
            println!(
                "{n:>10} {:>8} {:>10.3}% {:>11.4}% {:>10.2}% {:>10.2}% {:>10} {ms:>9.3}",
                format!("{sub}x{it}"),
                r.max_strain * 100.0,
                r.mean_strain * 100.0,
                err * 100.0,
                err_conv * 100.0,
                if scene.droop_defined() {
                    format!("{:.1}%", d * 100.0)
                } else {
                    "-".into()
                },
            );
            max_s.push(r.max_strain);
            mean_s.push(r.mean_strain);
            pinned_s.push(r.pinned_max_strain);
            traj.push(err);
            traj_conv.push(err_conv);
            droop_err.push(d);
        }
        let xs = BUDGETS.iter().map(|&n| n as f64);
        strain_lines.push(plot::Series {
            label: scene.name.into(),
            points: xs.clone().zip(max_s.iter().copied()).collect(),
        });
        error_lines.push(plot::Series {
            label: scene.name.into(),
            points: xs.clone().zip(traj.iter().copied()).collect(),
        });
        window_lines.push(plot::Series {
            label: scene.name.into(),
            points: xs.zip(traj_conv.iter().copied()).collect(),
        });
        let mut s = Map::new();
        s.insert("max_strain".into(), json!(max_s));
        s.insert("mean_strain".into(), json!(mean_s));
        s.insert("pinned_max_strain".into(), json!(pinned_s));
        s.insert("trajectory_error".into(), json!(traj));
        s.insert("trajectory_error_converged".into(), json!(traj_conv));
        s.insert("converged_seconds".into(), json!(window as f64 / 60.0));
        if scene.droop_defined() {
            s.insert("droop_error".into(), json!(droop_err));
        }
        s.insert("converged_check".into(), json!(convergence));
        s.insert("step_ms_median".into(), json!(default_ms));
        out.insert(scene.name.into(), Value::Object(s));
    }
    out.insert("step_ms_median".into(), json!(median(&mut all_default_ms)));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/isocloth");
    std::fs::create_dir_all(&dir)?;
    let stem = dir.join("budget_sweep");
    plot::log_log_panels(
        &stem,
        &[
            plot::Panel {
                title: "Worst max strain over 2 s".into(),
                x_label: "solver iterations per 1/60 s frame".into(),
                y_label: "max render-mesh strain".into(),
                series: strain_lines,
                target: Some((0.01, "1 % target".into())),
                v_line: None,
                lines: true,
                mark: None,
            },
            plot::Panel {
                title: "Centre-of-mass error vs converged, 2 s".into(),
                x_label: "solver iterations per 1/60 s frame".into(),
                y_label: "worst distance / cloth size".into(),
                series: error_lines,
                target: Some((0.05, "5 % target".into())),
                v_line: None,
                lines: true,
                mark: None,
            },
            plot::Panel {
                title: "The same over the converged window".into(),
                x_label: "solver iterations per 1/60 s frame".into(),
                y_label: "worst distance / cloth size".into(),
                series: window_lines,
                target: Some((0.05, "5 % target".into())),
                v_line: None,
                lines: true,
                mark: None,
            },
        ],
    )?;
    println!();
    println!("plot: {}", stem.with_extension("png").display());
    out.insert(
        "plot".into(),
        json!(stem.with_extension("png").display().to_string()),
    );
    println!("{}", Value::Object(out));
    Ok(())
}

impl Scene {
    fn droop_defined(&self) -> bool {
        matches!(self.kind, Kind::ClampedStrip)
    }
}
