//! Scenario runner for tuning budgets per platform: reads a scenario file (RON, see
//! `isocloth::scenario` and `scenarios/`), runs it headless through the bevy_ecs layer and prints a
//! table, then one JSON line (the cape demo's figures plus `conformity_residual` and
//! `nan_frames`). Optionally writes one OBJ per frame.
//!
//! Run: `cargo run --release --example scenario -- scenarios/banner.ron [--obj DIR]`.
//!
//! A malformed or hostile file ends with one line `error: ...` naming the problem and exit
//! status 1, never a panic or a hang.

use std::path::PathBuf;

use isocloth::rig::BONES;
use isocloth::scenario::run;

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
    let usage = "usage: scenario FILE.ron [--obj DIR]";
    let (file, obj) = match args.as_slice() {
        [f] => (PathBuf::from(f), None),
        [f, flag, dir] if flag == "--obj" => (PathBuf::from(f), Some(PathBuf::from(dir))),
        _ => {
            eprintln!("error: {usage}");
            std::process::exit(2);
        }
    };
    // Hostile input must end in one error line, never a panic message: the runner is written
    // not to panic, and this guard turns any panic that slips through into the same form.
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(|| run(&file, obj.as_deref()));
    let (name, with_character, sum) = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            eprintln!("error: internal failure on this input: {msg}");
            std::process::exit(1);
        }
    };
    let (median, p99) = (percentile(&sum.times, 0.5), percentile(&sum.times, 0.99));
    println!(
        "isocloth scenario {name} ({}): {} nodes, {} frames",
        file.display(),
        sum.nodes,
        sum.frames
    );
    println!();
    println!("{:<22} {:>12}", "measure", "value");
    println!("{:<22} {:>12}", "iterations per frame", sum.iterations);
    println!("{:<22} {:>12.3}", "step ms median", median);
    println!("{:<22} {:>12.3}", "step ms p99", p99);
    println!("{:<22} {:>12.2e}", "max strain", sum.max_strain);
    println!("{:<22} {:>12.2e}", "mean strain", sum.mean_strain);
    println!(
        "{:<22} {:>12.2e}",
        "max penetration (m)", sum.max_penetration_m
    );
    println!(
        "{:<22} {:>12.2e}",
        "conformity residual", sum.conformity_residual
    );
    println!("{:<22} {:>12}", "NaN frames", sum.nan_frames);
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
        "max_penetration_m": sum.max_penetration_m,
        "conformity_residual": sum.conformity_residual,
        "nan_frames": sum.nan_frames,
    });
    println!("{json}");
}
