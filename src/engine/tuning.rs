//! Picking a budget for a platform from measured figures: the candidates to try, what a run of
//! each must record, the converged reference they are compared with, the documented rule that
//! picks one within a frame budget, and the chosen preset as RON.
//!
//! The module runs nothing itself and needs no ECS: the `tune` example runs a scenario file
//! (the scenario runner's format) at each [`Candidate`] and at the reference, hands the records
//! here, and prints, plots and writes what [`choose`] returns. A game can drive it the same way
//! with its own scene.
//!
//! **The reference** is Newton's method at 4 substeps per frame ([`Candidate::reference`]),
//! checked by doubling as `budget_sweep` checks its references: the same at 8 substeps
//! ([`Candidate::finer_reference`]). The frames before the two centres of mass first differ by
//! 1 % of the cloth's size are the *converged window* ([`Reference::from_runs`]); trajectory
//! errors are measured over it only, since after it (a chaotic crumple, a cape flapping on a
//! running character) no reference converges and an error against it means nothing.
//!
//! **The rule** ([`Rule`], settable; defaults in its fields' docs): among the candidates whose
//! frame fits the budget (median or 99th percentile, scaled to the device by its speed
//! factor), keep those with no rollback, no crossing between layered cloths
//! ([`RunRecord::crossings`]), max strain at most [`Rule::max_strain`] and penetration at most
//! [`Rule::max_penetration_m`] and trajectory error at most [`Rule::max_trajectory_error`] (a
//! budget must move like the converged cloth, not only hold its length); pick the least
//! trajectory error, on a tie
//! the least max strain, then the cheaper frame. So the chosen candidate fits the budget and no
//! other eligible candidate is better on the rule. Where the reference has no converged window
//! (it differs from its check from the first frame on), no trajectory error exists and the
//! least max strain decides.

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::energy::SolverWeights;
use crate::model::SolverMethod;

/// One budget to try: substeps per frame, iterations per substep, the solver and the weights it
/// converges with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Substeps per 1/60 s frame.
    pub substeps: u32,
    /// Iterations per substep.
    pub iterations: u32,
    /// Solver.
    pub method: SolverMethod,
    /// The solver's weights ([`SolverWeights`]).
    pub weights: SolverWeights,
}

/// The weights the tuner tries at every budget: [`SolverWeights::SOFT`] (isometry `3e3`, render
/// edges `1e3`), a middle set (`1e4` / `3e3`) and [`SolverWeights::STIFF`] (`1e5` / `3e4`, the
/// default). Soft weights converge in a small budget and move like the converged stiff cloth;
/// stiff ones strain less where the budget converges them (docs/lab/2026-12-02-weights.md).
pub const TUNED_WEIGHTS: [SolverWeights; 3] = [
    SolverWeights::SOFT,
    SolverWeights {
        isometry: 1e4,
        conformity_ratio: 1e3,
        render_edge: 3e3,
    },
    SolverWeights::STIFF,
];

impl Candidate {
    /// The converged reference: Newton's method, 4 substeps per frame, up to 30 iterations a
    /// substep (it converges in 3 to 5 on `budget_sweep`'s scenes), at the stiff weights
    /// ([`SolverWeights::STIFF`]): the converged inextensible cloth.
    pub fn reference() -> Self {
        Self {
            substeps: 4,
            iterations: 30,
            method: SolverMethod::Newton,
            weights: SolverWeights::STIFF,
        }
    }

    /// The converged run the examples measure trajectory errors against
    /// (`scenario --reference`, `ladder`; `presets/reference.ron`): 32 substeps x 20
    /// iterations of the accelerated local-global map at the stiff weights
    /// ([`SolverWeights::STIFF`]), the converged inextensible cloth. Twice its substeps moves
    /// the banner's centre of mass by 0.03 % of its size and the running cape's by 2.7 % over
    /// its first 3 s (`scenario --spread`; docs/lab/2026-11-29-motion.md).
    pub fn converged() -> Self {
        Self {
            substeps: 32,
            iterations: 20,
            method: SolverMethod::Anderson { history: 5 },
            weights: SolverWeights::STIFF,
        }
    }

    /// The reference at twice the substeps, which checks it.
    pub fn finer_reference() -> Self {
        Self {
            substeps: 8,
            ..Self::reference()
        }
    }

