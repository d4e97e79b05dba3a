//! Game constraints: where a node may go, and when a cloth may stop.
//!
//! Game teams keep a cape where it belongs on a fast character with a few per-node limits
//! (the same ones NvCloth, Chaos Cloth and Unity Cloth offer):
//!
//! - **Tethers**: each free node stays within `tether_scale` times its rest geodesic distance
//!   (over the mesh) from its nearest pin, measured from that pin's current position. Built from
//!   the pins with the model, so every cloth of one model shares them ([`Tethers`]).
//! - **Max distance**: each node stays within a painted radius of its *skinned* position (the
//!   rest pose carried by the character's bones, [`crate::attachment::Attachments::with_skin`]);
//!   0 holds the node on it.
//! - **Backstop**: each node stays outside a sphere of a painted radius whose surface lies a
//!   painted distance behind the skinned surface (the sphere-behind form of Unity and NvCloth):
//!   the cloth cannot go more than `distance` behind its skinned pose, into the body.
//!
//! Each is an inequality on one node, solved like frictionless contact inside the iterations
//! (`docs/design.md` section 5): a force on the node, corrected each iteration from its gap with the
//! node's compliance, carried across substeps, and a last pass puts any node still outside its
//! limit on it. The factor is untouched. [`SleepSettings`] lets a still cloth stop stepping.
//!
//! All settings are plain serde data with documented defaults ([`LimitSettings`]); per-node
//! values come as `Vec<f32>` in node order (see [`crate::ClothMesh::node_values`] to spread
//! values painted on the base mesh's vertices).

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::error::ClothError;
use crate::mesh::ClothMesh;

/// When a cloth may stop stepping. Default: off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SleepSettings {
    /// Whether the cloth may fall asleep. Default `false`.
    pub enabled: bool,
    /// A node moving slower than this over a frame counts as still (m/s, positive). Default
    /// 0.01.
    pub speed: f64,
    /// How long every node must stay still, with still pins, skin and nearby bodies, before
    /// the cloth sleeps (seconds, non-negative). Default 0.5.
    pub time: f64,
}

impl Default for SleepSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            speed: 0.01,
            time: 0.5,
        }
    }
}

/// One cloth's game constraints. Plain data, every part off by default; per-node vectors are
/// either empty (off) or one value per cloth node.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    /// Tether length over each free node's rest geodesic distance to its nearest pin: at least
    /// 1 (1 lets the tether bind only where the cloth hangs straight from its pin), or 0 for no
    /// tethers. Default 0.
    pub tether_scale: f64,
    /// Per node, the farthest it may go from its skinned position (metres, finite and
    /// non-negative, or `inf` for no limit; 0 holds it there). Empty (the default): none.
    pub max_distance: Vec<f32>,
    /// Per node, how far behind its skinned surface it may go (metres, finite; negative keeps
    /// it in front). "Behind" is against the skinned render normal (the mesh's winding), or
    /// along it with `backstop_flip`. Empty (the default): no backstop; then `backstop_radius`
    /// must be empty too.
    pub backstop_distance: Vec<f32>,
    /// Per node, the backstop sphere's radius (metres, finite and non-negative; 0: no backstop
    /// for that node). A large radius (a metre or more) makes the backstop nearly a plane.
    /// Empty (the default): none.
    pub backstop_radius: Vec<f32>,
    /// Whether the body lies on the side the render normal points to (the backstop then sits
    /// along the normal). Default `false`: the render normal points away from the body, as a
    /// rendered garment's outer side does.
    pub backstop_flip: bool,
    /// When the cloth may stop stepping.
    pub sleep: SleepSettings,
}

impl LimitSettings {
    /// Checks every value (a cloth's [`Cloth::set_limit_settings`](crate::Cloth) also checks
    /// the per-node arrays' lengths against its nodes, [`LimitSettings::validate_for`]). A bad
    /// per-node value is named by its array and index ([`ClothError::BadNodeValue`]).
    pub fn validate(&self) -> Result<(), ClothError> {
        self.check(None)
    }

    /// [`LimitSettings::validate`], and each per-node array empty or one value for each of
    /// `nodes` nodes ([`ClothError::LengthMismatch`] otherwise).
    pub fn validate_for(&self, nodes: usize) -> Result<(), ClothError> {
        self.check(Some(nodes))
    }

