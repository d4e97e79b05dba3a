//! Picks a solver budget and weights for a platform from your own scenario file (about 9 minutes for the cape, more with checks; 3 with `--weights default`).
//!
//! Picks a solver budget for a platform from the user's own scenario: runs the scenario file (the
//! scenario runner's format) at each candidate of [`isocloth::tuning::ladder_with_weights`] (1 to
//! 4 substeps x 1 to 10 iterations of the accelerated local-global map, each at the three weights
//! of [`isocloth::tuning::TUNED_WEIGHTS`]) and at a converged reference (Newton's method at the
//! stiff weights: the converged inextensible cloth), and chooses the
//! candidate that fits the frame budget by the documented rule ([`isocloth::tuning`]: no
//! rollback, no layer crossing, max strain, penetration and trajectory error within bounds, then least
//! trajectory error). A scenario with `layers` is timed and judged with every cloth: the frame
//! time holds the layers' work, the max strain is the worst cloth's.
//!
//! Run: `cargo run --release --example tune -- SCENARIO.ron --ms 0.5 [--check CHECK.ron ...]
//! [--speed 0.35] [--out preset.ron] [--name NAME] [--fit median|p99] [--max-strain 0.1]
//! [--max-penetration-mm 1] [--max-trajectory-error 0.08] [--frames N] [--timing-frames N] [--no-family] [--weights all|default]`, or `... --example tune --
//! --calibrate`.
//!
//! - `--ms`: the frame budget for one cloth on the device (ms).
//! - `--check`: a further scenario every candidate also runs (repeatable), for scenes the budget
//!   must survive besides the one it is timed and judged on, such as `scenarios/drop_bar.ron`
//!   (a sheet dropped on a forearm-sized bar) or `scenarios/limb_sweep.ron`. The rule then sees
//!   each candidate's worst max strain, mean strain and penetration over all the scenarios and
//!   the rollbacks of all; frame times and the trajectory error stay the first scenario's, and
//!   `--frames` cuts only the first scenario. Each check is run as a family
//!   (`isocloth::scenario::Variation::family`): as written at three seeds (starts moved by up to
//!   1e-9 m), with its bodies a third thinner and thicker, a third slower and faster, and with
//!   wind a third weaker and stronger where it has wind (7 or 9 runs), and the rule sees the
//!   worst of them: a budget chosen on a check must hold on scenes of its kind. The preset's
//!   comment and the JSON's `check_family` name the members. `--no-family`: each check as
//!   written only.
//! - `--speed`: the device's speed relative to this machine (default 1); measured times are
//!   divided by it. Measure it with `--calibrate` on both: the factor is this machine's time
//!   over the device's.
//! - `--out`: where the chosen preset's RON goes (default `target/isocloth/tune/NAME.ron`); it
//!   loads with `BudgetPreset::from_ron` and is headed by comments naming the scenario, budget and
//!   figures. `--name`: the preset's name (default the scenario's).
//! - `--fit`: which frame statistic must fit the budget (default the median); `--max-strain`
//!   (default 0.1), `--max-penetration-mm` (default 1) and `--max-trajectory-error` (default
//!   0.08 of the cloth's size, over the reference's converged window) are the rule's bounds: a
//!   candidate holds only where strain and trajectory error both hold.
//! - `--weights default`: try the default weights only (32 candidates; default `all`, 96).
//! - `--frames`: run at most this many frames of the scenario; `--timing-frames`: frames timed per
//!   candidate (default 300).
//!
//! Three passes: the reference and its check at twice the substeps run side by side and stop at
//! the first frame where they differ by 1 % of the cloth's size (the converged window); the
//! candidates' quality runs go in parallel on every core; then each candidate is timed alone,
//! one after another. Everything but the times is deterministic.
//!
//! Prints the candidates (in budget, on the Pareto frontier of frame time, max strain and
//! trajectory error, chosen), writes a plot (`target/isocloth/tune/NAME.png`: frame time against
//! max strain and against trajectory error, the budget as a line, the choice ringed) and the
//! preset. The last stdout line is one JSON object: `scenario`, `checks` (the check files),
//! `check_family` (per check, its members),
//! `budget_ms`, `speed`, `rule`, `reference` (`window_frames`, `window_seconds`), `candidates`
//! (per candidate `label`, `substeps`, `iterations`, `frame_ms_median`, `frame_ms_p99`,
//! `max_strain`, `mean_strain`, `pinned_max_strain`, `penetration_m`, `trajectory_error`, `rollbacks`, `crossings`, `in_budget`,
//! `frontier`, `holds`), `chosen`, `plot`, `preset`. Errors print one `error:` line and exit with
//! status 1.

