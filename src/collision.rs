//! Character bodies: kinematic capsules, spheres and planes, and contact inside the iterations.
//!
//! This is the only module that calls parry3d. Colliders are posed by the game every frame
//! ([`ColliderSet::set_pose`] gives the pose at the *end* of the coming frame; the pose at its
//! start is the last one set), and every substep sees the pose interpolated between the two
//! (linear in translation, spherical in rotation).
//!
//! Contact (DESIGN.md section 5) is a projection inside the solver's loop: after every
//! iteration, each candidate node is tested against each nearby collider **in the collider's
//! moving frame**: the node's path from its position at the start of the substep (seen in the
//! collider's start pose) to its current iterate (seen in the end pose) is a segment in the
//! collider's local frame; a ray cast along it finds where a node outside the body would first
//! touch the body inflated by the cloth thickness, however fast the body moved. The node is put
//! there and keeps only the part of its remaining motion that slides along the surface. A node
//! already inside at the start of the substep goes to the nearest surface point. Because the test
//! is on the relative motion, a thin limb sweeping through a hanging sheet pushes it instead of
//! passing through it.
//!
//! After the last iteration one more pass applies Coulomb friction with the position form of the
//! velocity rule `v_t <- max(1 - mu |dv_n| / |v_t|, 0) v_t` (Wang 2012, eq. 3.27): the node's
//! tangential displacement relative to the surface over the substep is shortened by `mu` times
//! the normal correction (removed entirely when shorter, which is static friction). BDF2 derives
//! velocities from positions, so the rule acts on the velocities too. The pass ends with a
//! plain projection, so no node is left inside a body deeper than rounding.
//!
//! A broad phase runs once per substep: the cloth's box (start positions and predictions) against
//! each collider's box swept over the substep, then each node's box against the surviving
//! colliders' boxes, giving a list of (node, collider) candidates; only those are tested in the
//! iterations.

use glam::{DQuat, DVec3, Vec3};
use parry3d::query::{PointQuery, Ray, RayCast};
use parry3d::shape::{Ball, Capsule, HalfSpace};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::flags::NodeFlags;

/// A rigid pose: rotation then translation (world = rotation * local + translation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pose {
    /// Translation in metres.
    pub translation: DVec3,
    /// Rotation (unit quaternion).
    pub rotation: DQuat,
}

impl Default for Pose {
    fn default() -> Self {
        Self::IDENTITY
    }
}

impl Pose {
    /// No rotation, no translation.
    pub const IDENTITY: Pose = Pose {
        translation: DVec3::ZERO,
        rotation: DQuat::IDENTITY,
    };

    /// A pose from a translation and a rotation.
    pub fn new(translation: DVec3, rotation: DQuat) -> Self {
        Self {
            translation,
            rotation,
        }
    }

    /// A pure translation.
    pub fn from_translation(translation: DVec3) -> Self {
        Self::new(translation, DQuat::IDENTITY)
    }

    /// Maps a local point to world space.
    #[inline]
    pub fn transform_point(&self, p: DVec3) -> DVec3 {
        self.rotation * p + self.translation
    }

    /// Maps a local direction to world space.
    #[inline]
    pub fn transform_vector(&self, v: DVec3) -> DVec3 {
        self.rotation * v
    }

    /// Maps a world point to the local frame.
    #[inline]
    pub fn inverse_transform_point(&self, p: DVec3) -> DVec3 {
        self.rotation.inverse() * (p - self.translation)
    }

    /// The inverse pose.
    pub fn inverse(&self) -> Pose {
        let r = self.rotation.inverse();
        Pose::new(-(r * self.translation), r)
    }

    /// `self` after `other`: maps through `other` first.
    pub fn mul(&self, other: &Pose) -> Pose {
        Pose::new(
            self.transform_point(other.translation),
            (self.rotation * other.rotation).normalize(),
        )
    }

    /// Interpolates to `other`: linear in translation, spherical in rotation.
    pub fn interpolate(&self, other: &Pose, s: f64) -> Pose {
        Pose::new(
            self.translation.lerp(other.translation, s),
            self.rotation.slerp(other.rotation, s),
        )
    }

    /// Whether both parts are finite and the rotation has a usable length.
    pub fn is_valid(&self) -> bool {
        self.translation.is_finite()
            && self.rotation.is_finite()
            && (self.rotation.length() - 1.0).abs() < 1e-3
    }
}

/// The shape of a kinematic body, in its local frame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ColliderShape {
    /// A capsule along the local Y axis: a segment from `-half_height` to `+half_height`
    /// swept by a ball of `radius` (parry3d `Capsule`). Both in metres, both > 0.
    Capsule {
        /// Half the length of the axis segment.
        half_height: f64,
        /// Radius.
        radius: f64,
    },
    /// A ball of `radius` metres (> 0) around the local origin.
    Sphere {
        /// Radius.
        radius: f64,
    },
    /// The half-space below the local XZ plane (outward normal local +Y): ground, walls.
    Plane,
}

impl ColliderShape {
    /// Checks sizes: finite, positive radius, non-degenerate capsule axis, and under 1 km.
    pub fn validate(&self) -> Result<(), ColliderError> {
        let size_ok = |v: f64| v.is_finite() && v > 0.0 && v < 1e3;
        match *self {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => {
                if !size_ok(radius) {
                    return Err(ColliderError::BadRadius { radius });
                }
                if !size_ok(half_height) {
                    return Err(ColliderError::DegenerateAxis { half_height });
                }
            }
            ColliderShape::Sphere { radius } => {
                if !size_ok(radius) {
                    return Err(ColliderError::BadRadius { radius });
                }
            }
            ColliderShape::Plane => {}
        }
        Ok(())
    }

    /// Local bounding half-extents of the shape grown by `margin` (None for a plane).
    fn local_half_extents(&self, margin: f64) -> Option<DVec3> {
        match *self {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => Some(DVec3::new(0.0, half_height, 0.0) + DVec3::splat(radius + margin)),
            ColliderShape::Sphere { radius } => Some(DVec3::splat(radius + margin)),
            ColliderShape::Plane => None,
        }
    }
}