    /// Iterations per frame.
    pub fn iterations_per_frame(&self) -> u32 {
        self.substeps * self.iterations
    }

    /// A short name: `2x5 aa`, `1x5 lg`, `4x30 newton`, followed by the isometry weight where
    /// the weights are not the default (`2x5 aa w1e5`).
    pub fn label(&self) -> String {
        let m = match self.method {
            SolverMethod::LocalGlobal => "lg",
            SolverMethod::Anderson { .. } => "aa",
            SolverMethod::Newton => "newton",
        };
        let w = if self.weights == SolverWeights::default() {
            String::new()
        } else {
            format!(" w{:e}", self.weights.isometry)
        };
        format!("{}x{} {m}{w}", self.substeps, self.iterations)
    }

    /// The weights as presets write them.
    fn weights_ron(&self) -> String {
        let w = &self.weights;
        format!(
            "(isometry: {:?}, conformity_ratio: {:?}, render_edge: {:?})",
            w.isometry, w.conformity_ratio, w.render_edge
        )
    }

    /// The solver's name as presets write it.
    fn method_ron(&self) -> String {
        match self.method {
            SolverMethod::LocalGlobal => "LocalGlobal".into(),
            SolverMethod::Anderson { history } => format!("Anderson(history: {history})"),
            SolverMethod::Newton => "Newton".into(),
        }
    }
}

/// The budgets of the tuner's ladder: 1 to 4 substeps x 1, 2, 3, 4, 5, 6, 8 or 10 iterations
/// of the product's iteration, the local-global map with its coupled contact step accelerated
/// by Anderson mixing (history 5; one iteration of it is the plain local-global step), at the
/// default weights: 32 candidates, 1 to 40 iterations per frame. Plain local-global left the
/// ladder on 2026-11-27 (docs/lab/2026-11-27-one-iteration.md).
pub fn ladder() -> Vec<Candidate> {
    ladder_at(SolverWeights::default())
}

/// [`ladder`]'s budgets at `weights`.
pub fn ladder_at(weights: SolverWeights) -> Vec<Candidate> {
    let mut out = Vec::new();
    for substeps in 1..=4 {
        for iterations in [1, 2, 3, 4, 5, 6, 8, 10] {
            out.push(Candidate {
                substeps,
                iterations,
                method: SolverMethod::Anderson { history: 5 },
                weights,
            });
        }
    }
    out
}

/// What `tune` tries: [`ladder`]'s budgets at each of [`TUNED_WEIGHTS`] (96 candidates).
pub fn ladder_with_weights() -> Vec<Candidate> {
    TUNED_WEIGHTS.iter().flat_map(|&w| ladder_at(w)).collect()
}

/// What one run of a candidate recorded, apart from its frame times (deterministic: the same
/// scenario at the same candidate records the same figures on the same machine).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunRecord {
    /// The cloth's centre of mass after each frame (m).
    pub centre_of_mass: Vec<DVec3>,
    /// Worst max render-mesh strain over the frames.
    pub max_strain: f64,
    /// Worst mean strain over the frames.
    pub mean_strain: f64,
    /// Worst strain of the edges with both ends pinned (the pins' stretch; not judged).
    pub pinned_max_strain: f64,
    /// Deepest node inside a body's thickness layer after a frame (m).
    pub penetration_m: f64,
    /// Rollbacks after a non-finite step.
    pub rollbacks: u64,
    /// Frames that ended with a non-finite position.
    pub non_finite_frames: u32,
    /// Layered cloths' crossings, summed over the frames (a scenario with `layers`; see
    /// [`crate::scenario::Summary::crossings`]).
    pub crossings: u64,
}

impl RunRecord {
    /// Takes in a run of the same candidate on a check scenario (`tune --check`): the rule then
    /// sees the worst max strain, mean strain and penetration of either run and the rollbacks
    /// and non-finite frames of both. The trajectory stays this run's: the error is measured on
    /// the scenario the reference was run on.
    pub fn absorb_check(&mut self, check: &RunRecord) {
        self.max_strain = worst(self.max_strain, check.max_strain);
        self.mean_strain = worst(self.mean_strain, check.mean_strain);
        self.pinned_max_strain = worst(self.pinned_max_strain, check.pinned_max_strain);
        self.penetration_m = worst(self.penetration_m, check.penetration_m);
        self.rollbacks += check.rollbacks;
        self.non_finite_frames += check.non_finite_frames;
        self.crossings += check.crossings;
    }
}

