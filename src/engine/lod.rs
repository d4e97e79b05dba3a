//! Level of detail for many cloths: one frame budget for all of them, and a scheduler that
//! gives each cloth a rung of a ladder of budgets by its priority, from measured costs.
//!
//! A game runs a plaza of characters, not one cape: no platform affords every cape at its
//! preset. [`ClothBudget`] is the frame's cloth time as one number plus the ladder of
//! [`Rung`]s, from the most work to the least: simulated at the tuner's presets
//! ([`Rung::Simulate`]), simulated every other tick with a doubled step
//! ([`Rung::HalfRate`]), following the skinned pose ([`Rung::FollowSkin`]), asleep
//! ([`Rung::Sleep`]). [`LodScheduler`] is plain data with explicit calls, usable without the
//! ECS (the `ecs` layer drives it from components):
//!
//! - [`LodScheduler::insert`] a cloth with its class (cloths of one class share cost
//!   estimates: capes of one model) and node count; [`LodScheduler::remove`] it when it goes;
//! - every tick, [`LodScheduler::set_priority`] (higher is more important: nearer the camera,
//!   larger on screen), then [`LodScheduler::plan`], then run each cloth at
//!   [`LodScheduler::rung`] and [`LodScheduler::record`] what it cost.
//!
//! The rules (defaults in [`ClothBudget`]'s fields):
//!
//! 1. **Estimates.** Each cloth keeps a running mean of its measured cost per rung (weight
//!    [`ClothBudget::learning_rate`] for the newest; the tick a plan moved it on is not a
//!    sample: it carries the switch's one-time costs), and so does its class. A rung the cloth
//!    has not run takes its class's estimate (scaled by the cloth's cost against its class's
//!    on a rung both measured), else any measured rung's scaled by the rungs' work
//!    ([`Rung::work`]), else a prior per node and iteration.
//! 2. **Plan.** Cloths are ranked by priority, a cloth ranked anew only when its priority
//!    moved more than [`ClothBudget::priority_hysteresis`] since (two walkers side by side do
//!    not trade places every tick). A cloth that changed rung less than
//!    [`ClothBudget::min_dwell_s`] ago keeps it (no flicker); its estimate is spent first. The
//!    others start on the cheapest rung and are upgraded one rung at a time, best value per
//!    estimated millisecond first, while the plan fits [`ClothBudget::fill`] of the budget: a
//!    rung's value is `ln(1 + work)` (the first iterations buy the most; [`Rung::work`])
//!    weighted by `1 / rank` in rank order (then id), so the nearest cloths get the most, but
//!    the next ones get a simulated rung before the nearest gets the most expensive. Ranked:
//!    no cloth free to move gets more work than a cloth ranked above it, kept or free, so a
//!    near cloth held on a cheap rung by its dwell holds the farther ones there with it (a far
//!    cloth never takes the room a nearer one will want); an order that motion inverts lasts
//!    at most until one of the two cloths' dwell runs out. A cloth moves above the rung it
//!    runs at only if that fits with [`ClothBudget::upgrade_margin`] to spare.
//! 3. **Budget wins.** If the plan overruns the budget itself (the kept rungs' estimates
//!    alone: costs grew) by more than [`SURGE`] (a quarter) for [`OVERRUN_PLANS`] plans in a
//!    row, the lowest-priority cloths step down (one rung at a time) until it fits the planned
//!    fill again, dwell or not; their dwell keeps running from their last planned change (a
//!    forced step down does not hold a far cloth above a nearer one for another dwell). A smaller overrun lasts until the kept cloths' dwell runs out.
//! 4. **Measured frames.** Estimates do not see a core taken by another process or threads
//!    finishing unevenly: [`FrameTrim`] scales the budget the plan fills from the last five
//!    seconds of measured wall-clock frames against their plans, so that their 99th
//!    percentile stays within it (the `ecs` layer does this; [`LodScheduler::plan_scaled`]).
//!
//! Running a rung: [`LodModels`] holds, per cloth model, one factored model per substep length
//! of the ladder (shared by every cloth of the model), and [`LodModels::tick`] runs a cloth
//! one tick at its rung: [`Cloth::set_model`] and a step, a half-rate step every other tick,
//! [`Cloth::follow_skin`] or [`Cloth::hold`].
//!
//! The scheduler allocates nothing per tick once the cloths are in: slots, estimates, the sort
//! order and the upgrade queue are kept.

use std::collections::BinaryHeap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cloth::{Cloth, StepReport};
use crate::collision::ColliderSet;
use crate::error::{ClothError, non_negative, positive};
use crate::model::{ClothModel, SolverMethod, SolverSettings};

/// Plans in a row whose estimate must overrun the budget before kept cloths step down within
/// their dwell (a tenth of a second at 60 Hz): one noisy measurement does not move anyone.
pub const OVERRUN_PLANS: u32 = 6;

/// How far the kept cloths' estimate must overrun the budget (as a multiple of it) before they
/// step down within their dwell ([`OVERRUN_PLANS`] plans in a row): a cost surge. A smaller
/// overrun waits for their dwell to run out (at most [`ClothBudget::min_dwell_s`]), when the
/// plan places them again, so that no cloth changes rung twice within its dwell for a
/// measurement's drift. Measured on the `crowd` example (64 capes, 4 ms, one arriving and one
/// leaving every second): with every overrun acted on, a cloth changed rung twice within 0.1 s.
pub const SURGE: f64 = 1.25;

