//! The budget tuner: the rule's choice, the preset it writes, and the `tune` example's errors.
#![cfg(feature = "ecs")]

#[path = "../examples/tune.rs"]
#[allow(dead_code)]
mod tune;

use std::path::PathBuf;

use glam::DVec3;
use isocloth::SolverMethod;
use isocloth::ecs::BudgetPreset;
use isocloth::scenario;
use isocloth::tuning::{
    self, Candidate, Figures, FrameStat, Reference, Rule, RunRecord, TuneError,
};
use proptest::prelude::*;

/// A small scenario: a 0.4 m sheet (6 x 6 base cells) pinned along its top edge, falling
/// against a sphere, 40 frames.
const SMALL: &str = r#"(
    name: "small",
    mesh: Rectangle(width: 0.4, height: 0.4, cells_x: 6, cells_y: 6),
    placement: (translation: (-0.2, 0.6, 0.0)),
    pins: Box(min: (-1.0, 0.995, -1.0), max: (1.0, 1.005, 1.0)),
    colliders: [(shape: Sphere(radius: 0.1), motion: Static(translation: (0.0, 0.7, 0.12)))],
    frames: 40,
)"#;

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("isocloth-tuning-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn record(c: &Candidate) -> RunRecord {
    let mut s = scenario::load(SMALL, std::path::Path::new(".")).unwrap();
    s.set_budget(BudgetPreset {
        name: "t".into(),
        substeps: c.substeps,
        iterations: c.iterations,
        method: c.method,
        strain_cap: Default::default(),
        weights: c.weights,
    })
    .unwrap();
    let (_, _, sum) = s.run(None).unwrap();
    tune::record(sum)
}

/// Figures with the given frame time, strain, error and rollbacks (a 1x1 local-global label).
fn fig(ms: f64, strain: f64, error: f64, rollbacks: u64) -> Figures {
    let c = Candidate {
        substeps: 1,
        iterations: 1,
        method: SolverMethod::LocalGlobal,
        weights: Default::default(),
    };
    let reference = Reference {
        centre_of_mass: vec![DVec3::ZERO],
        size: 1.0,
    };
    let r = RunRecord {
        centre_of_mass: vec![DVec3::new(error, 0.0, 0.0)],
        max_strain: strain,
        rollbacks,
        ..Default::default()
    };
    Figures::new(c, &r, &[ms], &reference, 1.0)
}

/// A quality run is deterministic: the same candidate twice records the same centre of mass,
/// strain and penetration, bit for bit (only frame times may differ).
#[test]
fn quality_runs_are_deterministic() {
    let c = Candidate {
        substeps: 2,
        iterations: 3,
        method: SolverMethod::Anderson { history: 5 },
        weights: Default::default(),
    };
    assert_eq!(record(&c), record(&c));
}

/// On real runs of the small scenario (reference and its doubling, a dozen candidates, their
/// timings), the chosen candidate's frame fits the budget (the median of the cheapest
/// candidate's frames times 1.5, so some fit and some do not), it meets the rule, and no other
/// in-budget candidate that meets the rule has a smaller trajectory error; its RON loads through
/// `BudgetPreset::from_ron` as the same budget.
#[test]
fn chosen_candidate_fits_and_is_not_dominated_and_its_preset_round_trips() {
    let size = scenario::load(SMALL, std::path::Path::new("."))
        .unwrap()
        .cloth_size();
    let reference = record(&Candidate::reference());
    let finer = record(&Candidate::finer_reference());
    let reference = Reference::from_runs(&reference.centre_of_mass, &finer.centre_of_mass, size);
    assert!(
        reference.window_frames() > 0,
        "the reference converges at first"
    );
    let ladder: Vec<Candidate> = tuning::ladder().into_iter().step_by(5).collect();
    // Frame times stand in as iterations per frame (deterministic): a budget of 12.
    let figures: Vec<Figures> = ladder
        .iter()
        .map(|c| {
            let ms = c.iterations_per_frame() as f64;
            Figures::new(*c, &record(c), &[ms], &reference, 1.0)
        })
        .collect();
    let rule = Rule::default();
    let budget = 12.0;
    let choice = tuning::choose(&figures, budget, &rule).unwrap();
    let chosen = &figures[choice.chosen];
    assert!(chosen.frame_ms_median <= budget);
    assert!(rule.admits(chosen));
    assert!(
        choice.in_budget.len() < figures.len(),
        "some candidates are over budget"
    );
    for &i in &choice.in_budget {
        let f = &figures[i];
        assert!(
            !(rule.admits(f) && f.trajectory_error < chosen.trajectory_error),
            "{} beats the chosen {}",
            f.label,
            chosen.label
        );
    }
    assert!(choice.frontier.contains(&choice.chosen) || !choice.frontier.is_empty());
    let ron = tuning::preset_ron(
        "handheld",
        chosen,
        "scenario \"small\"",
        budget,
        0.35,
        &rule,
    );
    let p = BudgetPreset::from_ron(&ron).unwrap();
    let c = chosen.candidate();
    assert_eq!(
        (
            p.name.as_str(),
            p.substeps,
            p.iterations,
            p.method,
            p.weights
        ),
        ("handheld", c.substeps, c.iterations, c.method, c.weights)
    );
}