    fn check(&self, nodes: Option<usize>) -> Result<(), ClothError> {
        let s = self.tether_scale;
        if !(s == 0.0 || (s.is_finite() && s >= 1.0)) {
            return Err(ClothError::InvalidSetting {
                name: "tether_scale",
                reason: format!("must be 0 (off) or a finite number >= 1, got {s}"),
            });
        }
        let sl = &self.sleep;
        if !(sl.speed.is_finite() && sl.speed > 0.0) {
            return Err(ClothError::InvalidSetting {
                name: "sleep.speed",
                reason: format!("must be finite and positive, got {}", sl.speed),
            });
        }
        if !(sl.time.is_finite() && sl.time >= 0.0) {
            return Err(ClothError::InvalidSetting {
                name: "sleep.time",
                reason: format!("must be finite and non-negative, got {}", sl.time),
            });
        }
        let check = |what: &'static str,
                     values: &[f32],
                     ok: fn(f32) -> bool,
                     reason: &'static str|
         -> Result<(), ClothError> {
            if let Some(nodes) = nodes
                && !values.is_empty()
                && values.len() != nodes
            {
                return Err(ClothError::LengthMismatch {
                    what,
                    expected: nodes,
                    found: values.len(),
                });
            }
            match values.iter().position(|&v| !ok(v)) {
                Some(index) => Err(ClothError::BadNodeValue {
                    what,
                    index,
                    value: values[index] as f64,
                    reason,
                }),
                None => Ok(()),
            }
        };
        check(
            "max_distance",
            &self.max_distance,
            |v| v >= 0.0,
            "must be non-negative (inf: no limit)",
        )?;
        check(
            "backstop_distance",
            &self.backstop_distance,
            f32::is_finite,
            "must be finite",
        )?;
        check(
            "backstop_radius",
            &self.backstop_radius,
            |v| v.is_finite() && v >= 0.0,
            "must be finite and non-negative",
        )?;
        if self.backstop_distance.len() != self.backstop_radius.len() {
            return Err(ClothError::LengthMismatch {
                what: "backstop_radius (as many as backstop_distance)",
                expected: self.backstop_distance.len(),
                found: self.backstop_radius.len(),
            });
        }
        Ok(())
    }

    /// Whether any limit needs the skinned pose (max distance or backstop).
    pub fn uses_skin(&self) -> bool {
        !self.max_distance.is_empty() || !self.backstop_radius.is_empty()
    }

    /// Whether any backstop is on (the skin's normals are then needed).
    pub fn uses_backstop(&self) -> bool {
        !self.backstop_radius.is_empty()
    }

    /// Whether any limit is on.
    pub fn any(&self) -> bool {
        self.tether_scale > 0.0 || self.uses_skin()
    }
}

/// Each free node's nearest pin over the mesh and its rest geodesic distance to it: the
/// tethers of one model (built with it, shared by its cloths).
///
/// The distance is the shortest path along render-mesh edges at rest (Dijkstra from every pin
/// at once). It is at least the true geodesic (a path along edges zigzags; by up to 8 % on a
/// regular grid) and at least the straight distance, so a tether of scale 1 never binds a
/// cloth that is not stretched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tethers {
    /// Per node: the pin it is tied to (`u32::MAX`: none: pinned, or no pin reachable).
    pub anchor: Vec<u32>,
    /// Per node: rest geodesic distance to `anchor` (metres).
    pub length: Vec<f64>,
}

