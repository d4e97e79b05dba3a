//! Self-collision: a cloth against itself.
//!
//! A cape folding over a turning character, a skirt's front meeting its back: the cloth must
//! not pass through itself. Following Bridson, Fedkiw and Anderson (2002; the base of Wang's
//! thesis: Z. Wang, "Isometrically Deforming Cloth with Simultaneous Collision Handling",
//! MSc thesis, UBC 2012, section 3.3), two kinds of feature pairs of the render mesh
//! are handled, both between elements that share no node:
//!
//! - **point-triangle**: a node against a triangle;
//! - **edge-edge**: an edge against an edge.
//!
//! in four layers:
//!
//! 1. **Broad phase, once per substep**: a bounding volume hierarchy over the triangles
//!    (built once per model), refitted to the swept boxes (from the substep's start to where each
//!    node is headed, grown by the thickness) and traversed against itself. Pairs that come
//!    within twice the thickness, or whose paths cross (a continuous test), become the
//!    substep's pairs, each with the side it begins on. Pairs whose features lie within the
//!    thickness of each other in the rest shape are left out.
//! 2. **An impulse on the prediction**: pairs that would end closer than the thickness are
//!    pushed apart in the inertial prediction (weighted by inverse mass), which the iterations
//!    then spread over the cloth.
//! 3. **Forces inside the iterations**: each pair is a scalar inequality `gap >= 0` on its four
//!    nodes (the gap is the distance between the features along the normal from the side the
//!    pair began the substep on, less the thickness), solved as the body contact solves its
//!    per-node ones (`docs/design.md` section 5): a force `lambda >= 0` pushes the two sides apart,
//!    split over the nodes by the closest points' weights, so both sides move and the impulse is
//!    shared through the nodes' compliances; it is corrected each iteration from the gap
//!    (`lambda <- max(0, lambda - gap / W)`, `W` the pair's compliance), enters the next global
//!    solve's right-hand side, and starts the next substep (keyed by the features). The factor
//!    is untouched.
//! 4. **A last pass**: pairs still closer than the thickness are pushed apart, weighted by inverse
//!    mass (pinned nodes stay), and a continuous check over every node's actual path over the
//!    substep finds any point-triangle or edge-edge crossing (the coplanarity times of the four
//!    moving points, then the features' distance there). The free nodes of a crossing pair go
//!    back along their paths to half the crossing's time, and the check runs again, until none
//!    crosses: a cloth that began the substep without crossings ends it without (apart from
//!    pinned nodes, which are the game's to place). The substep then counts as an impact
//!    (backward-Euler velocities).
//!
//! Off by default ([`SelfCollisionSettings`]); crossed triangle pairs of any shape can be counted
//! with [`self_intersections`].

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::bounds::Aabb;
use crate::error::ClothError;

/// Self-collision of one cloth. Plain data; off by default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelfCollisionSettings {
    /// Whether the cloth collides with itself. Default `false`: it costs a broad phase and a
    /// continuous check every substep (see the README's figures).
    pub enabled: bool,
    /// The distance the cloth keeps between its own layers (metres, positive). Keep it well
    /// under the render mesh's edge length (pairs within it in the rest shape are left out).
    /// Default 0.004.
    pub thickness: f64,
}

impl Default for SelfCollisionSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            thickness: 0.004,
        }
    }
}

impl SelfCollisionSettings {
    /// Checks the thickness (positive, finite, under a metre).
    pub fn validate(&self) -> Result<(), ClothError> {
        crate::error::positive("self_collision.thickness", self.thickness)?;
        if self.thickness >= 1.0 {
            return Err(ClothError::InvalidSetting {
                name: "self_collision.thickness",
                reason: format!("must be under 1 m, got {}", self.thickness),
            });
        }
        Ok(())
    }
}

/// No feature (an entry of [`SelfTopology`]'s ownership lists).
const NONE: u32 = u32::MAX;

/// A node of the triangles' bounding volume hierarchy: two children, or with `left == NONE` a
/// leaf holding triangle `right`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BvhNode {
    left: u32,
    right: u32,
}

/// The render mesh's triangles and edges, which self-collision tests, with what the broad
/// phase needs (held by the model, built on the first self-colliding step):
///
/// - a bounding volume hierarchy over the triangles, built on the initial shape (median splits
///   of the centroids along the longest axis, one triangle per leaf, parents before children)
///   and refitted to the moving cloth each time;
/// - an owner per node and per edge (one of the triangles around it), so that each pair of
///   features comes from exactly one pair of triangles: node `v` against triangle `U` from the
///   pair (owner of `v`, `U`), edge `e` against edge `f` from (owner of `e`, owner of `f`).
///   Pairs of features that share a node are left out.
#[derive(Debug, Clone, Default)]
pub(crate) struct SelfTopology {
    pub(crate) triangles: Vec<[u32; 3]>,
    pub(crate) edges: Vec<[u32; 2]>,
    /// Per triangle, the nodes and edges it owns (`NONE`: fewer).
    own_nodes: Vec<[u32; 3]>,
    own_edges: Vec<[u32; 3]>,
    /// Per edge, whether it borders one triangle only (the cloth's boundary).
    border: Vec<bool>,
    /// Per triangle, whether it owns a border edge.
    owns_border: Vec<bool>,
    bvh: Vec<BvhNode>,
}

impl SelfTopology {
    pub(crate) fn new(triangles: &[[u32; 3]], positions: &[DVec3]) -> Self {
        let mut edges: Vec<[u32; 2]> = triangles
            .iter()
            .flat_map(|t| (0..3).map(move |k| sorted2(t[k], t[(k + 1) % 3])))
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let mut own_nodes = vec![[NONE; 3]; triangles.len()];
        let mut own_edges = vec![[NONE; 3]; triangles.len()];
        let mut node_owned = vec![false; positions.len()];
        let mut edge_owned = vec![false; edges.len()];
        let mut sides = vec![0u8; edges.len()];
        for (t, tri) in triangles.iter().enumerate() {
            let (mut nv, mut ne) = (0, 0);
            for k in 0..3 {
                let v = tri[k] as usize;
                if !node_owned[v] {
                    node_owned[v] = true;
                    own_nodes[t][nv] = v as u32;
                    nv += 1;
                }
                let e = edges
                    .binary_search(&sorted2(tri[k], tri[(k + 1) % 3]))
                    .expect("every triangle edge is listed");
                sides[e] = sides[e].saturating_add(1);
                if !edge_owned[e] {
                    edge_owned[e] = true;
                    own_edges[t][ne] = e as u32;
                    ne += 1;
                }
            }
        }
        let centroids: Vec<DVec3> = triangles
            .iter()
            .map(|t| t.iter().map(|&k| positions[k as usize]).sum::<DVec3>() / 3.0)
            .collect();
        let mut order: Vec<u32> = (0..triangles.len() as u32).collect();
        let mut bvh = Vec::with_capacity(2 * triangles.len());
        if !order.is_empty() {
            build_bvh(&mut order, &centroids, &mut bvh);
        }
        let owns_border = own_edges
            .iter()
            .map(|t| t.iter().any(|&e| e != NONE && sides[e as usize] == 1))
            .collect();
        Self {
            triangles: triangles.to_vec(),
            edges,
            own_nodes,
            own_edges,
            owns_border,
            border: sides.iter().map(|&n| n == 1).collect(),
            bvh,
        }
    }
}

impl SelfTopology {
    /// The hierarchy's boxes (`bvh_boxes`, one per node) refitted to the triangles' boxes
    /// (`tri_boxes`, one per triangle): children come after their parent, so one backward pass
    /// does it.
    fn refit(&self, tri_boxes: &[Aabb], bvh_boxes: &mut Vec<Aabb>) {
        bvh_boxes.clear();
        bvh_boxes.resize(self.bvh.len(), Aabb::EMPTY);
        for (k, n) in self.bvh.iter().enumerate().rev() {
            bvh_boxes[k] = if n.left == NONE {
                tri_boxes[n.right as usize]
            } else {
                bvh_boxes[n.left as usize].union(bvh_boxes[n.right as usize])
            };
        }
    }

    /// Calls `f(t, u)` once for every pair of distinct triangles whose boxes meet, by the
    /// hierarchy (refitted into `bvh_boxes`) against itself; `stack` is working memory.
    fn overlapping_triangles(
        &self,
        bvh_boxes: &[Aabb],
        stack: &mut Vec<(u32, u32)>,
        f: impl FnMut(u32, u32),
    ) {
        self.walk(bvh_boxes, self, bvh_boxes, true, stack, f);
    }

    /// Calls `f(t, u)` for every triangle `t` of `self` and `u` of `other` whose boxes meet,
    /// by the two hierarchies (refitted into `boxes` and `other_boxes`) against each other;
    /// `stack` is working memory.
    fn overlapping_between(
        &self,
        boxes: &[Aabb],
        other: &SelfTopology,
        other_boxes: &[Aabb],
        stack: &mut Vec<(u32, u32)>,
        f: impl FnMut(u32, u32),
    ) {
        self.walk(boxes, other, other_boxes, false, stack, f);
    }

    /// The traversal of both: pairs of hierarchy nodes whose boxes meet, descending the one
    /// that is not a leaf (the larger box when neither is). With `same` (`other` is `self`),
    /// a node against itself stands for its children's pairs, so each pair comes once.
    fn walk(
        &self,
        boxes: &[Aabb],
        other: &SelfTopology,
        other_boxes: &[Aabb],
        same: bool,
        stack: &mut Vec<(u32, u32)>,
        mut f: impl FnMut(u32, u32),
    ) {
        let (ba, bb) = (&self.bvh, &other.bvh);
        let meet = |a: u32, b: u32| boxes[a as usize].overlaps(&other_boxes[b as usize]);
        // Every pair on the stack meets (its boxes were tested before it went on).
        stack.clear();
        if !ba.is_empty() && !bb.is_empty() && (same || meet(0, 0)) {
            stack.push((0, 0));
        }
        while let Some((a, b)) = stack.pop() {
            let (na, nb) = (ba[a as usize], bb[b as usize]);
            if same && a == b {
                if na.left != NONE {
                    stack.push((na.left, na.left));
                    stack.push((na.right, na.right));
                    if meet(na.left, na.right) {
                        stack.push((na.left, na.right));
                    }
                }
                continue;
            }
            // Each child pair goes on and stays by its boxes' answer, without a branch on it.
            let mut keep = |c: u32, d: u32| push_kept(stack, (c, d), || meet(c, d));
            match (na.left == NONE, nb.left == NONE) {
                (true, true) => f(na.right, nb.right),
                (false, true) => {
                    keep(na.left, b);
                    keep(na.right, b);
                }
                (true, false) => {
                    keep(a, nb.left);
                    keep(a, nb.right);
                }
                // Both descend at once: half the pops of descending one at a time, and no
                // choice of which (a branch the predictor missed one time in five).
                (false, false) => {
                    keep(na.left, nb.left);
                    keep(na.left, nb.right);
                    keep(na.right, nb.left);
                    keep(na.right, nb.right);
                }
            }
        }
    }
}

/// Offsets of a second mesh's nodes, triangles and edges after a first's, in a numbering of
/// both (a pair's nodes, and the keys of [`RawPair`], count on from the first's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offsets {
    pub nodes: u32,
    pub triangles: u32,
    pub edges: u32,
}

/// Which edge-edge pairs a broad phase between two meshes lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EdgePairs {
    /// Every pair whose boxes meet (the continuous check: a crossing of two surfaces may begin
    /// at any two edges).
    All,
    /// Only pairs with an edge on its mesh's border. Where two surfaces lie near each other
    /// inside both, every two edges near each other are bracketed by nodes near the other
    /// surface, which their point-triangle pairs hold; a border edge can pass over the other
    /// surface with no node of it near (a hem over a skirt).
    Border,
}

/// Calls `f(t, u)` for every triangle `t` of mesh `a` and `u` of mesh `b` whose swept boxes
/// meet (by the two hierarchies; `stack` is working memory).
pub(crate) fn triangle_pairs_between(
    a: (&SelfTopology, &SweptBoxes),
    b: (&SelfTopology, &SweptBoxes),
    stack: &mut Vec<(u32, u32)>,
    f: impl FnMut(u32, u32),
) {
    let ((ta, ba), (tb, bb)) = (a, b);
    ta.overlapping_between(&ba.bvh, tb, &bb.bvh, stack, f);
}