/// The larger of `a` and `b`, NaN if either is (a NaN figure fails the rule).
fn worst(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Frames before the centres of mass `a` and `b` first differ by more than 1 % of `size` (all
/// of the shorter run if they never do).
pub fn converged_frames(a: &[DVec3], b: &[DVec3], size: f64) -> usize {
    a.iter()
        .zip(b)
        .position(|(p, q)| {
            // NaN counts as differing.
            let d = p.distance(*q);
            d.is_nan() || d > 0.01 * size
        })
        .unwrap_or(a.len().min(b.len()))
}

/// The converged reference of a scenario: its centre of mass over the converged window.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// The reference's centre of mass after each frame of the window.
    pub centre_of_mass: Vec<DVec3>,
    /// The cloth's size (m), which trajectory errors are divided by.
    pub size: f64,
}

impl Reference {
    /// From the reference's centres of mass and those of the run at twice its substeps: the
    /// window is the frames before they first differ by 1 % of `size`. A run may stop at the
    /// first frame that differs (the tuner does, to save the references' time).
    pub fn from_runs(reference: &[DVec3], finer: &[DVec3], size: f64) -> Self {
        let n = converged_frames(reference, finer, size);
        Self {
            centre_of_mass: reference[..n].to_vec(),
            size,
        }
    }

    /// The converged window's length in frames.
    pub fn window_frames(&self) -> usize {
        self.centre_of_mass.len()
    }

    /// Worst centre-of-mass distance from the reference over the window, over the cloth's size
    /// (NaN if the window is empty or the run is shorter than it).
    pub fn trajectory_error(&self, centre_of_mass: &[DVec3]) -> f64 {
        TrajectoryError::between(centre_of_mass, &self.centre_of_mass, self.size, None).error
    }
}

/// A cloth's size as trajectory errors are divided by it: the longest side of the box around
/// `positions` (m; 0 for none).
pub fn cloth_size(positions: &[DVec3]) -> f64 {
    let (lo, hi) = positions.iter().fold(
        (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
        |(lo, hi), &p| (lo.min(p), hi.max(p)),
    );
    (hi - lo).max_element().max(0.0)
}

/// The trajectory error of one run against a converged run of the same scene (docs/design.md
/// section 6): the worst distance between their centres of mass over the first `window_frames`
/// frames, over the cloth's size, with the frame where it is worst and the mean over the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrajectoryError {
    /// Worst centre-of-mass distance over the window, over the cloth's size (NaN when the window
    /// is empty, a run is shorter than it, or a centre of mass is not finite).
    pub error: f64,
    /// The frame (0-based) where the distance is worst.
    pub frame: usize,
    /// The mean distance over the window, over the cloth's size.
    pub mean: f64,
    /// Frames the error was taken over.
    pub window_frames: usize,
}

impl TrajectoryError {
    /// Measures `run` against `reference`, both a centre of mass per frame, over the first
    /// `window` frames (every frame of the reference when `None`; a longer window is cut to the
    /// reference), divided by `size` (the cloth's size, m, as
    /// [`crate::scenario::LoadedScenario::cloth_size`] gives it).
    pub fn between(run: &[DVec3], reference: &[DVec3], size: f64, window: Option<usize>) -> Self {
        let n = window.map_or(reference.len(), |w| w.min(reference.len()));
        let nan = Self {
            error: f64::NAN,
            frame: 0,
            mean: f64::NAN,
            window_frames: n,
        };
        if n == 0 || run.len() < n || !(size.is_finite() && size > 0.0) {
            return nan;
        }
        let (mut worst, mut frame, mut sum) = (0.0f64, 0, 0.0);
        for (k, (p, q)) in run[..n].iter().zip(&reference[..n]).enumerate() {
            let d = p.distance(*q);
            if !d.is_finite() {
                return Self { frame: k, ..nan };
            }
            if d > worst {
                (worst, frame) = (d, k);
            }
            sum += d;
        }
        Self {
            error: worst / size,
            frame,
            mean: sum / n as f64 / size,
            window_frames: n,
        }
    }
}

/// One candidate's figures, frame times scaled to the device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// [`Candidate::label`].
    pub label: String,
    /// Substeps per frame.
    pub substeps: u32,
    /// Iterations per substep.
    pub iterations: u32,
    /// Frame time on the device, median (ms).
    pub frame_ms_median: f64,
    /// Frame time on the device, 99th percentile (ms).
    pub frame_ms_p99: f64,
    /// Worst max strain over the run.
    pub max_strain: f64,
    /// Worst mean strain over the run.
    pub mean_strain: f64,
    /// Worst strain of the edges with both ends pinned (reported, not judged).
    pub pinned_max_strain: f64,
    /// Deepest penetration of a body's thickness layer (m).
    pub penetration_m: f64,
    /// Worst centre-of-mass distance from the reference over the converged window, over the
    /// cloth's size.
    pub trajectory_error: f64,
    /// Rollbacks (and frames that ended non-finite).
    pub rollbacks: u64,
    /// Layered cloths' crossings (0 without layers).
    pub crossings: u64,
    #[serde(skip)]
    candidate: Candidate,
}