impl Tethers {
    /// Tethers of `mesh` with `pins` (sorted node indices).
    pub fn new(mesh: &ClothMesh, pins: &[u32]) -> Self {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let n = mesh.node_count();
        let x = mesh.metric_positions();
        let mut adjacency: Vec<Vec<u32>> = vec![Vec::new(); n];
        for t in mesh.render_triangles() {
            for k in 0..3 {
                let (a, b) = (t[k], t[(k + 1) % 3]);
                adjacency[a as usize].push(b);
                adjacency[b as usize].push(a);
            }
        }
        let mut anchor = vec![u32::MAX; n];
        let mut length = vec![f64::INFINITY; n];
        // Distances are non-negative, so their bit patterns order like the numbers.
        let mut heap = BinaryHeap::new();
        for &p in pins {
            anchor[p as usize] = p;
            length[p as usize] = 0.0;
            heap.push(Reverse((0u64, p)));
        }
        while let Some(Reverse((d, i))) = heap.pop() {
            let d = f64::from_bits(d);
            if d > length[i as usize] {
                continue;
            }
            for &j in &adjacency[i as usize] {
                let dj = d + x[i as usize].distance(x[j as usize]);
                if dj < length[j as usize] {
                    length[j as usize] = dj;
                    anchor[j as usize] = anchor[i as usize];
                    heap.push(Reverse((dj.to_bits(), j)));
                }
            }
        }
        for &p in pins {
            anchor[p as usize] = u32::MAX;
        }
        for (a, l) in anchor.iter().zip(&mut length) {
            if *a == u32::MAX {
                *l = 0.0;
            }
        }
        Self { anchor, length }
    }
}

/// The skinned pose a cloth's max distance and backstop are measured from: positions and
/// render normals at the start and the end of the frame (the substeps interpolate). The
/// normals are kept only while a backstop needs them (empty otherwise): a skinned cape
/// without backstops does not pay for them every frame.
#[derive(Debug, Clone, Default)]
pub(crate) struct SkinFrame {
    pub start: Vec<DVec3>,
    pub target: Vec<DVec3>,
    pub start_normals: Vec<DVec3>,
    pub target_normals: Vec<DVec3>,
}

impl SkinFrame {
    /// A still skin at `positions`, with its normals if `normals`.
    pub fn still(mesh: &ClothMesh, positions: &[DVec3], normals: bool) -> Self {
        let mut skin = Self {
            start: positions.to_vec(),
            target: positions.to_vec(),
            ..Self::default()
        };
        if normals {
            skin.ensure_normals(mesh);
        }
        skin
    }

    /// Computes the normals of both poses if they are not kept yet.
    pub fn ensure_normals(&mut self, mesh: &ClothMesh) {
        if self.target_normals.len() != self.target.len() {
            vertex_normals(mesh, &self.start, &mut self.start_normals);
            vertex_normals(mesh, &self.target, &mut self.target_normals);
        }
    }

    /// The skinned pose wanted at the end of the next frame (and its normals if `normals`;
    /// else none are kept).
    pub fn set_target(&mut self, mesh: &ClothMesh, target: &[DVec3], normals: bool) {
        self.target.clear();
        self.target.extend_from_slice(target);
        if normals {
            if self.start_normals.len() != self.start.len() {
                vertex_normals(mesh, &self.start, &mut self.start_normals);
            }
            vertex_normals(mesh, &self.target, &mut self.target_normals);
        } else {
            self.start_normals.clear();
            self.target_normals.clear();
        }
    }

    /// Whether the skin moves over the coming frame.
    pub fn moving(&self) -> bool {
        self.start != self.target
    }

    /// Carries the skin rigidly (a teleport).
    pub fn transform(&mut self, pose: &crate::collision::Pose) {
        for p in self.start.iter_mut().chain(self.target.iter_mut()) {
            *p = pose.transform_point(*p);
        }
        for n in self
            .start_normals
            .iter_mut()
            .chain(self.target_normals.iter_mut())
        {
            *n = pose.transform_vector(*n);
        }
    }

    /// The frame ended: the targets are the start of the next one.
    pub fn finish_frame(&mut self) {
        self.start.copy_from_slice(&self.target);
        self.start_normals.clone_from(&self.target_normals);
    }
}

/// Area-weighted unit normals of the render mesh at `x` (the render winding's side).
pub(crate) fn vertex_normals(mesh: &ClothMesh, x: &[DVec3], out: &mut Vec<DVec3>) {
    out.clear();
    out.resize(x.len(), DVec3::ZERO);
    for t in mesh.render_triangles() {
        let [a, b, c] = t.map(|i| x[i as usize]);
        let n = (b - a).cross(c - a);
        for &i in t {
            out[i as usize] += n;
        }
    }
    for n in out.iter_mut() {
        *n = n.normalize_or(DVec3::Z);
    }
}