/// Bad collider data. Nothing is stored when one of these is returned, so a bad pose from an
/// animation never reaches the cloth.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ColliderError {
    /// A radius that is not a finite positive size under 1 km.
    #[error("collider radius must be finite, positive and under 1 km, got {radius}")]
    BadRadius {
        /// The radius given.
        radius: f64,
    },
    /// A capsule whose axis has zero, negative or non-finite length.
    #[error("capsule half-height must be finite, positive and under 1 km, got {half_height}")]
    DegenerateAxis {
        /// The half-height given.
        half_height: f64,
    },
    /// A pose with a NaN or infinite component, or a rotation that is not a unit quaternion.
    #[error("collider {collider} got a non-finite or non-unit pose")]
    BadPose {
        /// Index of the collider.
        collider: usize,
    },
    /// No collider with this index.
    #[error("no collider {collider} (there are {count})")]
    NoSuchCollider {
        /// The index asked for.
        collider: usize,
        /// Number of colliders.
        count: usize,
    },
}

/// A collider's handle: its index in the [`ColliderSet`].
pub type ColliderId = usize;

#[derive(Debug, Clone, Copy)]
struct Entry {
    shape: ColliderShape,
    /// Pose at the start of the frame being simulated.
    previous: Pose,
    /// Pose at its end.
    current: Pose,
}

/// Kinematic bodies the cloths collide with (a character's capsules, the ground). Shared by every
/// cloth stepped in a frame. Call [`ColliderSet::set_pose`] before stepping the cloths and
/// [`ColliderSet::finish_frame`] after.
#[derive(Debug, Clone, Default)]
pub struct ColliderSet {
    entries: Vec<Entry>,
}

impl ColliderSet {
    /// The empty set (what [`crate::Cloth::step`] collides with).
    pub const EMPTY: ColliderSet = ColliderSet {
        entries: Vec::new(),
    };

    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a body at `pose` (at rest there). Bad sizes or a bad pose are refused.
    pub fn add(&mut self, shape: ColliderShape, pose: Pose) -> Result<ColliderId, ColliderError> {
        shape.validate()?;
        let id = self.entries.len();
        if !pose.is_valid() {
            return Err(ColliderError::BadPose { collider: id });
        }
        let pose = Pose::new(pose.translation, pose.rotation.normalize());
        self.entries.push(Entry {
            shape,
            previous: pose,
            current: pose,
        });
        Ok(id)
    }

    /// Number of colliders.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The shape of collider `id`.
    pub fn shape(&self, id: ColliderId) -> Option<ColliderShape> {
        self.entries.get(id).map(|e| e.shape)
    }

    /// The pose of collider `id` at the end of the coming frame.
    pub fn pose(&self, id: ColliderId) -> Option<Pose> {
        self.entries.get(id).map(|e| e.current)
    }

    fn entry_mut(&mut self, id: ColliderId) -> Result<&mut Entry, ColliderError> {
        let count = self.entries.len();
        self.entries
            .get_mut(id)
            .ok_or(ColliderError::NoSuchCollider {
                collider: id,
                count,
            })
    }

    /// Sets where collider `id` will be at the end of the coming frame; it moves there from its
    /// last pose across the frame's substeps. A non-finite pose is refused and the collider
    /// keeps its old one.
    pub fn set_pose(&mut self, id: ColliderId, pose: Pose) -> Result<(), ColliderError> {
        if !pose.is_valid() {
            return Err(ColliderError::BadPose { collider: id });
        }
        let e = self.entry_mut(id)?;
        e.current = Pose::new(pose.translation, pose.rotation.normalize());
        Ok(())
    }

    /// Puts collider `id` at `pose` without sweeping through the space between (a respawn).
    pub fn teleport(&mut self, id: ColliderId, pose: Pose) -> Result<(), ColliderError> {
        self.set_pose(id, pose)?;
        let e = self.entry_mut(id)?;
        e.previous = e.current;
        Ok(())
    }

    /// Changes the shape of collider `id` (validated).
    pub fn set_shape(&mut self, id: ColliderId, shape: ColliderShape) -> Result<(), ColliderError> {
        shape.validate()?;
        self.entry_mut(id)?.shape = shape;
        Ok(())
    }

    /// Ends a frame: every collider's end pose becomes the start pose of the next.
    pub fn finish_frame(&mut self) {
        for e in &mut self.entries {
            e.previous = e.current;
        }
    }

    /// Pose of collider `id` at fraction `s` of the frame (0 = start, 1 = end).
    pub fn pose_at(&self, id: ColliderId, s: f64) -> Option<Pose> {
        self.entries
            .get(id)
            .map(|e| e.previous.interpolate(&e.current, s))
    }

    /// Signed distance of `p` from the surface of collider `id` at the end of the frame
    /// (negative inside).
    pub fn signed_distance(&self, id: ColliderId, p: DVec3) -> Option<f64> {
        let e = self.entries.get(id)?;
        Some(
            Body::new(e.shape, e.current, 0.0)
                .signed_distance(e.current.inverse_transform_point(p)),
        )
    }

    /// Largest depth of any of `points` inside the layer of `thickness` around any collider at
    /// the end of the frame: `max(0, thickness - signed distance)` (DESIGN.md section 6,
    /// "penetration").
    pub fn max_penetration(&self, points: &[DVec3], thickness: f64) -> f64 {
        let mut worst = 0.0f64;
        for e in &self.entries {
            let body = Body::new(e.shape, e.current, 0.0);
            for &p in points {
                let d = body.signed_distance(e.current.inverse_transform_point(p));
                worst = worst.max(thickness - d);
            }
        }
        worst
    }
}

