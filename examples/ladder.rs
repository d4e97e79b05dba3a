//! Is more budget better on your scenes? Runs scenario files as families at every budget of a ladder and lists the pairs where more work strained more (2-15 min).
//!
//! A platform preset is a rung of a ladder (substeps x iterations): a game trusts that a rung
//! with at least the substeps and the iterations of another is at least as good. This runs
//! each scenario as its family (`isocloth::scenario::Variation::family`: as written at three
//! seeds, bodies a third thinner and thicker, a third slower and faster, wind a third weaker
//! and stronger where it has wind), at every rung, in parallel on every core, and reports per
//! rung the worst max strain, mean strain and penetration over every member of every scene. A
//! pair is **non-monotone** when the rung with at least the other's substeps and iterations
//! strains more than `--slack` above it while the smaller rung strains at most
//! `--meaningful` (more work made a usable budget worse). No timing: `tune` times rungs.
//!
//! **Motion with strain**: each member also runs at a converged budget (`--reference`,
//! default `32x20`; `none` skips it) and at twice its substeps, and each rung's trajectory error
//! (docs/design.md section 6: the worst centre-of-mass distance from the converged run, over the
//! cloth's size) is the worst over every member of every scene, over each member's converged
//! window (the frames before the reference and its doubling part by 1 % of the size: a sheet a
//! limb knocks one way or the other has a short one) or the first `--window-frames N` of each
//! (then without the doubling). A rung holds only where strain and trajectory error both hold
//! (`--max-trajectory-error`, default 0.08); pairs where more budget moves further from the
//! converged cloth are listed too.
//!
//! Run: `cargo run --release --example ladder -- SCENARIO.ron [SCENARIO.ron ...]
//! [--written SCENARIO.ron] [--ladder SxI,...] [--preset NAME|FILE.ron] [--no-family] [--slack 0.005] [--meaningful 0.25]
//! [--max-strain 0.1] [--max-penetration-mm 1] [--reference SxI|none] [--window-frames N]
//! [--max-trajectory-error 0.08]`.
//!
//! - `--ladder`: the rungs (default `isocloth::tuning::ladder()`, 1-4 substeps x 1-10
//!   iterations); `--preset` judges the shipped presets' rungs (repeatable: `--preset mobile
//!   --preset console --preset desktop`).
//! - `--no-family`: each scenario as written only; `--written SCENARIO.ron`: that one as written
//!   only (as `tune` runs the scenario it times).
//!
//! The table has one row per rung: the worst figures over all scenes, then each scene's family
//! max strain; rungs that hold the rule (max strain and penetration within bounds, no
//! rollback) are marked. The last stdout line is one JSON object: `scenarios`, `family`
//! (member labels), `slack`, `meaningful`, `reference`, `window_frames`, `scene_window_frames`
//! (per scenario, its members' shortest converged window),
//! `max_trajectory_error`, `rungs` (per rung `label`, `substeps`, `iterations`, `max_strain`,
//! `mean_strain`, `penetration_m`, `rollbacks`, `trajectory_error`, `holds`,
//! `scene_max_strain` and `scene_trajectory_error` per scenario, `worst_member` per scenario),
//! `holding` (how many rungs hold), `non_monotone` (pairs `[larger, smaller, larger's strain,
//! smaller's strain]`), `non_monotone_trajectory` (the same on trajectory error).
//! Errors print one `error:` line and exit with status 1.

#[path = "common/preset_arg.rs"]
mod preset_arg;

use std::error::Error;
use std::path::{Path, PathBuf};

use glam::DVec3;
use isocloth::SolverMethod;
use isocloth::ecs::BudgetPreset;
use isocloth::scenario::{self, Summary, Variation};
use isocloth::tuning::{self, Candidate, TrajectoryError};
use rayon::prelude::*;
use serde_json::json;

const USAGE: &str = "usage: ladder SCENARIO.ron [SCENARIO.ron ...] [--written SCENARIO.ron] [--ladder SxI,...] \
[--preset NAME|FILE.ron ...] [--no-family] [--slack F] [--meaningful F] [--max-strain F] \
[--max-penetration-mm F] [--reference SxI|none] [--window-frames N] [--max-trajectory-error F]";