/// One rung of a level-of-detail ladder, from the most work to the least.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Rung {
    /// Simulated every tick at `substeps` x `iterations` of `method` (a tuner preset).
    Simulate {
        /// Substeps per tick.
        substeps: u32,
        /// Iterations per substep.
        iterations: u32,
        /// Solver.
        method: SolverMethod,
    },
    /// Simulated every other tick, one step of two ticks' time at `substeps` x `iterations`
    /// of `method` (its own factor for the doubled substep, built once per model and shared).
    HalfRate {
        /// Substeps per (doubled) step.
        substeps: u32,
        /// Iterations per substep.
        iterations: u32,
        /// Solver.
        method: SolverMethod,
    },
    /// Not simulated: each node moves as its skinned position moves
    /// ([`crate::Cloth::follow_skin`] with [`FOLLOW_BLEND`]), so the cloth keeps its last
    /// simulated shape on the moving character; a cloth without skin targets holds still, as
    /// asleep.
    FollowSkin,
    /// Not simulated: the cloth stays where it is, at rest ([`Cloth::hold`]). For cloths out
    /// of sight or on nothing that moves (a banner far away): an attached cloth left behind by
    /// a walking character jumps to it when it wakes, so crowds of walkers end their ladder at
    /// [`Rung::FollowSkin`].
    Sleep,
}

impl Rung {
    /// Whether the rung steps the cloth ([`Rung::Simulate`], [`Rung::HalfRate`]).
    pub fn simulates(&self) -> bool {
        matches!(self, Rung::Simulate { .. } | Rung::HalfRate { .. })
    }

    /// Work relative to one iteration of the cloth's solve, to scale a measured rung's cost to
    /// one not yet measured: `substeps * (iterations + 1)` a simulated tick (an iteration per
    /// iteration, and about one more per substep for prediction and contact), half that at
    /// half rate, a tenth of an iteration to follow the skin, nothing asleep.
    pub fn work(&self) -> f64 {
        match *self {
            Rung::Simulate {
                substeps,
                iterations,
                ..
            } => f64::from(substeps * (iterations + 1)),
            Rung::HalfRate {
                substeps,
                iterations,
                ..
            } => 0.5 * f64::from(substeps * (iterations + 1)),
            Rung::FollowSkin => 0.1,
            Rung::Sleep => 0.0,
        }
    }

    /// The solver settings of a simulated rung for ticks of `timestep` seconds (a half-rate
    /// rung steps twice that), the rest of `base` kept; `None` for a rung that does not
    /// simulate.
    pub fn settings(&self, base: &SolverSettings, timestep: f64) -> Option<SolverSettings> {
        let (substeps, iterations, method, frame_time) = match *self {
            Rung::Simulate {
                substeps,
                iterations,
                method,
            } => (substeps, iterations, method, timestep),
            Rung::HalfRate {
                substeps,
                iterations,
                method,
            } => (substeps, iterations, method, 2.0 * timestep),
            Rung::FollowSkin | Rung::Sleep => return None,
        };
        Some(SolverSettings {
            substeps,
            iterations,
            method,
            frame_time,
            ..*base
        })
    }

    fn validate(&self) -> Result<(), ClothError> {
        if let Some(s) = self.settings(&SolverSettings::default(), 1.0 / 60.0) {
            s.validate()?;
        }
        Ok(())
    }
}

/// The frame's cloth time for every cloth together, and the ladder of rungs the scheduler gives
/// out (plain configuration; the `ecs` layer holds one in a resource). Serde (RON) loadable;
/// [`ClothBudget::validate`] checks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClothBudget {
    /// Milliseconds of cloth time a frame, all cloths together: wall-clock time while they
    /// step on [`ClothBudget::parallelism`] cores. Default 2.
    pub frame_ms: f64,
    /// How many cores the cloths step on at once (the `ecs` layer steps them in parallel with
    /// rayon): the plan fills `frame_ms * parallelism` of summed per-cloth cost, each cloth's
    /// cost being measured while the others run beside it. At least 1; default 1.
    pub parallelism: f64,
    /// Rungs from the most work to the least, each simulated one of the accelerated
    /// local-global map. Default: desktop (4 x 10), console (2 x 5), mobile (1 x 5), half rate
    /// (2 x 3 over two ticks: the mobile rung's substep length, so its factor), follow the
    /// skin, sleep.
    pub ladder: Vec<Rung>,
    /// Seconds a cloth stays on a rung before it may change again (unless the budget needs
    /// it to step down). Default 1.
    pub min_dwell_s: f64,
    /// Fraction of `frame_ms` the plan fills, the rest left for estimates that run short. In
    /// (0, 1]; default 0.9.
    pub fill: f64,
    /// A cloth moves up only if the better rung's estimate fits with this fraction of it to
    /// spare. At least 0; default 0.1.
    pub upgrade_margin: f64,
    /// Weight of the newest measurement in a running cost estimate, in (0, 1]. Default 0.2.
    pub learning_rate: f64,
    /// Whether the budget the plan fills is scaled from measured frames so that their 99th
    /// percentile stays within it ([`FrameTrim`]; the `ecs` layer applies it). Default true;
    /// off, the plan trusts its estimates alone.
    pub trim: bool,
    /// Cost of one iteration of one node (ms) assumed before anything was measured.
    /// Default 1e-4 (a 777-node cape at 2 x 5 costs about 0.7 ms on a console core).
    pub prior_ms_per_node_iteration: f64,
    /// How far a cloth's priority must move from the value it was last ranked by before the
    /// plan ranks it anew (in the priority's units; the `ecs` layer's default priority is minus
    /// the distance to the viewer in metres). Two walkers side by side do not swap ranks, and
    /// with them rungs, every few ticks. At least 0; default 0.5.
    pub priority_hysteresis: f64,
}

