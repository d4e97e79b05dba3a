//! Runs a scenario file (RON) headless through the bevy_ecs layer, at its own budget or a preset's, and measures its trajectory error against a converged run (under a second for the banner, 2-10 s for the cape; a minute or more with `--reference`).
//!
//! Scenario runner for tuning budgets per platform: reads a scenario file (RON, see
//! `isocloth::scenario` and `scenarios/`), runs it headless through the bevy_ecs layer and prints a
//! table, then one JSON line (the cape demo's figures plus `conformity_residual` and
//! `nan_frames`; the step's costs `step_ms_median`, `step_ms_p99`, `step_ms_max` and its counted
//! work `work_median`, `work_p99`, `work_max` (`isocloth::counters`), with `degraded_frames`,
//! the frames a bound stopped a stage short; with layers, each cloth's strain, `crossings` and
//! `min_separation_m`; the trajectory figures below, `null` without `--reference`).
//! Optionally writes one OBJ per frame (a layered cloth's as `NAME_layerK_FRAME.obj`).
//!
//! Run: `cargo run --release --example scenario -- scenarios/banner.ron [--obj DIR]
//! [--preset mobile|console|desktop|SxI|PRESET.ron] [--reference [PRESET] [--window-frames N]
//! [--reference-obj DIR] [--spread]]`.
//!
//! - `--preset` runs the scenario at that budget instead of the file's (`SxI`: S substeps x I
//!   iterations of the accelerated local-global map).
//! - `--reference` runs it again at a converged budget (alone, or `--reference reference`: the
//!   converged inextensible cloth, `presets/reference.ron`, 32 x 20 at the stiff weights, the
//!   one the crate's figures use; `SxI` runs the default weights, the stiff ones too) and
//!   reports the **trajectory error** (docs/design.md section 6): the worst distance
//!   between the two runs' centres of mass over the cloth's size (`trajectory_error`), the frame
//!   where it is worst (`trajectory_error_frame`), its mean (`trajectory_error_mean`) and the
//!   frames it was taken over (`trajectory_window_frames`; every frame, or the first
//!   `--window-frames N` for a scene that turns chaotic, such as a cape flapping on a runner).
//!   `cloth_size_m` is the size it is divided by. `--reference-obj DIR` writes the converged
//!   run's frames as `--obj` does; `--spread` also runs the reference at twice its substeps and
//!   reports the same measure between the two (`reference_spread`): what the reference itself
//!   is good for.
//!
//! A malformed or hostile file ends with one line `error: FILE:LINE:COLUMN: PATH: MESSAGE`
//! naming the problem and, as far as known, where it is, and exit status 1; never a panic or a
//! hang.

use std::io::Write;
use std::path::{Path, PathBuf};

#[path = "common/preset_arg.rs"]
mod preset_arg;

use isocloth::ecs::BudgetPreset;
use isocloth::rig::BONES;
use isocloth::scenario::{ScenarioError, Summary, load};
use isocloth::tuning::TrajectoryError;
use preset_arg::preset_named;

/// A figure for the JSON line (non-finite written as null).
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Hostile input must end in one error line, never a panic message: the runner is written
    // not to panic, and `runner` turns any panic that slips through into the same form.
    std::panic::set_hook(Box::new(|_| {}));
    let status = runner(&args, &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(status);
}