struct Args {
    scenarios: Vec<PathBuf>,
    /// The converged budget trajectory errors are measured against (`None`: not measured).
    reference: Option<Candidate>,
    /// Frames the trajectory error is taken over (every frame when `None`).
    window: Option<usize>,
    max_trajectory_error: f64,
    /// Per scenario: run as written only (`--written`).
    written: Vec<bool>,
    ladder: Vec<Candidate>,
    family: bool,
    slack: f64,
    meaningful: f64,
    max_strain: f64,
    max_penetration: f64,
}

fn parse_rungs(v: &str) -> Result<Vec<Candidate>, Box<dyn Error>> {
    v.split(',')
        .map(|r| {
            let (s, i) = r
                .split_once('x')
                .ok_or_else(|| format!("--ladder: {r:?} is not SxI"))?;
            let (s, i): (u32, u32) = (s.trim().parse()?, i.trim().parse()?);
            if s == 0 || i == 0 || s > 64 || i > 100 {
                return Err(format!("--ladder: {r:?} out of range (1-64 x 1-100)").into());
            }
            Ok(Candidate {
                substeps: s,
                iterations: i,
                method: SolverMethod::default(),
                weights: Default::default(),
            })
        })
        .collect()
}

fn parse_args(args: &[String]) -> Result<Args, Box<dyn Error>> {
    let mut a = Args {
        scenarios: Vec::new(),
        reference: Some(Candidate::converged()),
        window: None,
        max_trajectory_error: 0.08,
        written: Vec::new(),
        ladder: Vec::new(),
        family: true,
        slack: 0.005,
        meaningful: 0.25,
        max_strain: 0.1,
        max_penetration: 0.001,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{arg} needs a value ({USAGE})"))
        };
        let number = |v: &str| -> Result<f64, Box<dyn Error>> {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                _ => Err(format!("{arg}: {v:?} is not a non-negative number").into()),
            }
        };
        match arg.as_str() {
            "--ladder" => a.ladder.extend(parse_rungs(value()?)?),
            "--preset" => {
                let p: BudgetPreset = preset_arg::preset_named(value()?)?;
                a.ladder.push(Candidate {
                    substeps: p.substeps,
                    iterations: p.iterations,
                    method: p.method,
                    weights: p.weights,
                });
            }
            "--no-family" => a.family = false,
            "--reference" => {
                a.reference = match value()?.as_str() {
                    "none" => None,
                    v => {
                        let p: BudgetPreset = preset_arg::preset_named(v)?;
                        Some(Candidate {
                            substeps: p.substeps,
                            iterations: p.iterations,
                            method: p.method,
                            weights: p.weights,
                        })
                    }
                }
            }
            "--window-frames" => {
                let v = value()?;
                a.window = Some(v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    format!("--window-frames: {v:?} is not a positive whole number")
                })?);
            }
            "--max-trajectory-error" => a.max_trajectory_error = number(value()?)?,
            "--written" => {
                a.scenarios.push(PathBuf::from(value()?));
                a.written.push(true);
            }
            "--slack" => a.slack = number(value()?)?,
            "--meaningful" => a.meaningful = number(value()?)?,
            "--max-strain" => a.max_strain = number(value()?)?,
            "--max-penetration-mm" => a.max_penetration = number(value()?)? / 1e3,
            s if s.starts_with("--") => return Err(format!("unknown option {s} ({USAGE})").into()),
            s => {
                a.scenarios.push(PathBuf::from(s));
                a.written.push(false);
            }
        }
    }
    if a.scenarios.is_empty() {
        return Err(format!("no scenario given ({USAGE})").into());
    }
    if a.ladder.is_empty() {
        a.ladder = tuning::ladder();
    }
    Ok(a)
}

struct Scene {
    path: PathBuf,
    text: String,
    dir: PathBuf,
    family: Vec<Variation>,
}

/// One rung on one member of one scene.
struct Run {
    max_strain: f64,
    mean_strain: f64,
    penetration: f64,
    rollbacks: u64,
    centre_of_mass: Vec<DVec3>,
    /// The cloth's size (m), which trajectory errors are divided by.
    size: f64,
}