impl Default for ClothBudget {
    fn default() -> Self {
        let aa = SolverMethod::Anderson { history: 5 };
        Self {
            frame_ms: 2.0,
            parallelism: 1.0,
            ladder: vec![
                Rung::Simulate {
                    substeps: 4,
                    iterations: 10,
                    method: aa,
                },
                Rung::Simulate {
                    substeps: 2,
                    iterations: 5,
                    method: aa,
                },
                Rung::Simulate {
                    substeps: 1,
                    iterations: 5,
                    method: aa,
                },
                Rung::HalfRate {
                    substeps: 2,
                    iterations: 3,
                    method: aa,
                },
                Rung::FollowSkin,
                Rung::Sleep,
            ],
            min_dwell_s: 1.0,
            fill: 0.9,
            upgrade_margin: 0.1,
            learning_rate: 0.2,
            trim: true,
            prior_ms_per_node_iteration: 1e-4,
            priority_hysteresis: 0.5,
        }
    }
}

impl ClothBudget {
    /// Checks every field: a positive finite budget and prior, a parallelism in [1, 1024], a
    /// non-empty ladder of valid rungs (at most 64), a non-negative dwell, margin and priority
    /// hysteresis, a fill and
    /// learning rate in (0, 1].
    pub fn validate(&self) -> Result<(), ClothError> {
        positive("frame_ms", self.frame_ms)?;
        if !(1.0..=1024.0).contains(&self.parallelism) {
            return Err(ClothError::InvalidSetting {
                name: "parallelism",
                reason: format!("must be in [1, 1024], got {}", self.parallelism),
            });
        }
        positive(
            "prior_ms_per_node_iteration",
            self.prior_ms_per_node_iteration,
        )?;
        non_negative("min_dwell_s", self.min_dwell_s)?;
        non_negative("upgrade_margin", self.upgrade_margin)?;
        non_negative("priority_hysteresis", self.priority_hysteresis)?;
        for (name, v) in [("fill", self.fill), ("learning_rate", self.learning_rate)] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(ClothError::InvalidSetting {
                    name,
                    reason: format!("must be in (0, 1], got {v}"),
                });
            }
        }
        if self.ladder.is_empty() || self.ladder.len() > 64 {
            return Err(ClothError::InvalidSetting {
                name: "ladder",
                reason: format!("needs 1 to 64 rungs, got {}", self.ladder.len()),
            });
        }
        for r in &self.ladder {
            r.validate()?;
        }
        Ok(())
    }

    /// Parses a budget from RON text (missing fields take their defaults) and validates it,
    /// for example `(frame_ms: 4.0, min_dwell_s: 0.5)`.
    pub fn from_ron(text: &str) -> Result<Self, ClothError> {
        let b: Self = crate::load::ron(text).map_err(|e| ClothError::InvalidSetting {
            name: "budget",
            reason: format!("RON: {e}"),
        })?;
        b.validate()?;
        Ok(b)
    }
}

/// A cloth in a [`LodScheduler`] (returned by [`LodScheduler::insert`]; reused after
/// [`LodScheduler::remove`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LodId(pub u32);

/// A running mean cost per rung (`NaN`: not measured).
#[derive(Debug, Clone)]
struct Estimates(Vec<f64>);

impl Estimates {
    fn new(rungs: usize) -> Self {
        Self(vec![f64::NAN; rungs])
    }

    fn learn(&mut self, rung: usize, ms: f64, rate: f64) {
        let e = &mut self.0[rung];
        *e = if e.is_nan() {
            ms
        } else {
            *e + rate * (ms - *e)
        };
    }

    /// A measured rung's cost per unit of work (the most worked one measured), if any.
    fn per_work(&self, ladder: &[Rung]) -> Option<f64> {
        self.0
            .iter()
            .zip(ladder)
            .filter(|(e, r)| !e.is_nan() && r.work() > 0.0)
            .max_by(|a, b| a.1.work().total_cmp(&b.1.work()))
            .map(|(e, r)| e / r.work())
    }
}

#[derive(Debug, Clone)]
struct Slot {
    class: u32,
    nodes: u32,
    priority: f64,
    /// The priority the plan ranks it by: its priority when it last moved more than
    /// [`ClothBudget::priority_hysteresis`] from this.
    rank: f64,
    rung: usize,
    /// When (seconds, [`LodScheduler::plan`]'s clock) it last changed rung; `-inf` never.
    since: f64,
    own: Estimates,
    changes: u64,
}

/// Gives each cloth a rung of a [`ClothBudget`]'s ladder, every tick, within the budget (see
/// the module docs for the rules).
#[derive(Debug, Clone)]
pub struct LodScheduler {
    budget: ClothBudget,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    classes: Vec<Estimates>,
    /// Scratch of a plan: every cloth in rank order; the free cloths in rank order, the best
    /// rung each may take (no better than a kept cloth ranked above it), their planned rungs,
    /// which wait on the cloth before them, and the queued upgrades.
    ranked: Vec<u32>,
    order: Vec<u32>,
    floor: Vec<usize>,
    pick: Vec<usize>,
    blocked: Vec<bool>,
    heap: BinaryHeap<Upgrade>,
    /// Plans in a row whose estimate overran the budget.
    overruns: u32,
    /// The time of the last plan (a cloth whose `since` is this moved on it).
    last_plan_s: f64,
    changes: u64,
    planned_ms: f64,
}

