//! Layers: cloth against cloth (a cape over a skirt, a mantle over a cape, two characters'
//! capes that meet).
//!
//! Cloths that opt in keep a minimum distance (the thickness) from each other and never pass
//! through each other, with the contract of self-collision ([`crate::self_contact`]): the same
//! feature pairs (a node against a triangle, an edge against an edge), the same forces inside
//! the iterations, a continuous check after them, and Coulomb friction between the layers.
//!
//! Cloths that may touch this frame form a **layer group** ([`crate::layering::ClothLayers`]),
//! and a group steps as one system: one substep loop, and in each iteration every cloth's own
//! map (its local step, its global solve with its own factor, its body contact), then one
//! update of the forces between the group's cloths. Everything between cloths is two-sided:
//!
//! 1. **Pairs, once per substep**: a swept broad phase between every two cloths of the group
//!    that may meet (each cloth's features from the substep's start to where it is headed,
//!    their boxes taken in the frame of the group's mean motion: layers carried by a running
//!    character meet only what their motion against each other brings near), the pairs
//!    numbered in the group's numbering (the first cloth's nodes, then the second's, ...),
//!    each with the side it begins on and its last force (warm start). Unlike
//!    self-collision, no impulse pushes the predictions apart: pushing both cloths at once
//!    threw a cape dropped on a draped sheet 12 m up at its first touch.
//!
//!    **Bodies driving layers into each other.** Where a cloth is headed is its prediction
//!    pushed out of the substep's bodies (a limb driven through one layer carries it into
//!    the next within the substep: the pairs must be there from its start), and the nodes a
//!    body pushes carry the layers they press on (the headings pushed apart along the pairs
//!    found, the pushed nodes held, and the pairs found again, once per further layer).
//!    Each node near a moving body has its box and its pairs' reach grown by how far the
//!    body moves against it over the substep (the push-out only estimates where the
//!    iterations put it). Which cloths may meet in a frame counts the bodies too (a cloth's
//!    box grows by how far a moving body near it goes). A node the iterations drag out of
//!    the box its pairs were found in makes the group find the pairs again once in the
//!    substep, the pairs found before keeping their forces.
//! 2. **Forces inside the iterations**: each pair's force `lambda >= 0` (and its friction)
//!    enters **both** cloths' right-hand sides, equal and opposite, split over the pair's
//!    nodes by the closest points' weights; after every iteration it is corrected from the
//!    gap at both cloths' new iterates (`lambda <- max(0, lambda - gap / W)`, `W` the sum of
//!    both sides' compliances).
//! 3. **A last pass**: pairs still closer than the thickness pushed apart (both sides; a node
//!    on a body, or within the reach of one, is not pushed into it: its partner takes the
//!    whole push, and a node pushed off a held one is held in turn, so a stack of layers on
//!    a limb is pushed off it layer by layer), then a continuous check over both cloths'
//!    actual paths (in the frame of the pairs' search): the nodes of the pairs that still
//!    cross move as **impact zones**, each zone's nodes together from their starts (the
//!    start's shape translated by the zone's pinned, held or mass centre's motion), zones
//!    that meet joined, until nothing crosses; as a fail-safe the free nodes of a crossing
//!    pair go back along their paths. Cloths that begin a substep untangled end it
//!    untangled (pinned nodes, which the game places, excepted).
//!
//! **Bounded work.** A group holds at most [`LayerSettings::max_pairs`] pairs in a substep
//! (those pushing already, then the nearest) and its searches test at most four times that
//! many feature pairs; past either bound the frame is degraded
//! ([`crate::layering::ClothLayers::degraded`]): the layers still never cross (the last
//! pass's check sees every pair), but may come closer than the thickness, and a body may
//! end a squeezed node inside it.
//!
//! Every stage reads only what the previous one wrote, and a group's work is one unit: the
//! results do not depend on the number of threads. [`layer_crossings`] and
//! [`layer_separation`] measure the result.

use std::sync::Arc;

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::bounds::Aabb;
use crate::collision::ColliderSet;
use crate::contact::collision::pass::ContactPass;
use crate::error::ClothError;
use crate::model::ClothModel;
use crate::self_contact::{
    CCD_EPS, EdgePairs, Offsets, RawPair, SelfContact, SelfTopology, SweptBoxes, at4,
    edges_may_act, feature_pairs, mean_motion, rewind_crossings, triangle_pairs_between,
    triangles_intersect,
};

/// How layered cloths meet. Plain data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayerSettings {
    /// The distance layered cloths keep between each other (metres, positive, under 1 m).
    /// Keep it well under the render meshes' edge length. Default 0.005.
    pub thickness: f64,
    /// Coulomb friction coefficient between the layers, in [0, 10]. Default 0.3.
    pub friction: f64,
    /// The most cloth-against-cloth pairs a layer group holds in a substep (their forces
    /// inside the iterations), at least 1: the bound on a group's contact work whatever
    /// presses the layers together. Past it the group keeps the pairs pushing already and
    /// then the nearest, and the frame counts as degraded ([`crate::layering::ClothLayers::degraded`]):
    /// the layers may come closer than the thickness there, but the last pass's check still
    /// sees every pair and they never pass through each other. Default 16384 (two layers
    /// lying on each other over a cape's area hold 400-600; a limb pressing two curtains
    /// together, 2,500 at 6 m/s and up to 9,400 at 10 m/s; see
    /// [`crate::layering::ClothLayers::most_pairs`]).
    pub max_pairs: u32,
}

impl Default for LayerSettings {
    fn default() -> Self {
        Self {
            thickness: 0.005,
            friction: 0.3,
            max_pairs: 16384,
        }
    }
}