/// The rule on hand-made figures: over-budget, rolled-back and over-strained candidates are
/// never chosen; among the rest the least trajectory error wins, and a tie goes to the cheaper
/// frame.
#[test]
fn rule_picks_least_error_among_admitted_in_budget() {
    let f = vec![
        fig(0.2, 0.05, 0.070, 0), // admitted
        fig(0.4, 0.05, 0.030, 0), // admitted, least error
        fig(0.3, 0.05, 0.010, 1), // rolled back
        fig(0.3, 0.20, 0.001, 0), // over-strained
        fig(0.9, 0.01, 0.000, 0), // over budget
        fig(0.3, 0.05, 0.030, 0), // ties with 1, cheaper
        fig(0.1, 0.01, 0.090, 0), // least strained and cheapest, but moves unlike the cloth
    ];
    let c = tuning::choose(&f, 0.5, &Rule::default()).unwrap();
    assert_eq!(c.chosen, 5);
    assert_eq!(c.in_budget, vec![0, 1, 2, 3, 5, 6]);
    assert!(!c.frontier.contains(&1), "1 is dominated by 5");
    assert!(
        !Rule::default().admits(&f[6]),
        "8 % of the size is the bound"
    );
    let loose = Rule {
        max_trajectory_error: 0.1,
        ..Rule::default()
    };
    assert!(loose.admits(&f[6]));
}

/// With no converged window (every trajectory error NaN) the least max strain decides.
#[test]
fn without_a_reference_window_the_least_strain_wins() {
    let mut f = vec![
        fig(0.2, 0.05, 0.1, 0),
        fig(0.3, 0.02, 0.1, 0),
        fig(0.1, 0.08, 0.1, 0),
    ];
    for x in &mut f {
        x.trajectory_error = f64::NAN;
    }
    assert_eq!(tuning::choose(&f, 0.5, &Rule::default()).unwrap().chosen, 1);
}

/// A budget no candidate fits, and candidates that fit but all tear, are errors that name the
/// cheapest candidate or the least strained one, and the cheapest candidate the rule admits at
/// any time (the budget it would take); a bad budget or bound is refused.
#[test]
fn impossible_budgets_are_errors() {
    let f = vec![
        fig(0.2, 0.5, 0.01, 0),
        fig(0.4, 0.3, 0.01, 0),
        fig(2.0, 0.05, 0.01, 1),
        fig(3.0, 0.05, 0.02, 0),
    ];
    let rule = Rule::default();
    match tuning::choose(&f, 0.1, &rule) {
        Err(TuneError::NoneInBudget {
            cheapest_ms,
            meets_rule,
            ..
        }) => {
            assert_eq!(cheapest_ms, 0.2);
            assert_eq!(meets_rule, "1x1 lg at 3.000 ms");
        }
        other => panic!("{other:?}"),
    }
    match tuning::choose(&f, 1.0, &rule) {
        Err(TuneError::NoneMeetsRule {
            fitting: 2,
            best_strain,
            meets_rule,
            ..
        }) => {
            assert_eq!(best_strain, 0.3);
            assert_eq!(meets_rule, "1x1 lg at 3.000 ms");
        }
        other => panic!("{other:?}"),
    }
    match tuning::choose(&f[..2], 1.0, &rule) {
        Err(TuneError::NoneMeetsRule { meets_rule, .. }) => assert_eq!(meets_rule, "none does"),
        other => panic!("{other:?}"),
    }
    assert!(tuning::choose(&f, f64::NAN, &rule).is_err());
    let bad = Rule {
        max_strain: -1.0,
        ..rule
    };
    assert!(tuning::choose(&f, 1.0, &bad).is_err());
    let bad = Rule {
        max_trajectory_error: f64::NAN,
        ..rule
    };
    assert!(tuning::choose(&f, 1.0, &bad).is_err());
}