impl LodScheduler {
    /// A scheduler for `budget` (validated), with no cloths.
    pub fn new(budget: ClothBudget) -> Result<Self, ClothError> {
        budget.validate()?;
        Ok(Self {
            budget,
            slots: Vec::new(),
            free: Vec::new(),
            classes: Vec::new(),
            ranked: Vec::new(),
            order: Vec::new(),
            floor: Vec::new(),
            pick: Vec::new(),
            blocked: Vec::new(),
            heap: BinaryHeap::new(),
            overruns: 0,
            last_plan_s: f64::NAN,
            changes: 0,
            planned_ms: 0.0,
        })
    }

    /// The budget.
    pub fn budget(&self) -> &ClothBudget {
        &self.budget
    }

    /// Replaces the budget (validated). A ladder of another length forgets every estimate and
    /// puts every cloth on the cheapest rung; otherwise rungs and estimates carry over.
    pub fn set_budget(&mut self, budget: ClothBudget) -> Result<(), ClothError> {
        budget.validate()?;
        let rungs = budget.ladder.len();
        if rungs != self.budget.ladder.len() {
            for c in &mut self.classes {
                *c = Estimates::new(rungs);
            }
            for s in self.slots.iter_mut().flatten() {
                s.own = Estimates::new(rungs);
                s.rung = rungs - 1;
                s.since = f64::NEG_INFINITY;
            }
        }
        self.budget = budget;
        Ok(())
    }

    /// Adds a cloth of `class` (cloths of one class, such as capes of one model, share cost
    /// estimates; classes are small numbers the caller gives out) with `nodes` nodes. It starts
    /// on the cheapest rung, free to move at the next plan, with priority 0.
    pub fn insert(&mut self, class: u32, nodes: u32) -> LodId {
        let rungs = self.budget.ladder.len();
        while self.classes.len() <= class as usize {
            self.classes.push(Estimates::new(rungs));
        }
        let slot = Slot {
            class,
            nodes,
            priority: 0.0,
            rank: 0.0,
            rung: rungs - 1,
            since: f64::NEG_INFINITY,
            own: Estimates::new(rungs),
            changes: 0,
        };
        match self.free.pop() {
            Some(k) => {
                self.slots[k as usize] = Some(slot);
                LodId(k)
            }
            None => {
                self.slots.push(Some(slot));
                LodId(self.slots.len() as u32 - 1)
            }
        }
    }

    /// Removes a cloth (its id may be given out again). Unknown ids are ignored.
    pub fn remove(&mut self, id: LodId) {
        if let Some(s) = self.slots.get_mut(id.0 as usize)
            && s.take().is_some()
        {
            self.free.push(id.0);
        }
    }

    /// Cloths in the scheduler.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether it holds no cloth.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets a cloth's priority (higher is more important; not finite counts as the lowest).
    pub fn set_priority(&mut self, id: LodId, priority: f64) {
        if let Some(s) = self.slot_mut(id) {
            s.priority = if priority.is_nan() {
                f64::NEG_INFINITY
            } else {
                priority
            };
        }
    }

    /// The rung a cloth runs at (index into the ladder), or `None` for an unknown id.
    pub fn rung(&self, id: LodId) -> Option<usize> {
        self.slot(id).map(|s| s.rung)
    }

    /// How many times a cloth changed rung.
    pub fn changes_of(&self, id: LodId) -> Option<u64> {
        self.slot(id).map(|s| s.changes)
    }

    /// Rung changes of every cloth so far (removed ones included).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The estimated cost of the last plan (ms).
    pub fn planned_ms(&self) -> f64 {
        self.planned_ms
    }

    /// Takes in what a cloth's last tick at `rung` cost (ms; a measurement that is not finite
    /// or negative is ignored). The tick on which the last plan moved the cloth to `rung` is
    /// ignored too: it carries one-time costs (the switch of model, buffers sized on first
    /// use, a cold cache), not the rung's. (Measured on `crowd`: learned from, those first
    /// ticks put the mobile rung's estimate at 1.26 ms where it settles at 0.45, and the plan
    /// overran by a quarter within the first 0.3 s in half the runs.)
    pub fn record(&mut self, id: LodId, rung: usize, ms: f64) {
        let rate = self.budget.learning_rate;
        if !(ms.is_finite() && ms >= 0.0) || rung >= self.budget.ladder.len() {
            return;
        }
        let last_plan = self.last_plan_s;
        let Some(s) = self.slots.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        if s.since == last_plan {
            return;
        }
        s.own.learn(rung, ms, rate);
        self.classes[s.class as usize].learn(rung, ms, rate);
    }

    /// The estimated cost (ms) of a cloth at `rung` (see the module docs, rule 1).
    pub fn estimate(&self, id: LodId, rung: usize) -> Option<f64> {
        let s = self.slot(id)?;
        (rung < self.budget.ladder.len()).then(|| self.estimate_slot(s, rung))
    }

    fn estimate_slot(&self, s: &Slot, rung: usize) -> f64 {
        let ladder = &self.budget.ladder;
        let class = &self.classes[s.class as usize];
        let (own, shared) = (s.own.0[rung], class.0[rung]);
        if !own.is_nan() {
            return own;
        }
        if !shared.is_nan() {
            // The class's figure, scaled by how this cloth's cost compares with its class's on
            // the most worked rung both have measured (a cloth in a heavier scene costs more
            // at every rung).
            let relative = s
                .own
                .0
                .iter()
                .zip(&class.0)
                .zip(ladder)
                .filter(|((o, c), r)| !o.is_nan() && !c.is_nan() && **c > 0.0 && r.work() > 0.0)
                .max_by(|a, b| a.1.work().total_cmp(&b.1.work()))
                .map_or(1.0, |((o, c), _)| o / c);
            return shared * relative;
        }
        let work = ladder[rung].work();
        let per_work = s.own.per_work(ladder).or_else(|| class.per_work(ladder));
        match per_work {
            Some(p) => p * work,
            None => self.budget.prior_ms_per_node_iteration * f64::from(s.nodes) * work,
        }
    }