/// Contact settings of one cloth: plain data, serde-loadable.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContactSettings {
    /// Cloth thickness in metres: nodes are kept this far outside every body. Default 0.005.
    pub thickness: f64,
    /// Coulomb friction coefficient against bodies, >= 0. Default 0.3.
    ///
    /// Below about 0.1 little of the cloth sticks. Cloth that wraps over a body of radius
    /// 0.1 m or less can then stretch by several hundred percent at the default split of 2
    /// substeps of 5 iterations. With `substeps: 10, iterations: 1` it stays under 5 %
    /// (`docs/fidelity.md` sections 5.9 and 5.11).
    pub friction: f64,
    /// Whether contact is handled at all. Default true.
    pub enabled: bool,
    /// Most contacts coupled exactly into each global solve (a dense system of this size per
    /// iteration, and one cached column of the inverse matrix per contact node); contacts beyond
    /// it are projected node by node after the solve. Default 64.
    pub max_coupled_contacts: u32,
    /// Speed (m/s) at which a node found inside a body at the start of a substep (cloth spawned
    /// or teleported into a character) is eased out, instead of being thrown out in one
    /// substep. Nodes that enter a body during a substep are always stopped at its surface.
    /// Default 1.
    pub max_depenetration_speed: f64,
    /// Static friction inside the solve: nodes sticking to a body (the cloth's load within the
    /// friction cone, judged from its momentum balance) are held on it exactly, through a
    /// refactorisation of the system matrix whenever the set of them changes, once more than
    /// this many stick; fewer are left to the coupled contact solve and the friction pass,
    /// which cost less. `u32::MAX` turns holding off. Default 16.
    pub hold_sticking_above: u32,
}

impl Default for ContactSettings {
    fn default() -> Self {
        Self {
            thickness: 0.005,
            friction: 0.3,
            enabled: true,
            max_coupled_contacts: 64,
            max_depenetration_speed: 1.0,
            hold_sticking_above: 16,
        }
    }
}

impl ContactSettings {
    /// Checks ranges: thickness finite in [0, 0.5] m, friction finite in [0, 10].
    pub fn validate(&self) -> Result<(), crate::ClothError> {
        if !(self.thickness.is_finite() && (0.0..=0.5).contains(&self.thickness)) {
            return Err(crate::ClothError::InvalidSetting {
                name: "thickness",
                reason: format!("must be in [0, 0.5] m, got {}", self.thickness),
            });
        }
        if !(self.friction.is_finite() && (0.0..=10.0).contains(&self.friction)) {
            return Err(crate::ClothError::InvalidSetting {
                name: "friction",
                reason: format!("must be in [0, 10], got {}", self.friction),
            });
        }
        if !(self.max_depenetration_speed.is_finite() && self.max_depenetration_speed > 0.0) {
            return Err(crate::ClothError::InvalidSetting {
                name: "max_depenetration_speed",
                reason: format!(
                    "must be finite and positive, got {}",
                    self.max_depenetration_speed
                ),
            });
        }
        if self.max_coupled_contacts > 4096 {
            return Err(crate::ClothError::InvalidSetting {
                name: "max_coupled_contacts",
                reason: format!("at most 4096, got {}", self.max_coupled_contacts),
            });
        }
        Ok(())
    }
}

/// One collider posed for a query, with its parry shape inflated by the cloth thickness.
#[derive(Clone, Copy)]
enum Inflated {
    Capsule(Capsule),
    Ball(Ball),
    Plane(HalfSpace, f32),
}

#[derive(Clone, Copy)]
struct Body {
    shape: Inflated,
    pose: Pose,
}

impl Body {
    fn new(shape: ColliderShape, pose: Pose, thickness: f64) -> Self {
        let shape = match shape {
            ColliderShape::Capsule {
                half_height,
                radius,
            } => Inflated::Capsule(Capsule::new_y(
                half_height as f32,
                (radius + thickness) as f32,
            )),
            ColliderShape::Sphere { radius } => {
                Inflated::Ball(Ball::new((radius + thickness) as f32))
            }
            ColliderShape::Plane => Inflated::Plane(HalfSpace::new(Vec3::Y), thickness as f32),
        };
        Self { shape, pose }
    }

    /// Signed distance of a local point from the inflated surface (negative inside).
    fn signed_distance(&self, p: DVec3) -> f64 {
        match self.shape {
            Inflated::Plane(_, t) => p.y - t as f64,
            _ => {
                let (proj, _) = self.project(p);
                let d = proj.distance(p);
                if self.contains(p) { -d } else { d }
            }
        }
    }

    /// Whether a node that began the substep at local `p` started inside the body, deeper than
    /// rounding: a node left on the surface by the last substep is on it to within the `f32`
    /// rounding of the shape queries, and about half the time just inside.
    fn started_inside(&self, p: DVec3) -> bool {
        self.contains(p) && self.project(p).0.distance(p) > START_INSIDE
    }

    fn contains(&self, p: DVec3) -> bool {
        let q = p.as_vec3();
        match &self.shape {
            Inflated::Capsule(c) => c.contains_local_point(q),
            Inflated::Ball(b) => b.contains_local_point(q),
            Inflated::Plane(h, t) => h.contains_local_point(q - Vec3::Y * *t),
        }
    }

    /// Nearest point on the inflated surface to a local point and the outward normal there.
    fn project(&self, p: DVec3) -> (DVec3, DVec3) {
        let q = p.as_vec3();
        let proj = match &self.shape {
            Inflated::Capsule(c) => c.project_local_point(q, false).point,
            Inflated::Ball(b) => b.project_local_point(q, false).point,
            Inflated::Plane(h, t) => {
                let s = h.project_local_point(q - Vec3::Y * *t, false).point + Vec3::Y * *t;
                // Keep the tangential coordinates in f64 (only the height is snapped).
                return (DVec3::new(p.x, s.y as f64, p.z), DVec3::Y);
            }
        };
        let proj = proj.as_dvec3();
        (proj, self.normal_at(proj))
    }