impl Figures {
    /// The figures of `candidate` from its record, its frame times measured on this machine
    /// (ms) and the reference; times are divided by `speed`, the device's speed relative to
    /// this machine (0.35: the device takes 1 / 0.35 times as long).
    pub fn new(
        candidate: Candidate,
        record: &RunRecord,
        frame_ms: &[f64],
        reference: &Reference,
        speed: f64,
    ) -> Self {
        let mut t: Vec<f64> = frame_ms.iter().map(|&ms| ms / speed).collect();
        t.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            if t.is_empty() {
                f64::NAN
            } else {
                t[((t.len() - 1) as f64 * q).round() as usize]
            }
        };
        Self {
            label: candidate.label(),
            substeps: candidate.substeps,
            iterations: candidate.iterations,
            frame_ms_median: pick(0.5),
            frame_ms_p99: pick(0.99),
            max_strain: record.max_strain,
            mean_strain: record.mean_strain,
            pinned_max_strain: record.pinned_max_strain,
            penetration_m: record.penetration_m,
            trajectory_error: reference.trajectory_error(&record.centre_of_mass),
            rollbacks: record.rollbacks + u64::from(record.non_finite_frames),
            crossings: record.crossings,
            candidate,
        }
    }

    /// The trajectory error as the rule ranks it: none (NaN, no converged window) after any
    /// measured one.
    fn ranked_error(&self) -> f64 {
        if self.trajectory_error.is_nan() {
            f64::INFINITY
        } else {
            self.trajectory_error
        }
    }

    /// The candidate these figures belong to.
    pub fn candidate(&self) -> Candidate {
        self.candidate
    }
}

/// Which frame statistic must fit the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FrameStat {
    /// The median frame.
    #[default]
    Median,
    /// The 99th percentile frame (stricter; noisier on a shared machine).
    P99,
}

/// The rule that picks a candidate (see the module docs). Defaults: the median frame fits,
/// max strain at most 10 %, penetration at most 1 mm (the contact issue's bounds) and
/// trajectory error at most 8 % of the cloth's size (the motion issue's bound).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rule {
    /// Which frame statistic must fit the budget. Default [`FrameStat::Median`].
    pub fit: FrameStat,
    /// Largest max strain allowed over the run. Default 0.10.
    pub max_strain: f64,
    /// Deepest penetration allowed (m). Default 0.001.
    pub max_penetration_m: f64,
    /// Largest trajectory error allowed over the reference's converged window, over the
    /// cloth's size: a budget whose cloth moves unlike the converged one does not hold, however
    /// little it strains. A candidate with no measured error (no converged window) is not
    /// refused by it. Default 0.08.
    pub max_trajectory_error: f64,
}

impl Default for Rule {
    fn default() -> Self {
        Self {
            fit: FrameStat::Median,
            max_strain: 0.10,
            max_penetration_m: 0.001,
            max_trajectory_error: 0.08,
        }
    }
}