impl LayerSettings {
    /// Checks the ranges: thickness finite in (0, 1) m, friction finite in [0, 10], at least
    /// one pair.
    pub fn validate(&self) -> Result<(), LayerError> {
        if !(self.thickness.is_finite() && self.thickness > 0.0 && self.thickness < 1.0) {
            return Err(LayerError::Thickness(self.thickness));
        }
        if !(self.friction.is_finite() && (0.0..=10.0).contains(&self.friction)) {
            return Err(LayerError::Friction(self.friction));
        }
        if self.max_pairs == 0 {
            return Err(LayerError::MaxPairs);
        }
        Ok(())
    }
}

/// What can be wrong with layers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayerError {
    /// The thickness is not a finite distance in (0, 1) m.
    #[error("layers: thickness must be finite, positive and under 1 m, got {0}")]
    Thickness(f64),
    /// The friction is not finite in [0, 10].
    #[error("layers: friction must be finite in [0, 10], got {0}")]
    Friction(f64),
    /// `max_pairs` is 0.
    #[error("layers: max_pairs must be at least 1")]
    MaxPairs,
    /// A pair names the same cloth twice (self-collision is the cloth's own setting).
    #[error(
        "layers: cloth {0} is listed against itself (a cloth against itself is self-collision: \
         `Cloth::set_self_collision`)"
    )]
    SelfPair(usize),
    /// A pair names a cloth that is not there.
    #[error("layers: pair ({a}, {b}) names a cloth past the {count} cloths given")]
    NoSuchCloth {
        /// The pair's first cloth.
        a: usize,
        /// The pair's second cloth.
        b: usize,
        /// How many cloths there are.
        count: usize,
    },
    /// Two cloths of a layer group step with different substep lengths (a group runs one
    /// substep loop).
    #[error(
        "layers: cloths {a} and {b} meet but step {h_a} s and {h_b} s substeps; a layer group \
         runs one substep loop, so cloths that meet need the same frame time and substeps"
    )]
    SubstepsDiffer {
        /// The first cloth.
        a: usize,
        /// The second cloth.
        b: usize,
        /// The first cloth's substep (seconds).
        h_a: f64,
        /// The second cloth's substep (seconds).
        h_b: f64,
    },
    /// The cloths given to a frame are not the ones the layers were made for.
    #[error("layers: made for {expected} cloths, given {given}")]
    CountChanged {
        /// Cloths the layers were made for.
        expected: usize,
        /// Cloths given.
        given: usize,
    },
}

impl From<LayerError> for ClothError {
    fn from(e: LayerError) -> Self {
        ClothError::InvalidSetting {
            name: "layers",
            reason: e.to_string(),
        }
    }
}

/// A cloth as the frame's broad phase between cloths sees it: its model (mesh and pins) and its
/// positions at the frame's start (a copy, reused frame to frame).
#[derive(Debug, Clone, Default)]
pub struct ClothSurface {
    model: Option<Arc<ClothModel>>,
    pub(crate) start: Vec<DVec3>,
    /// The box of the start positions.
    bounds: Aabb,
    /// The fastest node's speed at the start (m/s).
    speed: f64,
    /// How far a moving body near the cloth may carry its nodes this frame (m; see
    /// [`ClothSurface::reach_bodies`]).
    pushed: f64,
}

impl ClothSurface {
    /// An empty surface (see [`Cloth::surface`](crate::Cloth::surface)).
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies a cloth's model and positions at the frame's start; `velocities` give how far it
    /// may move in the frame.
    pub fn capture(&mut self, model: &Arc<ClothModel>, positions: &[DVec3], velocities: &[DVec3]) {
        if !self.model.as_ref().is_some_and(|m| Arc::ptr_eq(m, model)) {
            self.model = Some(Arc::clone(model));
        }
        self.start.clear();
        self.start.extend_from_slice(positions);
        let mut b = Aabb::EMPTY;
        for &p in positions {
            b.grow(p);
        }
        self.bounds = b;
        self.speed = velocities
            .iter()
            .fold(0.0f64, |m, v| m.max(v.length_squared()))
            .sqrt();
        self.pushed = 0.0;
    }

    /// Takes in how far the moving bodies of `colliders` near the captured cloth (within how
    /// far it may move in a frame of `dt` seconds, plus `thickness`) may carry its nodes over
    /// the frame: a limb driven through one layer carries it into the next, whatever the
    /// layers' own speeds at the frame's start.
    pub fn reach_bodies(&mut self, colliders: &ColliderSet, dt: f64, thickness: f64) {
        self.pushed = if self.start.is_empty() {
            0.0
        } else {
            colliders.push_reach(&self.bounds, 2.0 * self.speed * dt + thickness)
        };
    }

    /// The captured cloth's model (`None` before the first capture).
    pub fn model(&self) -> Option<&Arc<ClothModel>> {
        self.model.as_ref()
    }

    /// The positions at the start of the frame.
    pub fn positions(&self) -> &[DVec3] {
        &self.start
    }

    /// The fastest node's speed at the start of the frame (m/s).
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Whether this surface and `other` may come within `thickness` of each other over a frame
    /// of `dt` seconds (their boxes, grown by twice how far their fastest nodes go and how far
    /// the bodies near them may carry them, meet).
    pub fn may_meet(&self, other: &ClothSurface, dt: f64, thickness: f64) -> bool {
        if self.start.is_empty() || other.start.is_empty() {
            return false;
        }
        let reach = 2.0 * (self.speed + other.speed) * dt + self.pushed + other.pushed + thickness;
        self.bounds.inflate(reach).overlaps(&other.bounds)
    }
}