    /// Coulomb's two sides for a cloth resting on this body, given the force `force` the body
    /// must push it with and the mass-weighted mean outward normal `mean_normal` of the nodes
    /// touching it: the part that presses (normal; negative when the force would pull the
    /// cloth on) and the part that would slide it along the surface (slip). On a plane: the
    /// force along and across its normal. On a capsule: the force across the axis presses and
    /// the force along it slides; the cloth hanging over a bar is not turned about the axis by
    /// this judgement (section 5.6 of docs/fidelity.md says why). On a ball: the force along and
    /// across the mean normal.
    fn cone(&self, force: DVec3, mean_normal: DVec3) -> (f64, f64) {
        match &self.shape {
            Inflated::Capsule(_) => {
                let axis = self.pose.transform_vector(DVec3::Y);
                let along = force.dot(axis);
                let across = (force - along * axis).length();
                let pulls = force.dot(mean_normal) < 0.0;
                (if pulls { -across } else { across }, along.abs())
            }
            Inflated::Ball(_) => {
                let n = mean_normal.normalize_or_zero();
                let normal = force.dot(n);
                (normal, (force - normal * n).length())
            }
            Inflated::Plane(..) => {
                let n = self.pose.transform_vector(DVec3::Y);
                let normal = force.dot(n);
                (normal, (force - normal * n).length())
            }
        }
    }

    /// Outward normal at a local surface point.
    fn normal_at(&self, s: DVec3) -> DVec3 {
        match &self.shape {
            Inflated::Capsule(c) => {
                let h = c.segment.b.y.abs() as f64;
                let axis = DVec3::new(0.0, s.y.clamp(-h, h), 0.0);
                (s - axis).normalize_or(DVec3::Y)
            }
            Inflated::Ball(_) => s.normalize_or(DVec3::Y),
            Inflated::Plane(..) => DVec3::Y,
        }
    }

    /// First time in [0, 1] at which the local segment `p0 -> p1` touches the surface, with the
    /// outward normal there.
    fn cast(&self, p0: DVec3, p1: DVec3) -> Option<(f64, DVec3)> {
        let d = p1 - p0;
        let ray = Ray::new(p0.as_vec3(), d.as_vec3());
        let toi = match &self.shape {
            Inflated::Capsule(c) => c.cast_local_ray(&ray, 1.0, true),
            Inflated::Ball(b) => b.cast_local_ray(&ray, 1.0, true),
            Inflated::Plane(h, t) => {
                let shifted = Ray::new(ray.origin - Vec3::Y * *t, ray.dir);
                h.cast_local_ray(&shifted, 1.0, true)
            }
        }? as f64;
        let hit = p0 + toi * d;
        let (_, normal) = self.project(hit);
        Some((toi, normal))
    }

    /// Where a node that moved from local `p0` to local `p1` (relative to this body) ends up,
    /// with the outward normal and the length of the normal correction; `None` if it stays
    /// outside.
    fn resolve(&self, p0: DVec3, p1: DVec3, max_push: f64) -> Option<(DVec3, DVec3, f64)> {
        if !self.started_inside(p0)
            && let Some((t, n)) = self.cast(p0, p1)
        {
            // Entered through the surface at p0 + t (p1 - p0): keep the sliding part of the rest
            // of the motion, drop the part into the body.
            let entry = p0 + t * (p1 - p0);
            let rest = p1 - entry;
            let into = rest.dot(n).min(0.0);
            let mut q = p1 - into * n;
            let mut depth = -into;
            if self.contains(q) {
                let (s, _) = self.project(q);
                depth += s.distance(q);
                q = s;
            }
            return Some((q, n, depth));
        }
        if self.contains(p1) {
            return Some(self.push_out(p0, p1, max_push));
        }
        None
    }

    /// Nearest surface point to a local `p1` inside the body, with the normal and the distance
    /// moved; a node that already started the substep inside (`p0`) moves at most `max_push`
    /// toward the surface, so that cloth spawned or teleported into a body eases out instead of
    /// being thrown.
    fn push_out(&self, p0: DVec3, p1: DVec3, max_push: f64) -> (DVec3, DVec3, f64) {
        let (s, n) = self.project(p1);
        let d = s.distance(p1);
        if d > max_push && self.started_inside(p0) {
            (p1 + max_push * n, n, max_push)
        } else {
            (s, n, d)
        }
    }
}

/// A linearised contact: keep `normal . x[node] >= offset` (the tangent plane of the body's
/// inflated surface under the node).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContactConstraint {
    /// Index into the candidate list.
    pub candidate: u32,
    /// Cloth node.
    pub node: u32,
    /// Outward unit normal (world).
    pub normal: DVec3,
    /// Plane offset: `normal . surface point`.
    pub offset: f64,
}

/// Per-substep broad phase and contact projection for one cloth.
#[derive(Debug, Default)]
pub(crate) struct ContactPass {
    /// Linearised contacts found by the last [`ContactPass::detect`].
    pub constraints: Vec<ContactConstraint>,
    /// Per candidate: held by a constraint in an earlier iteration of this substep.
    sticky: Vec<bool>,
    /// (node, collider) pairs near enough to touch during the substep.
    pub candidates: Vec<(u32, u32)>,
    /// Colliders whose swept box meets the cloth's box this substep.
    near: Vec<u32>,
    /// Swept box of each collider over the substep (inflated by the thickness).
    swept: Vec<Aabb>,
    /// Normal correction of the last projection, per candidate.
    depth: Vec<f64>,
    /// Whether any projection this substep moved the candidate.
    hit: Vec<bool>,
    bodies0: Vec<Body>,
    bodies1: Vec<Body>,
    /// Nodes moved by the last pass.
    pub last_contacts: usize,
    /// Nodes that came into contact this substep (after [`ContactPass::finish`]).
    pub impacts: usize,
    /// Per node: in contact at the end of the previous substep.
    was_touching: Vec<bool>,
    /// Nodes the projection put on a body in this pass (held while the solver restores the
    /// linear constraints).
    held: Vec<bool>,
    /// Farthest a node that starts a substep inside a body is pushed out during it.
    max_push: f64,
    /// After [`ContactPass::finish`]: each node in contact, the outward normal and the
    /// displacement over the substep of the body's surface point under it.
    pub touched: Vec<(u32, DVec3, DVec3)>,
    /// Per node: sticking to its body (static friction) after the previous substep.
    sticking: Vec<bool>,
    /// Nodes held on their body for this substep ([`ContactPass::hold`]): node and where the
    /// body carried it.
    pub stuck: Vec<(u32, DVec3)>,
    /// Per node: in `stuck`.
    is_stuck: Vec<bool>,
    /// Body of each entry of `touched`.
    touched_body: Vec<u32>,
    /// Per body: touching mass, mass-weighted normal, and whether the cloth sticks to it.
    body_load: Vec<(f64, DVec3, bool)>,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body").field("pose", &self.pose).finish()
    }
}