#[path = "common/plot.rs"]
mod plot;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use glam::DVec3;
use isocloth::ecs::BudgetPreset;
use isocloth::scenario::{self, ScenarioError, Summary, Variation};
use isocloth::tuning::{self, Candidate, Figures, FrameStat, Reference, Rule, RunRecord};
use rayon::prelude::*;
use serde_json::{Value, json};

struct Args {
    scenario: Option<PathBuf>,
    ms: Option<f64>,
    speed: f64,
    out: Option<PathBuf>,
    name: Option<String>,
    rule: Rule,
    frames: Option<u32>,
    timing_frames: u32,
    /// Judge each check on its family (`scenario::Variation::family`), not only as written.
    family: bool,
    calibrate: bool,
    checks: Vec<PathBuf>,
    /// Search the weights too ([`tuning::ladder_with_weights`]), or the default weights only.
    all_weights: bool,
}

const USAGE: &str = "usage: tune SCENARIO.ron --ms BUDGET [--check SCENARIO.ron ...] [--speed F] [--out FILE] [--name NAME] \
[--fit median|p99] [--max-strain F] [--max-penetration-mm F] [--max-trajectory-error F] [--frames N] [--timing-frames N] [--no-family] \
[--weights all|default] | tune --calibrate";

fn parse_args(args: &[String]) -> Result<Args, Box<dyn Error>> {
    let mut a = Args {
        scenario: None,
        ms: None,
        speed: 1.0,
        out: None,
        name: None,
        rule: Rule::default(),
        frames: None,
        timing_frames: 300,
        family: true,
        calibrate: false,
        checks: Vec::new(),
        all_weights: true,
    };
    let mut it = args.iter().cloned();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{arg} needs a value ({USAGE})"))
        };
        let number = |v: String, name: &str| -> Result<f64, Box<dyn Error>> {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("{name}: {v:?} is not a number"))?;
            if !(x.is_finite() && x > 0.0) {
                return Err(format!("{name}: {v} is not a positive number").into());
            }
            Ok(x)
        };
        let count = |v: String, name: &str| -> Result<u32, Box<dyn Error>> {
            match v.parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{name}: {v:?} is not a positive whole number").into()),
            }
        };
        match arg.as_str() {
            "--ms" => a.ms = Some(number(value()?, "--ms")?),
            "--speed" => a.speed = number(value()?, "--speed")?,
            "--out" => a.out = Some(value()?.into()),
            "--name" => a.name = Some(value()?),
            "--fit" => {
                a.rule.fit = match value()?.as_str() {
                    "median" => FrameStat::Median,
                    "p99" => FrameStat::P99,
                    v => return Err(format!("--fit: {v:?} is not median or p99").into()),
                }
            }
            "--max-strain" => a.rule.max_strain = number(value()?, "--max-strain")?,
            "--max-penetration-mm" => {
                a.rule.max_penetration_m = number(value()?, "--max-penetration-mm")? * 1e-3
            }
            "--max-trajectory-error" => {
                a.rule.max_trajectory_error = number(value()?, "--max-trajectory-error")?
            }
            "--frames" => a.frames = Some(count(value()?, "--frames")?),
            "--timing-frames" => a.timing_frames = count(value()?, "--timing-frames")?,
            "--calibrate" => a.calibrate = true,
            "--check" => a.checks.push(value()?.into()),
            "--no-family" => a.family = false,
            "--weights" => {
                a.all_weights = match value()?.as_str() {
                    "all" => true,
                    "default" => false,
                    v => return Err(format!("--weights: {v:?} is not all or default").into()),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ if arg.starts_with('-') => {
                return Err(format!("unknown flag {arg:?} ({USAGE})").into());
            }
            _ if a.scenario.is_none() => a.scenario = Some(arg.into()),
            _ => return Err(format!("unexpected argument {arg:?} ({USAGE})").into()),
        }
    }
    if !a.calibrate {
        if a.scenario.is_none() {
            return Err(format!("no scenario file given ({USAGE})").into());
        }
        if a.ms.is_none() {
            return Err(format!("no budget given: --ms BUDGET ({USAGE})").into());
        }
    }
    Ok(a)
}

/// A scenario file's text and the folder its OBJ paths are relative to.
struct Source {
    path: PathBuf,
    text: String,
    dir: PathBuf,
    frames: Option<u32>,
    /// The members it is run as (a check's family; the scenario itself: as written).
    family: Vec<Variation>,
}