/// The contact between the cloths of one layer group (see the module docs): the group's
/// pairs and their forces in the group's numbering (each cloth's nodes after the previous
/// cloths'), and the group's copies of its cloths' positions. Reuses its memory substep to
/// substep; keeps the pairs' forces from one substep to the next (the warm start) while the
/// group keeps its cloths.
#[derive(Debug, Default)]
pub(crate) struct LayerContact {
    /// The group's pairs and their forces (a self-contact over the group's numbering).
    pairs: SelfContact,
    /// Per cloth: where its nodes, triangles and edges start in the group's numbering.
    offsets: Vec<Offsets>,
    /// The cloths' models this numbering is for (their addresses: the warm start is kept only
    /// while they stay).
    models: Vec<usize>,
    /// Per node: mass, pinned, compliance `(K^-1)_ii`.
    masses: Vec<f64>,
    pinned: Vec<bool>,
    compliance: Vec<f64>,
    /// The group's nodes at the substep's start and now.
    x_start: Vec<DVec3>,
    x: Vec<DVec3>,
    /// Per node, the forces of the group's pairs on it (the cloths' right-hand sides take
    /// their slices).
    pub(crate) force: Vec<DVec3>,
    /// Per cloth, its swept boxes over the substep's predicted path (grown by the reach).
    boxes: Vec<SweptBoxes>,
    /// Per cloth, its swept boxes over the substep's actual path (the last pass's check).
    tight: Vec<SweptBoxes>,
    /// The pairs of triangles whose [`LayerContact::boxes`] meet: (index into
    /// [`LayerContact::near`], triangle of the lower cloth, triangle of the higher).
    triangle_pairs: Vec<(u32, u32, u32)>,
    stack: Vec<(u32, u32)>,
    /// The broad phase's pairs (group numbering) with their nodes.
    raw: Vec<(RawPair, [u32; 4])>,
    /// The continuous check's pairs.
    resolved: Vec<(bool, [u32; 4])>,
    /// The pairs of the group's cloths that may meet this frame (group indices, lower first).
    pub(crate) near: Vec<[usize; 2]>,
    /// The translation the substep's boxes are taken in (the group's mean motion over the
    /// substep's prediction; see `SweptBoxes`).
    shift: DVec3,
    /// Per cloth, its solve's iteration state this substep.
    pub(crate) iterations: Vec<crate::solver::Iterations>,
    /// The collective compliance's solve: its right-hand side (1 at the engaged pairs'
    /// nodes), then each cloth's answer (group numbering).
    pub(crate) response: Vec<DVec3>,
    /// Engaged pairs when the collective compliance was last measured this substep.
    response_set: usize,
    /// Per cloth: whether a pair pushed one of its nodes, or the last pass moved one, this
    /// substep (an impact).
    pub(crate) impact: Vec<bool>,
    /// Per node (group numbering): the outward normal of the body it lies on after its
    /// cloth's last pass against the bodies (zero: none), which holds it in the group's last
    /// pass (see [`LayerContact::hold`]).
    held: Vec<DVec3>,
    /// Scratch: a cloth's heading before its bodies or its layers moved it.
    before: Vec<DVec3>,
    /// Scratch of the headings' push apart ([`LayerContact::prepare`]).
    push_sums: crate::self_contact::PushSums,
    /// Per node: how far a body may carry it beyond its path this substep (see
    /// [`LayerContact::carry`]).
    carried: Vec<f64>,
    /// Whether a body pushed a node's heading this substep beyond half the pairs' reach (then
    /// [`LayerContact::prepare`] carries the layers it presses on).
    pushed_far: bool,
    /// The pairs' reach (thickness and slack; set by [`LayerContact::begin`]).
    reach: f64,
    /// The pairs already listed while [`LayerContact::refresh`] finds them again (sorted;
    /// empty otherwise).
    known: Vec<crate::self_contact::RawPair>,
    /// The most pairs a substep holds ([`LayerSettings::max_pairs`]), and how many this
    /// frame dropped past it.
    max_pairs: usize,
    pub(crate) dropped: usize,
    /// The most pairs a substep of this frame held.
    pub(crate) most: usize,
    /// Pairs of triangles the last search left to the last pass's check past its bound.
    skipped: usize,
    /// Whether [`LayerContact::refresh`] searched this substep.
    refreshed: bool,
    /// Pairs measured and feature pairs tested this frame (the group's work, reported with
    /// its first cloth's counters: [`crate::counters::StepCounters::layer_pair_visits`]).
    pub(crate) pair_visits: u64,
    /// The last pass's impact zones: per node, its parent in the zones' union-find (a node
    /// in no zone is its own root and unmarked in `zoned`), and per root the zone's motion.
    zone: Vec<u32>,
    zoned: Vec<bool>,
    zone_motion: Vec<ZoneMotion>,
}

/// The motion an impact zone moves by, gathered over its nodes (see
/// [`LayerContact::impact_zones`]).
#[derive(Debug, Clone, Copy, Default)]
struct ZoneMotion {
    /// Mass-weighted sums of the motions of all its nodes and of its held ones, with their
    /// masses.
    all: (DVec3, f64),
    held: (DVec3, f64),
    /// Sum of its pinned nodes' motions, and their count.
    pinned: (DVec3, f64),
}

impl ZoneMotion {
    /// The zone's motion: its pinned nodes' mean if it has any (they cannot move), else its
    /// held nodes' (on a body or pushed off one: the zone moves on with the body that carries
    /// it), else its mass centre's (momentum kept). Three curtains at 6 m/s: 5.7 % strain;
    /// 16.6 % without the held nodes' priority, and 16.6 % with the mass centre's motion and
    /// the rotation that best fits the nodes' ends.
    fn motion(&self) -> DVec3 {
        [self.pinned, self.held, self.all]
            .into_iter()
            .find(|&(_, w)| w > 0.0)
            .map_or(DVec3::ZERO, |(d, w)| d / w)
    }
}

/// How many rounds the last pass's impact zones grow before the check falls back to sending
/// nodes back ([`rewind_crossings`]).
const ZONE_ROUNDS: usize = 16;