    /// Gives every cloth its rung for the coming tick at time `now_s` (seconds, any clock that
    /// does not run backwards), by the rules of the module docs. Returns the estimated total.
    pub fn plan(&mut self, now_s: f64) -> f64 {
        self.plan_scaled(now_s, 1.0)
    }

    /// [`LodScheduler::plan`] with the budget scaled by `scale` (in (0, 1.5]; [`FrameTrim`]
    /// gives it from measured frames, so that the frames' 99th percentile, not only their
    /// estimate, stays within the budget).
    pub fn plan_scaled(&mut self, now_s: f64, scale: f64) -> f64 {
        let scale = if scale > 0.0 { scale.min(1.5) } else { 1.0 };
        self.last_plan_s = now_s;
        let b = &self.budget;
        let cheapest = b.ladder.len() - 1;
        let capacity = b.frame_ms * b.parallelism * scale;
        // The budget rule's threshold, against the budget as set, not as `FrameTrim` scaled
        // it: the trim shapes what the free cloths are given, and a kept cloth waits out its
        // dwell for it.
        let surge = SURGE * b.frame_ms * b.parallelism;
        let total = b.fill * capacity;
        let dwell = b.min_dwell_s;
        let band = b.priority_hysteresis;
        // Ranks: a cloth is ranked anew only when its priority moved past the hysteresis band.
        for s in self.slots.iter_mut().flatten() {
            if (s.priority - s.rank).abs() > band || !s.rank.is_finite() {
                s.rank = s.priority;
            }
        }
        self.ranked.clear();
        self.ranked.extend(
            self.slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.is_some())
                .map(|(k, _)| k as u32),
        );
        let slots = &self.slots;
        self.ranked
            .sort_unstable_by(|a, b| rank(slots, *b).total_cmp(&rank(slots, *a)).then(a.cmp(b)));
        // Kept cloths (changed rung within the dwell) are spent first; the others start on the
        // cheapest rung. A free cloth may take no better rung than a kept cloth ranked above it
        // (the floor), so the plan never puts a cloth on a better rung than one ranked above
        // it. An order that motion or the plan's budget inverted (a free cloth above a kept one
        // gets less than it) lasts until the kept cloth's dwell runs out: it then may take no
        // more than the cloths above it.
        let mut spent = 0.0;
        self.order.clear();
        self.floor.clear();
        let mut floor = 0usize;
        for &k in &self.ranked {
            let Some(s) = self.slots[k as usize].as_ref() else {
                continue;
            };
            if now_s - s.since < dwell {
                spent += self.estimate_slot(s, s.rung);
                floor = floor.max(s.rung);
            } else {
                spent += self.estimate_slot(s, cheapest);
                self.order.push(k);
                self.floor.push(floor);
            }
        }
        let free = self.order.len();
        self.pick.clear();
        self.pick.resize(free, cheapest);
        // Then upgrades, one rung at a time, the best value for its cost first.
        self.blocked.clear();
        self.blocked.resize(free, false);
        self.heap.clear();
        for o in 0..free {
            self.push_upgrade(o);
        }
        let margin = 1.0 + self.budget.upgrade_margin;
        while let Some(u) = self.heap.pop() {
            let o = u.order as usize;
            let to = u.to as usize;
            if self.pick[o] != to + 1 {
                continue; // stale
            }
            let Some(s) = self.slots[self.order[o] as usize].as_ref() else {
                continue;
            };
            let (now, next) = (
                self.estimate_slot(s, self.pick[o]),
                self.estimate_slot(s, to),
            );
            // Above the rung it runs at, the better rung must fit with the margin to spare.
            let need = if to < s.rung { next * margin } else { next } - now;
            if spent + need > total {
                continue;
            }
            spent += next - now;
            self.pick[o] = to;
            self.push_upgrade(o);
            if o + 1 < free && self.blocked[o + 1] {
                self.blocked[o + 1] = false;
                self.push_upgrade(o + 1);
            }
        }
        for o in 0..free {
            let k = self.order[o] as usize;
            self.move_to(k, self.pick[o], Some(now_s));
        }
        // Budget wins: when the plan has overrun the budget itself (not only the planned fill)
        // by more than `SURGE` for `OVERRUN_PLANS` plans in a row (costs grew, not one noisy
        // measurement), kept cloths step down, lowest priority first, until the plan fits.
        self.overruns = if spent > surge { self.overruns + 1 } else { 0 };
        if self.overruns >= OVERRUN_PLANS {
            self.overruns = 0;
            self.order.clear();
            self.order.extend(
                self.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.as_ref().is_some_and(|s| s.rung < cheapest))
                    .map(|(k, _)| k as u32),
            );
            let slots = &self.slots;
            self.order.sort_unstable_by(|a, b| {
                rank(slots, *a).total_cmp(&rank(slots, *b)).then(b.cmp(a))
            });
            for o in 0..self.order.len() {
                if spent <= total {
                    break;
                }
                let k = self.order[o] as usize;
                let Some(s) = self.slots[k].as_ref() else {
                    continue;
                };
                let mut r = s.rung;
                let mut cost = self.estimate_slot(s, r);
                while r < cheapest && spent > total {
                    let next = self.estimate_slot(s, r + 1);
                    spent += next - cost;
                    cost = next;
                    r += 1;
                }
                // Its dwell keeps running from its last planned change: a step down the budget
                // forces does not hold it below a nearer cloth for another dwell.
                self.move_to(k, r, None);
            }
        }
        self.planned_ms = spent;
        spent
    }

    /// Queues the next upgrade of the free cloth at `o` (in priority order), or marks it
    /// blocked while the cloth before it has less work than the upgrade would give. Its score
    /// is the value gained, weighted by the cloth's rank, per millisecond: value is
    /// `ln(1 + work)` (the first iterations buy the most), the rank weight `1 / (o + 1)`.
    fn push_upgrade(&mut self, o: usize) {
        let from = self.pick[o];
        if from == 0 {
            return;
        }
        let to = from - 1;
        if to < self.floor[o] {
            return;
        }
        if o > 0 && self.pick[o - 1] > to {
            self.blocked[o] = true;
            return;
        }
        let Some(s) = self.slots[self.order[o] as usize].as_ref() else {
            return;
        };
        let ladder = &self.budget.ladder;
        let value = |r: usize| (1.0 + ladder[r].work()).ln();
        let gain = (value(to) - value(from)) / (o as f64 + 1.0);
        let cost = self.estimate_slot(s, to) - self.estimate_slot(s, from);
        let score = if cost > 0.0 {
            gain / cost
        } else {
            f64::INFINITY
        };
        self.heap.push(Upgrade {
            score,
            order: o as u32,
            to: to as u32,
        });
    }

    /// Moves slot `k` to `rung`, its dwell starting at `now_s` (`None`: left running).
    fn move_to(&mut self, k: usize, rung: usize, now_s: Option<f64>) {
        if let Some(s) = self.slots[k].as_mut()
            && s.rung != rung
        {
            s.rung = rung;
            s.since = now_s.unwrap_or(s.since);
            s.changes += 1;
            self.changes += 1;
        }
    }

    fn slot(&self, id: LodId) -> Option<&Slot> {
        self.slots.get(id.0 as usize).and_then(Option::as_ref)
    }

    fn slot_mut(&mut self, id: LodId) -> Option<&mut Slot> {
        self.slots.get_mut(id.0 as usize).and_then(Option::as_mut)
    }
}