impl Source {
    /// The scenario loaded at `candidate`, at most `frames` frames.
    fn load(
        &self,
        candidate: &Candidate,
        frames: Option<u32>,
    ) -> Result<scenario::LoadedScenario, ScenarioError> {
        self.load_as(candidate, frames, &Variation::default())
    }

    /// [`Source::load`] as one member of its family.
    fn load_as(
        &self,
        candidate: &Candidate,
        frames: Option<u32>,
        variation: &Variation,
    ) -> Result<scenario::LoadedScenario, ScenarioError> {
        let mut s = scenario::load_varied(&self.text, &self.dir, variation)
            .map_err(|e| e.in_file(&self.path))?;
        if let Some(n) = frames.or(self.frames) {
            s.truncate_frames(n);
        }
        s.set_budget(preset(candidate, "candidate"))?;
        Ok(s)
    }
}

fn preset(c: &Candidate, name: &str) -> BudgetPreset {
    BudgetPreset {
        name: name.into(),
        substeps: c.substeps,
        iterations: c.iterations,
        method: c.method,
        strain_cap: Default::default(),
        weights: c.weights,
    }
}

/// What the tuner keeps of a scenario run.
pub fn record(sum: Summary) -> RunRecord {
    RunRecord {
        centre_of_mass: sum.centre_of_mass,
        max_strain: sum.max_strain,
        mean_strain: sum.mean_strain,
        pinned_max_strain: sum.pinned_max_strain,
        penetration_m: sum.max_penetration_m,
        rollbacks: sum.recoveries,
        non_finite_frames: sum.nan_frames,
        crossings: sum.crossings,
    }
}