impl Rule {
    /// Checks the bounds (positive and finite).
    pub fn validate(&self) -> Result<(), TuneError> {
        for (name, v) in [
            ("max strain", self.max_strain),
            ("max penetration", self.max_penetration_m),
            ("max trajectory error", self.max_trajectory_error),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(TuneError::BadValue {
                    name,
                    reason: format!("{v} is not a positive number"),
                });
            }
        }
        Ok(())
    }

    /// The frame statistic of `f` that must fit the budget.
    pub fn frame_ms(&self, f: &Figures) -> f64 {
        match self.fit {
            FrameStat::Median => f.frame_ms_median,
            FrameStat::P99 => f.frame_ms_p99,
        }
    }

    /// Whether `f` may be chosen once its frame fits: no rollback, no layer crossing, strain,
    /// penetration and trajectory error (where one was measured) within bounds.
    pub fn admits(&self, f: &Figures) -> bool {
        f.rollbacks == 0
            && f.crossings == 0
            && f.max_strain <= self.max_strain
            && f.penetration_m <= self.max_penetration_m
            && (f.trajectory_error.is_nan() || f.trajectory_error <= self.max_trajectory_error)
    }
}

/// What [`choose`] found: indices into the figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Candidates whose frame fits the budget.
    pub in_budget: Vec<usize>,
    /// Those of them no other in-budget candidate dominates on frame time, max strain and
    /// trajectory error (as good on all three and better on one).
    pub frontier: Vec<usize>,
    /// The chosen candidate.
    pub chosen: usize,
}

/// Why no candidate could be chosen, or a bad input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TuneError {
    /// No candidate's frame fits the budget.
    #[error(
        "no candidate fits {budget_ms} ms a frame: the cheapest, {cheapest}, takes {cheapest_ms:.3} ms; the cheapest that meets the rule: {meets_rule}"
    )]
    NoneInBudget {
        /// The budget (ms).
        budget_ms: f64,
        /// The cheapest candidate.
        cheapest: String,
        /// Its frame time (ms, on the device).
        cheapest_ms: f64,
        /// The cheapest candidate that meets the rule at any frame time, as `LABEL at MS ms`
        /// (the budget it needs), or `none does`.
        meets_rule: String,
    },
    /// Candidates fit, but none meets the rule.
    #[error(
        "{fitting} candidates fit {budget_ms} ms a frame but none meets the rule (no rollback, no layer crossing, max strain <= {max_strain}, penetration <= {max_penetration_m} m, trajectory error <= {max_trajectory_error}); the least strained is {best} at {best_strain:.4}; the cheapest that meets the rule: {meets_rule}"
    )]
    NoneMeetsRule {
        /// The budget (ms).
        budget_ms: f64,
        /// How many fit the budget.
        fitting: usize,
        /// The rule's strain bound.
        max_strain: f64,
        /// The rule's penetration bound (m).
        max_penetration_m: f64,
        /// The rule's trajectory-error bound (of the cloth's size).
        max_trajectory_error: f64,
        /// The in-budget candidate with the least max strain.
        best: String,
        /// Its max strain.
        best_strain: f64,
        /// The cheapest candidate that meets the rule at any frame time, as `LABEL at MS ms`
        /// (the budget it needs), or `none does`.
        meets_rule: String,
    },
    /// A number out of range.
    #[error("{name}: {reason}")]
    BadValue {
        /// What it is.
        name: &'static str,
        /// Why it is refused.
        reason: String,
    },
}

/// Indices of the candidates among `among` that no other of them dominates on frame time (the
/// rule's statistic), max strain and trajectory error (NaN errors count as worst).
pub fn frontier(figures: &[Figures], among: &[usize], rule: &Rule) -> Vec<usize> {
    let key = |i: usize| {
        let f = &figures[i];
        [rule.frame_ms(f), f.max_strain, f.ranked_error()]
    };
    among
        .iter()
        .copied()
        .filter(|&i| {
            let a = key(i);
            !among.iter().any(|&j| {
                let b = key(j);
                j != i
                    && b.iter().zip(&a).all(|(b, a)| b <= a)
                    && b.iter().zip(&a).any(|(b, a)| b < a)
            })
        })
        .collect()
}