/// The rank priority of slot `k` (0 for an empty one).
fn rank(slots: &[Option<Slot>], k: u32) -> f64 {
    slots[k as usize].as_ref().map_or(0.0, |s| s.rank)
}

/// How far a cloth following its skin closes its offset from the skinned pose each tick
/// ([`Rung::FollowSkin`], [`Cloth::follow_skin`]): none. The cloth is carried by its skin's
/// motion and keeps its shape: measured on the demo cape running down the ladder and back
/// (`tests/lod.rs`), closing even 2 % a tick (at most 1 m/s) moved the cape into a blend of
/// its simulated and skinned poses, strained, which the solve snapped back by 23 cm in the
/// first tick of simulation; carried without closing it resumes without a jump.
pub const FOLLOW_BLEND: f64 = 0.0;

/// The fastest a cloth following its skin may close its offset from the skinned pose (m/s),
/// where [`FOLLOW_BLEND`] closes it at all.
pub const FOLLOW_SPEED: f64 = 1.0;

/// The models of a ladder for one cloth model: per simulating rung, the model factored for its
/// substep length (rungs of one step length share one factor, the base model's own where it
/// matches), built once and shared by every cloth of that model, so that a cloth changes rung
/// without a refactorisation ([`Cloth::set_model`]).
#[derive(Debug, Clone)]
pub struct LodModels {
    base: Arc<ClothModel>,
    ladder: Vec<Rung>,
    /// Per rung: its model and settings (`None`: the rung does not simulate).
    rungs: Vec<Option<(Arc<ClothModel>, SolverSettings)>>,
}

impl LodModels {
    /// The models of `ladder` for cloths of `base`, at ticks of `timestep` seconds (a
    /// half-rate rung steps twice that), with `base`'s gravity, integrator and catch-up.
    /// Factors once per distinct substep length and method.
    pub fn new(base: &Arc<ClothModel>, ladder: &[Rung], timestep: f64) -> Result<Self, ClothError> {
        positive("timestep", timestep)?;
        let mut rungs: Vec<Option<(Arc<ClothModel>, SolverSettings)>> = Vec::new();
        for rung in ladder {
            let Some(settings) = rung.settings(base.settings(), timestep) else {
                rungs.push(None);
                continue;
            };
            settings.validate()?;
            let factored_for = |m: &ClothModel| {
                let f = m.settings();
                f.substep() == settings.substep()
                    && f.method == settings.method
                    && f.integrator == settings.integrator
            };
            let shared = rungs
                .iter()
                .flatten()
                .map(|(m, _)| m)
                .chain(std::iter::once(base))
                .find(|m| factored_for(m))
                .cloned();
            let model = match shared {
                Some(m) => m,
                None => base.with_settings(settings)?,
            };
            rungs.push(Some((model, settings)));
        }
        Ok(Self {
            base: base.clone(),
            ladder: ladder.to_vec(),
            rungs,
        })
    }

    /// The model the ladder was built for.
    pub fn base(&self) -> &Arc<ClothModel> {
        &self.base
    }

    /// Whether `model` is the base model or one of the rungs' (a cloth of this ladder, on
    /// whichever rung it last ran).
    pub fn holds(&self, model: &Arc<ClothModel>) -> bool {
        Arc::ptr_eq(model, &self.base)
            || self
                .rungs
                .iter()
                .flatten()
                .any(|(m, _)| Arc::ptr_eq(m, model))
    }

