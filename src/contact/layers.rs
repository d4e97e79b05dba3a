//! Layers: cloth against cloth (a cape over a skirt, a hood over a cape, two characters'
//! capes that meet).
//!
//! Cloths that opt in keep a minimum distance (the thickness) from each other and never pass
//! through each other, with the contract of self-collision ([`crate::self_contact`]): the same
//! feature pairs (a node against a triangle, an edge against an edge), the same forces inside
//! the iterations, a continuous check after them, and Coulomb friction between the layers.
//!
//! A cloth cannot read another's positions while both move, so layered cloths step in a
//! defined order, the **layer order** (inner layers first: a skirt before the cape over it),
//! and exchange positions at two points of the frame ([`crate::layering::ClothLayers`]):
//!
//! 1. **Exchange** (`begin_frame`): every layered cloth's positions at the frame's start are
//!    copied into its [`ClothSurface`]; cloths whose boxes may meet this frame become
//!    partners, and partners linked together form a group, stepped in layer order.
//! 2. **Step** ([`Cloth::step_among`](crate::Cloth::step_among)), in rounds: round `k` steps
//!    the `k`-th cloth of every group (the groups in parallel). A cloth steps against its
//!    partners as kinematic surfaces: those already stepped this frame move along their
//!    actual motion from the frame's start to its end (straight, as every substep's
//!    continuous check assumes), those not yet stepped stay where the frame began. Its nodes
//!    are pushed, its partners' are not.
//! 3. **Exchange** (`end_cloth`): once a cloth has stepped, its surface's end positions are
//!    its new positions, which the later cloths of its group see.
//!
//! A later cloth's continuous check runs against the earlier cloths' whole motion over the
//! frame, so two cloths that begin a frame without crossing end it without (pinned nodes,
//! which the game places, excepted); an earlier cloth sees where a later one was, so it never
//! pushes into a cloth that moves away. Every stage reads only what the previous one wrote: the
//! results do not depend on the number of threads. The force between two cloths acts on the
//! later one only (a cape lying on a sheet does not press it down); friction likewise.
//! [`layer_crossings`] and [`layer_separation`] measure the result.

use std::sync::Arc;

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::bounds::Aabb;
use crate::error::ClothError;
use crate::model::ClothModel;
use crate::self_contact::{
    CCD_EPS, MAX_ROUNDS, Offsets, REWIND_MIN, SelfContact, SelfTopology, crossing_time, features,
    node_at, pairs_between, triangles_intersect,
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
}

impl Default for LayerSettings {
    fn default() -> Self {
        Self {
            thickness: 0.005,
            friction: 0.3,
        }
    }
}