/// Picks a candidate within `budget_ms` by `rule` (see the module docs).
pub fn choose(figures: &[Figures], budget_ms: f64, rule: &Rule) -> Result<Choice, TuneError> {
    if !(budget_ms.is_finite() && budget_ms > 0.0) {
        return Err(TuneError::BadValue {
            name: "budget",
            reason: format!("{budget_ms} ms is not a positive number"),
        });
    }
    rule.validate()?;
    let in_budget: Vec<usize> = (0..figures.len())
        .filter(|&i| rule.frame_ms(&figures[i]) <= budget_ms)
        .collect();
    // What a budget would need: the cheapest candidate the rule admits, whatever its time.
    let meets_rule = (0..figures.len())
        .filter(|&i| rule.admits(&figures[i]))
        .min_by(|&a, &b| {
            rule.frame_ms(&figures[a])
                .total_cmp(&rule.frame_ms(&figures[b]))
        })
        .map_or("none does".into(), |i| {
            format!(
                "{} at {:.3} ms",
                figures[i].label,
                rule.frame_ms(&figures[i])
            )
        });
    if in_budget.is_empty() {
        let cheapest = (0..figures.len()).min_by(|&a, &b| {
            rule.frame_ms(&figures[a])
                .total_cmp(&rule.frame_ms(&figures[b]))
        });
        return Err(TuneError::NoneInBudget {
            budget_ms,
            cheapest: cheapest.map_or("none".into(), |i| figures[i].label.clone()),
            cheapest_ms: cheapest.map_or(f64::NAN, |i| rule.frame_ms(&figures[i])),
            meets_rule,
        });
    }
    let chosen = in_budget
        .iter()
        .copied()
        .filter(|&i| rule.admits(&figures[i]))
        .min_by(|&a, &b| {
            let (fa, fb) = (&figures[a], &figures[b]);
            fa.ranked_error()
                .total_cmp(&fb.ranked_error())
                .then(fa.max_strain.total_cmp(&fb.max_strain))
                .then(rule.frame_ms(fa).total_cmp(&rule.frame_ms(fb)))
        });
    let Some(chosen) = chosen else {
        let best = in_budget
            .iter()
            .copied()
            .min_by(|&a, &b| figures[a].max_strain.total_cmp(&figures[b].max_strain))
            .expect("in_budget is not empty");
        return Err(TuneError::NoneMeetsRule {
            budget_ms,
            fitting: in_budget.len(),
            max_strain: rule.max_strain,
            max_penetration_m: rule.max_penetration_m,
            max_trajectory_error: rule.max_trajectory_error,
            best: figures[best].label.clone(),
            best_strain: figures[best].max_strain,
            meets_rule,
        });
    };
    let frontier = frontier(figures, &in_budget, rule);
    Ok(Choice {
        in_budget,
        frontier,
        chosen,
    })
}

/// The chosen candidate as a budget preset in RON (what `BudgetPreset::from_ron` and the files
/// under `presets/` read), headed by comments naming the scenario, the budget, the speed factor,
/// the rule and the figures it was chosen on. `on` says what it was chosen on, as the comment
/// should read after "on" (`tune` writes `scenario "cape_run", checked on scenarios/drop_bar.ron`).
pub fn preset_ron(
    name: &str,
    f: &Figures,
    on: &str,
    budget_ms: f64,
    speed: f64,
    rule: &Rule,
) -> String {
    let c = f.candidate;
    let fit = match rule.fit {
        FrameStat::Median => "median",
        FrameStat::P99 => "99th percentile",
    };
    format!(
        "// Chosen by `tune` on {on} for {budget_ms} ms a frame ({fit} frame fits),\n\
         // device speed {speed} x this machine; rule: no rollback, max strain <= {}, penetration <= {} m,\n\
         // trajectory error <= {}, then least trajectory error. Figures: frame {:.3} ms median / {:.3} ms p99, max strain {:.4},\n\
         // mean strain {:.5}, penetration {:.2e} m, trajectory error {:.4} of the cloth's size.\n\
         (name: {name:?}, substeps: {}, iterations: {}, method: {}, weights: {})\n",
        rule.max_strain,
        rule.max_penetration_m,
        rule.max_trajectory_error,
        f.frame_ms_median,
        f.frame_ms_p99,
        f.max_strain,
        f.mean_strain,
        f.penetration_m,
        f.trajectory_error,
        c.substeps,
        c.iterations,
        c.method_ron(),
        c.weights_ron(),
    )
}

/// Frames the calibration workload times (after as many to warm up).
pub const CALIBRATION_FRAMES: usize = 120;