    /// Distinct factored models held (the base's own included where a rung uses it).
    pub fn factors(&self) -> usize {
        let mut seen: Vec<*const ClothModel> = Vec::new();
        for (m, _) in self.rungs.iter().flatten() {
            if !seen.contains(&Arc::as_ptr(m)) {
                seen.push(Arc::as_ptr(m));
            }
        }
        seen.len()
    }

    /// Runs one tick of `dt` seconds of `cloth` (a cloth of the base model) at `rung` of the
    /// ladder, against `colliders`. `behind` is how many ticks the cloth's state is behind
    /// (1 after a tick that advanced it; the caller keeps it: reset to 1 when
    /// [`LodTick::advanced`], else one more): every rung advances it that many ticks. A
    /// half-rate rung runs only on the ticks that are its `turn` (every other one, the caller
    /// alternating cloths so that half of them step on each tick): its cloth's accumulated time
    /// then runs as whole steps of two ticks ([`Cloth::step_with`]; a cloth entering on the
    /// wrong tick keeps the odd tick for later, lagging its character by one tick). A
    /// simulating rung switches the cloth to its model first ([`Cloth::set_model`], no
    /// refactorisation; time owed runs as catch-up substeps); following the skin is
    /// [`Cloth::follow_skin`] by [`FOLLOW_BLEND`] and [`FOLLOW_SPEED`]; sleeping is
    /// [`Cloth::hold`].
    pub fn tick(
        &self,
        cloth: &mut Cloth,
        rung: usize,
        (behind, turn): (u32, bool),
        dt: f64,
        colliders: &ColliderSet,
    ) -> Result<LodTick, ClothError> {
        let entry = self.entry(rung)?;
        let behind = behind.max(1);
        let elapsed = f64::from(behind) * dt;
        let advanced = |report| LodTick {
            advanced: true,
            report,
        };
        match entry {
            Some((model, settings)) => {
                let half = settings.frame_time > dt * 1.5;
                if half && !turn {
                    return Ok(LodTick::default());
                }
                let s = SolverSettings {
                    gravity: cloth.settings().gravity,
                    ..*settings
                };
                cloth.set_model(model.clone(), s)?;
                cloth
                    .step_with(elapsed, colliders)
                    .map(|r| advanced(Some(r)))
            }
            None if self.ladder[rung] == Rung::FollowSkin => cloth
                .follow_skin(elapsed, FOLLOW_BLEND, FOLLOW_SPEED)
                .map(|_| advanced(None)),
            None => {
                cloth.hold();
                Ok(advanced(None))
            }
        }
    }