impl LayerSettings {
    /// Checks the ranges: thickness finite in (0, 1) m, friction finite in [0, 10].
    pub fn validate(&self) -> Result<(), LayerError> {
        if !(self.thickness.is_finite() && self.thickness > 0.0 && self.thickness < 1.0) {
            return Err(LayerError::Thickness(self.thickness));
        }
        if !(self.friction.is_finite() && (0.0..=10.0).contains(&self.friction)) {
            return Err(LayerError::Friction(self.friction));
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

/// A cloth as its partners see it during one frame: its model (mesh and pins), its positions
/// at the frame's start and, once it has stepped, at its end (copies, reused frame to frame).
#[derive(Debug, Clone, Default)]
pub struct ClothSurface {
    model: Option<Arc<ClothModel>>,
    pub(crate) start: Vec<DVec3>,
    pub(crate) end: Vec<DVec3>,
    /// The box of the start positions.
    bounds: Aabb,
    /// The fastest node's speed at the start (m/s).
    speed: f64,
}

impl ClothSurface {
    /// An empty surface (see [`Cloth::surface`](crate::Cloth::surface)).
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies a cloth's model and positions at the frame's start (its end, until
    /// [`ClothSurface::set_end`]); `velocities` give how far it may move in the frame.
    pub fn capture(&mut self, model: &Arc<ClothModel>, positions: &[DVec3], velocities: &[DVec3]) {
        if !self.model.as_ref().is_some_and(|m| Arc::ptr_eq(m, model)) {
            self.model = Some(Arc::clone(model));
        }
        self.start.clear();
        self.start.extend_from_slice(positions);
        self.end.clear();
        self.end.extend_from_slice(positions);
        let mut b = Aabb::EMPTY;
        for &p in positions {
            b.grow(p);
        }
        self.bounds = b;
        self.speed = velocities
            .iter()
            .fold(0.0f64, |m, v| m.max(v.length_squared()))
            .sqrt();
    }

    /// The cloth's positions after it stepped (the same number of nodes as captured; others
    /// are ignored).
    pub fn set_end(&mut self, positions: &[DVec3]) {
        if positions.len() == self.end.len() {
            self.end.copy_from_slice(positions);
        }
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

    /// Whether the cloth moved (or will, at its speed) this frame.
    pub(crate) fn moving(&self, threshold: f64) -> bool {
        self.speed > threshold || self.start != self.end
    }

    /// Whether this surface and `other` may come within `thickness` of each other over a frame
    /// of `dt` seconds (their boxes, grown by twice how far their fastest nodes go, meet).
    pub fn may_meet(&self, other: &ClothSurface, dt: f64, thickness: f64) -> bool {
        if self.start.is_empty() || other.start.is_empty() {
            return false;
        }
        let reach = 2.0 * (self.speed + other.speed) * dt + thickness;
        self.bounds.inflate(reach).overlaps(&other.bounds)
    }
}

/// The partners a cloth steps against in a frame: some of a frame's [`ClothSurface`]s.
#[derive(Debug, Clone, Copy)]
pub struct Partners<'a> {
    /// Every surface of the frame.
    pub surfaces: &'a [ClothSurface],
    /// Which of them are this cloth's partners (indices into `surfaces`; never the cloth's
    /// own).
    pub which: &'a [usize],
    /// How they meet.
    pub settings: &'a LayerSettings,
}

impl<'a> Partners<'a> {
    /// The partners' surfaces, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'a ClothSurface> + 'a {
        let surfaces = self.surfaces;
        self.which.iter().filter_map(move |&k| surfaces.get(k))
    }

    /// Whether there is any partner with a model.
    pub(crate) fn any(&self) -> bool {
        self.iter()
            .any(|s| s.model.is_some() && !s.start.is_empty())
    }
}

/// What a substep reads of its cloth's partners: their surfaces and the fractions of the
/// frame the substep spans.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerFrame<'a> {
    pub partners: Partners<'a>,
    pub span: (f64, f64),
}

impl SelfContact {
    /// The broad phase of the cloth (mesh `topo`, moving from `x0` to `x1`) against its
    /// partners (from `ext_start` to `ext_end`), boxes grown by `margin`: every pair of
    /// features whose boxes meet into `layer_raw`, numbered after the cloth's own.
    fn layer_broad_phase(
        &mut self,
        topo: &SelfTopology,
        partners: &Partners<'_>,
        x0: &[DVec3],
        x1: &[DVec3],
        margin: f64,
    ) {
        self.own_boxes.fill(topo, x0, x1, margin);
        self.layer_raw.clear();
        let mut off = Offsets {
            nodes: x0.len() as u32,
            triangles: topo.triangles.len() as u32,
            edges: topo.edges.len() as u32,
        };
        let mut at = 0usize;
        for surface in partners.iter() {
            let Some(model) = surface.model.as_ref() else {
                continue;
            };
            let other = model.self_topology();
            let n = surface.start.len();
            let (s, e) = (&self.ext_start[at..at + n], &self.ext_end[at..at + n]);
            self.ext_boxes.fill(other, s, e, margin);
            pairs_between(
                (topo, &self.own_boxes),
                (other, &self.ext_boxes),
                off,
                &mut self.stack,
                &mut self.layer_raw,
            );
            at += n;
            off.nodes += n as u32;
            off.triangles += other.triangles.len() as u32;
            off.edges += other.edges.len() as u32;
        }
    }

    /// The substep's pairs against the layers' partners (after [`SelfContact::prepare`]): the
    /// partners' nodes at the substep's two ends (on their straight paths from the frame's
    /// start to its end), then the pairs of features that may come within the thickness while the
    /// cloth's nodes move from `x_start` toward `x_pred`, or whose paths cross.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn prepare_layers(
        &mut self,
        topo: &SelfTopology,
        frame: &LayerFrame<'_>,
        masses: &[f64],
        pinned: &[bool],
        x_start: &[DVec3],
        x_pred: &[DVec3],
        h: f64,
    ) {
        self.layered = true;
        let (s0, s1) = frame.span;
        self.ext_start.clear();
        self.ext_end.clear();
        for surface in frame.partners.iter().filter(|s| s.model.is_some()) {
            let path = surface.start.iter().zip(&surface.end);
            self.ext_start
                .extend(path.clone().map(|(a, b)| a.lerp(*b, s0)));
            self.ext_end.extend(path.map(|(a, b)| a.lerp(*b, s1)));
        }
        let thickness = frame.partners.settings.thickness;
        let reach = thickness * (1.0 + crate::self_contact::SLACK_THICKNESSES);
        self.layer_broad_phase(topo, &frame.partners, x_start, x_pred, 0.5 * reach);
        let raw = std::mem::take(&mut self.layer_raw);
        for &(r, nodes) in &raw {
            let own = |k: u32| (k as usize) < x_start.len();
            if nodes.iter().all(|&k| !own(k) || pinned[k as usize]) {
                continue;
            }
            let p0 = nodes.map(|k| node_at(x_start, &self.ext_start, k));
            let p1 = nodes.map(|k| node_at(x_pred, &self.ext_end, k));
            if self.admit(
                r,
                nodes,
                p0,
                p1,
                thickness,
                frame.partners.settings.friction,
            ) {
                // Against a partner that stands still this frame (one not stepped yet: a later
                // layer), the pair pushes by at most a thickness a substep (`lambda h^2 / m`),
                // so that a cloth caught between a body and a later layer gives way instead
                // of the two pushes growing without bound.
                let still = nodes.iter().all(|&k| {
                    let k = k as usize;
                    k < x_start.len() || {
                        let e = k - x_start.len();
                        self.ext_start[e] == self.ext_end[e]
                    }
                });
                if still {
                    let mass = nodes
                        .iter()
                        .filter(|&&k| own(k))
                        .map(|&k| masses[k as usize])
                        .fold(f64::INFINITY, f64::min);
                    if let Some(p) = self.pairs.last_mut() {
                        p.max_force = thickness * mass / (h * h);
                    }
                }
            }
        }
        self.layer_raw = raw;
    }

    /// The layers' continuous check after the substep (after [`SelfContact::finish`]): for
    /// every pair whose features cross while the cloth moves from `x_start` to `x` and its
    /// partners along their paths, the cloth's free nodes of the pair go back along their
    /// paths to half the crossing's time when the partner's side stands still, or else move
    /// with it (the displacement of the partner's side at the closest points, so that the
    /// pair keeps the side and distance it began with: a node cannot undo a crossing the
    /// partner's motion made by going back), until none crosses. Counts the nodes moved in
    /// `impacts`.
    pub(crate) fn rewind_layers(
        &mut self,
        topo: &SelfTopology,
        frame: &LayerFrame<'_>,
        pinned: &[bool],
        x_start: &[DVec3],
        x: &mut [DVec3],
    ) {
        let n = x.len();
        if !self.own_boxes.hold(x) {
            self.layer_broad_phase(topo, &frame.partners, x_start, x, CCD_EPS);
        }
        let (ext0, ext1) = (&self.ext_start, &self.ext_end);
        // Nodes already carried with a partner: they move once (a node in several crossing
        // pairs would otherwise take each pair's carry in turn).
        let locked = &mut self.carried;
        locked.clear();
        locked.resize(n, false);
        let mut moved = 0;
        for round in 1..=MAX_ROUNDS {
            let mut changed = false;
            for &((ee, _, _), nodes) in &self.layer_raw {
                let p0 = nodes.map(|k| node_at(x_start, ext0, k));
                let p1 = nodes.map(|k| node_at(x, ext1, k));
                let Some(t) = crossing_time(ee, p0, p1, CCD_EPS) else {
                    continue;
                };
                // The partner's side: its displacement at the closest points at the start.
                let (coef, ..) = features(ee, p0);
                let (mut carried, mut weight) = (DVec3::ZERO, 0.0);
                for (c, &k) in coef.iter().zip(&nodes) {
                    if k as usize >= n {
                        let k = k as usize - n;
                        carried += c.abs() * (ext1[k] - ext0[k]);
                        weight += c.abs();
                    }
                }
                let carried = if weight > 0.0 {
                    carried / weight
                } else {
                    DVec3::ZERO
                };
                let still = carried.length_squared() <= CCD_EPS * CCD_EPS;
                let s = if t > REWIND_MIN { 0.5 * t } else { 0.0 };
                for &k in &nodes {
                    let k = k as usize;
                    if k >= n || pinned[k] || (locked[k] && !still) {
                        continue;
                    }
                    let to = if still && round < 3 {
                        x_start[k] + s * (x[k] - x_start[k])
                    } else if still {
                        x_start[k]
                    } else {
                        locked[k] = true;
                        x_start[k] + carried
                    };
                    if to != x[k] {
                        x[k] = to;
                        changed = true;
                        moved += 1;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        self.impacts += moved;
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
