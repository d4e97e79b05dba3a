//! A collider posed for the queries of one substep ([`Body`]): signed distance, the nearest
//! surface point and its normal, a node's gap measured along its path in the body's moving
//! frame, the point where a crossing path entered, and the region the body sweeps over the
//! substep for the broad phase ([`Swept`]). parry3d answers the queries of capsules, balls and
//! half-spaces; `super::shapes` the others.

use glam::{DVec3, Vec3};
use parry3d::query::{PointQuery, Ray, RayCast};
use parry3d::shape::{Ball, Capsule, HalfSpace};

use super::shapes;
use super::{ColliderShape, Pose};
use crate::contact::bounds::Aabb;

/// One collider posed for a query, with its parry shape inflated by the cloth thickness, or
/// one of `shapes`' with the thickness to grow it by.
#[derive(Clone, Debug)]
enum Inflated {
    Capsule(Capsule),
    Ball(Ball),
    Plane(HalfSpace, f32),
    Other(shapes::Query, f64),
}

#[derive(Clone)]
pub(super) struct Body {
    shape: Inflated,
    pub(super) pose: Pose,
}

impl Body {
    pub(super) fn new(shape: &ColliderShape, pose: Pose, thickness: f64) -> Self {
        let shape = match *shape {
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
            ref other => match other.query(thickness) {
                Some(q) => Inflated::Other(q, thickness),
                None => unreachable!("capsules, spheres and planes are matched above"),
            },
        };
        Self { shape, pose }
    }

    /// Signed distance of a local point from the inflated surface (negative inside).
    pub(super) fn signed_distance(&self, p: DVec3) -> f64 {
        self.surface(p).signed
    }

    /// The inflated surface seen from a local point, in one query of the shape (`shapes`' own)
    /// or a projection and an inside test (parry3d's).
    pub(super) fn surface(&self, p: DVec3) -> Surface {
        if let Inflated::Other(q, t) = &self.shape {
            let (point, normal, signed) = q.surface(p, *t);
            return Surface {
                point,
                normal,
                signed,
                inside: signed < 0.0,
            };
        }
        let (point, normal) = self.project(p);
        let inside = self.contains(p);
        let signed = match self.shape {
            Inflated::Plane(_, t) => p.y - t as f64,
            _ => {
                let d = point.distance(p);
                if inside { -d } else { d }
            }
        };
        Surface {
            point,
            normal,
            signed,
            inside,
        }
    }

    /// [`Body::surface`] for a point inside the body (`None` outside), without projecting a
    /// point that parry3d finds outside.
    pub(super) fn surface_inside(&self, p: DVec3) -> Option<Surface> {
        match self.shape {
            Inflated::Other(..) => Some(self.surface(p)).filter(|s| s.inside),
            _ => self.contains(p).then(|| self.surface(p)),
        }
    }

    /// Whether a node that began the substep at local `p` started inside the body, deeper than
    /// rounding: a node left on the surface by the last substep is on it to within the `f32`
    /// rounding of the shape queries, and about half the time just inside.
    pub(super) fn started_inside(&self, p: DVec3) -> bool {
        self.start_inside_depth(p).is_some()
    }

    /// How far a point found [`Body::started_inside`] is from the surface.
    pub(super) fn start_inside_depth(&self, p: DVec3) -> Option<f64> {
        self.surface_inside(p)
            .map(|s| s.point.distance(p))
            .filter(|&d| d > START_INSIDE)
    }

    /// Whether a local point is inside the inflated body (parry3d's shapes; `shapes`' answer in
    /// [`Body::surface`]).
    pub(super) fn contains(&self, p: DVec3) -> bool {
        let q = p.as_vec3();
        match &self.shape {
            Inflated::Other(..) => unreachable!("Body::surface answers for these shapes"),
            Inflated::Capsule(c) => c.contains_local_point(q),
            Inflated::Ball(b) => b.contains_local_point(q),
            Inflated::Plane(h, t) => h.contains_local_point(q - Vec3::Y * *t),
        }
    }