/// The most feature pairs a search of a layer group's pairs tests, per pair it may hold
/// ([`LayerSettings::max_pairs`]).
const RAW_PER_PAIR: usize = 4;

impl LayerContact {
    /// Numbers the group's cloths (`members`, in layer order) for the frame, sizing the
    /// buffers; forgets the pairs' forces when the cloths' models changed.
    pub(crate) fn begin<'a>(
        &mut self,
        members: impl Iterator<Item = &'a ClothModel> + Clone,
        settings: &LayerSettings,
    ) {
        self.reach = settings.thickness * (1.0 + crate::self_contact::SLACK_THICKNESSES);
        self.pushed_far = false;
        self.max_pairs = settings.max_pairs as usize;
        self.dropped = 0;
        self.pair_visits = 0;
        self.most = 0;
        let same = self.models.len() == members.clone().count()
            && members
                .clone()
                .zip(&self.models)
                .all(|(m, &a)| std::ptr::from_ref(m) as usize == a);
        if !same {
            self.pairs.warm.clear();
            self.models.clear();
            self.models
                .extend(members.clone().map(|m| std::ptr::from_ref(m) as usize));
        }
        self.offsets.clear();
        self.masses.clear();
        self.pinned.clear();
        self.compliance.clear();
        let mut off = Offsets {
            nodes: 0,
            triangles: 0,
            edges: 0,
        };
        for m in members {
            self.offsets.push(off);
            let topo = m.self_topology();
            off.nodes += m.mesh.node_count() as u32;
            off.triangles += topo.triangles.len() as u32;
            off.edges += topo.edges.len() as u32;
            self.masses.extend_from_slice(&m.masses);
            self.pinned.extend_from_slice(&m.pinned_mask);
            self.compliance.extend_from_slice(&m.compliance);
        }
        let n = off.nodes as usize;
        self.force.clear();
        self.force.resize(n, DVec3::ZERO);
        self.x.resize(n, DVec3::ZERO);
        self.x_start.resize(n, DVec3::ZERO);
        self.response.resize(n, DVec3::ZERO);
        self.held.resize(n, DVec3::ZERO);
        self.carried.resize(n, 0.0);
        self.zone.resize(n, 0);
        self.zoned.resize(n, false);
        self.zone_motion.resize(n, ZoneMotion::default());
        self.impact.clear();
        self.impact.resize(self.offsets.len(), false);
        if self.boxes.len() < self.offsets.len() {
            self.boxes
                .resize_with(self.offsets.len(), SweptBoxes::default);
            self.tight
                .resize_with(self.offsets.len(), SweptBoxes::default);
        }
    }

    /// Cloth `k`'s nodes in the group's numbering.
    pub(crate) fn range(&self, k: usize) -> std::ops::Range<usize> {
        let start = self.offsets[k].nodes as usize;
        let end = self
            .offsets
            .get(k + 1)
            .map_or(self.x.len(), |o| o.nodes as usize);
        start..end
    }

    /// Cloth `k`'s slice of the group's forces.
    pub(crate) fn force_of(&self, k: usize) -> &[DVec3] {
        &self.force[self.range(k)]
    }

    /// Sets cloth `k`'s positions at the substep's start and where it is headed (its
    /// prediction, pins at their targets), before [`LayerContact::prepare`].
    pub(crate) fn set_substep(&mut self, k: usize, x_start: &[DVec3], heading: &[DVec3]) {
        let r = self.range(k);
        self.x_start[r.clone()].copy_from_slice(x_start);
        self.x[r.clone()].copy_from_slice(heading);
        self.held[r.clone()].fill(DVec3::ZERO);
        self.carried[r].fill(0.0);
    }

    /// Moves cloth `k`'s heading (after [`LayerContact::set_substep`]) where the substep's
    /// bodies put it (`pass`, the cloth's contact pass, prepared), before
    /// [`LayerContact::prepare`]: a body driven through one layer carries it into the next
    /// within the substep, and their pairs must be seen from its start. The nodes it moves
    /// are held along their push while [`LayerContact::prepare`] carries the layers they
    /// press on, and each node near a moving body has its boxes and its pairs' reach grown
    /// by how far the body may carry it (the push-out is only an estimate of where the
    /// iterations put it).
    pub(crate) fn carry(&mut self, k: usize, pass: &ContactPass) {
        let r = self.range(k);
        self.carried[r.clone()].fill(0.0);
        pass.carry_reach(
            &self.x_start[r.clone()],
            &self.x[r.clone()],
            &mut self.carried[r.clone()],
        );

        self.before.clear();
        self.before.extend_from_slice(&self.x[r.clone()]);
        pass.push_out(&mut self.x[r.clone()]);
        let mut far = 0.0f64;
        for (((h, c), x), b) in self.held[r.clone()]
            .iter_mut()
            .zip(&mut self.carried[r.clone()])
            .zip(&self.x[r])
            .zip(&self.before)
        {
            let d = *x - *b;
            far = far.max(d.length_squared());
            *h = d.normalize_or_zero();
            // Only where a body reaches the heading (elsewhere the prediction serves).
            if d == DVec3::ZERO {
                *c = 0.0;
            }
        }
        self.pushed_far |= far.sqrt() > 0.5 * self.reach;
    }

    /// The substep's pairs (after [`LayerContact::set_substep`] for every cloth): the swept
    /// broad phase between every two cloths of [`LayerContact::near`] (`model(k)` is cloth
    /// `k`'s model), kept where the features may come within the thickness or their paths
    /// cross, each from its last force.
    pub(crate) fn prepare<'m>(
        &mut self,
        model: impl Fn(usize) -> &'m ClothModel,
        settings: &LayerSettings,
    ) {
        self.pairs.begin_group_substep();
        self.response_set = 0;
        self.refreshed = false;
        self.force.fill(DVec3::ZERO);
        self.impact.fill(false);
        self.find_pairs(&model, settings);
        // Layers carried into layers: a body pressing one layer (its nodes held where it put
        // them) carries the next, which carries the one after. The headings pushed apart
        // along the pairs found, and the pairs found again where that carried a node past
        // the boxes' margin, once per further layer.
        let chain = if std::mem::take(&mut self.pushed_far) {
            self.offsets.len()
        } else {
            1
        };
        for _ in 1..chain {
            self.before.clear();
            self.before.extend_from_slice(&self.x);
            // Each node moved by the mean of its pushes, twice the last pass's sweeps: pushed
            // one pair after another, a middle layer's nodes, in pairs pushing them both
            // ways, went back and forth by centimetre gaps until headings were 46 m off
            // (three curtains 2 cm apart, 9 m/s), and the search met its bound and degraded
            // (docs/lab/2026-11-29-layers-driven.md).
            let sweeps = 2 * (1 + self.offsets.len());
            self.pairs.push_apart_held(
                &self.masses,
                &self.pinned,
                &mut self.held,
                sweeps,
                &mut self.x,
                Some(&mut self.push_sums),
            );
            let carried = self
                .x
                .iter()
                .zip(&self.before)
                .map(|(a, b)| a.distance_squared(*b))
                .fold(0.0, f64::max)
                .sqrt();
            if carried <= 0.5 * self.reach {
                break;
            }
            self.pairs.begin_group_substep();
            self.find_pairs(&model, settings);
        }
        self.bound_pairs();
        let n = self.raw.len();
        if 2 * n > self.raw.capacity() {
            self.raw.reserve(2 * n - self.raw.len());
        }
        if 2 * n > self.resolved.capacity() {
            self.resolved.reserve(2 * n - self.resolved.len());
        }
        let n = self.triangle_pairs.len();
        if 2 * n > self.triangle_pairs.capacity() {
            self.triangle_pairs
                .reserve(2 * n - self.triangle_pairs.len());
        }
    }

    /// Within the iterations (after [`LayerContact::set_positions`] for every cloth): where
    /// a node has left the box its pairs were found in (a body drags a layer farther than
    /// its prediction), the pairs are found again from the substep's start to the current
    /// iterates, each keeping its force. Returns whether they were.
    pub(crate) fn refresh<'m>(
        &mut self,
        model: impl Fn(usize) -> &'m ClothModel,
        settings: &LayerSettings,
    ) -> bool {
        if self.boxes_hold(&self.boxes) || self.refreshed {
            return false;
        }
        // Once a substep (its cost bounded as the substep's first search).
        self.refreshed = true;
        // Only new pairs join: those found before keep their forces, friction and state.
        self.known.clear();
        self.known.extend(self.pairs.pairs.iter().map(|p| p.key));
        self.known.sort_unstable();
        let before = self.pairs.pairs.len();
        self.find_pairs(&model, settings);
        self.known.clear();
        self.bound_pairs();
        let grew = self.pairs.pairs.len() > before;
        if grew {
            self.response_set = 0;
        }
        grew
    }

    /// Whether every node of a cloth with near partners lies inside its box of `boxes` (the
    /// substep's search, [`LayerContact::boxes`], or the last pass's, [`LayerContact::tight`];
    /// [`SweptBoxes::hold`]).
    fn boxes_hold(&self, boxes: &[SweptBoxes]) -> bool {
        (0..self.offsets.len()).all(|k| {
            !self.near.iter().any(|p| p.contains(&k)) || boxes[k].hold(&self.x[self.range(k)])
        })
    }

    /// The search's pairs held to [`LayerSettings::max_pairs`] (the drops and the search's
    /// skipped pairs counted), the most recorded, and room kept for twice as many (the count
    /// jitters around its most).
    fn bound_pairs(&mut self) {
        self.dropped += self.pairs.keep_nearest(self.max_pairs) + self.skipped;
        self.most = self.most.max(self.pairs.pairs.len());
        self.pairs.keep_headroom();
    }

    /// The broad phase from the group's `x_start` to its heading `x`, and the pairs it finds
    /// admitted (see [`LayerContact::prepare`]).
    fn find_pairs<'m>(
        &mut self,
        model: &impl Fn(usize) -> &'m ClothModel,
        settings: &LayerSettings,
    ) {
        let (thickness, reach) = (settings.thickness, self.reach);
        self.broad_phase(model, 0.5 * reach);
        let raw = std::mem::take(&mut self.raw);
        self.pair_visits += raw.len() as u64;
        for &(r, nodes) in &raw {
            if nodes.iter().all(|&k| self.pinned[k as usize]) {
                continue;
            }
            let (p0, p1) = (at4(&self.x_start, nodes), at4(&self.x, nodes));
            // Edge-edge pairs only with a border edge (`EdgePairs::Border`), and of those
            // only where their closest points lie inside both edges or their paths cross
            // (elsewhere the closest points are a node's, which its point-triangle pairs
            // hold); everything else is left to the last pass's check. Two layers lying on
            // each other have several times more edge-edge pairs than point-triangle ones
            // (`layers --scene mantle`: 6,000-8,000 a substep against 2,000-2,600; 540 with
            // a border edge).
            let carried = nodes
                .iter()
                .map(|&k| self.carried[k as usize])
                .fold(0.0, f64::max);
            if r.0 && !edges_may_act(p0, p1, reach + carried) {
                continue;
            }
            if !self.known.is_empty() && self.known.binary_search(&r).is_ok() {
                continue;
            }
            self.pairs.admit_carried(
                r,
                nodes,
                (p0, p1),
                thickness,
                settings.friction,
                2.0 * carried,
            );
        }
        self.raw = raw;
    }

    /// The substep's broad phase: every cloth's swept boxes (from the group's `x_start` to its
    /// `x`, its prediction, grown by `margin`), the pairs of triangles of two cloths of `near`
    /// whose boxes meet into [`LayerContact::triangle_pairs`], and their feature pairs (edge
    /// pairs with a border edge, [`EdgePairs::Border`]) into `raw` (group numbering).
    fn broad_phase<'m>(&mut self, model: &impl Fn(usize) -> &'m ClothModel, margin: f64) {
        // The boxes in the frame of the group's mean motion over the substep: two layers
        // carried by a running character (3 cm a substep at 4 m/s) move a few millimetres
        // against each other, and boxes swept over the world's path meet several times more
        // triangles of the other layer (see `SweptBoxes`).
        self.shift = mean_motion(&self.x_start, &self.x);
        fill_boxes(
            &mut self.boxes,
            &self.near,
            model,
            &self.offsets,
            (&self.x_start, &self.x),
            (margin, self.shift),
            (true, &self.carried),
        );
        self.raw.clear();
        self.triangle_pairs.clear();
        // The narrow phase's bound: past this many feature pairs, the rest of the boxes that
        // meet are left to the last pass's check (which then traverses on its own).
        let budget = RAW_PER_PAIR * self.max_pairs;
        let mut skipped = 0;
        for (p, &[a, b]) in self.near.iter().enumerate() {
            let (ma, mb) = meshes(model, &self.boxes, a, b);
            let off = between(self.offsets[a], self.offsets[b]);
            let from = self.raw.len();
            let (raw, pairs) = (&mut self.raw, &mut self.triangle_pairs);
            triangle_pairs_between(ma, mb, &mut self.stack, |t, u| {
                if raw.len() >= budget {
                    skipped += 1;
                    return;
                }
                pairs.push((p as u32, t, u));
                feature_pairs(ma, mb, (t, u), off, EdgePairs::Border, raw);
            });
            renumber(&mut self.raw[from..], self.offsets[a]);
        }
        self.skipped = skipped;
    }

    /// The last pass's broad phase: every cloth's swept boxes over its actual path (from
    /// `x_start` to `x`, grown by the check's tolerance) and every feature pair of two cloths
    /// whose boxes meet into `raw`, and their features and nodes into `resolved` (the check's
    /// list). When every node stayed inside its substep's box
    /// ([`SweptBoxes::hold`]), every such pair of triangles is among the substep's
    /// [`LayerContact::triangle_pairs`], which are tested instead of a second traversal. The
    /// boxes are taken in the frame moving by `shift` (the substep's, or zero for the check
    /// again in the world's frame, which always traverses).
    fn last_broad_phase<'m>(&mut self, model: &impl Fn(usize) -> &'m ClothModel, shift: DVec3) {
        let held = self.skipped == 0 && shift == self.shift && self.boxes_hold(&self.boxes);
        // Held, the listed pairs of triangles are tested by their boxes alone: no hierarchy.
        fill_boxes(
            &mut self.tight,
            &self.near,
            model,
            &self.offsets,
            (&self.x_start, &self.x),
            (CCD_EPS, shift),
            (!held, &[]),
        );
        self.raw.clear();
        if held {
            let mut from = 0;
            for (p, &[a, b]) in self.near.iter().enumerate() {
                let (ma, mb) = meshes(model, &self.tight, a, b);
                let off = between(self.offsets[a], self.offsets[b]);
                let start = self.raw.len();
                let to = from
                    + self.triangle_pairs[from..].partition_point(|&(q, _, _)| q as usize == p);
                for &(_, t, u) in &self.triangle_pairs[from..to] {
                    if ma.1.triangles_meet(t, mb.1, u) {
                        feature_pairs(ma, mb, (t, u), off, EdgePairs::All, &mut self.raw);
                    }
                }
                from = to;
                renumber(&mut self.raw[start..], self.offsets[a]);
            }
        } else {
            for &[a, b] in &self.near {
                let (ma, mb) = meshes(model, &self.tight, a, b);
                let off = between(self.offsets[a], self.offsets[b]);
                let start = self.raw.len();
                let raw = &mut self.raw;
                triangle_pairs_between(ma, mb, &mut self.stack, |t, u| {
                    feature_pairs(ma, mb, (t, u), off, EdgePairs::All, raw);
                });
                renumber(&mut self.raw[start..], self.offsets[a]);
            }
        }
        self.resolved.clear();
        self.resolved
            .extend(self.raw.iter().map(|&((ee, _, _), nodes)| (ee, nodes)));
        self.pair_visits += self.resolved.len() as u64;
    }

    /// Whether the substep has pairs.
    pub(crate) fn active(&self) -> bool {
        self.pairs.active()
    }

    /// Copies cloth `k`'s current positions (its prediction, an iterate, its substep's end)
    /// into the group's (before [`LayerContact::push_apart`], [`LayerContact::update`],
    /// [`LayerContact::finish`]).
    pub(crate) fn set_positions(&mut self, k: usize, x: &[DVec3]) {
        let r = self.range(k);
        let moved = self.x[r.clone()]
            .iter()
            .zip(x)
            .map(|(a, b)| a.distance_squared(*b))
            .fold(0.0, f64::max);
        self.pairs.moved_by(moved.sqrt());
        self.x[r].copy_from_slice(x);
    }

    /// Holds cloth `k`'s nodes that its last pass left on a body or within the pairs' reach
    /// of one (`pass`, the cloth's contact pass, finished; after
    /// [`LayerContact::set_positions`]) for the group's last pass: a pair pushed apart there
    /// never moves such a node into its body; the other side of the pair moves (a body
    /// pressing one layer onto another moves the other).
    pub(crate) fn hold(&mut self, k: usize, pass: &ContactPass) {
        let r = self.range(k);
        let held = &mut self.held[r.clone()];
        held.fill(DVec3::ZERO);
        pass.near_bodies_at(&self.x[r], self.reach, |i, n| {
            if let Some(h) = held.get_mut(i as usize) {
                *h = n;
            }
        });
    }

    /// Cloth `k`'s positions in the group's copy (after a pass moved them).
    pub(crate) fn positions(&self, k: usize) -> &[DVec3] {
        &self.x[self.range(k)]
    }

    /// First half of an update of the pairs' forces: the gaps at the group's current
    /// positions (both cloths' iterates). Returns whether the engaged set grew by a fifth since
    /// the collective compliance was last measured: then [`LayerContact::response`] holds the
    /// measuring solve's right-hand side (1 in the first lane at the engaged pairs' nodes),
    /// which each cloth answers with its own factor before [`LayerContact::take_response`].
    pub(crate) fn measure(&mut self) -> bool {
        let engaged = self.pairs.measure(&self.x);
        let grew = engaged > 0 && 5 * engaged > 6 * self.response_set;
        if grew {
            self.response.fill(DVec3::ZERO);
            self.pairs.response_rhs(&mut self.response);
            self.response_set = engaged;
        }
        grew
    }

    /// Takes the cloths' answers in [`LayerContact::response`] as the engaged pairs'
    /// collective compliance (each node's the larger of its answer and its own `(K^-1)_ii`):
    /// a node pushed by many pairs at once answers their sum, and each pair corrects only its
    /// share (as self-contact's pairs do, [`crate::self_contact`]).
    pub(crate) fn take_response(&mut self) {
        self.pairs.set_response(&self.response, &self.compliance);
    }

    /// Second half: each engaged pair's force corrected from its gap (both sides'
    /// compliances); [`LayerContact::force`] then holds each node's sum.
    pub(crate) fn update(&mut self) {
        self.pair_visits += self.pairs.pairs.len() as u64;
        self.pairs.clear_forces(&mut self.force);
        self.pairs.update(&self.compliance, 0.0, &mut self.force);
        // A cloth a pair pushed at any iteration of the substep has had an impact (its
        // velocities then take no rebound from the push; see `crate::pipeline`).
        for k in 0..self.impact.len() {
            if !self.impact[k] {
                let r = self.range(k);
                self.impact[k] = self.force[r].iter().any(|f| *f != DVec3::ZERO);
            }
        }
    }

    /// The last pass (after every cloth's own last pass, the group's positions set): the
    /// forces kept for the next substep, pairs still closer than the thickness pushed apart,
    /// then the continuous check over both sides' paths from the substep's start, every free
    /// node of a crossing pair sent back until nothing crosses. Flags in
    /// [`LayerContact::impact`] the cloths a pair pushed or whose nodes moved.
    pub(crate) fn finish<'m>(&mut self, model: impl Fn(usize) -> &'m ClothModel) {
        for i in self.pairs.pushing_nodes() {
            let k = self.member_of(i as usize);
            self.impact[k] = true;
        }
        // Two sweeps, and one more per further layer (a stack on a body is pushed off it
        // layer by layer).
        let sweeps = 1 + self.offsets.len();
        self.pairs.finish_pairs_held(
            &self.masses,
            &self.pinned,
            &mut self.held,
            sweeps,
            &mut self.x,
        );
        // Its own broad phase over the actual paths with boxes grown by the check's
        // tolerance only: the substep's pairs (grown by the thickness and slack) are several
        // times more, each a distance to rule out (`layers --scene mantle`: layered step
        // 6.6-6.8 -> 5.3-6.1 ms, the same figures).
        // Held nodes go back too: fixing them (their partners alone sent back) left pairs
        // the check could not resolve, and its rounds ran to their bound on every substep
        // of three curtains pressed together (a frame of seconds). A pair a pin's path
        // leaves crossed is checked again in the world's frame (see `rewind_crossings`).
        for world in [false, true] {
            let shift = if world { DVec3::ZERO } else { self.shift };
            self.last_broad_phase(&model, shift);
            if !world && self.impact_zones(&model) {
                break;
            }
            let rewind = rewind_crossings(
                &self.resolved,
                (&self.x_start, shift),
                &mut self.x,
                &self.pinned,
            );
            if !rewind.stuck {
                break;
            }
        }
    }

    /// The last pass's impact zones (after its broad phase over the actual paths; the pairs in
    /// `resolved`): the nodes of every pair whose features cross on their paths from
    /// `x_start` are joined into zones, and each zone's free nodes move from their starts by
    /// one motion ([`ZoneMotion::motion`]): the zone's shape at the substep's start, which
    /// crossed nothing, translated. Zones that cross others or other nodes grow and move again,
    /// up to [`ZONE_ROUNDS`] rounds; a move that takes a node out of its box finds the pairs
    /// again. Returns whether nothing crosses after.
    ///
    /// Sending each crossing pair's nodes back on its own (to half its crossing's time, or to
    /// its start) tore the layers a body carries: a limb at 10 m/s carries three curtains
    /// 8 cm a substep, and a node sent back 8 cm behind its neighbours stretched their edges
    /// by 300 % (then the next substeps flung it metres). A zone moves with the nodes that
    /// carry it.
    fn impact_zones<'m>(&mut self, model: &impl Fn(usize) -> &'m ClothModel) -> bool {
        let n = self.x.len();
        for (k, z) in self.zone.iter_mut().enumerate() {
            *z = k as u32;
        }
        self.zoned.fill(false);
        for round in 0..=ZONE_ROUNDS {
            let mut crossing = false;
            for &(ee, nodes) in &self.resolved {
                let (p0, p1) = (at4(&self.x_start, nodes), at4(&self.x, nodes));
                if crate::self_contact::crossing_time(ee, p0, p1, CCD_EPS).is_none() {
                    continue;
                }
                crossing = true;
                let root = find_root(&mut self.zone, nodes[0]);
                for &k in &nodes {
                    self.zoned[k as usize] = true;
                    let r = find_root(&mut self.zone, k);
                    self.zone[r as usize] = root;
                }
            }
            if !crossing {
                return true;
            }
            if round == ZONE_ROUNDS {
                break;
            }
            for z in self.zone_motion.iter_mut() {
                *z = ZoneMotion::default();
            }
            for k in 0..n {
                if !self.zoned[k] {
                    continue;
                }
                let r = find_root(&mut self.zone, k as u32) as usize;
                let (d, m) = (self.x[k] - self.x_start[k], self.masses[k]);
                let z = &mut self.zone_motion[r];
                z.all.0 += m * d;
                z.all.1 += m;
                if self.pinned[k] {
                    z.pinned.0 += d;
                    z.pinned.1 += 1.0;
                } else if self.held[k] != DVec3::ZERO {
                    z.held.0 += m * d;
                    z.held.1 += m;
                }
            }
            for k in 0..n {
                if self.zoned[k] && !self.pinned[k] {
                    let r = find_root(&mut self.zone, k as u32) as usize;
                    self.x[k] = self.x_start[k] + self.zone_motion[r].motion();
                }
            }
            // A node the zone moved out of its box: the pairs found again over the paths.
            if !self.boxes_hold(&self.tight) {
                self.last_broad_phase(model, self.shift);
            }
        }
        false
    }

    /// The cloth node `i` (group numbering) belongs to.
    fn member_of(&self, i: usize) -> usize {
        self.offsets
            .partition_point(|o| o.nodes as usize <= i)
            .saturating_sub(1)
    }
}

