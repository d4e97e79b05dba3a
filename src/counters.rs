//! What a step did, counted per stage, in the manner of rapier's `Counters`: the work each
//! stage did (solves, iterations, the strain cap's steps and conjugate-gradient iterations,
//! contact tests, self-contact and layer pairs) and whether a bound stopped one, so that a game
//! can see what a frame cost and why, and plan on it.
//!
//! [`StepCounters::work`] folds the counts into one figure in units of one free node of one
//! solve with the constant factor (a quiet console frame of the 777-node cape is about 23,000),
//! with weights fitted to measured frame times (see `weight`; `benches/work.rs` times frames of
//! several scenes against their work).

use serde::Serialize;

/// Per-stage work counts of one [`crate::Cloth::step`] (summed over its substeps; see the
/// module docs). A layer group's counts are its cloths' plus its own pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StepCounters {
    /// Solves with the constant factor (each over every free node): one per local-global
    /// iteration, one per contact step, one per compliance measurement, one per velocity split.
    pub solves: u32,
    /// Free nodes solved for, summed over [`StepCounters::solves`].
    pub solve_nodes: u64,
    /// Nodes projected and assembled by the local step, summed over its iterations.
    pub local_nodes: u64,
    /// Strain-cap steps taken (each a linearised projection; [`crate::StrainCap::steps`]).
    pub cap_steps: u32,
    /// Conjugate-gradient iterations of the cap, over its steps.
    pub cap_cg_iterations: u32,
    /// The cap's rows times the conjugate-gradient iterations that multiplied them (the bulk
    /// of its work).
    pub cap_row_iterations: u64,
    /// Half edges the cap tested against the band (one pass per step and one to find none
    /// outside).
    pub cap_edge_tests: u64,
    /// Contact candidates (node, body) updated, summed over the iterations.
    pub contact_visits: u64,
    /// Node-against-body tests of the broad phase and of the path guard.
    pub contact_tests: u64,
    /// Self-contact pairs measured, summed over the iterations.
    pub self_pair_visits: u64,
    /// A layer group's cloth-against-cloth pairs measured, summed over its iterations.
    pub layer_pair_visits: u64,
    /// Substeps whose strain cap stopped at a bound with half edges still outside its band
    /// (the cap's steps or its work bound, [`crate::StrainCap::work`]): the step ends with the
    /// strain the cap had reached, the bodies and limits still satisfied.
    pub cap_unmet: u32,
}

/// Weights of [`StepCounters::work`]: the time of one count relative to one free node of a
/// solve, fitted by least squares to the frame times of `scenario` (banner at three budgets,
/// cape_run, tablecloth, limb_sweep, drop_bar, napkin) and three minutes of `soak`, 2,500
/// frames: each scene's median frame time is within 0.90-1.14x of what its work predicts
/// (docs/lab/2026-12-02-counters.md).
pub(crate) mod weight {
    /// One free node of a solve (37 ns on the machine the weights were fitted on).
    pub const SOLVE_NODE: f64 = 1.0;
    /// One node of the local step (its red triangles' rotations, bending rows, springs).
    pub const LOCAL_NODE: f64 = 1.2;
    /// One cap row in one conjugate-gradient iteration (its scatter, gather and updates).
    pub const CAP_ROW_ITERATION: f64 = 0.3;
    /// One half edge tested by the cap.
    pub const CAP_EDGE_TEST: f64 = 0.4;
    /// One contact candidate's update.
    pub const CONTACT_VISIT: f64 = 1.0;
    /// One node-against-body test of a box.
    pub const CONTACT_TEST: f64 = 0.04;
    /// One self-contact or layer pair measured or tested.
    pub const PAIR_VISIT: f64 = 3.8;
}

impl StepCounters {
    /// The step's work in units of one free node of one solve (see the module docs): a
    /// counted figure, identical from run to run and machine to machine, which a budget can be
    /// planned on where wall time cannot.
    pub fn work(&self) -> f64 {
        use weight::*;
        self.solve_nodes as f64 * SOLVE_NODE
            + self.local_nodes as f64 * LOCAL_NODE
            + self.cap_row_iterations as f64 * CAP_ROW_ITERATION
            + self.cap_edge_tests as f64 * CAP_EDGE_TEST
            + self.contact_visits as f64 * CONTACT_VISIT
            + self.contact_tests as f64 * CONTACT_TEST
            + (self.self_pair_visits + self.layer_pair_visits) as f64 * PAIR_VISIT
    }

    /// Counts one solve with `model`'s factor.
    pub(crate) fn count_solve(&mut self, model: &crate::model::ClothModel) {
        self.solves += 1;
        self.solve_nodes += model.free_nodes.len() as u64;
    }