/// Pushes `item` and keeps it only when `kept()` answers true, without a branch on the answer
/// (written, then the length set back): for tests whose answers are as good as random to a
/// predictor. The test runs after the push.
#[inline(always)]
fn push_kept<T>(out: &mut Vec<T>, item: T, kept: impl FnOnce() -> bool) {
    out.push(item);
    let len = out.len() - usize::from(!kept());
    out.truncate(len);
}

/// The positions in `x` of a pair's four nodes (written out: `[T; 4]::map` went through the
/// stack, a copy a pair in the layers' broad phase).
#[inline(always)]
pub(crate) fn at4(x: &[DVec3], nodes: [u32; 4]) -> [DVec3; 4] {
    [
        x[nodes[0] as usize],
        x[nodes[1] as usize],
        x[nodes[2] as usize],
        x[nodes[3] as usize],
    ]
}

/// The feature pairs between triangle `t` of mesh `a` and triangle `u` of mesh `b` (numbered
/// after `a` by `off`) whose swept boxes meet, with their nodes: `t`'s own nodes against `u`,
/// `u`'s own nodes against `t`, and `t`'s own edges against `u`'s (those `edges` lists). Over
/// every pair of triangles whose boxes meet, each feature pair comes once (by the meshes'
/// ownership).
pub(crate) fn feature_pairs(
    a: (&SelfTopology, &SweptBoxes),
    b: (&SelfTopology, &SweptBoxes),
    (t, u): (u32, u32),
    off: Offsets,
    edges: EdgePairs,
    out: &mut Vec<(RawPair, [u32; 4])>,
) {
    let ((ta, ba), (tb, bb)) = (a, b);
    let (tri_a, tri_b) = (ta.triangles[t as usize], tb.triangles[u as usize]);
    // Each candidate is written and kept by its test's answer, without a branch on it (the
    // answers are as good as random to a predictor: `push_kept`). Owned nodes and edges come
    // first in their lists, `NONE` after.
    let keep =
        |out: &mut Vec<(RawPair, [u32; 4])>, pair, meets: bool| push_kept(out, pair, || meets);
    let tri_b_nodes = tri_b.map(|k| k + off.nodes);
    let (box_u, box_t) = (&bb.triangles[u as usize], &ba.triangles[t as usize]);
    for &v in &ta.own_nodes[t as usize] {
        if v == NONE {
            break;
        }
        let pair = (
            (false, v, u + off.triangles),
            [v, tri_b_nodes[0], tri_b_nodes[1], tri_b_nodes[2]],
        );
        keep(out, pair, ba.nodes[v as usize].overlaps(box_u));
    }
    for &v in &tb.own_nodes[u as usize] {
        if v == NONE {
            break;
        }
        let pair = (
            (false, v + off.nodes, t),
            [v + off.nodes, tri_a[0], tri_a[1], tri_a[2]],
        );
        keep(out, pair, bb.nodes[v as usize].overlaps(box_t));
    }
    if edges == EdgePairs::All || ta.owns_border[t as usize] || tb.owns_border[u as usize] {
        for &e in &ta.own_edges[t as usize] {
            if e == NONE {
                break;
            }
            let (ea, border) = (
                ta.edges[e as usize],
                edges == EdgePairs::All || ta.border[e as usize],
            );
            for &f in &tb.own_edges[u as usize] {
                if f == NONE {
                    break;
                }
                let fb = tb.edges[f as usize];
                let pair = (
                    (true, e, f + off.edges),
                    [ea[0], ea[1], fb[0] + off.nodes, fb[1] + off.nodes],
                );
                let meets = (border | tb.border[f as usize])
                    & ba.edges[e as usize].overlaps(&bb.edges[f as usize]);
                keep(out, pair, meets);
            }
        }
    }
}

/// Sends the free nodes (`fixed` false) of every pair of `pairs` whose features cross while
/// the nodes move from `x_start` to `x` back along their paths (to half the crossing's time,
/// or their start when it came early), until none crosses; after `MAX_ROUNDS` rounds, every
/// free node of every pair goes back to its start.
///
/// The paths are taken in the frame of the broad phase that found `pairs` (moving by `shift`
/// over the sweep, see [`SweptBoxes`]): a node goes back toward its start carried by the
/// shift, `x_start + shift`, so that its path in that frame stays inside the box the pairs
/// were found with. Sent back toward its start in the world, a node's path in the moving frame
/// leaves its box by the shift and a crossing on it goes unlisted: three curtains carried
/// together by a limb at 6 m/s (a shift of 3.5 cm a substep) came out of this check crossed.
/// The starts carried by the shift are as free of crossings as the starts, except against a
/// fixed node, which stays where its path ends: a pair still crossing with every free node at
/// home is reported [`Rewind::stuck`] (then the caller checks again in the world's frame,
/// `shift` zero, where the fixed nodes' starts are the free nodes' too).
pub(crate) fn rewind_crossings(
    pairs: &[(bool, [u32; 4])],
    (x_start, shift): (&[DVec3], DVec3),
    x: &mut [DVec3],
    fixed: &[bool],
) -> Rewind {
    let home = |k: usize| x_start[k] + shift;
    let crosses = |x: &[DVec3], (ee, nodes): (bool, [u32; 4])| {
        crossing_time(ee, at4(x_start, nodes), at4(x, nodes), CCD_EPS)
    };
    let mut rewind = Rewind::default();
    let mut round = 0;
    loop {
        round += 1;
        let mut changed = false;
        let mut stuck = false;
        for &(ee, nodes) in pairs {
            let Some(t) = crosses(x, (ee, nodes)) else {
                continue;
            };
            let s = if t > REWIND_MIN { 0.5 * t } else { 0.0 };
            let mut moved = false;
            for &k in &nodes {
                let k = k as usize;
                if !fixed[k] && x[k] != home(k) {
                    x[k] = home(k) + s * (x[k] - home(k));
                    moved = true;
                    rewind.sent += 1;
                }
            }
            changed |= moved;
            stuck |= !moved;
        }
        if !changed {
            rewind.stuck = stuck;
            break;
        }
        if round >= MAX_ROUNDS {
            for &(_, nodes) in pairs {
                for k in nodes {
                    let k = k as usize;
                    if !fixed[k] {
                        x[k] = home(k);
                    }
                }
            }
            rewind.stuck = pairs.iter().any(|&p| crosses(x, p).is_some());
            break;
        }
    }
    rewind
}

/// What [`rewind_crossings`] did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rewind {
    /// How many times a node was sent back.
    pub sent: usize,
    /// Whether a pair still crosses with each of its free nodes at its start (a fixed node's
    /// path crossed it): the check is to be made again in the world's frame.
    pub stuck: bool,
}

/// Appends the hierarchy over `tris` to `out` (its root first) and returns the root's index.
fn build_bvh(tris: &mut [u32], centroids: &[DVec3], out: &mut Vec<BvhNode>) -> u32 {
    let at = out.len() as u32;
    if tris.len() == 1 {
        out.push(BvhNode {
            left: NONE,
            right: tris[0],
        });
        return at;
    }
    out.push(BvhNode { left: 0, right: 0 });
    let mut b = Aabb::EMPTY;
    for &t in tris.iter() {
        b.grow(centroids[t as usize]);
    }
    let extent = b.max - b.min;
    let axis = if extent.x >= extent.y && extent.x >= extent.z {
        0
    } else if extent.y >= extent.z {
        1
    } else {
        2
    };
    let mid = tris.len() / 2;
    tris.select_nth_unstable_by(mid, |&a, &b| {
        centroids[a as usize][axis].total_cmp(&centroids[b as usize][axis])
    });
    let (lo, hi) = tris.split_at_mut(mid);
    let left = build_bvh(lo, centroids, out);
    let right = build_bvh(hi, centroids, out);
    out[at as usize] = BvhNode { left, right };
    at
}

fn sorted2(a: u32, b: u32) -> [u32; 2] {
    if a < b { [a, b] } else { [b, a] }
}

/// Closest point of triangle `(a, b, c)` to `p`, as barycentric weights (Ericson, Real-Time
/// Collision Detection, 5.1.5).
pub(crate) fn closest_on_triangle(p: DVec3, a: DVec3, b: DVec3, c: DVec3) -> [f64; 3] {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = ab.dot(ap);
    let d2 = ac.dot(ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return [1.0, 0.0, 0.0];
    }
    let bp = p - b;
    let d3 = ab.dot(bp);
    let d4 = ac.dot(bp);
    if d3 >= 0.0 && d4 <= d3 {
        return [0.0, 1.0, 0.0];
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        return [1.0 - v, v, 0.0];
    }
    let cp = p - c;
    let d5 = ab.dot(cp);
    let d6 = ac.dot(cp);
    if d6 >= 0.0 && d5 <= d6 {
        return [0.0, 0.0, 1.0];
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let w = d2 / (d2 - d6);
        return [1.0 - w, 0.0, w];
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return [0.0, 1.0 - w, w];
    }
    let denom = 1.0 / (va + vb + vc);
    let v = vb * denom;
    let w = vc * denom;
    [1.0 - v - w, v, w]
}