proptest! {
    /// For any figures, a choice fits the budget, is admitted by the rule, and no in-budget
    /// admitted candidate has a smaller trajectory error; every frontier member is in budget
    /// and not dominated.
    #[test]
    fn choice_is_in_budget_and_undominated(
        rows in prop::collection::vec((0.01f64..2.0, 0.0f64..0.3, 0.0f64..0.12, 0u64..2), 1..30),
        budget in 0.05f64..2.0,
        p99 in any::<bool>(),
    ) {
        let f: Vec<Figures> = rows.iter().map(|&(ms, s, e, r)| fig(ms, s, e, r)).collect();
        let rule = Rule { fit: if p99 { FrameStat::P99 } else { FrameStat::Median }, ..Rule::default() };
        if let Ok(c) = tuning::choose(&f, budget, &rule) {
            let chosen = &f[c.chosen];
            prop_assert!(rule.frame_ms(chosen) <= budget && rule.admits(chosen));
            for &i in &c.in_budget {
                prop_assert!(!(rule.admits(&f[i]) && f[i].trajectory_error < chosen.trajectory_error));
            }
            for &i in &c.frontier {
                prop_assert!(c.in_budget.contains(&i));
                let k = |g: &Figures| [rule.frame_ms(g), g.max_strain, g.trajectory_error];
                for &j in &c.in_budget {
                    let (a, b) = (k(&f[i]), k(&f[j]));
                    let dominated = b.iter().zip(&a).all(|(b, a)| b <= a) && b.iter().zip(&a).any(|(b, a)| b < a);
                    prop_assert!(!dominated);
                }
            }
        }
    }
}

/// The `tune` example: a budget too small for any candidate, a scenario that fails to load,
/// a missing file and a bad flag each end in exactly one `error:` line and status 1.
#[test]
fn tune_errors_are_one_line_and_status_1() {
    let small = scratch("small.ron", SMALL);
    let broken = scratch("broken.ron", "(name: \"x\", mesh: ");
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let cases = [
        (
            s(&[
                small.to_str().unwrap(),
                "--ms",
                "0.000001",
                "--frames",
                "5",
                "--timing-frames",
                "5",
            ]),
            "no candidate fits",
        ),
        (s(&[broken.to_str().unwrap(), "--ms", "1"]), "broken.ron:1:"),
        (
            s(&["/nonexistent/scenario.ron", "--ms", "1"]),
            "/nonexistent/scenario.ron",
        ),
        (
            s(&[small.to_str().unwrap(), "--ms", "1", "--sped", "2"]),
            "unknown flag",
        ),
        (s(&[small.to_str().unwrap(), "--ms", "-1"]), "--ms"),
        (s(&[small.to_str().unwrap()]), "no budget"),
    ];
    for (args, expect) in cases {
        let mut err = Vec::new();
        let status = tune::tune(&args, &mut err);
        let err = String::from_utf8(err).unwrap();
        assert_eq!(status, 1, "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(expect),
            "{args:?}: {err}"
        );
    }
}

