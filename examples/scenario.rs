//! Runs a scenario file (RON) headless through the bevy_ecs layer, at its own budget or a preset's (under a second for the banner, 2-10 s for the cape).
//!
//! Scenario runner for tuning budgets per platform: reads a scenario file (RON, see
//! `isocloth::scenario` and `scenarios/`), runs it headless through the bevy_ecs layer and prints a
//! table, then one JSON line (the cape demo's figures plus `conformity_residual` and
//! `nan_frames`; with layers, each cloth's strain, `crossings` and `min_separation_m`).
//! Optionally writes one OBJ per frame (a layered cloth's as `NAME_layerK_FRAME.obj`).
//!
//! Run: `cargo run --release --example scenario -- scenarios/banner.ron [--obj DIR]
//! [--preset mobile|console|desktop|PRESET.ron]` (under a second for the banner, a few seconds
//! for the cape). `--preset` runs the scenario at that budget instead of the file's.
//!
//! A malformed or hostile file ends with one line `error: FILE:LINE:COLUMN: PATH: MESSAGE`
//! naming the problem and, as far as known, where it is, and exit status 1; never a panic or a
//! hang.

use std::io::Write;
use std::path::{Path, PathBuf};

#[path = "common/preset_arg.rs"]
mod preset_arg;

use isocloth::rig::BONES;
use isocloth::scenario::{ScenarioError, load, run};
use preset_arg::preset_named;

fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
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
    let usage = "usage: scenario FILE.ron [--obj DIR] [--preset mobile|console|desktop|PRESET.ron]";
    let (mut file, mut obj, mut preset) = (None, None, None);
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
    let budget = match preset.as_deref().map(preset_named) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            let _ = writeln!(err, "error: --preset: {e}");
            return 1;
        }
    };
    let outcome = std::panic::catch_unwind(|| match &budget {
        None => run(&file, obj.as_deref()),
        Some(b) => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| ScenarioError::from(e.to_string()).in_file(&file))?;
            let dir = file.parent().unwrap_or(Path::new("."));
            let mut loaded = load(&text, dir).map_err(|e| e.in_file(&file))?;
            loaded.set_budget(b.clone()).map_err(|e| e.in_file(&file))?;
            loaded.run(obj.as_deref())
        }
    });
    let (name, with_character, sum) = match outcome {
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
    let (median, p99) = (percentile(&sum.times, 0.5), percentile(&sum.times, 0.99));
    let rows: [(&str, String); 8] = [
        ("iterations per frame", format!("{:>12}", sum.iterations)),
        ("step ms median", format!("{median:>12.3}")),
        ("step ms p99", format!("{p99:>12.3}")),
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
        "step_ms_median": median,
        "step_ms_p99": p99,
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
    });
    report.push_str(&format!("{json}\n"));
    let _ = out.write_all(report.as_bytes());
    0
}