/// Parameters `(s, t)` of the closest points of segments `p1 + s (q1 - p1)` and
/// `p2 + t (q2 - p2)`, both in `[0, 1]` (Ericson 5.1.9).
fn closest_between_segments(p1: DVec3, q1: DVec3, p2: DVec3, q2: DVec3) -> (f64, f64) {
    let d1 = q1 - p1;
    let d2 = q2 - p2;
    let r = p1 - p2;
    let a = d1.length_squared();
    let e = d2.length_squared();
    let f = d2.dot(r);
    const TINY: f64 = 1e-30;
    if a <= TINY && e <= TINY {
        return (0.0, 0.0);
    }
    if a <= TINY {
        return (0.0, (f / e).clamp(0.0, 1.0));
    }
    let c = d1.dot(r);
    if e <= TINY {
        return ((-c / a).clamp(0.0, 1.0), 0.0);
    }
    let b = d1.dot(d2);
    let denom = a * e - b * b;
    let mut s = if denom > TINY * a * e {
        ((b * f - c * e) / denom).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut t = (b * s + f) / e;
    if t < 0.0 {
        t = 0.0;
        s = (-c / a).clamp(0.0, 1.0);
    } else if t > 1.0 {
        t = 1.0;
        s = ((b - c) / a).clamp(0.0, 1.0);
    }
    (s, t)
}

/// The two features of a pair at positions `p` (the pair's four nodes): the weights of the
/// closest points (positive on the first feature, negative on the second, each side summing
/// to 1), the vector between them (first minus second), and the reference normal whose sign
/// tells the sides apart (triangle normal, or the edges' cross product), with whether the closest
/// points lie strictly inside both features (only then does the side decide the sign of the
/// distance).
pub(crate) fn features(edge_edge: bool, p: [DVec3; 4]) -> ([f64; 4], DVec3, DVec3, bool) {
    if edge_edge {
        let (s, t) = closest_between_segments(p[0], p[1], p[2], p[3]);
        let coef = [1.0 - s, s, -(1.0 - t), -t];
        let d = p[0].lerp(p[1], s) - p[2].lerp(p[3], t);
        let m = (p[1] - p[0]).cross(p[3] - p[2]);
        let inside = s > 0.0 && s < 1.0 && t > 0.0 && t < 1.0;
        (coef, d, m, inside)
    } else {
        let w = closest_on_triangle(p[0], p[1], p[2], p[3]);
        let coef = [1.0, -w[0], -w[1], -w[2]];
        let d = p[0] - (w[0] * p[1] + w[1] * p[2] + w[2] * p[3]);
        let m = (p[2] - p[1]).cross(p[3] - p[1]);
        let inside = w.iter().all(|&w| w > 0.0);
        (coef, d, m, inside)
    }
}

/// Unsigned distance between the features of a pair at `p`.
fn distance(edge_edge: bool, p: [DVec3; 4]) -> f64 {
    features(edge_edge, p).1.length()
}

/// Signed distance and outward normal (pointing from the second feature toward the first, on
/// the side `side` the pair began on) of a pair at `p`, with the closest points' weights. Where
/// the closest points lie inside both features, the distance is measured along the reference
/// normal oriented by `side`, so a node that went through comes back the way it came; elsewhere
/// it is the plain distance (a node passing beside a triangle's edge has not crossed it).
fn signed_geometry(edge_edge: bool, side: f64, p: [DVec3; 4]) -> (f64, DVec3, [f64; 4]) {
    let (dist, n, coef, _) = sided_geometry(edge_edge, side, p);
    (dist, n, coef)
}

/// [`signed_geometry`] with whether the features lie on the side `side` (their separation
/// along the reference normal has its sign, or is zero).
fn sided_geometry(edge_edge: bool, side: f64, p: [DVec3; 4]) -> (f64, DVec3, [f64; 4], bool) {
    let (coef, d, m, inside) = features(edge_edge, p);
    let ml = m.length();
    let len = d.length();
    let own_side = side * d.dot(m) >= 0.0;
    if inside && ml > 1e-300 {
        let n = side * m / ml;
        let dist = d.dot(n);
        // A point sliding inside a triangle's prism: the normal. Edges crossing at an angle:
        // the same (their closest points' difference is along it).
        return (dist, n, coef, own_side);
    }
    if len > 1e-300 {
        (len, d / len, coef, own_side)
    } else if ml > 1e-300 {
        (0.0, side * m / ml, coef, own_side)
    } else {
        (0.0, DVec3::Y, coef, own_side)
    }
}

/// Which side of the features a pair is on at `p`: the sign of the features' separation along
/// the reference normal (+1 when it is zero).
fn side_of(edge_edge: bool, p: [DVec3; 4]) -> f64 {
    let (_, d, m, _) = features(edge_edge, p);
    if d.dot(m) < 0.0 { -1.0 } else { 1.0 }
}

/// The largest motion of a pair's four points relative to their mean motion: the distance
/// between the features changes by at most twice this over the motion (a common translation
/// changes nothing).
fn relative_motion(p0: [DVec3; 4], p1: [DVec3; 4]) -> f64 {
    let mean = (0..4).map(|k| p1[k] - p0[k]).sum::<DVec3>() / 4.0;
    (0..4)
        .map(|k| (p1[k] - p0[k] - mean).length_squared())
        .fold(0.0, f64::max)
        .sqrt()
}

/// A lower bound on the distance between a pair's features at `p`: the gap between their
/// boxes (cheaper than the closest points).
fn box_gap(edge_edge: bool, p: [DVec3; 4]) -> f64 {
    let split = if edge_edge { 2 } else { 1 };
    let (mut a, mut b) = (Aabb::EMPTY, Aabb::EMPTY);
    for (k, &q) in p.iter().enumerate() {
        if k < split { a.grow(q) } else { b.grow(q) }
    }
    (a.min - b.max).max(b.min - a.max).max(DVec3::ZERO).length()
}

/// A lower bound on the distance between a pair's features at `p`: the distance of one from
/// the other's plane (a point from its triangle's plane; an edge from the plane through the
/// other edge parallel to it), zero where that plane is not defined (a degenerate triangle,
/// parallel edges). Two layers lying on each other at the thickness are ruled out by it
/// without their closest points.
fn plane_gap(edge_edge: bool, p: [DVec3; 4]) -> f64 {
    let (n, d) = if edge_edge {
        let (da, db) = (p[1] - p[0], p[3] - p[2]);
        (da.cross(db), p[2] - p[0])
    } else {
        ((p[2] - p[1]).cross(p[3] - p[1]), p[0] - p[1])
    };
    let nn = n.length_squared();
    // Near-degenerate planes give no bound (the same threshold in both cases: a normal
    // shorter than 1e-9 of the feature's edges' product).
    let scale = if edge_edge {
        (p[1] - p[0]).length_squared() * (p[3] - p[2]).length_squared()
    } else {
        (p[2] - p[1]).length_squared() * (p[3] - p[1]).length_squared()
    };
    if nn <= 1e-18 * scale {
        return 0.0;
    }
    // Rounded down a hair so the bound never exceeds the closest points' distance.
    d.dot(n).abs() / nn.sqrt() * (1.0 - 1e-12)
}

/// Whether an edge-edge pair of two layers moving from `p0` to `p1` can act in a substep:
/// its closest points lie inside both edges at either end of the path and it may come within
/// `reach`, or the edges' paths cross. Elsewhere its closest points are a node's, which the
/// node's point-triangle pairs hold. The same answer as testing the three, cheapest first:
/// the distance at the end and the bound on its change over the path
/// ([`relative_motion`]) rule out most pairs of two layers lying near each other before the
/// start's closest points or the continuous check are computed.
pub(crate) fn edges_may_act(p0: [DVec3; 4], p1: [DVec3; 4], reach: f64) -> bool {
    let motion = 2.0 * relative_motion(p0, p1) + CCD_EPS;
    let far = reach + motion;
    if box_gap(true, p1) >= far || plane_gap(true, p1) >= far {
        return false;
    }
    let (_, d, _, inside) = features(true, p1);
    let d1 = d.length();
    if d1 >= far {
        // Neither within reach (admission's own test) nor able to cross.
        return false;
    }
    if inside || features(true, p0).3 {
        return true;
    }
    // Not inside at either end: only a crossing keeps it, and the distance cannot fall to the
    // check's tolerance when it ends farther than the motion allows.
    d1 <= motion && crossing_time(true, p0, p1, CCD_EPS).is_some()
}

/// Earliest time in `[0, 1]` at which the features of a pair moving linearly from `p0` to `p1`
/// come within `eps` of each other at a moment when their four points are coplanar (the
/// continuous collision test of Bridson et al.: a crossing happens only then), or `None`.
pub(crate) fn crossing_time(
    edge_edge: bool,
    p0: [DVec3; 4],
    p1: [DVec3; 4],
    eps: f64,
) -> Option<f64> {
    let reach = 2.0 * relative_motion(p0, p1) + eps;
    if box_gap(edge_edge, p0) > reach
        || plane_gap(edge_edge, p0) > reach
        || distance(edge_edge, p0) > reach
    {
        return None;
    }
    // f(t) = (q(t) - a(t)) . ((b(t) - a(t)) x (c(t) - a(t))): zero when coplanar. For a
    // point-triangle pair q is the point and a, b, c the triangle; for edges (a0 a1) and
    // (b0 b1), q = a1, a = a0, b = b0, c = b1.
    let (iq, ia, ib, ic) = if edge_edge {
        (1, 0, 2, 3)
    } else {
        (0, 1, 2, 3)
    };
    let d0 = p0[iq] - p0[ia];
    let e0 = p0[ib] - p0[ia];
    let g0 = p0[ic] - p0[ia];
    let dd = (p1[iq] - p1[ia]) - d0;
    let de = (p1[ib] - p1[ia]) - e0;
    let dg = (p1[ic] - p1[ia]) - g0;
    let c0 = d0.dot(e0.cross(g0));
    let c1 = dd.dot(e0.cross(g0)) + d0.dot(de.cross(g0) + e0.cross(dg));
    let c2 = dd.dot(de.cross(g0) + e0.cross(dg)) + d0.dot(de.cross(dg));
    let c3 = dd.dot(de.cross(dg));
    let f = |t: f64| ((c3 * t + c2) * t + c1) * t + c0;
    let at = |t: f64| -> [DVec3; 4] { std::array::from_fn(|k| p0[k].lerp(p1[k], t)) };
    let hit = |t: f64| distance(edge_edge, at(t)) <= eps;
    // Split [0, 1] at the derivative's roots into monotone pieces.
    let mut cuts = [0.0, 1.0, 1.0, 1.0];
    let mut n = 1;
    let (a, b, c) = (3.0 * c3, 2.0 * c2, c1);
    let scale = a.abs().max(b.abs()).max(c.abs());
    if scale > 0.0 {
        if a.abs() > 1e-12 * scale {
            let disc = b * b - 4.0 * a * c;
            if disc >= 0.0 {
                let sq = disc.sqrt();
                let q = -0.5 * (b + b.signum() * sq);
                let mut r = [q / a, if q != 0.0 { c / q } else { q / a }];
                if r[0] > r[1] {
                    r.swap(0, 1);
                }
                for t in r {
                    if t > cuts[n - 1] && t < 1.0 {
                        cuts[n] = t;
                        n += 1;
                    }
                }
            }
        } else if b.abs() > 0.0 {
            let t = -c / b;
            if t > 0.0 && t < 1.0 {
                cuts[n] = t;
                n += 1;
            }
        }
    }
    cuts[n] = 1.0;
    for k in 0..n {
        let (mut lo, mut hi) = (cuts[k], cuts[k + 1]);
        let (flo, fhi) = (f(lo), f(hi));
        if flo == 0.0 && hit(lo) {
            return Some(lo);
        }
        if flo * fhi > 0.0 {
            continue; // no coplanarity inside this monotone piece
        }
        let positive_lo = flo > 0.0;
        for _ in 0..50 {
            let mid = 0.5 * (lo + hi);
            if (f(mid) > 0.0) == positive_lo {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if hit(hi) || hit(lo) {
            return Some(lo);
        }
    }
    None
}

/// What a substep's self-collision reads from the cloth.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SelfFrame<'a> {
    /// The render mesh's triangles and edges.
    pub topology: &'a SelfTopology,
    /// [`SelfCollisionSettings::thickness`] when the cloth collides with itself (`None`: it
    /// does not).
    pub thickness: Option<f64>,
    /// The rest shape (pairs within the thickness there are left out).
    pub rest: &'a [DVec3],
    /// Which nodes the game holds.
    pub pinned: &'a [bool],
    /// Where each node is headed at the substep's end: the inertial prediction for free nodes,
    /// the target for pinned ones.
    pub targets: &'a [DVec3],
}

/// One feature pair of a substep with its force.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pair {
    /// The features (see [`RawPair`]): the key of its warm start.
    pub(crate) key: RawPair,
    /// Point-triangle: the point, then the triangle's three nodes. Edge-edge: the first edge's
    /// two nodes, then the second's.
    nodes: [u32; 4],
    edge_edge: bool,
    /// The side the pair began the substep on (see [`side_of`]).
    side: f64,
    /// The distance the pair keeps (the self-collision or the layers' thickness).
    thickness: f64,
    /// Coulomb friction coefficient (0: frictionless, as self-collision is).
    friction: f64,
    /// The four nodes' positions at the substep's start (for the slip).
    start: [DVec3; 4],
    /// Friction force (newtons, tangential, within `friction * force`).
    tangent: DVec3,
    /// At the current iterate: the features' relative tangential motion since the start.
    slip: DVec3,
    /// Force pushing the two sides apart (newtons, `>= 0`).
    pub(crate) force: f64,
    /// At the current iterate: gap (distance less the thickness), normal, weights.
    gap: f64,
    normal: DVec3,
    coef: [f64; 4],
    engaged: bool,
    /// Per node, the collective compliance measured while engaged (0: not measured).
    w: [f64; 4],
    prev_gap: f64,
    overshoot: f64,
    /// [`SelfContact::moved`] when the pair was last measured (NaN: never).
    measured_at: f64,
    /// Whether the features lay on their starting side when last measured.
    own_side: bool,
    /// The features' distance where they were admitted (their heading).
    admitted_at: f64,
}

impl Pair {
    /// Whether the pair is certainly still apart with the nodes moved `moved` in all
    /// ([`SelfContact::moved`]): neither pushing nor engaged, on the side it began on, and its
    /// gap when last measured more than twice how far any node moved since. There its signed
    /// distance is the distance between its features, which changes by at most twice that.
    /// (On the other side, beside the triangle, a small step into its prism turns the distance
    /// negative.)
    fn stays_apart(&self, moved: f64) -> bool {
        self.force == 0.0
            && !self.engaged
            && self.own_side
            && self.gap - 2.0 * (moved - self.measured_at) > 0.0
    }
}

/// A pair found by a broad phase before its narrow test: (edge-edge, first, second) with
/// `first` a node or an edge and `second` a triangle or an edge.
pub(crate) type RawPair = (bool, u32, u32);

/// Self-collision working memory of one substep (held by the contact pass; see the module
/// docs).
#[derive(Debug, Default)]
pub(crate) struct SelfContact {
    /// Whether this substep collides the cloth with itself.
    pub(crate) enabled: bool,
    pub(crate) pairs: Vec<Pair>,
    raw: Vec<RawPair>,
    /// The cloth's swept boxes for its pairs against itself.
    boxes: SweptBoxes,
    pub(crate) stack: Vec<(u32, u32)>,
    /// The forces of the pairs that pushed at the end of the last substep, sorted by their
    /// features: the next substep's warm start (the cloth's, swapped in by `load`).
    pub(crate) warm: Vec<(RawPair, f64)>,
    /// Largest collective compliance of the last measurement.
    w_max: f64,
    /// A bound on how far any node has moved since the substep's pairs were found, summed
    /// over the iterates given to [`SelfContact::moved_by`] (infinite: not tracked, every
    /// pair is measured every time).
    moved: f64,
    /// Pairs that pushed or were pushed apart, and nodes sent back, in the last pass.
    pub(crate) impacts: usize,
    /// The pairs' forces saved by [`SelfContact::save_forces`].
    saved: Vec<(f64, DVec3)>,
    /// The last pass's pairs with their nodes.
    resolved: Vec<(bool, [u32; 4])>,
    /// Feature pairs tested by the broad phases and the last pass's check since the counters
    /// were last gathered ([`crate::counters::StepCounters::self_pair_visits`]).
    pub(crate) visits: u64,
}

/// Swept boxes of a mesh's nodes, triangles and edges, and its hierarchy refitted to them.
///
/// The boxes may be taken in a frame that moves by `shift` over the sweep (a node's box spans
/// its start and its end less `shift`). Two points' distance at any moment of their linear
/// paths is the same in every such frame, so boxes of the same `shift` meet wherever the
/// features come near in the world; a shift near the features' common motion (two layers
/// carried by a running character) keeps the boxes as small as their motion against each
/// other.
#[derive(Debug, Default)]
pub(crate) struct SweptBoxes {
    nodes: Vec<Aabb>,
    triangles: Vec<Aabb>,
    edges: Vec<Aabb>,
    bvh: Vec<Aabb>,
    shift: DVec3,
}

/// Positions at a sweep's start and end.
pub(crate) type Sweep<'a> = (&'a [DVec3], &'a [DVec3]);

impl SweptBoxes {
    /// The boxes of `topo`'s features moving from `x.0` to `x.1`, grown by `grow.0` (a
    /// margin), in the frame moving by `grow.1` over the sweep (zero: the world's).
    pub(crate) fn fill(&mut self, topo: &SelfTopology, x: Sweep<'_>, grow: (f64, DVec3)) {
        self.fill_leaves(topo, x, grow);
        self.refit(topo);
    }

    /// The hierarchy refitted to the triangles' boxes (after [`SweptBoxes::fill_leaves`]).
    pub(crate) fn refit(&mut self, topo: &SelfTopology) {
        topo.refit(&self.triangles, &mut self.bvh);
    }

    /// [`SweptBoxes::fill`] without the hierarchy's refit: the nodes', edges' and triangles'
    /// boxes only (for pairs of triangles already listed). A feature's box is the union of
    /// its nodes' (the same box as grown from their positions: rounding keeps the order).
    pub(crate) fn fill_leaves(&mut self, topo: &SelfTopology, x: Sweep<'_>, grow: (f64, DVec3)) {
        self.fill_leaves_carried(topo, x, grow, &[]);
    }

    /// [`SweptBoxes::fill_leaves`] with each node's box grown by `carried[i]` more (how far a
    /// body may carry it beyond its path; empty: none).
    pub(crate) fn fill_leaves_carried(
        &mut self,
        topo: &SelfTopology,
        (x0, x1): Sweep<'_>,
        (margin, shift): (f64, DVec3),
        carried: &[f64],
    ) {
        self.shift = shift;
        self.nodes.clear();
        self.nodes
            .extend(x0.iter().zip(x1).enumerate().map(|(i, (&a, &b))| {
                Aabb::spanning(a, b - shift)
                    .inflate(margin + carried.get(i).copied().unwrap_or(0.0))
            }));
        let n = &self.nodes;
        self.edges.clear();
        self.edges.extend(
            topo.edges
                .iter()
                .map(|e| n[e[0] as usize].union(n[e[1] as usize])),
        );
        self.triangles.clear();
        self.triangles.extend(topo.triangles.iter().map(|t| {
            n[t[0] as usize]
                .union(n[t[1] as usize])
                .union(n[t[2] as usize])
        }));
    }

    /// Whether triangle `t`'s box meets triangle `u`'s of `other`.
    pub(crate) fn triangles_meet(&self, t: u32, other: &SweptBoxes, u: u32) -> bool {
        self.triangles[t as usize].overlaps(&other.triangles[u as usize])
    }

    /// Whether every node of `x` (an end of the sweep, less the boxes' shift) lies inside its
    /// box (shrunk by the continuous check's tolerance): then every pair of features whose
    /// paths' boxes of the same shift meet was found with them.
    pub(crate) fn hold(&self, x: &[DVec3]) -> bool {
        self.nodes.len() == x.len()
            && self
                .nodes
                .iter()
                .zip(x)
                .all(|(b, p)| b.inflate(-CCD_EPS).contains(*p - self.shift))
    }
}

/// The mean of the nodes' motions from `x0` to `x1` (zero for no nodes): the shift that
/// keeps their swept boxes small when they move together (see [`SweptBoxes`]).
pub(crate) fn mean_motion(x0: &[DVec3], x1: &[DVec3]) -> DVec3 {
    let sum: DVec3 = x1.iter().zip(x0).map(|(b, a)| *b - *a).sum();
    sum / x0.len().max(1) as f64
}

/// How far beyond its predicted path a node may wander during the iterations and still meet
/// its pairs, as a multiple of the thickness.
pub(crate) const SLACK_THICKNESSES: f64 = 1.0;

/// The most a push apart (the last pass's, and a layer group's headings') moves a node of a
/// pair, in multiples of the pair's gap ([`SelfContact::push_apart_held`]). With the nodes
/// free and of equal mass the exact projection moves none farther than three gaps (a triangle's corner by its weight over the
/// weights' squares, at most one over the largest weight, which is at least a third; an edge's
/// end by less than the gap); five leaves room for nodes of unequal mass. With the others
/// held, one corner of small weight left free moved by the gap over its weight: three
/// curtains pressed by a limb at 6 m/s had headings pushed 2.5 km. Over 108 held-out cells of
/// three curtains (docs/lab/2026-11-29-layers-driven.md), unbounded / five / three: cells with
/// nodes left inside the limb 13 / 3 / 4, past 10 % strain 15 / 11 / 5; three fails this
/// crate's three-curtain test at 10 m/s (a curtain at 2.1x its strain alone).
pub(crate) const PUSH_MOST: f64 = 5.0;

/// Working memory of a push apart whose sweeps move each node by the mean of its pushes
/// ([`SelfContact::push_apart_held`]): per node, the sum of a sweep's pushes and their count.
#[derive(Debug, Default)]
pub(crate) struct PushSums {
    sum: Vec<DVec3>,
    count: Vec<u32>,
}

/// Distance at which the last pass's continuous check calls two features touching (metres).
pub(crate) const CCD_EPS: f64 = 1e-7;

/// Most rounds of the last pass's check before every node of a crossing pair's neighbourhood
/// goes back (each round sends back at least one node).
pub(crate) const MAX_ROUNDS: usize = 64;

/// A crossing found before this fraction of the substep sends its nodes back to their start
/// (later ones, to half its time).
pub(crate) const REWIND_MIN: f64 = 0.1;

impl SelfContact {
    fn nodes_of(&self, topo: &SelfTopology, raw: RawPair) -> [u32; 4] {
        let (ee, a, b) = raw;
        if ee {
            let (e, f) = (topo.edges[a as usize], topo.edges[b as usize]);
            [e[0], e[1], f[0], f[1]]
        } else {
            let t = topo.triangles[b as usize];
            [a, t[0], t[1], t[2]]
        }
    }

    /// Swept boxes of nodes, triangles and edges between `x0` and `x1`, grown by `margin`, the
    /// hierarchy refitted to them, and every pair of features whose boxes meet and that share
    /// no node into `raw`, each once (see [`SelfTopology`]).
    fn broad_phase(&mut self, topo: &SelfTopology, x0: &[DVec3], x1: &[DVec3], margin: f64) {
        // In the frame of the cloth's mean motion (see `SweptBoxes`): a cloth carried by a
        // running character moves centimetres a substep, its folds millimetres against
        // each other.
        self.broad_phase_in(topo, (x0, x1), (margin, mean_motion(x0, x1)));
    }

    /// [`SelfContact::broad_phase`] in the frame moving by `shift` over the sweep.
    fn broad_phase_in(&mut self, topo: &SelfTopology, x: Sweep<'_>, (margin, shift): (f64, DVec3)) {
        self.boxes.fill(topo, x, (margin, shift));
        self.raw.clear();
        let (mut stack, boxes) = (
            std::mem::take(&mut self.stack),
            std::mem::take(&mut self.boxes),
        );
        topo.overlapping_triangles(&boxes.bvh, &mut stack, |t, u| {
            Self::triangle_pair(&mut self.raw, &boxes, topo, t, u)
        });
        (self.stack, self.boxes) = (stack, boxes);
    }

    /// The feature pairs of two triangles whose boxes meet: each node either owns against the
    /// other triangle, each edge either owns against each edge the other owns (features that
    /// share a node left out), where their own boxes meet.
    fn triangle_pair(
        raw: &mut Vec<RawPair>,
        boxes: &SweptBoxes,
        topo: &SelfTopology,
        t: u32,
        u: u32,
    ) {
        for (a, b) in [(t, u), (u, t)] {
            let tri = topo.triangles[b as usize];
            for &v in &topo.own_nodes[a as usize] {
                if v != NONE
                    && !tri.contains(&v)
                    && boxes.nodes[v as usize].overlaps(&boxes.triangles[b as usize])
                {
                    raw.push((false, v, b));
                }
            }
        }
        for &e in &topo.own_edges[t as usize] {
            if e == NONE {
                continue;
            }
            let ea = topo.edges[e as usize];
            for &f in &topo.own_edges[u as usize] {
                if f == NONE {
                    continue;
                }
                let fb = topo.edges[f as usize];
                if ea.contains(&fb[0]) || ea.contains(&fb[1]) {
                    continue;
                }
                if boxes.edges[e as usize].overlaps(&boxes.edges[f as usize]) {
                    raw.push((true, e.min(f), e.max(f)));
                }
            }
        }
    }

    /// No self-collision this substep.
    pub(crate) fn reset(&mut self) {
        self.enabled = false;
        self.moved = f64::INFINITY;
        self.warm.clear();
        self.pairs.clear();
        self.impacts = 0;
    }

    /// Broad phase for a substep: the pairs of features that may come within the thickness
    /// while the nodes move from `x_start` toward `frame.targets`, or whose paths cross, each
    /// with the side it begins on: the cloth's against itself (with a thickness).
    pub(crate) fn prepare(&mut self, frame: &SelfFrame<'_>, x_start: &[DVec3]) {
        let SelfFrame {
            topology: topo,
            thickness,
            rest,
            pinned,
            targets: x_pred,
        } = *frame;
        self.enabled = thickness.is_some();
        self.moved = f64::INFINITY;
        self.pairs.clear();
        self.impacts = 0;
        self.w_max = 0.0;
        if let Some(thickness) = thickness {
            let reach = thickness * (1.0 + SLACK_THICKNESSES);
            self.broad_phase(topo, x_start, x_pred, 0.5 * reach);
            let raw = std::mem::take(&mut self.raw);
            self.visits += raw.len() as u64;
            for &r in &raw {
                let nodes = self.nodes_of(topo, r);
                if nodes.iter().all(|&k| pinned[k as usize]) {
                    continue;
                }
                let at = |x: &[DVec3]| -> [DVec3; 4] { at4(x, nodes) };
                if self.admit(r, nodes, at(x_start), at(x_pred), thickness, 0.0)
                    && distance(r.0, at(rest)) < thickness
                {
                    self.pairs.pop(); // within the thickness in the rest shape
                }
            }
            self.raw = raw;
        }
    }

    /// Keeps the pair `r` (nodes `nodes`, moving from `p0` to `p1`) for the substep when its
    /// features may come within `thickness` (with the iterations' slack) or their paths cross;
    /// it starts from its last force (the warm start). Returns whether it was kept.
    pub(crate) fn admit(
        &mut self,
        r: RawPair,
        nodes: [u32; 4],
        p0: [DVec3; 4],
        p1: [DVec3; 4],
        thickness: f64,
        friction: f64,
    ) -> bool {
        self.admit_carried(r, nodes, (p0, p1), thickness, friction, 0.0)
    }

    /// [`SelfContact::admit`] for features a body may carry `carried` metres beyond their
    /// predicted path this substep (a limb pressing one layer onto another): kept where they
    /// may come within the reach plus that.
    pub(crate) fn admit_carried(
        &mut self,
        r: RawPair,
        nodes: [u32; 4],
        (p0, p1): ([DVec3; 4], [DVec3; 4]),
        thickness: f64,
        friction: f64,
        carried: f64,
    ) -> bool {
        let ee = r.0;
        let reach = thickness * (1.0 + SLACK_THICKNESSES) + carried;
        // Over the path the distance stays within twice the relative motion of its end.
        let motion = 2.0 * relative_motion(p0, p1) + CCD_EPS;
        let far = reach + motion;
        if box_gap(ee, p1) >= far || plane_gap(ee, p1) >= far {
            return false;
        }
        let d1 = distance(ee, p1);
        if d1 >= far {
            return false;
        }
        let near = d1 < reach || distance(ee, p0) < reach;
        // Not near: only a crossing keeps it, which needs the distance to fall to the check's
        // tolerance along the path.
        if !near && (d1 > motion || crossing_time(ee, p0, p1, CCD_EPS).is_none()) {
            return false;
        }
        let force = match self.warm.binary_search_by(|w| w.0.cmp(&r)) {
            Ok(k) => self.warm[k].1,
            _ => 0.0,
        };
        self.pairs.push(Pair {
            key: r,
            nodes,
            edge_edge: ee,
            side: side_of(ee, p0),
            thickness,
            friction,
            start: p0,
            tangent: DVec3::ZERO,
            slip: DVec3::ZERO,
            force,
            gap: f64::INFINITY,
            normal: DVec3::ZERO,
            coef: [0.0; 4],
            engaged: false,
            w: [0.0; 4],
            prev_gap: f64::NAN,
            overshoot: 0.0,
            measured_at: f64::NAN,
            own_side: false,
            admitted_at: d1,
        });
        true
    }

    /// Whether the substep has pairs to iterate on.
    pub(crate) fn active(&self) -> bool {
        !self.pairs.is_empty()
    }

    /// Gaps at the iterate `x`; returns how many pairs are engaged (pushing or closer than the
    /// thickness).
    pub(crate) fn measure(&mut self, x: &[DVec3]) -> usize {
        let mut engaged = 0;
        for p in &mut self.pairs {
            // Not measured while it certainly stays apart (`Pair::stays_apart`).
            if p.stays_apart(self.moved) {
                continue;
            }
            p.measured_at = self.moved;
            let pos = at4(x, p.nodes);
            let (dist, n, coef, own_side) = sided_geometry(p.edge_edge, p.side, pos);
            p.own_side = own_side;
            p.gap = dist - p.thickness;
            p.normal = n;
            p.coef = coef;
            if p.friction > 0.0 {
                let rel: DVec3 = (0..4).map(|k| coef[k] * (pos[k] - p.start[k])).sum();
                p.slip = rel - rel.dot(n) * n;
            }
            p.engaged = p.force > 0.0 || p.gap < 0.0;
            engaged += p.engaged as usize;
        }
        engaged
    }

    /// Adds `d`, a bound on how far any node moved to the iterate [`SelfContact::measure`] is
    /// next given, to [`SelfContact::moved`].
    pub(crate) fn moved_by(&mut self, d: f64) {
        self.moved += d;
    }

    /// Marks the nodes of engaged pairs in the right-hand side of the collective compliance's
    /// solve (see `ContactPass::response_rhs`).
    pub(crate) fn response_rhs(&self, rhs: &mut [DVec3]) {
        for p in self.pairs.iter().filter(|p| p.engaged) {
            for &k in &p.nodes {
                if let Some(r) = rhs.get_mut(k as usize) {
                    *r = DVec3::X;
                }
            }
        }
    }

    /// Takes the collective compliance `u` (node order, first lane) for the engaged pairs'
    /// nodes: each node's compliance is the larger of `u_i` and its own `(K^-1)_ii`.
    pub(crate) fn set_response(&mut self, u: &[DVec3], compliance: &[f64]) {
        self.w_max = 0.0;
        for p in &mut self.pairs {
            for k in 0..4 {
                let i = p.nodes[k] as usize;
                p.w[k] = if p.engaged && i < compliance.len() {
                    compliance[i].max(u[i].x)
                } else {
                    0.0 // not engaged
                };
                self.w_max = self.w_max.max(p.w[k]);
            }
        }
    }

    /// Corrects each engaged pair's force from its gap: `lambda <- max(0, lambda - gap / W)`
    /// with `W = sum_k |c_k| w_k` over its four nodes (weights `c_k`, compliances `w_k`: the
    /// measured collective one, or the largest measured for a pair that joined since), doubled
    /// each time a correction carries the pair across its gap, as body contact does. Adds
    /// the forces, split over the nodes, to `node_force`.
    pub(crate) fn update(&mut self, compliance: &[f64], w_body: f64, node_force: &mut [DVec3]) {
        let w_max = self.w_max.max(w_body);
        for p in &mut self.pairs {
            if p.engaged {
                let mut w = 0.0;
                for k in 0..4 {
                    let i = p.nodes[k] as usize;
                    let wk = if p.w[k] > 0.0 {
                        p.w[k]
                    } else if compliance.get(i).is_some_and(|&c| c > 0.0) {
                        compliance[i].max(w_max)
                    } else {
                        0.0 // pinned
                    };
                    w += p.coef[k].abs() * wk;
                }
                if p.prev_gap * p.gap < 0.0 && p.force > 0.0 {
                    p.overshoot = 2.0 * w.max(p.overshoot);
                }
                p.prev_gap = p.gap;
                let w = w.max(p.overshoot);
                if w > 0.0 {
                    p.force = (p.force - p.gap / w).max(0.0);
                    if p.friction > 0.0 {
                        // Coulomb friction as body contact has it: the tangential force
                        // corrected by what would cancel the slip, kept inside the cone.
                        let t = p.tangent - p.tangent.dot(p.normal) * p.normal;
                        let t = t - p.slip / w;
                        let limit = p.friction * p.force;
                        let len = t.length();
                        p.tangent = if len > limit { t * (limit / len) } else { t };
                    }
                }
            }
            if p.force > 0.0 {
                let push = p.force * p.normal + p.tangent;
                for k in 0..4 {
                    if let Some(f) = node_force.get_mut(p.nodes[k] as usize) {
                        *f += p.coef[k] * push;
                    }
                }
            }
        }
    }

    /// Saves the pairs' forces (see `ContactPass::save_forces`).
    pub(crate) fn save_forces(&mut self) {
        self.saved.clear();
        self.saved
            .extend(self.pairs.iter().map(|p| (p.force, p.tangent)));
    }

    /// Puts back the pairs' forces of the last [`SelfContact::save_forces`].
    pub(crate) fn restore_forces(&mut self) {
        for (p, &(f, t)) in self.pairs.iter_mut().zip(&self.saved) {
            p.force = f;
            p.tangent = t;
        }
    }

    /// The nodes below `own` of the substep's pairs, up to four a pair (repeats included).
    pub(crate) fn nodes(&self, own: usize) -> impl Iterator<Item = u32> + '_ {
        self.pairs
            .iter()
            .flat_map(|p| p.nodes)
            .filter(move |&k| (k as usize) < own)
    }

    /// Zeroes `node_force` at every node of the substep's pairs (before the sums are formed
    /// again).
    pub(crate) fn clear_forces(&self, node_force: &mut [DVec3]) {
        for p in &self.pairs {
            for &k in &p.nodes {
                if let Some(f) = node_force.get_mut(k as usize) {
                    *f = DVec3::ZERO;
                }
            }
        }
    }

    /// Two Gauss-Seidel sweeps pushing apart the pairs closer than the thickness at `x`,
    /// weighted by inverse mass (pinned nodes fixed); returns how many pushes were made. On the
    /// inertial prediction before the iterations, it is an inelastic impulse on the approaching
    /// sides, which the iterations then spread over the cloth (Bridson et al.'s repulsion on
    /// the velocities); in the last pass, a position correction.
    pub(crate) fn push_apart(&self, masses: &[f64], pinned: &[bool], x: &mut [DVec3]) -> usize {
        self.push_apart_held(masses, pinned, &mut [], 2, x, None)
    }

    /// [`SelfContact::push_apart`] in `sweeps` Gauss-Seidel sweeps, with nodes held by bodies:
    /// `held[i]`, where not zero, is the outward normal of the body node `i` lies on, and a
    /// push that would move the node into that body (against the normal) leaves it where it
    /// is, its partners taking the whole correction (the body's constraint and the pair's in
    /// one projection: a layer pressed by a body onto another moves the other, never itself
    /// into the body). A node a held node pushes is held in turn along its push (the layer
    /// after it rests on it), so a stack of layers on a body is pushed outward layer by
    /// layer. An empty `held` holds nothing. No push moves a node more than [`PUSH_MOST`]
    /// times its pair's gap.
    ///
    /// With `jacobi` (working memory), each sweep's pushes are summed per node and each node
    /// moves by their mean at the sweep's end, instead of one pair after another: a layer
    /// group's headings pushed apart where a middle layer's nodes sit in pairs pushing them
    /// both ways ([`crate::layers`]).
    pub(crate) fn push_apart_held(
        &self,
        masses: &[f64],
        pinned: &[bool],
        held: &mut [DVec3],
        sweeps: usize,
        x: &mut [DVec3],
        mut jacobi: Option<&mut PushSums>,
    ) -> usize {
        let own = x.len();
        if let Some(j) = jacobi.as_deref_mut() {
            j.sum.resize(own, DVec3::ZERO);
            j.count.resize(own, 0);
        }
        let inv_mass = |i: usize| {
            if i >= own || pinned[i] {
                0.0 // pinned
            } else {
                1.0 / masses[i]
            }
        };
        // Node `i`'s inverse mass for a push along `dir`: none when a body holds it there.
        let inv_mass_along = |held: &[DVec3], i: usize, dir: DVec3| {
            if held.get(i).is_some_and(|h| h.dot(dir) < 0.0) {
                0.0
            } else {
                inv_mass(i)
            }
        };
        let mut pushes = 0;
        // As in `measure` (`Pair::stays_apart`), the pushes here counted in how far the nodes
        // moved.
        let mut moved = self.moved;
        for _ in 0..sweeps {
            if let Some(j) = jacobi.as_deref_mut() {
                j.sum.fill(DVec3::ZERO);
                j.count.fill(0);
            }
            for p in &self.pairs {
                if p.stays_apart(moved) {
                    continue;
                }
                let pos = at4(x, p.nodes);
                let (dist, n, coef) = signed_geometry(p.edge_edge, p.side, pos);
                let gap = dist - p.thickness;
                if gap >= 0.0 {
                    continue;
                }
                let w = |held: &[DVec3], c: f64, i: u32| inv_mass_along(held, i as usize, c * n);
                let mut blocked = false;
                let mut denom = 0.0;
                for (&c, &i) in coef.iter().zip(&p.nodes) {
                    let wi = w(held, c, i);
                    blocked |= wi == 0.0 && c != 0.0 && inv_mass(i as usize) > 0.0;
                    denom += c * c * wi;
                }
                if denom <= 0.0 {
                    continue;
                }
                // At most `PUSH_MOST` times the gap a node: where every node that could close
                // the gap at a fair share is held, pinned or blocked, the one left free may
                // weigh almost nothing in the pair (a triangle's corner far from the point),
                // and the exact projection would move it by the gap over its weight.
                let largest = coef
                    .iter()
                    .zip(&p.nodes)
                    .map(|(&c, &i)| (c * w(held, c, i)).abs())
                    .fold(0.0, f64::max);
                let mut dl = -gap / denom;
                if largest * dl > -PUSH_MOST * gap {
                    dl = -PUSH_MOST * gap / largest;
                }
                let mut most = 0.0f64;
                for (&c, &i) in coef.iter().zip(&p.nodes) {
                    if (i as usize) < own {
                        let step = c * w(held, c, i) * dl * n;
                        match jacobi.as_deref_mut() {
                            Some(j) => {
                                j.sum[i as usize] += step;
                                j.count[i as usize] += 1;
                            }
                            None => x[i as usize] += step,
                        }
                        most = most.max(step.length());
                        // Pushed off a held node: held in turn.
                        if blocked
                            && step != DVec3::ZERO
                            && let Some(h) = held.get_mut(i as usize)
                            && *h == DVec3::ZERO
                        {
                            *h = step.normalize();
                        }
                    }
                }
                moved += most;
                pushes += 1;
            }
            if let Some(j) = jacobi.as_deref() {
                for ((x, &d), &c) in x.iter_mut().zip(&j.sum).zip(&j.count) {
                    if c > 0 {
                        *x += d / f64::from(c);
                    }
                }
            }
        }
        pushes
    }

    /// The last pass (see the module docs): pairs still within the thickness pushed apart
    /// (two Gauss-Seidel sweeps, weighted by inverse mass, pinned nodes fixed), then the
    /// continuous check over the nodes' actual paths from `x_start` to `x`, sending the free
    /// nodes of crossing pairs back to their start until nothing crosses. Counts in `impacts`
    /// the pairs pushed and the nodes sent back; returns how many it moved (pushes of pairs
    /// and nodes sent back), 0 when it left `x` as it was.
    pub(crate) fn finish(
        &mut self,
        topo: &SelfTopology,
        masses: &[f64],
        pinned: &[bool],
        x_start: &[DVec3],
        x: &mut [DVec3],
    ) -> usize {
        let pushed = self.finish_pairs(masses, pinned, x);
        if self.enabled {
            pushed + self.rewind_self(topo, pinned, x_start, x)
        } else {
            pushed
        }
    }

    /// A layer group's substep begins (`crate::layers`): no pairs yet, none against itself.
    pub(crate) fn begin_group_substep(&mut self) {
        self.enabled = false;
        self.moved = 0.0;
        self.pairs.clear();
        self.impacts = 0;
        self.w_max = 0.0;
    }

    /// The last pass before the continuous check (the cloth's own, or a layer group's): the
    /// pushing pairs' forces kept for the next substep, then the pairs closer than the
    /// thickness pushed apart (both sides), counted in `impacts`.
    pub(crate) fn finish_pairs(
        &mut self,
        masses: &[f64],
        pinned: &[bool],
        x: &mut [DVec3],
    ) -> usize {
        self.finish_pairs_held(masses, pinned, &mut [], 2, x)
    }

    /// [`SelfContact::finish_pairs`] with nodes held by bodies (see
    /// [`SelfContact::push_apart_held`]). Returns the pushes it made.
    pub(crate) fn finish_pairs_held(
        &mut self,
        masses: &[f64],
        pinned: &[bool],
        held: &mut [DVec3],
        sweeps: usize,
        x: &mut [DVec3],
    ) -> usize {
        self.warm.clear();
        self.warm.extend(
            self.pairs
                .iter()
                .filter(|p| p.force > 0.0)
                .map(|p| (p.key, p.force)),
        );
        self.warm.sort_unstable_by_key(|w| w.0);
        self.impacts = self.pairs.iter().filter(|p| p.force > 0.0).count();
        let pushes = self.push_apart_held(masses, pinned, held, sweeps, x, None);
        self.impacts += pushes;
        pushes
    }

    /// Keeps at most `max` pairs: those pushing already (a warm start), then the nearest
    /// where they were admitted. Returns how many were dropped.
    pub(crate) fn keep_nearest(&mut self, max: usize) -> usize {
        let n = self.pairs.len();
        if n <= max {
            return 0;
        }
        let rank = |p: &Pair| if p.force > 0.0 { -1.0 } else { p.admitted_at };
        if max > 0 {
            self.pairs
                .select_nth_unstable_by(max - 1, |a, b| rank(a).total_cmp(&rank(b)));
        }
        self.pairs.truncate(max);
        n - max
    }

    /// Keeps room for twice as many pairs as this substep has (and their warm starts), so
    /// that a layer group whose pair count jitters around its most does not allocate frame
    /// after frame.
    pub(crate) fn keep_headroom(&mut self) {
        let n = self.pairs.len();
        if 2 * n > self.pairs.capacity() {
            self.pairs.reserve(2 * n - self.pairs.len());
        }
        if 2 * n > self.warm.capacity() {
            self.warm.reserve(2 * n - self.warm.len());
        }
    }

    /// The nodes of the pairs pushing at the last update (repeats included).
    pub(crate) fn pushing_nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.pairs
            .iter()
            .filter(|p| p.force > 0.0)
            .flat_map(|p| p.nodes)
    }

    /// The continuous check of the cloth against itself (see [`SelfContact::finish`]).
    fn rewind_self(
        &mut self,
        topo: &SelfTopology,
        pinned: &[bool],
        x_start: &[DVec3],
        x: &mut [DVec3],
    ) -> usize {
        // The continuous check over the actual paths. The broad phase of `prepare` serves when
        // every node's path stayed inside the box it was given there (then every pair of
        // features whose paths' boxes meet is among its pairs); else it runs again.
        if !self.boxes.hold(x) {
            self.broad_phase(topo, x_start, x, CCD_EPS);
        }
        let mut resolved = std::mem::take(&mut self.resolved);
        let mut sent = 0;
        for world in [false, true] {
            if world {
                // A pin's path crossed a pair at home: the check again in the world's frame.
                self.broad_phase_in(topo, (x_start, x), (CCD_EPS, DVec3::ZERO));
            }
            resolved.clear();
            resolved.extend(self.raw.iter().map(|&r| (r.0, self.nodes_of(topo, r))));
            self.visits += resolved.len() as u64;
            let rewind = rewind_crossings(&resolved, (x_start, self.boxes.shift), x, pinned);
            self.impacts += rewind.sent;
            sent += rewind.sent;
            if !rewind.stuck {
                break;
            }
        }
        self.resolved = resolved;
        sent
    }
}