/// The root of node `k`'s zone (halving the path).
fn find_root(parent: &mut [u32], mut k: u32) -> u32 {
    while parent[k as usize] != k {
        parent[k as usize] = parent[parent[k as usize] as usize];
        k = parent[k as usize];
    }
    k
}

/// Cloths `a` and `b` of a group, each its render mesh's topology with its boxes of `boxes`.
fn meshes<'m, 'b>(
    model: &impl Fn(usize) -> &'m ClothModel,
    boxes: &'b [SweptBoxes],
    a: usize,
    b: usize,
) -> MeshPair<'m, 'b> {
    (
        (model(a).self_topology(), &boxes[a]),
        (model(b).self_topology(), &boxes[b]),
    )
}

/// Two cloths' render mesh topologies with their swept boxes.
type MeshPair<'m, 'b> = (
    (&'m SelfTopology, &'b SweptBoxes),
    (&'m SelfTopology, &'b SweptBoxes),
);

/// Cloth `b`'s offsets after cloth `a`'s (both in group numbering).
fn between(a: Offsets, b: Offsets) -> Offsets {
    Offsets {
        nodes: b.nodes - a.nodes,
        triangles: b.triangles - a.triangles,
        edges: b.edges - a.edges,
    }
}

/// Pairs numbered from a cloth at offsets `base` (the lower of their two cloths) into the
/// group's numbering.
fn renumber(raw: &mut [(RawPair, [u32; 4])], base: Offsets) {
    for ((ee, first, second), nodes) in raw {
        *first += if *ee { base.edges } else { base.nodes };
        *second += if *ee { base.edges } else { base.triangles };
        for k in nodes.iter_mut() {
            *k += base.nodes;
        }
    }
}