/// One limit on one node for a substep: the node stays inside (tether, max distance) or
/// outside (backstop) a sphere.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeLimit {
    pub node: u32,
    pub centre: DVec3,
    pub radius: f64,
    /// Whether the node must stay inside the sphere.
    pub inside: bool,
    /// Direction the node is pushed if it sits at the centre (outside limits).
    pub fallback: DVec3,
    /// How far the sphere's centre moves over the substep (the limit's own velocity times
    /// the substep).
    pub moved: DVec3,
}

impl NodeLimit {
    /// Signed gap at `x` (negative: the node must move by that much) and the direction the
    /// limit pushes the node.
    #[inline]
    pub fn gap(&self, x: DVec3) -> (f64, DVec3) {
        let d = x - self.centre;
        let len = d.length();
        if self.inside {
            let n = if len > 0.0 { -d / len } else { DVec3::ZERO };
            (self.radius - len, n)
        } else {
            let n = if len > 0.0 { d / len } else { self.fallback };
            (len - self.radius, n)
        }
    }

    /// Whether a node moving from `a` to `b`, and anywhere within `slack` of that path, may
    /// reach the sphere's boundary (the broad phase).
    pub fn may_reach(&self, a: DVec3, b: DVec3, slack: f64) -> bool {
        if self.inside {
            // A ball is convex: the path stays inside if both ends do.
            self.gap(a).0.min(self.gap(b).0) <= slack
        } else {
            let ab = b - a;
            let t = ((self.centre - a).dot(ab) / ab.length_squared()).clamp(0.0, 1.0);
            let t = if t.is_finite() { t } else { 0.0 };
            (a + t * ab).distance(self.centre) - self.radius <= slack
        }
    }

    /// The nearest allowed point to `x`, if `x` breaks the limit.
    #[inline]
    pub fn project(&self, x: DVec3) -> Option<DVec3> {
        let (gap, n) = self.gap(x);
        if gap >= 0.0 {
            return None;
        }
        Some(x - gap * n)
    }
}

/// What builds a substep's [`NodeLimit`]s: a cloth's settings, its model's tethers and its
/// skin.
pub(crate) struct LimitFrame<'a> {
    pub settings: &'a LimitSettings,
    pub tethers: &'a Tethers,
    pub skin: &'a SkinFrame,
    pub pinned: &'a [bool],
}