/// Whether segment `(p, q)` crosses triangle `(a, b, c)` (touching counts).
fn segment_crosses_triangle(p: DVec3, q: DVec3, a: DVec3, b: DVec3, c: DVec3) -> bool {
    let orient = |a: DVec3, b: DVec3, c: DVec3, d: DVec3| (b - a).cross(c - a).dot(d - a);
    let sp = orient(a, b, c, p);
    let sq = orient(a, b, c, q);
    if (sp > 0.0 && sq > 0.0) || (sp < 0.0 && sq < 0.0) || (sp == 0.0 && sq == 0.0) {
        return false;
    }
    let s1 = orient(p, q, a, b);
    let s2 = orient(p, q, b, c);
    let s3 = orient(p, q, c, a);
    (s1 >= 0.0 && s2 >= 0.0 && s3 >= 0.0) || (s1 <= 0.0 && s2 <= 0.0 && s3 <= 0.0)
}

/// Whether two triangles intersect: an edge of one crosses the other (the test for triangles
/// that are not coplanar; coplanar ones count as not crossing).
pub fn triangles_intersect(t: [DVec3; 3], u: [DVec3; 3]) -> bool {
    (0..3).any(|k| segment_crosses_triangle(t[k], t[(k + 1) % 3], u[0], u[1], u[2]))
        || (0..3).any(|k| segment_crosses_triangle(u[k], u[(k + 1) % 3], t[0], t[1], t[2]))
}