    /// Nearest point on the inflated surface to a local point and the outward normal there.
    pub(super) fn project(&self, p: DVec3) -> (DVec3, DVec3) {
        let q = p.as_vec3();
        let proj = match &self.shape {
            Inflated::Other(q, t) => {
                let (s, n, _) = q.surface(p, *t);
                return (s, n);
            }
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

    /// Outward normal at a local surface point.
    pub(super) fn normal_at(&self, s: DVec3) -> DVec3 {
        match &self.shape {
            Inflated::Capsule(c) => {
                let h = c.segment.b.y.abs() as f64;
                let axis = DVec3::new(0.0, s.y.clamp(-h, h), 0.0);
                (s - axis).normalize_or(DVec3::Y)
            }
            Inflated::Ball(_) => s.normalize_or(DVec3::Y),
            Inflated::Plane(..) => DVec3::Y,
            Inflated::Other(..) => unreachable!("Body::surface answers for these shapes"),
        }
    }

    /// First time in [0, 1] at which the local segment `p0 -> p1` touches the surface, with the
    /// outward normal there.
    pub(super) fn cast(&self, p0: DVec3, p1: DVec3) -> Option<(f64, DVec3)> {
        let d = p1 - p0;
        let ray = Ray::new(p0.as_vec3(), d.as_vec3());
        let toi = match &self.shape {
            Inflated::Other(q, t) => return q.cast(p0, p1, *t),
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

    /// [`Body::start_depth`] of `p0`, and a radius around `p0` (carried with the body to the
    /// substep's end) within which the node's gap is known to stay positive and its path not
    /// to cross the body (see [`Gap::clear`]): half its distance from the surface, for the
    /// shapes whose one query gives that distance anyway (`shapes`'), else 0.
    pub(super) fn start_query(&self, p0: DVec3) -> (Option<f64>, f64) {
        if let Inflated::Other(..) = self.shape {
            let s = self.surface(p0);
            if s.inside {
                let depth = s.point.distance(p0);
                return ((depth > START_INSIDE).then_some(-depth), 0.0);
            }
            return (None, clear_radius(s.signed, 0.0));
        }
        (self.start_depth(p0), 0.0)
    }

    /// The signed depth of a node that started the substep inside the body (see
    /// [`Body::started_inside`]) at local `p0`, or `None`: what [`Body::gap_from`] needs of the
    /// substep's start, kept per candidate so that the iterations do not query it again.
    pub(super) fn start_depth(&self, p0: DVec3) -> Option<f64> {
        if let Inflated::Plane(..) = self.shape {
            return None; // the plane's gap reads the start's height directly
        }
        self.start_inside_depth(p0).map(|d| -d)
    }

    /// The gap of a node that moved from local `p0` (seen in the body's pose at the start of
    /// the substep) to local `p1` (in its pose at the end). On its own side of the body, the
    /// signed distance from the nearest point of the inflated surface, along the normal there.
    /// A node whose relative path entered the surface and crossed the body's middle (a thin
    /// limb swept past it within the substep) must go back out the way it came in: its gap is
    /// measured from the tangent plane where it entered. A node that started the substep
    /// inside (spawned or teleported there) may come out by at most `max_push` a substep.
    /// `start` is [`Body::start_depth`] of `p0`, kept per candidate.
    pub(super) fn gap_from(&self, p0: DVec3, start: Option<f64>, p1: DVec3, max_push: f64) -> Gap {
        if let Inflated::Plane(_, t) = self.shape {
            let s1 = p1.y - t as f64;
            let s0 = p0.y - t as f64;
            let allowed = if s0 < -START_INSIDE {
                (s0 + max_push).min(0.0)
            } else {
                0.0
            };
            let gap = s1 - allowed;
            // The path of a node that started above the layer stays above it within the gap.
            let clear = if s0 > CLEAR_MARGIN {
                (gap - CLEAR_MARGIN).max(0.0)
            } else {
                0.0
            };
            return Gap {
                gap,
                normal: DVec3::Y,
                through: false,
                clear,
            };
        }
        let Surface {
            normal: n,
            signed: s1,
            inside,
            ..
        } = self.surface(p1);
        if let Some(s0) = start {
            // No clear radius: `Body::resolve` eases such a node out further than its gap.
            return Gap {
                gap: s1 - (s0 + max_push).min(0.0),
                normal: n,
                through: false,
                clear: 0.0,
            };
        }
        // Outside and nearer to where it started than to the surface: it cannot have crossed.
        // Through where the nearest face is not the one it entered by: past the body's middle
        // (normals opposed), or on it (normals square: a node the body swept onto its axis,
        // whose nearest face is a tie, is resolved by where it entered, not sideways).
        if (inside || p1.distance(p0) > s1)
            && let Some((t, entry_normal)) = self.cast(p0, p1)
            && n.dot(entry_normal) < THROUGH_COS
        {
            let entry = p0 + t * (p1 - p0);
            return Gap {
                gap: entry_normal.dot(p1 - entry),
                normal: entry_normal,
                through: true,
                clear: 0.0,
            };
        }
        Gap {
            gap: s1,
            normal: n,
            through: false,
            clear: clear_radius(s1, p1.distance(p0)),
        }
    }

    /// Where a node that moved from local `p0` to local `p1` (relative to this body) ends up,
    /// with the outward normal and the length of the normal correction; `None` if it stays
    /// outside.
    pub(super) fn resolve(
        &self,
        p0: DVec3,
        p1: DVec3,
        max_push: f64,
    ) -> Option<(DVec3, DVec3, f64)> {
        // Farther from the surface than the path is long: the path stays outside (the
        // distance is 1-Lipschitz), which is the answer the queries below would give, at one
        // query instead of three (`shapes`' queries cost most).
        if let Inflated::Other(q, t) = &self.shape
            && q.surface(p0, *t).2 > p0.distance(p1) + CLEAR_MARGIN
        {
            return None;
        }
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
            if let Some(s) = self.surface_inside(q) {
                depth += s.point.distance(q);
                q = s.point;
            }
            return Some((q, n, depth));
        }
        self.surface_inside(p1)
            .map(|s| self.push_out(p0, p1, &s, max_push))
    }

    /// Nearest surface point to a local `p1` inside the body, with the normal and the distance
    /// moved; a node that already started the substep inside (`p0`) moves at most `max_push`
    /// toward the surface, so that cloth spawned or teleported into a body eases out instead of
    /// being thrown.
    pub(super) fn push_out(
        &self,
        p0: DVec3,
        p1: DVec3,
        inside: &Surface,
        max_push: f64,
    ) -> (DVec3, DVec3, f64) {
        let (s, n) = (inside.point, inside.normal);
        let d = s.distance(p1);
        if d > max_push && self.started_inside(p0) {
            (p1 + max_push * n, n, max_push)
        } else {
            (s, n, d)
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body").field("pose", &self.pose).finish()
    }
}

/// A body's inflated surface seen from a local point ([`Body::surface`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Surface {
    /// The nearest point of the surface.
    pub(super) point: DVec3,
    /// The outward normal there.
    pub(super) normal: DVec3,
    /// The point's signed distance from the surface (negative inside).
    pub(super) signed: f64,
    /// Whether the point is inside.
    pub(super) inside: bool,
}

/// Where a node stands against one body at the current iterate.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gap {
    /// Signed distance along `normal` from where the node may be (negative: it must move out
    /// by that much).
    pub(super) gap: f64,
    /// Outward unit normal (body-local).
    pub(super) normal: DVec3,
    /// The node's relative path crossed the body's middle (it must go back the way it came).
    pub(super) through: bool,
    /// A radius around the node within which its gap stays positive, its path cannot cross
    /// the body and [`Body::resolve`] leaves it where it is (0 where that is not known): a
    /// node that stays within it needs no query.
    pub(super) clear: f64,
}

/// Rounding allowance (metres) of [`clear_radius`]: the `f32` shape queries of parry3d are
/// accurate to well under it.
const CLEAR_MARGIN: f64 = 1e-6;

/// A node whose path entered a body, and whose nearest face's normal makes less than this
/// cosine with the normal it entered by (about 84 degrees apart or more), is resolved by where
/// it entered ([`Body::gap_from`]). Only opposed normals (cosine 0) pushed a node a limb swept
/// onto its axis sideways (two curtains crossed there); square only (1e-3) lost two of the
/// contact gallery's cells (docs/lab/2026-11-29-layers-driven.md).
const THROUGH_COS: f64 = 0.1;

/// How far a node at signed distance `s` from a body's inflated surface, `d` from where it
/// started the substep (body-relative), can move without its gap turning negative or its path
/// crossing the body: within `r` the distance is at least `s - r` (it is 1-Lipschitz) and the
/// distance from the start at most `d + r`, so for `r` up to half their difference the node
/// stays outside and nearer to where it started than to the surface (less a rounding margin;
/// 0 when `s <= d`). A plane's gap, for a node that started above its layer, does not depend
/// on the path and stays positive within the gap itself, less the margin. A node that started
/// inside has none ([`Body::resolve`] eases it out further than its gap says).
pub(super) fn clear_radius(s: f64, d: f64) -> f64 {
    (0.5 * (s - d) - CLEAR_MARGIN).max(0.0)
}

/// Depth below which a node that began a substep inside a body counts as on its surface
/// (metres; see `Body::started_inside`): well above the `f32` rounding of the shape queries in
/// body-local coordinates (about 3e-7 m on a 5 m capsule), far below any depth worth easing out.
const START_INSIDE: f64 = 1e-5;

/// The region a body may occupy over a substep, grown by a margin: the union of its boxes at
/// the substep's two ends, or for a plane the union of its two half-spaces (each an outward
/// normal and the largest `n . p` inside it). A plane's box would be unbounded, which made every
/// node of a cloth over the ground a candidate every substep.
#[derive(Clone, Copy, Debug)]
pub(super) enum Swept {
    Box(Aabb),
    HalfSpaces([(DVec3, f64); 2]),
}

impl Swept {
    pub(super) fn new(shape: &ColliderShape, p0: &Pose, p1: &Pose, margin: f64) -> Self {
        match shape.local_half_extents(margin) {
            Some(he) => Swept::Box(world_box(he, p0).union(world_box(he, p1))),
            None => {
                // A plane: the half-space below it, grown by the margin.
                let half = |pose: &Pose| {
                    let n = pose.transform_vector(DVec3::Y);
                    (n, n.dot(pose.translation) + margin)
                };
                Swept::HalfSpaces([half(p0), half(p1)])
            }
        }
    }

    pub(super) fn overlaps(&self, b: &Aabb) -> bool {
        match self {
            Swept::Box(s) => s.overlaps(b),
            Swept::HalfSpaces(h) => {
                let centre = 0.5 * (b.min + b.max);
                let half = 0.5 * (b.max - b.min);
                h.iter()
                    .any(|&(n, c)| n.dot(centre) - n.abs().dot(half) <= c)
            }
        }
    }
}

/// World box of a bounded shape with local half-extents `he` at a pose.
pub(super) fn world_box(he: DVec3, pose: &Pose) -> Aabb {
    let m = glam::DMat3::from_quat(pose.rotation);
    let abs = glam::DMat3::from_cols(m.x_axis.abs(), m.y_axis.abs(), m.z_axis.abs());
    let e = abs * he;
    Aabb {
        min: pose.translation - e,
        max: pose.translation + e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use glam::DQuat;

    use crate::contact::collision::{ConvexHull, TriangleMesh};

    /// A plane's broad-phase region is its half-space grown by the margin, not an unbounded box:
    /// a node box more than the margin above the plane is left out, one that reaches into the
    /// layer is kept, and a plane tilted or moving over the substep keeps what either end pose
    /// reaches (to the exact margin, 1e-12 m).
    #[test]
    fn plane_broad_phase_keeps_only_boxes_near_its_half_space() {
        let b = |lo: [f64; 3], hi: [f64; 3]| Aabb {
            min: DVec3::from(lo),
            max: DVec3::from(hi),
        };
        let ground = Pose::from_translation(DVec3::new(0.0, 0.8, 0.0));
        let s = Swept::new(&ColliderShape::Plane, &ground, &ground, 0.03);
        assert!(!s.overlaps(&b([-1.0, 0.8301, -1.0], [1.0, 2.0, 1.0])));
        assert!(s.overlaps(&b([-1.0, 0.8299, -1.0], [1.0, 2.0, 1.0])));
        assert!(
            s.overlaps(&b([5.0, -3.0, 5.0], [6.0, -2.0, 6.0])),
            "below is inside"
        );
        // Tilted 90 degrees about z: the outward normal is -x; the region is x >= -margin.
        let wall = Pose::new(
            DVec3::ZERO,
            DQuat::from_rotation_z(std::f64::consts::FRAC_PI_2),
        );
        let s = Swept::new(&ColliderShape::Plane, &wall, &wall, 0.03);
        assert!(s.overlaps(&b([-0.0299, 0.0, 0.0], [-0.0299, 1.0, 1.0])));
        assert!(!s.overlaps(&b([-0.5, 0.0, 0.0], [-0.0301, 1.0, 1.0])));
        // Rising by 0.5 m over the substep: the end pose's layer counts.
        let risen = Pose::from_translation(DVec3::new(0.0, 1.3, 0.0));
        let s = Swept::new(&ColliderShape::Plane, &ground, &risen, 0.03);
        assert!(s.overlaps(&b([0.0, 1.3299, 0.0], [1.0, 2.0, 1.0])));
        assert!(!s.overlaps(&b([0.0, 1.3301, 0.0], [1.0, 2.0, 1.0])));
    }

    fn capsule_body(thickness: f64) -> Body {
        Body::new(
            &ColliderShape::Capsule {
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
        let plane = Body::new(&ColliderShape::Plane, Pose::IDENTITY, 0.01);
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
            &ColliderShape::Capsule {
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

    /// Bodies of every kind for the query tests: plane, capsule, box, tapered capsule, a
    /// convex hull and a closed mesh (a box's 12 triangles), posed off the origin.
    fn test_bodies(thickness: f64) -> Vec<Body> {
        let corners: Vec<DVec3> = (0..8)
            .map(|k| {
                DVec3::new(
                    if k & 1 == 0 { -0.2 } else { 0.3 },
                    if k & 2 == 0 { -0.1 } else { 0.15 },
                    if k & 4 == 0 { -0.25 } else { 0.2 },
                )
            })
            .collect();
        let quads = [
            [0, 2, 3, 1],
            [4, 5, 7, 6],
            [0, 1, 5, 4],
            [2, 6, 7, 3],
            [0, 4, 6, 2],
            [1, 3, 7, 5],
        ];
        let triangles: Vec<[u32; 3]> = quads
            .iter()
            .flat_map(|q| [[q[0], q[1], q[2]], [q[0], q[2], q[3]]])
            .collect();
        let shapes = [
            ColliderShape::Plane,
            ColliderShape::Capsule {
                half_height: 0.2,
                radius: 0.1,
            },
            ColliderShape::Cuboid {
                half_extents: DVec3::new(0.2, 0.1, 0.3),
            },
            ColliderShape::TaperedCapsule {
                half_height: 0.2,
                bottom_radius: 0.15,
                top_radius: 0.05,
            },
            ColliderShape::ConvexHull(Arc::new(
                ConvexHull::new(corners.clone()).expect("box hull"),
            )),
            ColliderShape::TriMesh(Arc::new(
                TriangleMesh::new(corners, triangles).expect("box mesh"),
            )),
        ];
        let pose = Pose::new(DVec3::new(0.1, 0.9, -0.2), DQuat::from_rotation_x(0.3));
        shapes
            .iter()
            .map(|s| Body::new(s, pose, thickness))
            .collect()
    }

    /// A small deterministic generator of points in a cube of half size `r` around `c`.
    fn scatter(seed: &mut u64, c: DVec3, r: f64) -> DVec3 {
        let mut next = || {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        c + r * DVec3::new(next(), next(), next())
    }

    /// [`Gap::clear`] is what lets an unpushed candidate skip its query: anywhere within it of
    /// where the gap was measured, the gap is positive and the path from the start does not
    /// cross the body, for every kind of body and for starts outside and inside (checked at
    /// 20 points on the clear sphere of each of 400 node paths a body).
    #[test]
    fn within_the_clear_radius_the_gap_stays_positive_and_the_path_outside() {
        let mut seed = 7;
        for body in test_bodies(0.01) {
            let centre = body.pose.transform_point(DVec3::ZERO);
            let mut cleared = 0;
            for _ in 0..400 {
                let p0 = body
                    .pose
                    .inverse_transform_point(scatter(&mut seed, centre, 0.6));
                let p1 = scatter(&mut seed, p0, 0.1);
                let start = body.start_depth(p0);
                let g = body.gap_from(p0, start, p1, 0.001);
                if g.clear <= 0.0 {
                    continue;
                }
                assert!(g.gap > 0.0 && !g.through);
                cleared += 1;
                for _ in 0..20 {
                    let d = scatter(&mut seed, DVec3::ZERO, 1.0).normalize_or(DVec3::X);
                    let p = p1 + 0.999 * g.clear * d;
                    let h = body.gap_from(p0, start, p, 0.001);
                    assert!(
                        h.gap > 0.0 && !h.through,
                        "{:?}: gap {} at {p:?} within {} of {p1:?}",
                        body.shape,
                        h.gap,
                        g.clear
                    );
                    assert_eq!(body.resolve(p0, p, 0.001), None);
                }
            }
            assert!(
                cleared > 100,
                "{:?}: only {cleared} paths cleared",
                body.shape
            );
        }
    }

    /// [`Body::start_query`]'s radius holds around the start itself: a node that moves less
    /// than it from where it started (carried with the body) has a positive gap and no
    /// crossing; nodes that start inside get none.
    #[test]
    fn the_start_radius_bounds_the_first_iterations() {
        let mut seed = 11;
        for body in test_bodies(0.01) {
            let centre = body.pose.transform_point(DVec3::ZERO);
            for _ in 0..400 {
                let p0 = body
                    .pose
                    .inverse_transform_point(scatter(&mut seed, centre, 0.6));
                let (start, clear) = body.start_query(p0);
                assert_eq!(start, body.start_depth(p0));
                if clear <= 0.0 {
                    continue;
                }
                assert!(start.is_none() && body.signed_distance(p0) > 2.0 * clear);
                for _ in 0..20 {
                    let d = scatter(&mut seed, DVec3::ZERO, 1.0).normalize_or(DVec3::X);
                    let g = body.gap_from(p0, start, p0 + 0.999 * clear * d, 0.001);
                    assert!(g.gap > 0.0 && !g.through);
                }
            }
        }
    }

    /// A mesh's query answers alike whatever triangle the previous query left as its hint:
    /// the same points queried in two orders (and after a far-away query) give bit-identical
    /// nearest points, normals and distances.
    #[test]
    fn mesh_queries_do_not_depend_on_the_previous_query() {
        let mesh = test_bodies(0.01).pop().expect("the mesh body");
        let mut seed = 3;
        let points: Vec<DVec3> = (0..300)
            .map(|_| scatter(&mut seed, DVec3::ZERO, 0.5))
            .collect();
        let forward: Vec<_> = points
            .iter()
            .map(|&p| {
                let s = mesh.surface(p);
                (s.point, s.normal, s.signed)
            })
            .collect();
        for (k, &p) in points.iter().enumerate().rev() {
            mesh.surface(DVec3::new(40.0, -30.0, 25.0));
            let s = mesh.surface(p);
            assert_eq!((s.point, s.normal, s.signed), forward[k], "point {p:?}");
        }
    }
}