    /// For a layered cloth ([`crate::layering`]): when `rung` simulates this whole tick of
    /// `dt` seconds in one step (a rung simulated every tick, the cloth not behind), puts the
    /// cloth on the rung's model and returns true: its layer group then steps it. Otherwise
    /// false, changing nothing: the cloth ticks alone ([`LodModels::tick`]).
    pub fn enter_rung(
        &self,
        cloth: &mut Cloth,
        rung: usize,
        behind: u32,
        dt: f64,
    ) -> Result<bool, ClothError> {
        match self.entry(rung)? {
            Some((model, settings)) if settings.frame_time <= dt * 1.5 && behind <= 1 => {
                let s = SolverSettings {
                    gravity: cloth.settings().gravity,
                    ..*settings
                };
                cloth.set_model(model.clone(), s)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The model and settings of `rung` (`None`: a rung that does not simulate).
    #[allow(clippy::type_complexity)]
    fn entry(&self, rung: usize) -> Result<&Option<(Arc<ClothModel>, SolverSettings)>, ClothError> {
        self.rungs
            .get(rung)
            .ok_or_else(|| ClothError::InvalidSetting {
                name: "rung",
                reason: format!("{rung} is past the ladder's {} rungs", self.rungs.len()),
            })
    }
}

/// What [`LodModels::tick`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LodTick {
    /// Whether the cloth's state advanced to this tick (not a half-rate rung's waiting tick).
    pub advanced: bool,
    /// The step's report where it simulated.
    pub report: Option<StepReport>,
}

/// A queued upgrade of a plan: the free cloth at `order` to rung `to`, by `score`.
#[derive(Debug, Clone, Copy)]
struct Upgrade {
    score: f64,
    order: u32,
    to: u32,
}

impl PartialEq for Upgrade {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Upgrade {}

impl PartialOrd for Upgrade {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Upgrade {
    /// Higher score first; on a tie the cloth of higher priority (lower order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.order.cmp(&self.order))
    }
}

/// Frames of history [`FrameTrim`] keeps (five seconds at 60 Hz): its 99th percentile is the
/// fourth-worst frame, so that two slow frames in a row (a preempted thread) do not set it.
const TRIM_WINDOW: usize = 300;

/// A frame teaches [`FrameTrim`] only if its plan was at least this fraction of the frame's
/// budget: a nearly idle frame's wall-clock time is the threads' wake-up, not the cloths' cost.
const TRIM_MIN_PLANNED: f64 = 0.1;

/// Keeps the measured frames' 99th percentile within the budget: the plan works from
/// estimates of each cloth's cost, but a frame's wall-clock time also carries what no
/// estimate sees (a core taken by another process, threads finishing unevenly, a worker woken
/// late). Per frame it takes the ratio of the measured wall-clock time to the plan's estimate
/// (summed over cloths); from the last five seconds' 99th percentile of that ratio `r` it
/// scales the summed budget the plan fills (`fill * frame_ms * parallelism`) by `1 / (r *
/// parallelism * fill)`, so that a frame as slow for its plan as the slowest 1 % takes the
/// budget: the measured ratio holds what estimates miss, so the trim, not
/// [`ClothBudget::fill`], sets the margin. Fed whole ticks ([`FrameTrim::record_tick`]), it
/// also takes the tick's work outside the step off the budget. The scale falls at once and
/// rises at most 2 % a frame; it stays in [0.3, 1 / fill] (times the share of the budget
/// the rest of the tick leaves). Frames that planned less than a tenth of the budget are not
/// learned from.
///
/// The scale is set from the window, not accumulated frame by frame: a slow frame lowers it
/// for as long as it is in the window, by what it showed, and no more. (The first trim
/// multiplied the scale down 2 % every frame the window's 99th percentile was over the budget:
/// two slow frames kept it falling for two seconds, and on `crowd` it sat at its floor 0.3;
/// this one holds 0.44-0.46 there, on a machine whose slowest frames run as on one core.)
#[derive(Debug, Clone)]
pub struct FrameTrim {
    /// Per frame of the window: the step's wall-clock time over its plan's estimate, the
    /// tick's time outside the step (0 where fed the step alone) and the plan's estimate.
    frames: Vec<(f64, f64, f64)>,
    next: usize,
    scale: f64,
    sorted: Vec<f64>,
}

impl Default for FrameTrim {
    fn default() -> Self {
        Self {
            frames: Vec::with_capacity(TRIM_WINDOW),
            next: 0,
            scale: 1.0,
            sorted: Vec::with_capacity(TRIM_WINDOW),
        }
    }
}

impl FrameTrim {
    /// The scale for the next plan.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Takes in a frame's measured wall-clock cloth time and the estimate its plan was made
    /// with (ms, summed over cloths: [`LodScheduler::planned_ms`]) under `budget`; returns the
    /// scale for the next plan. Frames with a time that is not finite or negative are
    /// ignored.
    pub fn record(&mut self, wall_ms: f64, planned_ms: f64, budget: &ClothBudget) -> f64 {
        self.record_tick(wall_ms, wall_ms, planned_ms, budget)
    }

    /// [`FrameTrim::record`] for a whole tick of the cloth schedule: `tick_ms` its wall-clock
    /// time (colliders, attachments, the plan, the step, render meshes), `step_ms` the step's
    /// share of it. The rest of the tick (`tick_ms - step_ms`, which no rung changes: it grows
    /// with the number of cloths, not their work) is taken off the budget before the plan
    /// fills it, by its median over the window; its excess over that median in a frame counts
    /// in that frame's ratio as the step's (`(step + excess) / planned`), and the ratio's 99th
    /// percentile sets the scale as in `record`. So the tick's 99th percentile, not only the
    /// step's, stays within [`ClothBudget::frame_ms`]: the plan trims before the tick
    /// overruns. (With the median alone, `crowd`'s tick p99 was 5.6-5.9 ms at a 4 ms budget,
    /// the step's 3.7-4.0 ms.) A tick whose other work leaves the step less than a tenth of
    /// the budget plans for that tenth. (On `crowd`, 64 capes at 4 ms on a 2-core machine, the
    /// other work was 1.3 ms at its median and 3.3 ms at its 99th percentile, when every cape
    /// was skinned every tick: planning for that tail left the plan a sixth of the budget.
    /// Skinned and drawn by need, it is 0.8 and 2.7 ms.)
    pub fn record_tick(
        &mut self,
        tick_ms: f64,
        step_ms: f64,
        planned_ms: f64,
        budget: &ClothBudget,
    ) -> f64 {
        let valid = tick_ms.is_finite()
            && step_ms.is_finite()
            && step_ms >= 0.0
            && tick_ms >= step_ms
            && planned_ms.is_finite();
        if !valid || planned_ms < TRIM_MIN_PLANNED * budget.frame_ms {
            return self.scale;
        }
        let frame = (step_ms / planned_ms, tick_ms - step_ms, planned_ms);
        if self.frames.len() < TRIM_WINDOW {
            self.frames.push(frame);
        } else {
            self.frames[self.next] = frame;
        }
        self.next = (self.next + 1) % TRIM_WINDOW;
        if self.frames.len() < TRIM_WINDOW / 10 {
            return self.scale;
        }
        // The rest of the tick by its median: its fixed part, which the plan cannot change.
        self.sorted.clear();
        self.sorted.extend(self.frames.iter().map(|f| f.1));
        let mid = (self.sorted.len() - 1) / 2;
        let other = *self.sorted.select_nth_unstable_by(mid, f64::total_cmp).1;
        // Each frame's ratio carries its other work's excess over that median, as if the step
        // had taken it: a tick's 99th percentile is a slow step and slow other work together
        // (a core taken from both), and only the plan can give the time back.
        self.sorted.clear();
        self.sorted.extend(
            self.frames
                .iter()
                .map(|&(ratio, rest, planned)| ratio + (rest - other).max(0.0) / planned),
        );
        let k = ((self.sorted.len() - 1) as f64 * 0.99).round() as usize;
        let r99 = *self.sorted.select_nth_unstable_by(k, f64::total_cmp).1;
        let left = (1.0 - other / budget.frame_ms).max(0.1);
        let target =
            (left / (r99 * budget.parallelism * budget.fill)).clamp(0.3 * left, 1.0 / budget.fill);
        self.scale = target.min(1.02 * self.scale);
        self.scale
    }
}