/// The tuner end to end on the small scenario with a generous budget: it chooses, writes a
/// preset that loads, and its output's last line is the JSON object with the chosen label.
#[test]
fn tune_writes_a_preset_that_loads() {
    let small = scratch("small2.ron", SMALL);
    let out = small.with_extension("preset.ron");
    let args: Vec<String> = [
        small.to_str().unwrap(),
        "--ms",
        "1000",
        "--frames",
        "20",
        "--timing-frames",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut err = Vec::new();
    assert_eq!(
        tune::tune(&args, &mut err),
        0,
        "{}",
        String::from_utf8_lossy(&err)
    );
    let p = BudgetPreset::from_ron(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(p.name, "small");
}

/// A check scenario's run, taken into a candidate's record, makes the rule see the worse of
/// the two runs' max strain, mean strain and penetration (NaN if either is), and the rollbacks,
/// non-finite frames and layer crossings of both, while the trajectory stays the primary run's
/// (exactly); a record with a layer crossing is not admitted.
#[test]
fn a_check_run_makes_the_rule_see_the_worst_figures() {
    let primary = RunRecord {
        centre_of_mass: vec![DVec3::X, DVec3::Y],
        max_strain: 0.05,
        mean_strain: 0.004,
        pinned_max_strain: 0.0,
        penetration_m: 2e-4,
        rollbacks: 1,
        non_finite_frames: 0,
        crossings: 0,
    };
    let check = RunRecord {
        centre_of_mass: vec![DVec3::Z; 7],
        max_strain: 0.3,
        mean_strain: 0.001,
        pinned_max_strain: 0.02,
        penetration_m: 1e-3,
        rollbacks: 2,
        non_finite_frames: 1,
        crossings: 4,
    };
    let mut r = primary.clone();
    r.absorb_check(&check);
    assert_eq!(r.centre_of_mass, primary.centre_of_mass);
    assert_eq!((r.max_strain, r.mean_strain), (0.3, 0.004));
    assert_eq!(r.penetration_m, 1e-3);
    assert_eq!(r.pinned_max_strain, 0.02);
    assert_eq!((r.rollbacks, r.non_finite_frames), (3, 1));
    assert_eq!(r.crossings, 4);
    let crossed = RunRecord {
        crossings: 1,
        rollbacks: 0,
        ..primary.clone()
    };
    let figures = |r: &RunRecord| {
        Figures::new(
            Candidate::reference(),
            r,
            &[0.1],
            &Reference::from_runs(&[], &[], 1.0),
            1.0,
        )
    };
    assert!(!Rule::default().admits(&figures(&crossed)));
    assert!(Rule::default().admits(&figures(&RunRecord {
        crossings: 0,
        ..crossed.clone()
    })));
    let mut nan = primary.clone();
    nan.absorb_check(&RunRecord {
        max_strain: f64::NAN,
        ..check.clone()
    });
    assert!(nan.max_strain.is_nan());
    assert!(!Rule::default().admits(&Figures::new(
        Candidate::reference(),
        &nan,
        &[0.1],
        &Reference::from_runs(&[], &[], 1.0),
        1.0
    )));
}

/// `tune --check`: the candidates are also run on the check scenario, so the chosen
/// candidate's reported max strain is at least the check scenario's own at that budget (to the
/// comment's four decimals; the check here is a sheet dropped on a thin bar), the preset's
/// comment names the check, and a check file that does not load is one `error:` line.
#[test]
fn tune_checks_candidates_on_the_check_scenarios() {
    let small = scratch("small3.ron", SMALL);
    let bar = scratch(
        "bar.ron",
        r#"(
            name: "bar",
            mesh: Rectangle(width: 0.4, height: 0.4, cells_x: 6, cells_y: 6),
            placement: (translation: (-0.2, 0.12, 0.2), rotation_deg: (-90.0, 0.0, 0.0)),
            colliders: [(shape: Capsule(half_height: 0.3, radius: 0.03),
                         motion: Static(translation: (0.0, 0.0, 0.0), rotation_deg: (0.0, 0.0, 90.0)))],
            frames: 30,
        )"#,
    );
    let out = small.with_extension("checked.ron");
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let args = s(&[
        small.to_str().unwrap(),
        "--check",
        bar.to_str().unwrap(),
        "--ms",
        "1000",
        "--frames",
        "20",
        "--timing-frames",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    let mut err = Vec::new();
    assert_eq!(
        tune::tune(&args, &mut err),
        0,
        "{}",
        String::from_utf8_lossy(&err)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("checked on") && text.contains("bar.ron"),
        "{text}"
    );
    let preset = BudgetPreset::from_ron(&text).unwrap();
    let reported: f64 = text
        .split("Figures:")
        .nth(1)
        .and_then(|t| t.split("max strain ").nth(1))
        .and_then(|t| t.split(',').next())
        .and_then(|t| t.trim().parse().ok())
        .expect("the comment gives the max strain");
    let mut check = scenario::load(&std::fs::read_to_string(&bar).unwrap(), ".".as_ref()).unwrap();
    check.set_budget(preset).unwrap();
    let (_, _, sum) = check.run(None).unwrap();
    assert!(
        reported >= sum.max_strain - 5e-5,
        "reported {reported}, check alone {}",
        sum.max_strain
    );
    let mut err = Vec::new();
    let bad = s(&[
        small.to_str().unwrap(),
        "--check",
        "/nonexistent/check.ron",
        "--ms",
        "1",
    ]);
    assert_eq!(tune::tune(&bad, &mut err), 1);
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.lines().count() == 1 && err.contains("/nonexistent/check.ron"),
        "{err}"
    );
}

/// A sheet in free fall (no pins, no bodies) placed `d` away from another is the same motion
/// moved rigidly: its trajectory error against the other is `|d|` over the cloth's size at
/// every frame (to 1e-6 of the size: the iterations round differently 0.25 m away), and 0
/// against itself, exactly.
#[test]
fn a_rigid_offset_of_the_start_is_the_trajectory_error() {
    const FALLING: &str = r#"(
        name: "falling",
        mesh: Rectangle(width: 0.4, height: 0.3, cells_x: 4, cells_y: 3),
        placement: (translation: (TX, 0.6, 0.0), rotation_deg: (20.0, 0.0, 10.0)),
        frames: 30,
    )"#;
    let run = |tx: &str| {
        let s = scenario::load(&FALLING.replace("TX", tx), std::path::Path::new(".")).unwrap();
        let size = s.cloth_size();
        (s.run(None).unwrap().2, size)
    };
    let ((a, size), (b, _)) = (run("0.0"), run("0.25"));
    assert!((size - 0.4).abs() < 0.05, "size {size}");
    let e = tuning::TrajectoryError::between(&b.centre_of_mass, &a.centre_of_mass, size, None);
    assert!((e.error - 0.25 / size).abs() < 1e-6, "{e:?}");
    assert!((e.mean - 0.25 / size).abs() < 1e-6, "{e:?}");
    assert_eq!(e.window_frames, 30);
    let same = tuning::TrajectoryError::between(&a.centre_of_mass, &a.centre_of_mass, size, None);
    assert_eq!(same.error, 0.0);
}

#[path = "../examples/scenario.rs"]
#[allow(dead_code)]
mod scenario_example;

/// `scenario --reference`: against its own budget the trajectory error is 0 (runs are
/// deterministic), against the converged budget it is positive, a window cuts the frames it is
/// taken over, and the JSON line names the reference and the window; `--window-frames` without
/// `--reference` is a usage error.
#[test]
fn scenario_reports_the_trajectory_error_against_a_reference() {
    let small = scratch("small_ref.ron", SMALL);
    let json = |args: &[&str]| -> serde_json::Value {
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        args.insert(0, small.display().to_string());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(
            scenario_example::runner(&args, &mut out, &mut err),
            0,
            "{}",
            String::from_utf8_lossy(&err)
        );
        let out = String::from_utf8(out).unwrap();
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let same = json(&["--preset", "2x3", "--reference", "2x3"]);
    assert_eq!(same["trajectory_error"], 0.0);
    assert_eq!(same["trajectory_window_frames"], 40);
    assert_eq!(same["reference"], "2x3");
    let off = json(&[
        "--preset",
        "1x1",
        "--reference",
        "8x10",
        "--window-frames",
        "20",
    ]);
    let e = off["trajectory_error"].as_f64().unwrap();
    assert!(e > 0.0 && e < 1.0, "{off}");
    assert_eq!(off["trajectory_window_frames"], 20);
    assert!(off["trajectory_error_frame"].as_u64().unwrap() < 20);
    let plain = json(&[]);
    assert!(plain["trajectory_error"].is_null());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = [
        small.display().to_string(),
        "--window-frames".into(),
        "5".into(),
    ];
    assert_eq!(scenario_example::runner(&args, &mut out, &mut err), 2);
}