/// Axis-aligned box.
#[derive(Clone, Copy, Debug)]
struct Aabb {
    min: DVec3,
    max: DVec3,
}

impl Aabb {
    const EMPTY: Aabb = Aabb {
        min: DVec3::splat(f64::INFINITY),
        max: DVec3::splat(f64::NEG_INFINITY),
    };
    fn grow(&mut self, p: DVec3) {
        self.min = self.min.min(p);
        self.max = self.max.max(p);
    }
    fn union(self, o: Aabb) -> Aabb {
        Aabb {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
    fn inflate(self, m: f64) -> Aabb {
        Aabb {
            min: self.min - DVec3::splat(m),
            max: self.max + DVec3::splat(m),
        }
    }
    fn overlaps(&self, o: &Aabb) -> bool {
        self.min.cmple(o.max).all() && o.min.cmple(self.max).all()
    }
}

/// World box of a shape at a pose grown by `margin`; a plane's box is unbounded below it.
fn world_box(shape: ColliderShape, pose: &Pose, margin: f64) -> Aabb {
    match shape.local_half_extents(margin) {
        Some(he) => {
            let m = glam::DMat3::from_quat(pose.rotation);
            let abs = glam::DMat3::from_cols(m.x_axis.abs(), m.y_axis.abs(), m.z_axis.abs());
            let e = abs * he;
            Aabb {
                min: pose.translation - e,
                max: pose.translation + e,
            }
        }
        None => Aabb {
            min: DVec3::splat(f64::NEG_INFINITY),
            max: DVec3::splat(f64::INFINITY),
        },
    }
}

/// A node this close to a body's inflated surface (metres) at the end of a substep, and moved by
/// a contact during it, counts as touching.
const TOUCH: f64 = 1e-4;

/// Depth below which a node that began a substep inside a body counts as on its surface
/// (metres; see `Body::started_inside`): well above the `f32` rounding of the shape queries in
/// body-local coordinates (about 3e-7 m on a 5 m capsule), far below any depth worth easing out.
const START_INSIDE: f64 = 1e-5;

/// Strain (of the render-mesh edges at a node, `measures::node_strain`) that friction may
/// always raise the cloth to; above it, friction may not raise it further (see
/// [`ContactPass::finish`]).
pub(crate) const FRICTION_STRAIN_TOLERANCE: f64 = 0.03;

/// Most a touching node may move relative to its body over a substep, along the surface, and
/// start sticking to it in the next (metres).
const STICK_SLIP: f64 = 1e-4;

/// How far beyond its predicted path a node may wander during the iterations and still be
/// tested (metres).
const SLACK: f64 = 0.02;

impl ContactPass {
    /// Sizes the per-node buffers for a cloth of `nodes` nodes (reusing memory) and takes which
    /// of its nodes touched a body after its last substep. With `bodies` (the step has
    /// colliders) it also reserves room for every node being a candidate, so that the passes
    /// of this step allocate only when a node meets several bodies at once; a workspace that
    /// never steps a cloth among bodies does not hold that room (about 110 bytes a node).
    pub(crate) fn load(&mut self, touching: &NodeFlags, sticking: &NodeFlags, bodies: bool) {
        self.was_touching.clear();
        self.was_touching.extend(touching.iter());
        self.sticking.clear();
        self.sticking.extend(sticking.iter());
        let nodes = self.was_touching.len();
        self.is_stuck.clear();
        self.is_stuck.resize(nodes, false);
        self.stuck.clear();
        self.held.resize(nodes, false);
        // Cleared here and refilled by `prepare`.
        self.candidates.clear();
        self.depth.clear();
        self.hit.clear();
        self.sticky.clear();
        self.touched.clear();
        if bodies {
            self.stuck.reserve(nodes);
            self.candidates.reserve(nodes);
            self.depth.reserve(nodes);
            self.hit.reserve(nodes);
            self.sticky.reserve(nodes);
            self.touched.reserve(nodes);
        }
    }

    /// Broad phase for a substep spanning fractions `s0..s1` of the frame: which free nodes
    /// (moving from `x_start` toward `x_pred`) may touch which colliders.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &mut self,
        colliders: &ColliderSet,
        settings: &ContactSettings,
        h: f64,
        s0: f64,
        s1: f64,
        free_nodes: &[u32],
        x_start: &[DVec3],
        x_pred: &[DVec3],
    ) {
        self.candidates.clear();
        self.near.clear();
        self.bodies0.clear();
        self.bodies1.clear();
        self.swept.clear();
        self.touched.clear();
        self.last_contacts = 0;
        self.impacts = 0;
        self.max_push = settings.max_depenetration_speed * h;
        for &(i, _) in &self.stuck {
            self.is_stuck[i as usize] = false;
        }
        self.stuck.clear();
        if !settings.enabled || colliders.is_empty() {
            self.was_touching.fill(false);
            self.sticking.fill(false);
            return;
        }
        let margin = settings.thickness + SLACK;
        let mut cloth = Aabb::EMPTY;
        for &i in free_nodes {
            cloth.grow(x_start[i as usize]);
            cloth.grow(x_pred[i as usize]);
        }
        let cloth = cloth.inflate(margin);
        for (c, e) in colliders.entries.iter().enumerate() {
            let (p0, p1) = (
                e.previous.interpolate(&e.current, s0),
                e.previous.interpolate(&e.current, s1),
            );
            self.bodies0
                .push(Body::new(e.shape, p0, settings.thickness));
            self.bodies1
                .push(Body::new(e.shape, p1, settings.thickness));
            self.swept
                .push(world_box(e.shape, &p0, settings.thickness).union(world_box(
                    e.shape,
                    &p1,
                    settings.thickness,
                )));
            let swept = world_box(e.shape, &p0, margin).union(world_box(e.shape, &p1, margin));
            if swept.overlaps(&cloth) {
                self.near.push(c as u32);
            }
        }
        if self.near.is_empty() {
            return;
        }
        for &i in free_nodes {
            let (a, b) = (x_start[i as usize], x_pred[i as usize]);
            let slack = SLACK + a.distance(b);
            let node = Aabb {
                min: a.min(b) - DVec3::splat(slack),
                max: a.max(b) + DVec3::splat(slack),
            };
            for &c in &self.near {
                if self.swept[c as usize].overlaps(&node) {
                    self.candidates.push((i, c));
                }
            }
        }
        self.depth.clear();
        self.depth.resize(self.candidates.len(), 0.0);
        self.hit.clear();
        self.hit.resize(self.candidates.len(), false);
        self.sticky.clear();
        self.sticky.resize(self.candidates.len(), false);
    }

    /// Holds the sticking nodes on their bodies for this substep (static friction): every node
    /// that ended the last substep touching a body and within the friction cone
    /// ([`ContactPass::judge`]) gets a target where the body carried the point it rests on, and
    /// the solver keeps it there exactly. Only when more than `min_count` nodes stick: fewer
    /// are left to the coupled contact solve and the friction pass, which cost less than the
    /// refactorisation holding them needs.
    pub fn hold(&mut self, x_start: &[DVec3], min_count: usize) {
        for (k, &(i, c)) in self.candidates.iter().enumerate() {
            let iu = i as usize;
            if !self.sticking[iu] || self.is_stuck[iu] {
                continue;
            }
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let local = b0.pose.inverse_transform_point(x_start[iu]);
            if b0.signed_distance(local) > TOUCH {
                continue;
            }
            let on = if b1.signed_distance(local) < 0.0 {
                b1.project(local).0
            } else {
                local
            };
            self.stuck.push((i, b1.pose.transform_point(on)));
            self.is_stuck[iu] = true;
            self.hit[k] = true;
        }
        if self.stuck.len() <= min_count {
            self.unstick();
        }
    }

    /// Lets every held node go (the substep solves without holding them).
    pub fn unstick(&mut self) {
        for &(i, _) in &self.stuck {
            self.is_stuck[i as usize] = false;
        }
        self.stuck.clear();
        for (k, &(i, _)) in self.candidates.iter().enumerate() {
            if self.sticking[i as usize] {
                self.hit[k] = false;
            }
        }
    }

    /// After a substep: which nodes stick to their body in the next one. The cloth sticks to a
    /// body while the force the body must push it with presses it on and could not slide it
    /// against Coulomb friction ([`Body::cone`]); then the nodes held this substep keep sticking
    /// and the other touching nodes start once they move less than [`STICK_SLIP`] over the
    /// substep relative to the body. With no friction nothing sticks.
    ///
    /// The force is `load`: the cloth's momentum balance over the substep, the sum over its
    /// free nodes of `m (x - x~) / h~^2` (mass times acceleration, less gravity and whatever
    /// else the prediction `x~` holds), averaged over the last substeps by the caller. The
    /// cloth's own forces cancel in that sum, so it holds however far the iterations are from
    /// converged, which per-node forces do not: an almost inextensible cloth with a strain of
    /// 1e-5 between two held neighbours pulls them apart with a thousand times their weight
    /// (docs/fidelity.md section 5.5). Several bodies share it in proportion to the mass
    /// touching each. Moments are left out: the rotation of a cloth is what a local-global
    /// iteration converges slowest, and moments taken from it were noise (section 5.6). Pins
    /// carry part of a pinned cloth's weight, which this leaves with the bodies.
    pub fn judge(
        &mut self,
        load: DVec3,
        masses: &[f64],
        friction: f64,
        x_start: &[DVec3],
        x: &[DVec3],
    ) {
        self.sticking.fill(false);
        if friction <= 0.0 || self.touched.is_empty() {
            return;
        }
        self.body_load.clear();
        self.body_load
            .resize(self.bodies1.len(), (0.0, DVec3::ZERO, false));
        let mut touching_mass = 0.0;
        for (&(i, normal, _), &c) in self.touched.iter().zip(&self.touched_body) {
            let m = masses[i as usize];
            self.body_load[c as usize].0 += m;
            self.body_load[c as usize].1 += m * normal;
            touching_mass += m;
        }
        for (c, entry) in self.body_load.iter_mut().enumerate() {
            let (mass, weighted_normal, _) = *entry;
            if mass <= 0.0 {
                continue;
            }
            let force = mass / touching_mass * load;
            let (normal, slip) = self.bodies1[c].cone(force, weighted_normal);
            entry.2 = normal > 0.0 && slip <= friction * normal;
        }
        for k in 0..self.touched.len() {
            let (i, normal, moved) = self.touched[k];
            let iu = i as usize;
            self.sticking[iu] = self.body_load[self.touched_body[k] as usize].2
                && (self.is_stuck[iu] || {
                    let rel = x[iu] - x_start[iu] - moved;
                    (rel - rel.dot(normal) * normal).length() <= STICK_SLIP
                });
        }
    }

    /// Per node: sticking after the last substep (of the cloth [`ContactPass::load`]ed).
    pub fn sticking(&self) -> &[bool] {
        &self.sticking
    }

    /// Finds the contacts of the iterate `x`: every candidate whose path from `x_start` enters
    /// its body, and every candidate held in an earlier iteration of this substep (so that the
    /// set does not flicker; [`ContactPass::release`] drops one the solve finds pulling).
    pub fn detect(&mut self, x_start: &[DVec3], x: &[DVec3]) {
        self.constraints.clear();
        self.depth.fill(0.0);
        for (k, &(i, c)) in self.candidates.iter().enumerate() {
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let iu = i as usize;
            if self.is_stuck[iu] {
                continue;
            }
            let p1 = b1.pose.inverse_transform_point(x[iu]);
            let p0 = b0.pose.inverse_transform_point(x_start[iu]);
            let (surface, n) = if self.sticky[k] {
                let (q, n, _) = b1.push_out(p0, p1, self.max_push);
                (q, n)
            } else {
                match b1.resolve(p0, p1, self.max_push) {
                    Some((q, n, _)) => (q, n),
                    None => continue,
                }
            };
            let normal = b1.pose.transform_vector(n);
            let point = b1.pose.transform_point(surface);
            self.sticky[k] = true;
            self.hit[k] = true;
            self.constraints.push(ContactConstraint {
                candidate: k as u32,
                node: i,
                normal,
                offset: normal.dot(point),
            });
        }
    }

    /// Drops a constraint the solve found pulling the node toward the body.
    pub fn release(&mut self, candidate: u32) {
        self.sticky[candidate as usize] = false;
    }

    /// Records how far a coupled solve moved a candidate along its normal (for friction).
    pub fn record_depth(&mut self, candidate: u32, depth: f64) {
        self.depth[candidate as usize] = depth;
    }

    /// Per node: touching a body after the last substep (of the cloth [`ContactPass::load`]ed).
    pub fn touching(&self) -> &[bool] {
        &self.was_touching
    }

    /// Flags the nodes that the projections of this substep put on a body.
    fn mark_held(&mut self) {
        self.held.fill(false);
        for (k, &(i, _)) in self.candidates.iter().enumerate() {
            self.held[i as usize] |= self.hit[k];
        }
    }

    /// Projects penetrating candidates out (as [`ContactPass::project`]), lets `restore`
    /// repair what the moves broke with the moved nodes flagged, and projects once more.
    pub fn project_and_restore(
        &mut self,
        x_start: &[DVec3],
        x: &mut [DVec3],
        restore: impl FnOnce(&mut [DVec3], &[bool]),
    ) {
        self.project(x_start, x);
        self.mark_held();
        restore(x, &self.held);
        self.project(x_start, x);
    }

    /// Whether any candidates exist this substep.
    pub fn active(&self) -> bool {
        !self.candidates.is_empty()
    }

    /// Projects every candidate node out of its collider along its path relative to the
    /// collider's motion. Returns whether any node moved.
    pub fn project(&mut self, x_start: &[DVec3], x: &mut [DVec3]) -> bool {
        let mut moved = false;
        let mut count = 0;
        for (k, &(i, c)) in self.candidates.iter().enumerate() {
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let i = i as usize;
            if self.is_stuck[i] {
                continue;
            }
            let p0 = b0.pose.inverse_transform_point(x_start[i]);
            let p1 = b1.pose.inverse_transform_point(x[i]);
            if let Some((q, _, depth)) = b1.resolve(p0, p1, self.max_push) {
                x[i] = b1.pose.transform_point(q);
                self.depth[k] = self.depth[k].max(depth);
                self.hit[k] = true;
                moved = true;
                count += 1;
            }
        }
        self.last_contacts = count;
        moved
    }

    /// The last pass of a substep: projection, Coulomb friction on the displacement relative
    /// to the surface, and a final guard over every free node whose actual path over the
    /// substep meets a nearby body's swept box (the iterations can carry a node farther than
    /// the broad phase's allowance), so that no node tunnels or stays inside.
    /// Friction may not stretch the cloth: a node's friction move is halved (up to three
    /// times, then dropped) while it would raise `strain(x, node)` (the stretch of the cloth
    /// at the node) above both its value before the move and [`FRICTION_STRAIN_TOLERANCE`].
    /// `restore` runs after friction and before the last push-out, with the nodes the
    /// projection put on a body flagged: the solver restores the linear constraints around them.
    pub fn finish(
        &mut self,
        x_start: &[DVec3],
        x: &mut [DVec3],
        friction: f64,
        free_nodes: &[u32],
        strain: impl Fn(&[DVec3], usize) -> f64,
        restore: impl FnOnce(&mut [DVec3], &[bool]),
    ) {
        self.project(x_start, x);
        if friction > 0.0 {
            for (k, &(i, c)) in self.candidates.iter().enumerate() {
                let depth = self.depth[k];
                if depth <= 0.0 {
                    continue;
                }
                let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
                let i = i as usize;
                // Where the surface point under the node at the start went over the substep.
                let carried = b1
                    .pose
                    .transform_point(b0.pose.inverse_transform_point(x_start[i]));
                let local = b1.pose.inverse_transform_point(x[i]);
                let (_, n) = b1.project(local);
                let n = b1.pose.transform_vector(n);
                let rel = x[i] - carried;
                let tangential = rel - rel.dot(n) * n;
                let len = tangential.length();
                if len > 0.0 {
                    let cut = (friction * depth / len).min(1.0);
                    let before = strain(x, i).max(FRICTION_STRAIN_TOLERANCE);
                    let from = x[i];
                    let mut step = cut * tangential;
                    for _ in 0..4 {
                        x[i] = from - step;
                        if strain(x, i) <= before {
                            break;
                        }
                        step *= 0.5;
                        x[i] = from;
                    }
                }
            }
        }
        self.mark_held();
        restore(x, &self.held);
        // Friction moved nodes along tangent planes of curved bodies: push out once more.
        self.touched.clear();
        self.touched_body.clear();
        self.impacts = 0;
        for (k, &(i, c)) in self.candidates.iter().enumerate() {
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let i = i as usize;
            let p = b1.pose.inverse_transform_point(x[i]);
            if b1.contains(p) {
                let p0 = b0.pose.inverse_transform_point(x_start[i]);
                let (s, _, _) = b1.push_out(p0, p, self.max_push);
                x[i] = b1.pose.transform_point(s);
            }
            let local = b1.pose.inverse_transform_point(x[i]);
            if self.hit[k] && b1.signed_distance(local) < TOUCH {
                let (_, n) = b1.project(local);
                let moved = x[i] - b0.pose.transform_point(local);
                self.touched
                    .push((i as u32, b1.pose.transform_vector(n), moved));
                self.touched_body.push(c);
                if !self.was_touching[i] {
                    self.impacts += 1;
                }
            }
        }
        self.was_touching.fill(false);
        for &(i, _, _) in &self.touched {
            self.was_touching[i as usize] = true;
        }
        self.last_contacts = self.touched.len();
        // Guard: the actual paths against the swept boxes of the nearby bodies.
        for &c in &self.near {
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let swept = self.swept[c as usize];
            for &i in free_nodes {
                let i = i as usize;
                if self.is_stuck[i] {
                    continue;
                }
                let (a, b) = (x_start[i], x[i]);
                let path = Aabb {
                    min: a.min(b),
                    max: a.max(b),
                };
                if !path.overlaps(&swept) {
                    continue;
                }
                let p0 = b0.pose.inverse_transform_point(a);
                let p1 = b1.pose.inverse_transform_point(b);
                if let Some((q, _, _)) = b1.resolve(p0, p1, self.max_push) {
                    x[i] = b1.pose.transform_point(q);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capsule_body(thickness: f64) -> Body {
        Body::new(
            ColliderShape::Capsule {
                half_height: 0.2,
                radius: 0.04,
            },
            Pose::IDENTITY,
            thickness,
        )
    }

    /// A point swept straight through a thin capsule in one step (relative motion 0.3 m across a
    /// 0.08 m body) is stopped on the side it came from, on the inflated surface (to 1e-5 m).
    #[test]
    fn segment_through_a_thin_capsule_stops_at_the_entry_side() {
        let body = capsule_body(0.005);
        let (q, n, depth) = body
            .resolve(DVec3::new(0.0, 0.0, -0.15), DVec3::new(0.0, 0.0, 0.15), 1.0)
            .unwrap();
        assert!(n.z < -0.99, "{n}");
        assert!((q.z + 0.045).abs() < 1e-5, "{q}");
        assert!((depth - 0.195).abs() < 1e-5, "{depth}");
    }

    /// A point that starts inside goes to the nearest surface point; a point that stays outside
    /// is left alone; the plane keeps points above its thickness.
    #[test]
    fn inside_points_go_to_the_nearest_surface_and_outside_points_stay() {
        let body = capsule_body(0.0);
        let (q, _, _) = body
            .resolve(DVec3::new(0.0, 0.1, 0.01), DVec3::new(0.0, 0.1, 0.02), 1.0)
            .unwrap();
        assert!((q - DVec3::new(0.0, 0.1, 0.04)).length() < 1e-6, "{q}");
        assert!(
            body.resolve(DVec3::new(0.1, 0.0, 0.0), DVec3::new(0.1, 0.05, 0.0), 1.0)
                .is_none()
        );
        let plane = Body::new(ColliderShape::Plane, Pose::IDENTITY, 0.01);
        let (q, _, _) = plane
            .resolve(DVec3::new(0.0, 0.5, 0.0), DVec3::new(0.3, -0.5, 0.0), 1.0)
            .unwrap();
        assert!((q.y - 0.01).abs() < 1e-6 && (q.x - 0.3).abs() < 1e-6, "{q}");
    }

    /// A node that ended the last substep on the surface is, after the `f32` shape queries, as
    /// often just inside as just outside. Pushed 8 cm into a 0.1 m capsule by the solve, it
    /// must still be resolved along its path (back on its own side, outside to 1e-5 m) and
    /// not eased out at the depenetration speed like a node spawned inside. Before this was
    /// told apart, a frictionless sheet dropped on a capsule ended frames with nodes 3-6 cm
    /// inside it.
    #[test]
    fn a_node_resting_on_the_surface_is_not_treated_as_spawned_inside() {
        let body = Body::new(
            ColliderShape::Capsule {
                half_height: 0.4,
                radius: 0.1,
            },
            Pose::IDENTITY,
            0.0,
        );
        let max_push = 0.008;
        for eps in [-1e-9, -1e-8, 0.0, 1e-8] {
            let p0 = DVec3::new(0.0, 0.0, 0.1 + eps);
            let p1 = DVec3::new(0.01, 0.0, 0.02);
            let (q, n, _) = body.resolve(p0, p1, max_push).unwrap();
            // On the tangent plane at the entry point, outside the body, on its own side.
            let r = q.x.hypot(q.z);
            assert!(r > 0.1 - 1e-5 && r < 0.101 && q.z > 0.09, "eps {eps}: {q}");
            assert!(n.z > 0.99, "eps {eps}: {n}");
        }
        // Really inside (1 cm deep): eased out by at most `max_push`.
        let (q, _, moved) = body
            .resolve(
                DVec3::new(0.0, 0.0, 0.09),
                DVec3::new(0.0, 0.0, 0.02),
                max_push,
            )
            .unwrap();
        assert!(
            (moved - max_push).abs() < 1e-9 && (q.z - 0.028).abs() < 1e-9,
            "{q}"
        );
    }

    /// Bad shapes and poses are refused with typed errors and leave the set unchanged.
    #[test]
    fn bad_collider_data_is_refused() {
        let mut set = ColliderSet::new();
        assert!(matches!(
            set.add(
                ColliderShape::Capsule {
                    half_height: 0.1,
                    radius: -0.1
                },
                Pose::IDENTITY
            ),
            Err(ColliderError::BadRadius { .. })
        ));
        assert!(matches!(
            set.add(
                ColliderShape::Capsule {
                    half_height: 0.0,
                    radius: 0.1
                },
                Pose::IDENTITY
            ),
            Err(ColliderError::DegenerateAxis { .. })
        ));
        let id = set
            .add(ColliderShape::Sphere { radius: 0.1 }, Pose::IDENTITY)
            .unwrap();
        let bad = Pose::from_translation(DVec3::new(f64::NAN, 0.0, 0.0));
        assert!(matches!(
            set.set_pose(id, bad),
            Err(ColliderError::BadPose { .. })
        ));
        assert_eq!(set.pose(id), Some(Pose::IDENTITY));
        assert!(matches!(
            set.set_pose(7, Pose::IDENTITY),
            Err(ColliderError::NoSuchCollider { .. })
        ));
    }
}