    /// Whether a bound stopped a stage short of its goal in this step.
    pub fn degraded(&self) -> bool {
        self.cap_unmet > 0
    }
}

impl std::ops::AddAssign for StepCounters {
    fn add_assign(&mut self, o: Self) {
        self.solves += o.solves;
        self.solve_nodes += o.solve_nodes;
        self.local_nodes += o.local_nodes;
        self.cap_steps += o.cap_steps;
        self.cap_cg_iterations += o.cap_cg_iterations;
        self.cap_row_iterations += o.cap_row_iterations;
        self.cap_edge_tests += o.cap_edge_tests;
        self.contact_visits += o.contact_visits;
        self.contact_tests += o.contact_tests;
        self.self_pair_visits += o.self_pair_visits;
        self.layer_pair_visits += o.layer_pair_visits;
        self.cap_unmet += o.cap_unmet;
    }
}

/// The per-frame work and step time of a run, for its median, 99th percentile and maximum
/// ([`FrameCosts::summary`]): the figures the examples print as `work_median`, `work_p99`,
/// `work_max`, `step_ms_median`, `step_ms_p99` and `step_ms_max`.
#[derive(Debug, Clone, Default)]
pub struct FrameCosts {
    work: Vec<f64>,
    ms: Vec<f64>,
}

/// What [`FrameCosts::summary`] gives: percentiles of the frames' work
/// ([`StepCounters::work`]) and of their step time, each taken over the frames on its own
/// (the frame of the worst work need not be the slowest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CostSummary {
    /// Frames recorded.
    pub frames: usize,
    /// The median frame's work.
    pub work_median: f64,
    /// The 99th percentile of the frames' work.
    pub work_p99: f64,
    /// The largest frame's work.
    pub work_max: f64,
    /// The median step time (ms).
    pub step_ms_median: f64,
    /// The 99th percentile of the step times (ms).
    pub step_ms_p99: f64,
    /// The slowest step (ms).
    pub step_ms_max: f64,
}

impl FrameCosts {
    /// Room for `frames` frames.
    pub fn with_capacity(frames: usize) -> Self {
        Self {
            work: Vec::with_capacity(frames),
            ms: Vec::with_capacity(frames),
        }
    }

    /// Records one frame: its work (of every cloth it stepped) and its step time in ms.
    pub fn record(&mut self, work: f64, step_ms: f64) {
        self.work.push(work);
        self.ms.push(step_ms);
    }

    /// Median, 99th percentile and maximum of the work and of the step times (the element at
    /// `round(q (n - 1))` of the `n` sorted frames; all zero without frames).
    pub fn summary(&self) -> CostSummary {
        let (work, ms) = (quantiles(&self.work), quantiles(&self.ms));
        CostSummary {
            frames: self.ms.len(),
            work_median: work[0],
            work_p99: work[1],
            work_max: work[2],
            step_ms_median: ms[0],
            step_ms_p99: ms[1],
            step_ms_max: ms[2],
        }
    }
}

/// Median, 99th percentile and maximum of `v` (zeros when empty).
fn quantiles(v: &[f64]) -> [f64; 3] {
    if v.is_empty() {
        return [0.0; 3];
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.99), s[s.len() - 1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary's percentiles are the sorted frames' elements at `round(q (n - 1))`: of
    /// 1..=100, the median is 51, the 99th percentile 99, the maximum 100.
    #[test]
    fn summary_takes_the_sorted_frames_at_their_rank() {
        let mut c = FrameCosts::with_capacity(100);
        for k in (1..=100).rev() {
            c.record(k as f64, 2.0 * k as f64);
        }
        let s = c.summary();
        assert_eq!((s.work_median, s.work_p99, s.work_max), (51.0, 99.0, 100.0));
        assert_eq!(s.step_ms_max, 200.0);
        assert_eq!(s.frames, 100);
    }

    /// Work is additive: two steps' counters summed have the work of both.
    #[test]
    fn work_of_summed_counters_is_the_sum_of_their_work() {
        let a = StepCounters {
            solves: 10,
            solve_nodes: 7_560,
            local_nodes: 7_770,
            cap_row_iterations: 400,
            ..StepCounters::default()
        };
        let b = StepCounters {
            contact_visits: 300,
            contact_tests: 2_000,
            cap_unmet: 1,
            ..StepCounters::default()
        };
        let mut sum = a;
        sum += b;
        assert!((sum.work() - a.work() - b.work()).abs() < 1e-9);
        assert!(sum.degraded() && !a.degraded());
    }
}