impl Run {
    fn from(s: Summary, size: f64) -> Self {
        let nan = s.nan_frames > 0;
        Self {
            max_strain: if nan { f64::INFINITY } else { s.max_strain },
            mean_strain: if nan { f64::INFINITY } else { s.mean_strain },
            penetration: s.max_penetration_m,
            rollbacks: s.recoveries,
            centre_of_mass: s.centre_of_mass,
            size,
        }
    }
}

/// Runs member `m` of scene `sc` at rung `c`.
fn run_member(sc: &Scene, m: usize, c: &Candidate) -> Result<Run, String> {
    let mut loaded = scenario::load_varied(&sc.text, &sc.dir, &sc.family[m])
        .map_err(|e| e.in_file(&sc.path).to_string())?;
    let size = loaded.cloth_size();
    loaded
        .set_budget(BudgetPreset {
            name: "rung".into(),
            substeps: c.substeps,
            iterations: c.iterations,
            method: c.method,
            strain_cap: Default::default(),
            weights: c.weights,
        })
        .map_err(|e| e.to_string())?;
    let (_, _, sum) = loaded.run(None).map_err(|e| e.to_string())?;
    Ok(Run::from(sum, size))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn label(c: &Candidate) -> String {
    format!("{} x {}", c.substeps, c.iterations)
}

fn run(args: &[String]) -> Result<(), Box<dyn Error>> {
    let a = parse_args(args)?;
    let scenes = a
        .scenarios
        .iter()
        .zip(&a.written)
        .map(|(path, &written)| {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
            let loaded = scenario::load(&text, &dir).map_err(|e| e.in_file(path))?;
            let family = if a.family && !written {
                Variation::family(loaded.has_wind())
            } else {
                vec![Variation::default()]
            };
            Ok(Scene {
                path: path.clone(),
                text,
                dir,
                family,
            })
        })
        .collect::<Result<Vec<_>, Box<dyn Error>>>()?;
    // Every (rung, scene, member) is one job.
    let jobs: Vec<(usize, usize, usize)> = (0..a.ladder.len())
        .flat_map(|r| {
            scenes
                .iter()
                .enumerate()
                .flat_map(move |(s, sc)| (0..sc.family.len()).map(move |m| (r, s, m)))
        })
        .collect();
    let t0 = std::time::Instant::now();
    // The converged runs first (the most work each), one per member of each scene.
    let members: Vec<(usize, usize)> = scenes
        .iter()
        .enumerate()
        .flat_map(|(s, sc)| (0..sc.family.len()).map(move |m| (s, m)))
        .collect();
    // Without `--window-frames`, each member's window is its converged window: the frames
    // before the reference and the reference at twice its substeps part by 1 % of the cloth's
    // size (`tuning::converged_frames`, as `tune` finds it).
    let finer_reference = a
        .reference
        .filter(|_| a.window.is_none())
        .map(|c| Candidate {
            substeps: 2 * c.substeps,
            ..c
        });
    let references: Vec<Option<(Run, usize)>> = members
        .par_iter()
        .map(|&(s, m)| -> Result<_, String> {
            let Some(c) = &a.reference else {
                return Ok(None);
            };
            let run = run_member(&scenes[s], m, c)?;
            let window = match &finer_reference {
                Some(f) => {
                    let finer = run_member(&scenes[s], m, f)?;
                    tuning::converged_frames(&run.centre_of_mass, &finer.centre_of_mass, run.size)
                }
                None => a.window.unwrap_or(run.centre_of_mass.len()),
            };
            Ok(Some((run, window)))
        })
        .collect::<Result<_, String>>()?;
    let converged_of = |s: usize, m: usize| {
        members
            .iter()
            .position(|&p| p == (s, m))
            .and_then(|k| references[k].as_ref())
    };
    // Per scene, the shortest window over its members.
    let scene_window: Vec<Option<usize>> = (0..scenes.len())
        .map(|s| {
            members
                .iter()
                .zip(&references)
                .filter(|((ms, _), _)| *ms == s)
                .filter_map(|(_, r)| r.as_ref().map(|r| r.1))
                .min()
        })
        .collect();
    let runs: Vec<Run> = jobs
        .par_iter()
        .map(|&(r, s, m)| run_member(&scenes[s], m, &a.ladder[r]))
        .collect::<Result<_, String>>()?;
    let elapsed = t0.elapsed().as_secs_f64();

    struct Rung {
        max_strain: f64,
        mean_strain: f64,
        penetration: f64,
        rollbacks: u64,
        scene_max: Vec<f64>,
        worst_member: Vec<String>,
        /// Worst trajectory error over every member of every scene (0 when not measured).
        trajectory_error: f64,
        scene_trajectory: Vec<f64>,
    }
    let mut rungs: Vec<Rung> = (0..a.ladder.len())
        .map(|_| Rung {
            max_strain: 0.0,
            mean_strain: 0.0,
            penetration: 0.0,
            rollbacks: 0,
            scene_max: vec![0.0; scenes.len()],
            worst_member: vec![String::new(); scenes.len()],
            trajectory_error: 0.0,
            scene_trajectory: vec![0.0; scenes.len()],
        })
        .collect();
    for (&(r, s, m), run) in jobs.iter().zip(&runs) {
        let g = &mut rungs[r];
        g.max_strain = g.max_strain.max(run.max_strain);
        g.mean_strain = g.mean_strain.max(run.mean_strain);
        g.penetration = g.penetration.max(run.penetration);
        g.rollbacks += run.rollbacks;
        // A member whose reference parts from its doubling at once has no window: no
        // verdict on its motion.
        if let Some((c, window)) = converged_of(s, m).filter(|r| r.1 > 0) {
            let e = TrajectoryError::between(
                &run.centre_of_mass,
                &c.centre_of_mass,
                run.size,
                Some(*window),
            )
            .error;
            // A run that ends non-finite has no trajectory: the worst.
            let e = if e.is_nan() { f64::INFINITY } else { e };
            g.trajectory_error = g.trajectory_error.max(e);
            g.scene_trajectory[s] = g.scene_trajectory[s].max(e);
        }
        if run.max_strain >= g.scene_max[s] {
            g.scene_max[s] = run.max_strain;
            g.worst_member[s] = scenes[s].family[m].label();
        }
    }
    let holds = |g: &Rung| {
        g.max_strain <= a.max_strain
            && g.penetration <= a.max_penetration
            && g.rollbacks == 0
            && g.trajectory_error <= a.max_trajectory_error
    };
    let measured = a.reference.is_some();
    let names: Vec<String> = scenes
        .iter()
        .map(|s| {
            s.path
                .file_stem()
                .map_or("?".into(), |n| n.to_string_lossy().into_owned())
        })
        .collect();
    println!(
        "ladder: {} rungs x {} scenes ({} members each{}), {} runs in {elapsed:.1} s",
        a.ladder.len(),
        scenes.len(),
        scenes.iter().map(|s| s.family.len()).max().unwrap_or(1),
        if a.family { ", families" } else { "" },
        runs.len()
    );
    if let Some(c) = &a.reference {
        println!(
            "trajectory error against {}, {}; a rung holds where strain and trajectory error both hold",
            c.label(),
            a.window.map_or(
                format!(
                    "over each member's converged window (the frames before it and {}x{} part by 1 % of the size; shortest per scene: {})",
                    2 * c.substeps,
                    c.iterations,
                    scene_window
                        .iter()
                        .map(|w| w.map_or("-".into(), |w| w.to_string()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                |w| format!("over the first {w} frames")
            )
        );
    }
    print!(
        "{:>8} {:>6} {:>8} {:>8} {:>9} {:>8} {:>5}",
        "rung", "iters", "max %", "mean %", "pen mm", "traj %", "holds"
    );
    for n in &names {
        print!(" {:>14}", truncate(n, 14));
    }
    println!();
    for (c, g) in a.ladder.iter().zip(&rungs) {
        print!(
            "{:>8} {:>6} {:>8.2} {:>8.3} {:>9.3} {:>8} {:>5}",
            label(c),
            c.iterations_per_frame(),
            100.0 * g.max_strain,
            100.0 * g.mean_strain,
            1e3 * g.penetration,
            if measured {
                format!("{:.2}", 100.0 * g.trajectory_error)
            } else {
                "-".into()
            },
            if holds(g) { "yes" } else { "" }
        );
        for (v, t) in g.scene_max.iter().zip(&g.scene_trajectory) {
            if measured {
                print!(" {:>6.2} /{:>6.2}", 100.0 * v, 100.0 * t);
            } else {
                print!(" {:>14.2}", 100.0 * v);
            }
        }
        println!();
    }
    if measured {
        println!("(per scene: max strain % / trajectory error %)");
    }
    // Pairs where the rung with at least the other's substeps and iterations does worse: on
    // strain (the smaller rung usable), and on trajectory error.
    let mut bad = Vec::new();
    let mut bad_motion = Vec::new();
    for (x, gx) in a.ladder.iter().zip(&rungs) {
        for (y, gy) in a.ladder.iter().zip(&rungs) {
            if std::ptr::eq(x, y)
                || (x.substeps, x.iterations) == (y.substeps, y.iterations)
                || x.substeps < y.substeps
                || x.iterations < y.iterations
            {
                continue;
            }
            if gy.max_strain <= a.meaningful && gx.max_strain > gy.max_strain + a.slack {
                bad.push((label(x), label(y), gx.max_strain, gy.max_strain));
            }
            if measured && gx.trajectory_error > gy.trajectory_error + a.slack {
                bad_motion.push((label(x), label(y), gx.trajectory_error, gy.trajectory_error));
            }
        }
    }
    bad.sort_by(|p, q| (q.2 - q.3).total_cmp(&(p.2 - p.3)));
    bad_motion.sort_by(|p, q| (q.2 - q.3).total_cmp(&(p.2 - p.3)));
    for (x, y, sx, sy) in &bad {
        println!(
            "non-monotone: {x} {:.2} % > {y} {:.2} %",
            100.0 * sx,
            100.0 * sy
        );
    }
    for (x, y, sx, sy) in &bad_motion {
        println!(
            "non-monotone motion: {x} trajectory error {:.2} % > {y} {:.2} %",
            100.0 * sx,
            100.0 * sy
        );
    }
    let holding = rungs.iter().filter(|g| holds(g)).count();
    println!(
        "{holding} of {} rungs hold (max strain <= {:.1} %, penetration <= {} mm{}); {} non-monotone pairs (slack {:.1} points, smaller rung at most {:.0} %){}",
        a.ladder.len(),
        100.0 * a.max_strain,
        1e3 * a.max_penetration,
        if measured {
            format!(
                ", trajectory error <= {:.1} %",
                100.0 * a.max_trajectory_error
            )
        } else {
            String::new()
        },
        bad.len(),
        100.0 * a.slack,
        100.0 * a.meaningful,
        if measured {
            format!("; {} on trajectory error", bad_motion.len())
        } else {
            String::new()
        }
    );
    let json = json!({
        "scenarios": a.scenarios.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "family": scenes.first().map(|s| s.family.iter().map(Variation::label).collect::<Vec<_>>()),
        "slack": a.slack,
        "meaningful": a.meaningful,
        "reference": a.reference.map(|c| format!("{}x{}", c.substeps, c.iterations)),
        "window_frames": a.window,
        "scene_window_frames": scene_window,
        "max_trajectory_error": a.max_trajectory_error,
        "rungs": a.ladder.iter().zip(&rungs).map(|(c, g)| json!({
            "label": label(c),
            "substeps": c.substeps,
            "iterations": c.iterations,
            "max_strain": finite(g.max_strain),
            "mean_strain": finite(g.mean_strain),
            "penetration_m": g.penetration,
            "rollbacks": g.rollbacks,
            "trajectory_error": if measured { finite(g.trajectory_error) } else { None },
            "holds": holds(g),
            "scene_max_strain": g.scene_max.iter().map(|&v| finite(v)).collect::<Vec<_>>(),
            "scene_trajectory_error": g.scene_trajectory.iter().map(|&v| if measured { finite(v) } else { None }).collect::<Vec<_>>(),
            "worst_member": g.worst_member,
        })).collect::<Vec<_>>(),
        "holding": holding,
        "non_monotone": bad.iter().map(|(x, y, sx, sy)| json!([x, y, sx, sy])).collect::<Vec<_>>(),
        "non_monotone_trajectory": bad_motion.iter().map(|(x, y, sx, sy)| json!([x, y, sx, sy])).collect::<Vec<_>>(),
    });
    println!("{json}");
    Ok(())
}

/// A strain for the JSON line (a non-finite run is written as null).
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