/// A fixed workload to compare machines: the 2,025-node sheet (0.9 m, 22 x 22 base cells,
/// top row pinned) hanging at the console budget (2 x 5 of the default iteration), [`CALIBRATION_FRAMES`]
/// frames timed after as many to settle. Returns the median frame time in ms. Run it on the
/// device and here; the device's speed factor is this machine's time over the device's.
pub fn calibrate() -> Result<f64, crate::ClothError> {
    use crate::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};
    const CELLS: usize = 22;
    let base = BaseMesh::rectangle(0.9, 0.9, CELLS, CELLS)?;
    let mesh = ClothMesh::new(&base)?;
    let top: Vec<u32> = (0..=CELLS)
        .map(|i| BaseMesh::grid_index(CELLS, i, CELLS))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default())?;
    for _ in 0..CALIBRATION_FRAMES {
        cloth.step(1.0 / 60.0)?;
    }
    let mut t = Vec::with_capacity(CALIBRATION_FRAMES);
    for _ in 0..CALIBRATION_FRAMES {
        let start = std::time::Instant::now();
        cloth.step(1.0 / 60.0)?;
        t.push(start.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window ends at the first frame whose centres of mass differ by more than 1 % of the
    /// size (here 1 cm of 1 m), and the trajectory error is the worst distance over it, over
    /// the size; a run shorter than the window has no error (NaN).
    #[test]
    fn window_ends_at_the_first_one_percent_difference() {
        let a: Vec<DVec3> = (0..5).map(|k| DVec3::X * k as f64 * 0.004).collect();
        let b = vec![DVec3::ZERO; 5];
        // Distances 0, 4, 8, 12, 16 mm: the window is 3 frames.
        assert_eq!(converged_frames(&a, &b, 1.0), 3);
        let r = Reference::from_runs(&a, &b, 1.0);
        assert_eq!(r.window_frames(), 3);
        let run = vec![DVec3::Y * 0.02; 5];
        let e = r.trajectory_error(&run);
        assert!((e - (0.008f64.powi(2) + 0.02f64.powi(2)).sqrt()).abs() < 1e-12);
        assert!(r.trajectory_error(&run[..2]).is_nan());
    }

    /// A run against itself is 0 off; a run moved rigidly by `d` is `|d| / size` off at every
    /// frame (worst and mean alike); a window cuts the frames measured; a non-finite frame or a
    /// run shorter than the window has no error (NaN).
    #[test]
    fn trajectory_error_is_zero_against_itself_and_a_rigid_offset_over_the_size() {
        let path: Vec<DVec3> = (0..10)
            .map(|k| DVec3::new(0.1 * k as f64, -0.05 * (k * k) as f64, 0.3))
            .collect();
        let same = TrajectoryError::between(&path, &path, 1.2, None);
        assert_eq!((same.error, same.mean, same.window_frames), (0.0, 0.0, 10));
        let d = DVec3::new(0.03, -0.04, 0.0);
        let moved: Vec<DVec3> = path.iter().map(|&p| p + d).collect();
        let e = TrajectoryError::between(&moved, &path, 0.5, None);
        assert!((e.error - 0.1).abs() < 1e-12 && (e.mean - 0.1).abs() < 1e-12);
        // Off by k cm at frame k: the worst of the first 4 frames is at frame 3.
        let drift: Vec<DVec3> = path
            .iter()
            .enumerate()
            .map(|(k, &p)| p + DVec3::X * 0.01 * k as f64)
            .collect();
        let w = TrajectoryError::between(&drift, &path, 1.0, Some(4));
        assert_eq!((w.frame, w.window_frames), (3, 4));
        assert!((w.error - 0.03).abs() < 1e-12);
        let mut broken = moved.clone();
        broken[5].y = f64::NAN;
        assert!(
            TrajectoryError::between(&broken, &path, 1.0, None)
                .error
                .is_nan()
        );
        assert!(
            TrajectoryError::between(&path[..5], &path, 1.0, None)
                .error
                .is_nan()
        );
        assert!(TrajectoryError::between(&path[..5], &path, 1.0, Some(5)).error == 0.0);
    }

    /// The ladder holds 32 distinct candidates, 1 to 40 iterations per frame, every one of
    /// them the product's iteration (Anderson-accelerated local-global).
    #[test]
    fn ladder_is_thirty_two_distinct_candidates_of_one_iteration() {
        let l = ladder();
        assert_eq!(l.len(), 32);
        for (i, a) in l.iter().enumerate() {
            assert!(l[i + 1..].iter().all(|b| b != a));
            assert!((1..=40).contains(&a.iterations_per_frame()));
            assert!(matches!(a.method, SolverMethod::Anderson { .. }));
        }
    }
}