/// The reference and its check at twice the substeps, side by side, stopped at the first
/// frame where their centres of mass differ by 1 % of `size`.
fn reference(src: &Source, size: f64) -> Result<Reference, Box<dyn Error + Send + Sync>> {
    let (tx, rx) = crossbeam_channel::unbounded::<DVec3>();
    let stop = AtomicBool::new(false);
    let (reference, finer) = std::thread::scope(|s| {
        let finer = s.spawn(|| {
            let sc = src.load(&Candidate::finer_reference(), None)?;
            let out = sc.run_observed(None, |_, cloth| {
                let _ = tx.send(cloth.center_of_mass());
                !stop.load(Ordering::Relaxed)
            });
            drop(tx);
            out
        });
        let reference = src.load(&Candidate::reference(), None).and_then(|sc| {
            sc.run_observed(None, |_, cloth| match rx.recv() {
                Ok(f) if cloth.center_of_mass().distance(f) <= 0.01 * size => true,
                _ => {
                    stop.store(true, Ordering::Relaxed);
                    false
                }
            })
        });
        stop.store(true, Ordering::Relaxed);
        // Let the finer run finish its frame if it waits on nothing (the channel is unbounded).
        (reference, finer.join())
    });
    let (_, _, reference) = reference?;
    let (_, _, finer) = finer.map_err(|_| "the finer reference run panicked")??;
    Ok(Reference::from_runs(
        &reference.centre_of_mass,
        &finer.centre_of_mass,
        size,
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(tune(&args, &mut std::io::stderr()));
}

/// The tuner on its command-line arguments: 0 when a preset was chosen and written; otherwise
/// one `error: ...` line on `err` and 1.
pub fn tune(args: &[String], err: &mut dyn std::io::Write) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

fn run(args: &[String]) -> Result<(), Box<dyn Error>> {
    let args = parse_args(args)?;
    if args.calibrate {
        let ms = tuning::calibrate()?;
        println!(
            "calibration: 2,025-node sheet at 2 x 5 (console), median of {} frames: {ms:.3} ms",
            tuning::CALIBRATION_FRAMES
        );
        println!("the device's --speed is this machine's time over the device's");
        println!("{}", json!({ "calibration_ms": ms }));
        return Ok(());
    }
    let path = args.scenario.clone().expect("checked in parse_args");
    let budget = args.ms.expect("checked in parse_args");
    args.rule.validate()?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let src = Source {
        dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        path: path.clone(),
        text,
        frames: args.frames,
        family: vec![Variation::default()],
    };
    let checks = args
        .checks
        .iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut check = Source {
                dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
                path: path.clone(),
                text,
                frames: None,
                family: vec![Variation::default()],
            };
            let loaded = scenario::load(&check.text, &check.dir).map_err(|e| e.in_file(path))?;
            if args.family {
                check.family = Variation::family(loaded.has_wind());
                // Every member must load (a thicker body can leave its shape's limits).
                for v in &check.family {
                    scenario::load_varied(&check.text, &check.dir, v)
                        .map_err(|e| e.in_file(path))?;
                }
            }
            Ok(check)
        })
        .collect::<Result<Vec<Source>, Box<dyn Error>>>()?;
    let first = scenario::load(&src.text, &src.dir).map_err(|e| e.in_file(&path))?;
    let name = first.name().to_string();
    let size = first.cloth_size();
    let frames = args
        .frames
        .map_or(first.frames(), |f| f.min(first.frames()));
    drop(first);
    let ladder = if args.all_weights {
        tuning::ladder_with_weights()
    } else {
        tuning::ladder()
    };
    println!(
        "tune {}: scenario \"{name}\", {frames} frames, cloth size {size:.2} m; budget {budget} ms \
         at device speed {}; {} candidates",
        path.display(),
        args.speed,
        ladder.len()
    );

    let t0 = std::time::Instant::now();
    let reference = reference(&src, size).map_err(|e| e.to_string())?;
    println!(
        "reference (Newton 4 substeps, checked at 8): converged for {} frames ({:.2} s) [{:.1} s]",
        reference.window_frames(),
        reference.window_frames() as f64 / 60.0,
        t0.elapsed().as_secs_f64()
    );
    if reference.window_frames() == 0 {
        println!(
            "warning: the reference differs from its check by 1 % of the cloth's size from the \
             first frame: no trajectory error can be measured, the least max strain decides"
        );
    }
    let t1 = std::time::Instant::now();
    let records: Vec<RunRecord> = ladder
        .par_iter()
        .map(|c| {
            let mut r = record(src.load(c, None)?.run(None)?.2);
            for check in &checks {
                for v in &check.family {
                    r.absorb_check(&record(check.load_as(c, None, v)?.run(None)?.2));
                }
            }
            Ok(r)
        })
        .collect::<Result<_, ScenarioError>>()?;
    println!(
        "quality runs, in parallel: {:.1} s{}",
        t1.elapsed().as_secs_f64(),
        if checks.is_empty() {
            String::new()
        } else {
            format!(
                "; strain, penetration and rollbacks are the worst over {} and {}",
                path.display(),
                checks
                    .iter()
                    .map(|c| c.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let t2 = std::time::Instant::now();
    let timing_frames = args.timing_frames.min(frames);
    let skip = if timing_frames > 20 { 10 } else { 0 };
    let mut figures = Vec::with_capacity(ladder.len());
    for (c, r) in ladder.iter().zip(&records) {
        let (_, _, s) = src.load(c, Some(timing_frames))?.run(None)?;
        figures.push(Figures::new(
            *c,
            r,
            &s.times[skip..],
            &reference,
            args.speed,
        ));
    }
    println!(
        "timing runs, one at a time, {timing_frames} frames each (the first {skip} not timed): {:.1} s",
        t2.elapsed().as_secs_f64()
    );

    let choice = tuning::choose(&figures, budget, &args.rule);
    let (in_budget, frontier, chosen) = match &choice {
        Ok(c) => (c.in_budget.clone(), c.frontier.clone(), Some(c.chosen)),
        Err(_) => (Vec::new(), Vec::new(), None),
    };
    print_table(&figures, &in_budget, &frontier, chosen, &args.rule);
    let choice = choice?;
    let chosen = &figures[choice.chosen];

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/isocloth/tune");
    std::fs::create_dir_all(&dir)?;
    let stem = dir.join(&name);
    plot_figures(&stem, &figures, &choice, budget, &args.rule)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| stem.with_extension("ron"));
    let preset_name = args.name.clone().unwrap_or_else(|| name.clone());
    let mut on = format!("scenario {name:?}");
    for c in &checks {
        on += &format!(
            ", checked on {} ({})",
            c.path.display(),
            c.family
                .iter()
                .map(Variation::label)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let ron = tuning::preset_ron(&preset_name, chosen, &on, budget, args.speed, &args.rule);
    BudgetPreset::from_ron(&ron).map_err(|e| format!("the written preset does not load: {e}"))?;
    std::fs::write(&out, &ron).map_err(|e| format!("{}: {e}", out.display()))?;
    println!();
    println!(
        "chosen: {} ({:.3} ms median, {:.3} ms p99, max strain {:.2} %, trajectory error {:.2} %)",
        chosen.label,
        chosen.frame_ms_median,
        chosen.frame_ms_p99,
        chosen.max_strain * 100.0,
        chosen.trajectory_error * 100.0
    );
    println!("plot: {}", stem.with_extension("png").display());
    println!("preset: {}", out.display());

    let candidates: Vec<Value> = figures
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut v = serde_json::to_value(f).expect("figures serialise");
            v["in_budget"] = json!(choice.in_budget.contains(&i));
            v["frontier"] = json!(choice.frontier.contains(&i));
            v["holds"] = json!(args.rule.admits(f));
            v
        })
        .collect();
    println!(
        "{}",
        json!({
            "scenario": name,
            "checks": checks.iter().map(|c| c.path.display().to_string()).collect::<Vec<_>>(),
            "check_family": checks.iter().map(|c| c.family.iter().map(Variation::label).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "budget_ms": budget,
            "speed": args.speed,
            "rule": args.rule,
            "reference": {
                "window_frames": reference.window_frames(),
                "window_seconds": reference.window_frames() as f64 / 60.0,
            },
            "candidates": candidates,
            "chosen": chosen.label,
            "plot": stem.with_extension("png").display().to_string(),
            "preset": out.display().to_string(),
        })
    );
    Ok(())
}

fn print_table(
    figures: &[Figures],
    in_budget: &[usize],
    frontier: &[usize],
    chosen: Option<usize>,
    rule: &Rule,
) {
    println!();
    println!(
        "{:<12} {:>9} {:>9} {:>10} {:>11} {:>9} {:>10} {:>9}  notes",
        "candidate", "ms med", "ms p99", "max str %", "mean str %", "pen mm", "traj %", "rollback"
    );
    let mut order: Vec<usize> = (0..figures.len()).collect();
    order.sort_by(|&a, &b| {
        rule.frame_ms(&figures[a])
            .total_cmp(&rule.frame_ms(&figures[b]))
    });
    for i in order {
        let f = &figures[i];
        let mut notes = Vec::new();
        if in_budget.contains(&i) {
            notes.push("in budget");
        }
        if frontier.contains(&i) {
            notes.push("frontier");
        }
        if rule.admits(f) {
            notes.push("holds");
        }
        let crossed = format!("{} layer crossings", f.crossings);
        if f.crossings > 0 {
            notes.push(&crossed);
        }
        if chosen == Some(i) {
            notes.push("CHOSEN");
        }
        println!(
            "{:<12} {:>9.3} {:>9.3} {:>10.2} {:>11.3} {:>9.3} {:>10.2} {:>9}  {}",
            f.label,
            f.frame_ms_median,
            f.frame_ms_p99,
            f.max_strain * 100.0,
            f.mean_strain * 100.0,
            f.penetration_m * 1e3,
            f.trajectory_error * 100.0,
            f.rollbacks,
            notes.join(", ")
        );
    }
}

fn plot_figures(
    stem: &Path,
    figures: &[Figures],
    choice: &tuning::Choice,
    budget: f64,
    rule: &Rule,
) -> Result<(), Box<dyn Error>> {
    let series = |y: &dyn Fn(&Figures) -> f64| {
        let (inside, outside): (Vec<usize>, Vec<usize>) =
            (0..figures.len()).partition(|i| choice.in_budget.contains(i));
        let pts = |ix: Vec<usize>| {
            ix.into_iter()
                .map(|i| (rule.frame_ms(&figures[i]), y(&figures[i])))
                .collect()
        };
        vec![
            plot::Series {
                label: "in budget".into(),
                points: pts(inside),
            },
            plot::Series {
                label: "over budget".into(),
                points: pts(outside),
            },
        ]
    };
    let c = &figures[choice.chosen];
    let x_label = match rule.fit {
        FrameStat::Median => "frame time, median (ms, on the device)",
        FrameStat::P99 => "frame time, 99th percentile (ms, on the device)",
    };
    let budget_line = Some((budget, format!("budget {budget} ms")));
    plot::log_log_panels(
        stem,
        &[
            plot::Panel {
                title: "Max strain against frame time".into(),
                x_label: x_label.into(),
                y_label: "max render-mesh strain".into(),
                series: series(&|f| f.max_strain),
                target: Some((rule.max_strain, "strain bound".into())),
                v_line: budget_line.clone(),
                lines: false,
                mark: Some((
                    (rule.frame_ms(c), c.max_strain),
                    format!("chosen: {}", c.label),
                )),
            },
            plot::Panel {
                title: "Trajectory error against frame time".into(),
                x_label: x_label.into(),
                y_label: "centre-of-mass error / cloth size".into(),
                series: series(&|f| f.trajectory_error),
                target: None,
                v_line: budget_line,
                lines: false,
                mark: Some((
                    (rule.frame_ms(c), c.trajectory_error),
                    format!("chosen: {}", c.label),
                )),
            },
        ],
    )
}