/// How many pairs of `triangles` that share no node intersect at `positions`: the
/// `self_intersections` figure (0 for a cloth that never passes through itself). The same
/// bounding volume hierarchy as the solver's, built on `positions`, finds the pairs to test;
/// each is tested exactly in `f64` by [`triangles_intersect`]. Allocates; a measure, not part
/// of the frame loop.
pub fn self_intersections(triangles: &[[u32; 3]], positions: &[DVec3]) -> usize {
    let topo = SelfTopology::new(triangles, positions);
    let boxes: Vec<Aabb> = triangles
        .iter()
        .map(|t| {
            let mut b = Aabb::EMPTY;
            for &k in t {
                b.grow(positions[k as usize]);
            }
            b
        })
        .collect();
    let mut bvh_boxes = Vec::new();
    topo.refit(&boxes, &mut bvh_boxes);
    let mut crossed = 0;
    topo.overlapping_triangles(&bvh_boxes, &mut Vec::new(), |i, j| {
        let (t, u) = (triangles[i as usize], triangles[j as usize]);
        if !t.iter().any(|k| u.contains(k))
            && triangles_intersect(
                t.map(|k| positions[k as usize]),
                u.map(|k| positions[k as usize]),
            )
        {
            crossed += 1;
        }
    });
    crossed
}