impl LimitFrame<'_> {
    /// The limits of a substep spanning fractions `s0..s1` of the frame, in node order, with
    /// the pins at `x0` at its start and `x1` at its end. Reuses `out`'s memory.
    pub fn build(
        &self,
        (s0, s1): (f64, f64),
        x0: &[DVec3],
        x1: &[DVec3],
        out: &mut Vec<NodeLimit>,
    ) {
        out.clear();
        let st = self.settings;
        let tether = st.tether_scale > 0.0;
        let skin = self.skin;
        let skinned = |i: usize, s: f64| skin.start[i].lerp(skin.target[i], s);
        let normal = |i: usize, s: f64| {
            let n = skin.start_normals[i]
                .lerp(skin.target_normals[i], s)
                .normalize_or(skin.target_normals[i]);
            if st.backstop_flip { -n } else { n }
        };
        for i in 0..self.pinned.len() {
            if self.pinned[i] {
                continue;
            }
            let node = i as u32;
            if tether {
                let a = self.tethers.anchor[i];
                if a != u32::MAX {
                    let a = a as usize;
                    out.push(NodeLimit {
                        node,
                        centre: x1[a],
                        radius: st.tether_scale * self.tethers.length[i],
                        inside: true,
                        fallback: DVec3::ZERO,
                        moved: x1[a] - x0[a],
                    });
                }
            }
            if let Some(&r) = st.max_distance.get(i)
                && r.is_finite()
            {
                let centre = skinned(i, s1);
                out.push(NodeLimit {
                    node,
                    centre,
                    radius: r as f64,
                    inside: true,
                    fallback: DVec3::ZERO,
                    moved: centre - skinned(i, s0),
                });
            }
            if let Some(&r) = st.backstop_radius.get(i)
                && r > 0.0
            {
                let r = r as f64;
                let behind = st.backstop_distance[i] as f64 + r;
                let n = normal(i, s1);
                let centre = skinned(i, s1) - behind * n;
                out.push(NodeLimit {
                    node,
                    centre,
                    radius: r,
                    inside: false,
                    fallback: n,
                    moved: centre - (skinned(i, s0) - behind * normal(i, s0)),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BaseMesh;

    /// A node at rest is its straight distance from a pin in a straight row: tethers on a
    /// strip hanging from one end measure along it (to 1e-12 m) and skip the pin.
    #[test]
    fn tethers_measure_rest_geodesic_from_the_nearest_pin() {
        let base = BaseMesh::rectangle(1.0, 0.1, 10, 1).unwrap();
        let mesh = ClothMesh::new(&base).unwrap();
        let pins = mesh.nodes_for_vertices(&[0, BaseMesh::grid_index(10, 0, 1)], false);
        let t = Tethers::new(&mesh, &pins);
        for &p in &pins {
            assert_eq!(t.anchor[p as usize], u32::MAX);
        }
        let x = mesh.metric_positions();
        // The far end of the bottom row: 1 m along the row from the bottom-left pin.
        let far = BaseMesh::grid_index(10, 10, 0) as usize;
        assert_eq!(t.anchor[far], 0);
        assert!((t.length[far] - 1.0).abs() < 1e-12, "{}", t.length[far]);
        for i in 0..mesh.node_count() {
            if t.anchor[i] != u32::MAX {
                let straight = x[i].distance(x[t.anchor[i] as usize]);
                assert!(t.length[i] >= straight - 1e-12);
            }
        }
    }

    /// Inside limits push toward the centre, outside limits away; the projection lands on the
    /// sphere (to 1e-12 m) and leaves points that keep the limit alone.
    #[test]
    fn limits_project_onto_their_sphere() {
        let inside = NodeLimit {
            node: 0,
            centre: DVec3::ZERO,
            radius: 1.0,
            inside: true,
            fallback: DVec3::ZERO,
            moved: DVec3::ZERO,
        };
        let p = DVec3::new(2.0, 0.0, 0.0);
        let (g, n) = inside.gap(p);
        assert_eq!((g, n), (-1.0, DVec3::new(-1.0, 0.0, 0.0)));
        assert!((inside.project(p).unwrap() - DVec3::X).length() < 1e-12);
        assert!(inside.project(DVec3::new(0.5, 0.0, 0.0)).is_none());
        let outside = NodeLimit {
            inside: false,
            fallback: DVec3::Y,
            ..inside
        };
        let q = DVec3::new(0.0, 0.0, 0.5);
        assert!((outside.project(q).unwrap() - DVec3::Z).length() < 1e-12);
        assert!((outside.project(DVec3::ZERO).unwrap() - DVec3::Y).length() < 1e-12);
        assert!(outside.project(p).is_none());
    }

    /// Each bad value is refused with its array and index.
    #[test]
    fn bad_limit_data_names_the_index() {
        let mut s = LimitSettings {
            max_distance: vec![0.1, -0.2, 0.3],
            ..Default::default()
        };
        match s.validate_for(3) {
            Err(ClothError::BadNodeValue { what, index, .. }) => {
                assert_eq!((what, index), ("max_distance", 1))
            }
            other => panic!("{other:?}"),
        }
        s.max_distance = vec![0.1, f32::NAN, 0.3];
        assert!(matches!(
            s.validate_for(3),
            Err(ClothError::BadNodeValue { index: 1, .. })
        ));
        s.max_distance = vec![0.1; 2];
        assert!(matches!(
            s.validate_for(3),
            Err(ClothError::LengthMismatch { found: 2, .. })
        ));
        s.max_distance = vec![0.1, f32::INFINITY, 0.0];
        assert!(s.validate_for(3).is_ok());
        s.backstop_distance = vec![0.0; 3];
        assert!(matches!(
            s.validate_for(3),
            Err(ClothError::LengthMismatch { .. })
        ));
        s.backstop_radius = vec![0.1, 0.1, -1.0];
        assert!(matches!(
            s.validate_for(3),
            Err(ClothError::BadNodeValue {
                what: "backstop_radius",
                index: 2,
                ..
            })
        ));
        s.backstop_radius = vec![0.1; 3];
        s.tether_scale = 0.5;
        assert!(matches!(
            s.validate_for(3),
            Err(ClothError::InvalidSetting { .. })
        ));
    }
}