/// Every cloth of `near`'s swept boxes (cloth `k`'s nodes from `offsets[k]` on in the group's
/// positions, moving from `x.0` to `x.1`, grown by `margin`) into `boxes`.
fn fill_boxes<'m>(
    boxes: &mut [SweptBoxes],
    near: &[[usize; 2]],
    model: &impl Fn(usize) -> &'m ClothModel,
    offsets: &[Offsets],
    x: (&[DVec3], &[DVec3]),
    (margin, shift): (f64, DVec3),
    (refit, carried): (bool, &[f64]),
) {
    for (k, b) in boxes.iter_mut().enumerate().take(offsets.len()) {
        if near.iter().any(|p| p.contains(&k)) {
            let end = offsets.get(k + 1).map_or(x.0.len(), |o| o.nodes as usize);
            let r = offsets[k].nodes as usize..end;
            let topo = model(k).self_topology();
            let carried = carried.get(r.clone()).unwrap_or(&[]);
            b.fill_leaves_carried(topo, (&x.0[r.clone()], &x.1[r]), (margin, shift), carried);
            if refit {
                b.refit(topo);
            }
        }
    }
}

/// How many pairs of triangles of two cloths (`a` and `b`, render triangles and positions)
/// intersect: the `crossings` figure of layers (0 for cloths that never pass through each
/// other). Each candidate pair is tested exactly by [`triangles_intersect`]. Allocates; a
/// measure, not part of the frame loop.
pub fn layer_crossings(a: (&[[u32; 3]], &[DVec3]), b: (&[[u32; 3]], &[DVec3])) -> usize {
    let mut crossed = 0;
    crate::self_contact::for_near_triangles(a, b, 0.0, |t, u| {
        if triangles_intersect(t, u) {
            crossed += 1;
        }
    });
    crossed
}

/// The smallest distance between two cloths (`a` and `b`, render triangles and positions)
/// within `within` metres (`f64::INFINITY` when no features are that near): node against
/// triangle both ways and edge against edge. The `min_separation_m` figure of layers.
/// Allocates; a measure, not part of the frame loop.
pub fn layer_separation(
    a: (&[[u32; 3]], &[DVec3]),
    b: (&[[u32; 3]], &[DVec3]),
    within: f64,
) -> f64 {
    let mut least = f64::INFINITY;
    crate::self_contact::for_near_triangles(a, b, within, |t, u| {
        least = least.min(crate::self_contact::triangle_distance(t, u));
    });
    if least <= within {
        least
    } else {
        f64::INFINITY
    }
}