/// Calls `f` with the corners of every triangle of mesh `a` and of mesh `b` (triangles and
/// positions) whose boxes, grown by `within`, meet, found by the two meshes' hierarchies.
/// Allocates; for measures.
pub(crate) fn for_near_triangles(
    a: (&[[u32; 3]], &[DVec3]),
    b: (&[[u32; 3]], &[DVec3]),
    within: f64,
    mut f: impl FnMut([DVec3; 3], [DVec3; 3]),
) {
    let topo = |m: (&[[u32; 3]], &[DVec3])| {
        let t = SelfTopology::new(m.0, m.1);
        let boxes: Vec<Aabb> =
            m.0.iter()
                .map(|tri| {
                    let mut bx = Aabb::EMPTY;
                    for &k in tri {
                        bx.grow(m.1[k as usize]);
                    }
                    bx.inflate(0.5 * within)
                })
                .collect();
        let mut bvh = Vec::new();
        t.refit(&boxes, &mut bvh);
        (t, bvh)
    };
    let ((ta, ba), (tb, bb)) = (topo(a), topo(b));
    ta.overlapping_between(&ba, &tb, &bb, &mut Vec::new(), |t, u| {
        f(
            a.0[t as usize].map(|k| a.1[k as usize]),
            b.0[u as usize].map(|k| b.1[k as usize]),
        )
    });
}