/// The whole runner: reads the scenario named by `args`, prints the table and the JSON line to
/// `out` and returns 0; or prints one line `error: ...` to `err` and returns 1 (2 for bad
/// usage). A panic inside is caught and reported as `error: internal failure ...`, status 1.
/// (`tests/scenario_mutations.rs` runs it on mutated files.)
pub fn runner(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let usage = "usage: scenario FILE.ron [--obj DIR] [--preset mobile|console|desktop|SxI|PRESET.ron] \
[--reference [PRESET]] [--window-frames N] [--reference-obj DIR] [--spread]";
    let (mut file, mut obj, mut preset) = (None, None, None);
    let (mut reference, mut window, mut reference_obj, mut spread) = (None, None, None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.clone().next()) {
            ("--obj", Some(v)) => {
                obj = Some(PathBuf::from(v));
                it.next();
            }
            ("--preset", Some(v)) => {
                preset = Some(v.clone());
                it.next();
            }
            ("--reference", Some(v)) if !v.starts_with("--") => {
                reference = Some(v.clone());
                it.next();
            }
            // Alone, the converged inextensible cloth (`presets/reference.ron`).
            ("--reference", _) => reference = Some("reference".into()),
            ("--reference-obj", Some(v)) => {
                reference_obj = Some(PathBuf::from(v));
                it.next();
            }
            ("--window-frames", Some(v)) => {
                match v.parse::<usize>() {
                    Ok(n) if n > 0 => window = Some(n),
                    _ => {
                        let _ = writeln!(
                            err,
                            "error: --window-frames: {v:?} is not a positive whole number"
                        );
                        return 2;
                    }
                }
                it.next();
            }
            ("--spread", _) => spread = true,
            (f, _) if file.is_none() && !f.starts_with("--") => file = Some(PathBuf::from(f)),
            _ => {
                let _ = writeln!(err, "error: {usage}");
                return 2;
            }
        }
    }
    let Some(file) = file else {
        let _ = writeln!(err, "error: {usage}");
        return 2;
    };
    if (reference_obj.is_some() || spread || window.is_some()) && reference.is_none() {
        let _ = writeln!(
            err,
            "error: --reference-obj, --spread and --window-frames need --reference ({usage})"
        );
        return 2;
    }
    let mut budgets = [None, None];
    for (slot, (flag, name)) in budgets
        .iter_mut()
        .zip([("--preset", &preset), ("--reference", &reference)])
    {
        match name.as_deref().map(preset_named) {
            None => {}
            Some(Ok(p)) => *slot = Some(p),
            Some(Err(e)) => {
                let _ = writeln!(err, "error: {flag}: {e}");
                return 1;
            }
        }
    }
    let [budget, reference] = budgets;
    // One run of the file at `budget` (the file's own when `None`): its name, whether it has
    // the character, what it measured, and the cloth's size.
    let run_at = |budget: Option<&BudgetPreset>,
                  obj: Option<&Path>|
     -> Result<(String, bool, Summary, f64), ScenarioError> {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| ScenarioError::from(e.to_string()).in_file(&file))?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut loaded = load(&text, dir).map_err(|e| e.in_file(&file))?;
        let size = loaded.cloth_size();
        if let Some(b) = budget {
            loaded.set_budget(b.clone()).map_err(|e| e.in_file(&file))?;
        }
        let (name, with_character, sum) = loaded.run(obj)?;
        Ok((name, with_character, sum, size))
    };
    let outcome = std::panic::catch_unwind(|| -> Result<_, ScenarioError> {
        let run = run_at(budget.as_ref(), obj.as_deref())?;
        let Some(reference) = &reference else {
            return Ok((run, None));
        };
        let converged = run_at(Some(reference), reference_obj.as_deref())?.2;
        let twice = spread
            .then(|| {
                let mut b = reference.clone();
                b.substeps = (2 * b.substeps).min(isocloth::SolverSettings::MAX_SUBSTEPS);
                b.name = format!("{}x{}", b.substeps, b.iterations);
                run_at(Some(&b), None).map(|r| (b, r.2))
            })
            .transpose()?;
        Ok((run, Some((reference.clone(), converged, twice))))
    });
    let ((name, with_character, sum, size), versus) = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let _ = writeln!(err, "error: {e}");
            return 1;
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let _ = writeln!(err, "error: internal failure on this input: {msg}");
            return 1;
        }
    };
    // The trajectory error against the converged run, and the converged run's own spread (the
    // same measure against it at twice its substeps).
    let trajectory = versus.as_ref().map(|(_, converged, _)| {
        TrajectoryError::between(&sum.centre_of_mass, &converged.centre_of_mass, size, window)
    });
    let reference_spread = versus.as_ref().and_then(|(_, converged, twice)| {
        twice.as_ref().map(|(_, t)| {
            TrajectoryError::between(&t.centre_of_mass, &converged.centre_of_mass, size, window)
                .error
        })
    });
    let costs = sum.costs();
    let rows: [(&str, String); 11] = [
        ("iterations per frame", format!("{:>12}", sum.iterations)),
        ("step ms median", format!("{:>12.3}", costs.step_ms_median)),
        ("step ms p99", format!("{:>12.3}", costs.step_ms_p99)),
        ("step ms max", format!("{:>12.3}", costs.step_ms_max)),
        ("work median", format!("{:>12.0}", costs.work_median)),
        (
            "work p99 / max",
            format!(
                "{:>12}",
                format!("{:.0} / {:.0}", costs.work_p99, costs.work_max)
            ),
        ),
        ("max strain", format!("{:>12.2e}", sum.max_strain)),
        ("mean strain", format!("{:>12.2e}", sum.mean_strain)),
        (
            "max penetration (m)",
            format!("{:>12.2e}", sum.max_penetration_m),
        ),
        (
            "conformity residual",
            format!("{:>12.2e}", sum.conformity_residual),
        ),
        ("NaN frames", format!("{:>12}", sum.nan_frames)),
    ];
    let mut report = format!(
        "isocloth scenario {name} ({}): {} nodes, {} frames\n\n{:<22} {:>12}\n",
        file.display(),
        sum.nodes,
        sum.frames,
        "measure",
        "value"
    );
    for (measure, value) in rows {
        report.push_str(&format!("{measure:<22} {value}\n"));
    }
    let layered = sum.cloth_max_strain.len() > 1;
    if layered {
        for (k, strain) in sum.cloth_max_strain.iter().enumerate() {
            let who = if k == 0 {
                "cloth".to_string()
            } else {
                format!("layer {k}")
            };
            report.push_str(&format!("{:<22} {strain:>12.2e}\n", who + " max strain"));
        }
        report.push_str(&format!(
            "{:<22} {:>12}\n{:<22} {:>12}\n{:<22} {:>12.2e}\n",
            "crossings",
            sum.crossings,
            "crossing frames",
            sum.crossing_frames,
            "min separation (m)",
            sum.min_separation_m
        ));
    }
    if let (Some(t), Some((b, _, _))) = (&trajectory, &versus) {
        report.push_str(&format!(
            "{:<22} {:>11.2}%   (against {} x {}, worst at frame {}, over {} frames, cloth size {size:.2} m)\n",
            "trajectory error",
            100.0 * t.error,
            b.substeps,
            b.iterations,
            t.frame,
            t.window_frames
        ));
        if let (Some(e), Some((_, _, Some((twice, _))))) = (reference_spread, &versus) {
            report.push_str(&format!(
                "{:<22} {:>11.2}%   ({} against it)\n",
                "reference spread",
                100.0 * e,
                twice.name
            ));
        }
    }
    let separation = sum
        .min_separation_m
        .is_finite()
        .then_some(sum.min_separation_m);
    let json = serde_json::json!({
        "scenario": name,
        "frames": sum.frames,
        "nodes": sum.nodes,
        "bones": if with_character { BONES.len() } else { 0 },
        "iterations": sum.iterations,
        "step_ms_median": costs.step_ms_median,
        "step_ms_p99": costs.step_ms_p99,
        "step_ms_max": costs.step_ms_max,
        "work_median": costs.work_median,
        "work_p99": costs.work_p99,
        "work_max": costs.work_max,
        "degraded_frames": sum.degraded_frames,
        "max_strain": sum.max_strain,
        "mean_strain": sum.mean_strain,
        "pinned_max_strain": sum.pinned_max_strain,
        "max_penetration_m": sum.max_penetration_m,
        "conformity_residual": sum.conformity_residual,
        "nan_frames": sum.nan_frames,
        "cloth_max_strain": sum.cloth_max_strain,
        "crossings": sum.crossings,
        "crossing_frames": sum.crossing_frames,
        "min_separation_m": separation,
        "reference": versus.as_ref().map(|(b, _, _)| format!("{}x{}", b.substeps, b.iterations)),
        "trajectory_error": trajectory.and_then(|t| finite(t.error)),
        "trajectory_error_frame": trajectory.map(|t| t.frame),
        "trajectory_error_mean": trajectory.and_then(|t| finite(t.mean)),
        "trajectory_window_frames": trajectory.map(|t| t.window_frames),
        "reference_spread": reference_spread.and_then(finite),
        "cloth_size_m": size,
    });
    report.push_str(&format!("{json}\n"));
    let _ = out.write_all(report.as_bytes());
    0
}