/// The distance between two triangles that do not intersect: the least of their corners'
/// distances to the other triangle and their edges' distances to each other.
pub(crate) fn triangle_distance(t: [DVec3; 3], u: [DVec3; 3]) -> f64 {
    let mut least = f64::INFINITY;
    for (p, q) in [(t, u), (u, t)] {
        for &c in &p {
            least = least.min(distance(false, [c, q[0], q[1], q[2]]));
        }
    }
    for i in 0..3 {
        for j in 0..3 {
            let e = [t[i], t[(i + 1) % 3], u[j], u[(j + 1) % 3]];
            least = least.min(distance(true, e));
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two triangles, one piercing the other through its middle, intersect; moved 1 mm apart
    /// along the piercing axis past its tip, they do not; sharing a node is not counted.
    #[test]
    fn crossing_triangles_are_counted_and_separated_ones_are_not() {
        let flat = [
            DVec3::new(-1.0, 0.0, -1.0),
            DVec3::new(1.0, 0.0, -1.0),
            DVec3::new(0.0, 0.0, 1.0),
        ];
        let piercing = [
            DVec3::new(0.0, -0.5, 0.0),
            DVec3::new(0.1, 0.5, 0.0),
            DVec3::new(-0.1, 0.5, 0.0),
        ];
        assert!(triangles_intersect(flat, piercing));
        let above = piercing.map(|p| p + DVec3::new(0.0, 0.501, 0.0));
        assert!(!triangles_intersect(flat, above));
        let mut x = flat.to_vec();
        x.extend_from_slice(&piercing);
        assert_eq!(self_intersections(&[[0, 1, 2], [3, 4, 5]], &x), 1);
        assert_eq!(self_intersections(&[[0, 1, 2], [0, 4, 5]], &x), 0);
    }

    /// A point falling through the middle of a still triangle is caught at the time it reaches
    /// the plane (1e-9 relative); one passing 1 cm beside its edge is not.
    #[test]
    fn a_point_through_a_triangle_is_found_at_the_plane() {
        let tri = [
            DVec3::new(-1.0, 0.0, -1.0),
            DVec3::new(1.0, 0.0, -1.0),
            DVec3::new(0.0, 0.0, 1.0),
        ];
        let p0 = [DVec3::new(0.0, 0.3, 0.0), tri[0], tri[1], tri[2]];
        let p1 = [DVec3::new(0.0, -0.1, 0.0), tri[0], tri[1], tri[2]];
        let t = crossing_time(false, p0, p1, CCD_EPS).expect("a crossing");
        assert!((t - 0.75).abs() < 1e-9, "{t}");
        let beside = |y: f64| [DVec3::new(0.0, y, -1.01), tri[0], tri[1], tri[2]];
        assert!(crossing_time(false, beside(0.3), beside(-0.1), CCD_EPS).is_none());
    }

    /// Two edges sweeping through each other (one rising through the other, crossed at right
    /// angles) are caught; the same motion shifted 1 cm along the lower edge's end is not.
    #[test]
    fn edges_sweeping_through_each_other_are_found() {
        let lower = [DVec3::new(-1.0, 0.0, 0.0), DVec3::new(1.0, 0.0, 0.0)];
        let edge = |y: f64, x: f64| [DVec3::new(x, y, -1.0), DVec3::new(x, y, 1.0)];
        let (a0, a1) = (edge(-0.2, 0.3), edge(0.2, 0.3));
        let p0 = [a0[0], a0[1], lower[0], lower[1]];
        let p1 = [a1[0], a1[1], lower[0], lower[1]];
        let t = crossing_time(true, p0, p1, CCD_EPS).expect("a crossing");
        assert!((t - 0.5).abs() < 1e-9, "{t}");
        let (b0, b1) = (edge(-0.2, 1.01), edge(0.2, 1.01));
        let q0 = [b0[0], b0[1], lower[0], lower[1]];
        let q1 = [b1[0], b1[1], lower[0], lower[1]];
        assert!(crossing_time(true, q0, q1, CCD_EPS).is_none());
    }

    /// A node carried with a triangle by a common motion of 5 cm (the frame's shift) that
    /// passes through it on the way is sent back toward its start carried by the shift: its
    /// path in the moving frame stays inside the box it had there (so the pair list that found
    /// it still covers it) and nothing crosses after. With a fixed node of the triangle left
    /// where the pins put it (its path crosses the node at home), the check reports itself
    /// stuck, and in the world's frame (shift zero) the node goes back on its side uncrossed.
    #[test]
    fn a_node_sent_back_is_carried_by_the_frame_its_pair_was_found_in() {
        let shift = DVec3::new(0.0, 0.0, -0.05);
        let tri = [
            DVec3::new(-0.1, -0.1, 0.0),
            DVec3::new(0.1, -0.1, 0.0),
            DVec3::new(0.0, 0.1, 0.0),
        ];
        let x0 = vec![DVec3::new(0.0, 0.0, 0.01), tri[0], tri[1], tri[2]];
        let mut x: Vec<DVec3> = x0.iter().map(|p| *p + shift).collect();
        x[0].z -= 0.02; // through the triangle, relative to it
        let pairs = [(false, [0, 1, 2, 3])];
        let crosses = |x: &[DVec3]| {
            crossing_time(false, at4(&x0, [0, 1, 2, 3]), at4(x, [0, 1, 2, 3]), CCD_EPS).is_some()
        };
        assert!(crosses(&x));
        let mut boxes = SweptBoxes::default();
        let topo = SelfTopology::new(&[[1, 2, 3]], &x0);
        boxes.fill(&topo, (&x0, &x), (CCD_EPS, shift));
        let free = [false; 4];
        let r = rewind_crossings(&pairs, (&x0, shift), &mut x, &free);
        assert!(r.sent > 0 && !r.stuck);
        assert!(!crosses(&x));
        assert!(
            boxes.nodes[0].contains(x[0] - shift),
            "left its box: {:?}",
            x[0]
        );

        // The triangle pinned in place (its nodes fixed at their starts), the node carried by
        // the shift through it: at home in the moving frame it is still through.
        let mut x = x0.clone();
        x[0] += shift;
        let fixed = [false, true, true, true];
        let r = rewind_crossings(&pairs, (&x0, shift), &mut x, &fixed);
        assert!(r.stuck);
        let r = rewind_crossings(&pairs, (&x0, DVec3::ZERO), &mut x, &fixed);
        assert!(!r.stuck);
        assert!(!crosses(&x));
        assert!(x[0].z > 0.0, "not back on its side: {:?}", x[0]);
    }

    /// A small crumpled sheet: a 6 x 6 grid folded over itself with noise.
    fn crumpled() -> (Vec<[u32; 3]>, Vec<DVec3>, Vec<DVec3>) {
        let n = 7;
        let mut tris = Vec::new();
        for j in 0..n - 1 {
            for i in 0..n - 1 {
                let (a, b, c, d) = (
                    j * n + i,
                    j * n + i + 1,
                    (j + 1) * n + i + 1,
                    (j + 1) * n + i,
                );
                tris.push([a as u32, b as u32, c as u32]);
                tris.push([a as u32, c as u32, d as u32]);
            }
        }
        let mut seed = 7u64;
        let mut noise = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.02
        };
        let mut x0 = Vec::new();
        let mut x1 = Vec::new();
        for j in 0..n {
            for i in 0..n {
                // Folded in half along x = 0.3 (a 0.1 m cell grid), then noise.
                let (u, v) = (i as f64 * 0.1, j as f64 * 0.1);
                let (x, y) = if u <= 0.3 { (u, 0.0) } else { (0.6 - u, 0.02) };
                let p = DVec3::new(x + noise(), y + noise(), v + noise());
                x0.push(p);
                x1.push(p + DVec3::new(noise(), noise(), noise()));
            }
        }
        (tris, x0, x1)
    }

    /// The hierarchy's broad phase, with its ownership of features, finds exactly the pairs of
    /// features (sharing no node) whose swept boxes (in the frame of the sheet's mean motion,
    /// see [`SweptBoxes`]) meet, each once, as a search over all pairs does.
    #[test]
    fn broad_phase_finds_every_pair_a_search_over_all_pairs_finds() {
        let (tris, x0, x1) = crumpled();
        let topo = SelfTopology::new(&tris, &x0);
        let mut sc = SelfContact::default();
        let margin = 0.01;
        sc.broad_phase(&topo, &x0, &x1, margin);
        let mut found = sc.raw.clone();
        found.sort_unstable();
        let len = found.len();
        found.dedup();
        assert_eq!(found.len(), len, "a pair came twice");
        let shift = mean_motion(&x0, &x1);
        let swept = |nodes: &[u32]| {
            let mut b = Aabb::EMPTY;
            for &k in nodes {
                b.grow(x0[k as usize]);
                b.grow(x1[k as usize] - shift);
            }
            b.inflate(margin)
        };
        let mut all = Vec::new();
        for v in 0..x0.len() as u32 {
            for (t, tri) in tris.iter().enumerate() {
                if !tri.contains(&v) && swept(&[v]).overlaps(&swept(tri)) {
                    all.push((false, v, t as u32));
                }
            }
        }
        for (e, ea) in topo.edges.iter().enumerate() {
            for (f, fb) in topo.edges.iter().enumerate().skip(e + 1) {
                if !ea.contains(&fb[0]) && !ea.contains(&fb[1]) && swept(ea).overlaps(&swept(fb)) {
                    all.push((true, e as u32, f as u32));
                }
            }
        }
        all.sort_unstable();
        assert!(all.len() > 100, "{}", all.len());
        assert_eq!(found, all);
    }

    /// Between two meshes (the crumpled sheet and a copy 1 cm above it), the feature pairs of
    /// every two triangles whose swept boxes meet are exactly the node-triangle pairs both
    /// ways and the edge-edge pairs whose boxes meet (each once, as a search over all pairs
    /// finds them); [`EdgePairs::Border`] keeps the same node-triangle pairs and only the
    /// edge-edge pairs with a border edge; and the triangle pairs found with boxes grown by
    /// 1 cm, filtered by the tight boxes, give the tight search's pairs (the layers' last
    /// pass reuses its substep's triangle pairs so).
    #[test]
    fn pairs_between_two_meshes_are_every_pair_whose_boxes_meet() {
        let (tris, x0, x1) = crumpled();
        let up = DVec3::new(0.003, 0.01, -0.002);
        let (y0, y1): (Vec<DVec3>, Vec<DVec3>) = (
            x0.iter().map(|&p| p + up).collect(),
            x1.iter().map(|&p| p - up).collect(),
        );
        let (ta, tb) = (SelfTopology::new(&tris, &x0), SelfTopology::new(&tris, &y0));
        let off = Offsets {
            nodes: x0.len() as u32,
            triangles: tris.len() as u32,
            edges: ta.edges.len() as u32,
        };
        let search = |margin: f64, edges: EdgePairs| {
            let (mut ba, mut bb) = (SweptBoxes::default(), SweptBoxes::default());
            ba.fill(&ta, (&x0, &x1), (margin, DVec3::ZERO));
            bb.fill(&tb, (&y0, &y1), (margin, DVec3::ZERO));
            let (mut raw, mut pairs) = (Vec::new(), Vec::new());
            triangle_pairs_between((&ta, &ba), (&tb, &bb), &mut Vec::new(), |t, u| {
                pairs.push((t, u));
                feature_pairs((&ta, &ba), (&tb, &bb), (t, u), off, edges, &mut raw);
            });
            (raw, pairs, ba, bb)
        };
        let sorted = |mut v: Vec<(RawPair, [u32; 4])>| {
            v.sort_unstable();
            v
        };
        let tight = 1e-3;
        let (found, _, ba, bb) = search(tight, EdgePairs::All);
        let found = sorted(found);
        let mut all = Vec::new();
        for v in 0..x0.len() as u32 {
            for u in 0..tris.len() as u32 {
                if ba.nodes[v as usize].overlaps(&bb.triangles[u as usize]) {
                    all.push((false, v, u + off.triangles));
                }
                if bb.nodes[v as usize].overlaps(&ba.triangles[u as usize]) {
                    all.push((false, v + off.nodes, u));
                }
            }
        }
        for e in 0..ta.edges.len() as u32 {
            for f in 0..tb.edges.len() as u32 {
                if ba.edges[e as usize].overlaps(&bb.edges[f as usize]) {
                    all.push((true, e, f + off.edges));
                }
            }
        }
        all.sort_unstable();
        let keys: Vec<RawPair> = found.iter().map(|p| p.0).collect();
        assert!(all.len() > 100, "{}", all.len());
        assert_eq!(keys, all);
        let (border, _, _, _) = search(tight, EdgePairs::Border);
        let expected: Vec<_> = found
            .iter()
            .filter(|((ee, e, f), _)| {
                !ee || ta.border[*e as usize] || tb.border[(*f - off.edges) as usize]
            })
            .copied()
            .collect();
        assert!(expected.len() < found.len());
        assert_eq!(sorted(border), expected);
        let (_, coarse, _, _) = search(0.01, EdgePairs::Border);
        let mut reused = Vec::new();
        for &(t, u) in &coarse {
            if ba.triangles_meet(t, &bb, u) {
                every_feature_pair(((&ta, &ba), (&tb, &bb)), (t, u), off, &mut reused);
            }
        }
        assert_eq!(sorted(reused), found);
    }

    /// [`feature_pairs`] with every edge-edge pair (the last pass's).
    fn every_feature_pair(
        (a, b): ((&SelfTopology, &SweptBoxes), (&SelfTopology, &SweptBoxes)),
        tu: (u32, u32),
        off: Offsets,
        out: &mut Vec<(RawPair, [u32; 4])>,
    ) {
        feature_pairs(a, b, tu, off, EdgePairs::All, out);
    }

    /// Boxes taken in a moving frame find every pair that comes near: the crumpled sheet and
    /// a copy 1 cm above it (0.1 m cells), both carried 25 cm over the sweep (two and a half
    /// cells, as a running character carries a 1 cm render mesh 3 cm a substep) with a few
    /// centimetres of motion against each other. With the shift of their common
    /// motion, the feature pairs of the triangles whose boxes meet (grown by 5 mm each) hold
    /// every node-triangle and edge-edge pair whose features come within 1 cm at any of 41
    /// moments of their linear paths (a search over all pairs), and are fewer than two thirds
    /// of those the world-frame boxes give (which hold them too; 2,860 against 5,245).
    #[test]
    fn boxes_in_the_frame_of_a_common_motion_find_every_near_pair() {
        let (tris, x0, x1) = crumpled();
        let carry = DVec3::new(0.25, 0.0, 0.05);
        let up = DVec3::new(0.0, 0.01, 0.0);
        let x1: Vec<DVec3> = x1.iter().map(|&p| p + carry).collect();
        let (y0, y1): (Vec<DVec3>, Vec<DVec3>) = (
            x0.iter().map(|&p| p + up).collect(),
            x0.iter()
                .zip(&x1)
                .map(|(&a, &b)| a + up + 0.8 * (b - a) + 0.2 * carry)
                .collect(),
        );
        let (ta, tb) = (SelfTopology::new(&tris, &x0), SelfTopology::new(&tris, &y0));
        let off = Offsets {
            nodes: x0.len() as u32,
            triangles: tris.len() as u32,
            edges: ta.edges.len() as u32,
        };
        let (reach, margin) = (0.01, 0.005);
        let search = |shift: DVec3| {
            let (mut ba, mut bb) = (SweptBoxes::default(), SweptBoxes::default());
            ba.fill(&ta, (&x0, &x1), (margin, shift));
            bb.fill(&tb, (&y0, &y1), (margin, shift));
            let mut raw = Vec::new();
            triangle_pairs_between((&ta, &ba), (&tb, &bb), &mut Vec::new(), |t, u| {
                every_feature_pair(((&ta, &ba), (&tb, &bb)), (t, u), off, &mut raw);
            });
            let mut keys: Vec<RawPair> = raw.iter().map(|p| p.0).collect();
            keys.sort_unstable();
            keys
        };
        let at = |a: &[DVec3], b: &[DVec3], k: u32, s: f64| a[k as usize].lerp(b[k as usize], s);
        let mut near = Vec::new();
        for step in 0..=40 {
            let s = f64::from(step) / 40.0;
            for v in 0..x0.len() as u32 {
                for (u, t) in tris.iter().enumerate() {
                    let tri = |a: &[DVec3], b: &[DVec3]| t.map(|k| at(a, b, k, s));
                    let (q, w) = (at(&x0, &x1, v, s), tri(&y0, &y1));
                    if features(false, [q, w[0], w[1], w[2]]).1.length() < reach {
                        near.push((false, v, u as u32 + off.triangles));
                    }
                    let (q, w) = (at(&y0, &y1, v, s), tri(&x0, &x1));
                    if features(false, [q, w[0], w[1], w[2]]).1.length() < reach {
                        near.push((false, v + off.nodes, u as u32));
                    }
                }
            }
            for (e, ea) in ta.edges.iter().enumerate() {
                for (f, fb) in tb.edges.iter().enumerate() {
                    let p = [
                        at(&x0, &x1, ea[0], s),
                        at(&x0, &x1, ea[1], s),
                        at(&y0, &y1, fb[0], s),
                        at(&y0, &y1, fb[1], s),
                    ];
                    if features(true, p).1.length() < reach {
                        near.push((true, e as u32, f as u32 + off.edges));
                    }
                }
            }
        }
        near.sort_unstable();
        near.dedup();
        let (moving, world) = (search(carry), search(DVec3::ZERO));
        assert!(near.len() > 100, "{}", near.len());
        for keys in [&moving, &world] {
            let missed: Vec<_> = near
                .iter()
                .filter(|p| keys.binary_search(p).is_err())
                .collect();
            assert!(missed.is_empty(), "{missed:?}");
        }
        assert!(
            3 * moving.len() < 2 * world.len(),
            "{} against {}",
            moving.len(),
            world.len()
        );
    }

    /// Measuring only the pairs that may have closed (a pair apart is skipped while its gap
    /// exceeds twice how far the nodes moved since it was measured) finds the same engaged
    /// pairs, with the same gaps, as measuring every pair every time: the crumpled sheet's
    /// pairs within 5 mm moved by 200 random steps (three seeds, steps up to 0.25, 0.5 and 1 mm
    /// along each axis), each step's bound given to `moved_by`; pairs are skipped. The last
    /// pass's push then moves every node exactly as without skipping.
    #[test]
    fn skipping_pairs_that_cannot_have_closed_changes_nothing() {
        let (tris, x0, x1) = crumpled();
        let topo = SelfTopology::new(&tris, &x0);
        let thickness = 0.005;
        let fill = |sc: &mut SelfContact| {
            sc.broad_phase(&topo, &x0, &x1, thickness);
            for r in std::mem::take(&mut sc.raw) {
                let nodes = sc.nodes_of(&topo, r);
                let at = |x: &[DVec3]| at4(x, nodes);
                sc.admit(r, nodes, at(&x0), at(&x1), thickness, 0.0);
            }
        };
        let mut skipped = 0;
        for (seed, step) in [(11u64, 1e-3), (12, 2e-3), (13, 0.5e-3)] {
            let (mut every, mut skipping) = (SelfContact::default(), SelfContact::default());
            every.moved = f64::INFINITY;
            fill(&mut every);
            skipping.begin_group_substep();
            fill(&mut skipping);
            assert!(every.pairs.len() > 50, "{}", every.pairs.len());
            let mut x = x1.clone();
            let mut seed = seed;
            let mut noise = move || {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            };
            for _ in 0..200 {
                let mut moved = 0.0f64;
                for p in &mut x {
                    let d = DVec3::new(noise(), noise(), noise()) * step;
                    *p += d;
                    moved = moved.max(d.length());
                }
                skipping.moved_by(moved);
                let before: Vec<f64> = skipping.pairs.iter().map(|p| p.measured_at).collect();
                assert_eq!(every.measure(&x), skipping.measure(&x));
                skipped += skipping
                    .pairs
                    .iter()
                    .zip(&before)
                    .filter(|(p, b)| p.measured_at.to_bits() == b.to_bits())
                    .count();
                for (a, b) in every.pairs.iter().zip(&skipping.pairs) {
                    assert_eq!(a.engaged, b.engaged);
                    if b.engaged {
                        assert_eq!(a.gap, b.gap);
                    }
                }
            }
            // The last pass's push skips the same way and moves the nodes the same.
            let masses = vec![1.0; x.len()];
            let pinned = vec![false; x.len()];
            let (mut xa, mut xb) = (x.clone(), x.clone());
            let pushes = every.push_apart(&masses, &pinned, &mut xa);
            assert_eq!(pushes, skipping.push_apart(&masses, &pinned, &mut xb));
            assert!(pushes > 0);
            assert_eq!(xa, xb);
        }
        assert!(skipped > 0);
    }

    /// The last pass's push keeps the centre of mass where it was (to 1e-15 m: the pushes are
    /// weighted by inverse mass) and leaves a pair at least at the thickness less 1e-12 m.
    #[test]
    fn proximity_push_keeps_the_centre_of_mass_and_opens_the_gap() {
        let masses = [1.0, 2.0, 0.5, 3.0];
        let mut x = vec![
            DVec3::new(0.2, 0.001, 0.2),
            DVec3::new(0.0, 0.0, 0.0),
            DVec3::new(1.0, 0.0, 0.0),
            DVec3::new(0.0, 0.0, 1.0),
        ];
        let com = |x: &[DVec3]| x.iter().zip(&masses).map(|(p, m)| *p * *m).sum::<DVec3>();
        let before = com(&x);
        let side = side_of(false, [x[0], x[1], x[2], x[3]]);
        let sc = SelfContact {
            pairs: vec![Pair {
                key: (false, 0, 0),
                nodes: [0, 1, 2, 3],
                edge_edge: false,
                side,
                thickness: 0.004,
                friction: 0.0,
                start: [DVec3::ZERO; 4],
                tangent: DVec3::ZERO,
                slip: DVec3::ZERO,
                force: 0.0,
                gap: 0.0,
                normal: DVec3::ZERO,
                coef: [0.0; 4],
                engaged: false,
                w: [0.0; 4],
                prev_gap: f64::NAN,
                overshoot: 0.0,
                measured_at: f64::NAN,
                own_side: false,
                admitted_at: 0.0,
            }],
            ..Default::default()
        };
        let pushes = sc.push_apart(&masses, &[false; 4], &mut x);
        assert!(pushes >= 1);
        assert!(
            (com(&x) - before).length() < 1e-15,
            "{:?}",
            com(&x) - before
        );
        let (dist, _, _) = signed_geometry(false, side, [x[0], x[1], x[2], x[3]]);
        assert!(dist >= 0.004 - 1e-12, "{dist}");
    }

    /// The closest points of a point over a triangle's middle and beside a corner, and of two
    /// skew segments, are the textbook ones.
    #[test]
    fn closest_points_are_the_textbook_ones() {
        let (a, b, c) = (DVec3::ZERO, DVec3::X, DVec3::Z);
        let w = closest_on_triangle(DVec3::new(0.25, 1.0, 0.25), a, b, c);
        assert!((w[0] - 0.5).abs() < 1e-12 && (w[1] - 0.25).abs() < 1e-12);
        assert_eq!(
            closest_on_triangle(DVec3::new(-1.0, 0.0, -1.0), a, b, c),
            [1.0, 0.0, 0.0]
        );
        let (s, t) = closest_between_segments(
            DVec3::new(-1.0, 0.0, 0.0),
            DVec3::new(1.0, 0.0, 0.0),
            DVec3::new(0.5, 1.0, -1.0),
            DVec3::new(0.5, 1.0, 1.0),
        );
        assert!((s - 0.75).abs() < 1e-12 && (t - 0.5).abs() < 1e-12);
    }

    /// The planes' distance is a lower bound on the closest points' distance, for a point
    /// against a triangle and an edge against an edge: 20,000 random pairs (coordinates in
    /// [-1, 1] m, a tenth of them flattened to 1e-6 m across), none above it by more than
    /// 1e-15 m.
    #[test]
    fn the_planes_distance_never_exceeds_the_features_distance() {
        let mut seed = 7u64;
        let mut r = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            2.0 * ((seed >> 11) as f64 / (1u64 << 53) as f64) - 1.0
        };
        for k in 0..20_000 {
            let flat = if k % 10 == 0 { 1e-6 } else { 1.0 };
            let p: [DVec3; 4] = std::array::from_fn(|_| DVec3::new(r(), flat * r(), r()));
            for ee in [false, true] {
                let (bound, d) = (plane_gap(ee, p), distance(ee, p));
                assert!(bound <= d + 1e-15, "{ee} {p:?}: {bound} > {d}");
            }
        }
    }

    /// A pair pushed apart with every node that could take a fair share held (the point on a
    /// body, two triangle corners pinned) moves the one corner left, whose weight in the pair
    /// is 0.01, by at most [`PUSH_MOST`] times the gap (4 mm: at most 20 mm, where the exact
    /// projection would move it 0.4 m), along the pair's normal.
    #[test]
    fn a_push_moves_a_light_corner_at_most_push_most_gaps() {
        let (a, b, c) = (DVec3::ZERO, DVec3::X, DVec3::Z);
        let q = DVec3::new(0.01, 0.001, 0.01);
        let mut x = vec![q, a, b, c];
        let mut sc = SelfContact::default();
        sc.begin_group_substep();
        let p = at4(&x, [0, 1, 2, 3]);
        assert!(sc.admit((false, 0, 0), [0, 1, 2, 3], p, p, 0.005, 0.0));
        let masses = [1.0; 4];
        let pinned = [false, true, true, false];
        let mut held = vec![-DVec3::Y, DVec3::ZERO, DVec3::ZERO, DVec3::ZERO];
        sc.push_apart_held(&masses, &pinned, &mut held, 1, &mut x, None);
        let moved = x[3] - c;
        assert!(moved.length() <= PUSH_MOST * 0.004 + 1e-12, "{moved:?}");
        assert!(
            moved.y < -0.004 && moved.x.abs() + moved.z.abs() < 1e-12,
            "{moved:?}"
        );
        assert_eq!((x[0], x[1], x[2]), (q, a, b));
    }

    /// A node squeezed between two layers (3 mm from each, thickness 5 mm), pushed apart with
    /// each sweep's pushes averaged per node (`PushSums`), stays at the middle (to 1e-12 m;
    /// within 0.01 mm sideways, as the layers tilt) while the two layers move apart from it by
    /// the same distance; pushed one pair after another it ends more than 0.1 mm off the
    /// middle.
    #[test]
    fn a_node_squeezed_between_two_layers_is_pushed_by_the_mean_of_its_pairs() {
        let tri = |y: f64| {
            [
                DVec3::new(-1.0, y, -1.0),
                DVec3::new(1.0, y, -1.0),
                DVec3::new(0.0, y, 1.0),
            ]
        };
        let (below, above) = (tri(0.0), tri(0.006));
        let q = DVec3::new(0.0, 0.003, 0.0);
        let x0: Vec<DVec3> = [q].into_iter().chain(below).chain(above).collect();
        let run = |jacobi: bool| {
            let mut x = x0.clone();
            let mut sc = SelfContact::default();
            sc.begin_group_substep();
            for (t, nodes) in [(0, [0, 1, 2, 3]), (1, [0, 4, 5, 6])] {
                let p = at4(&x, nodes);
                assert!(sc.admit((false, 0, t), nodes, p, p, 0.005, 0.0));
            }
            let mut sums = PushSums::default();
            let sums = jacobi.then_some(&mut sums);
            sc.push_apart_held(&[1.0; 7], &[false; 7], &mut [], 4, &mut x, sums);
            x
        };
        let x = run(true);
        assert!(
            (x[0].y - q.y).abs() < 1e-12 && (x[0] - q).length() < 1e-5,
            "{:?}",
            x[0]
        );
        let (down, up) = (x0[1].y - x[1].y, x[4].y - x0[4].y);
        assert!(down > 1e-4 && (down - up).abs() < 1e-12, "{down} {up}");
        let x = run(false);
        assert!((x[0].y - q.y).abs() > 1e-4, "{:?}", x[0]);
    }
}
