//! The measures the crate reports, named as in docs/design.md section 6.

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::mesh::StrainEdge;
use crate::model::ClothModel;

/// Quality and energy figures of a cloth state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Measures {
    /// Max over base edges `(a, b)` of `|(|x_a - r_ab| + |r_ab - x_b|) / rest_length - 1|`: the
    /// stretch of the *render* mesh, measured through black nodes. Edges with both ends pinned
    /// are left out: their length is the pins' (a skin that stretches the pinned row), not the
    /// solver's; they are [`Measures::pinned_max_strain`].
    pub max_strain: f64,
    /// Mean of the same `|strain|` over the base edges [`Measures::max_strain`] counts.
    pub mean_strain: f64,
    /// Max `|strain|` over the base edges with both ends pinned: the stretch the pins impose
    /// (zero when no two pins share an edge, or when they move rigidly).
    #[serde(default)]
    pub pinned_max_strain: f64,
    /// Max relative error of the red-red distances of the rigid (red) triangles.
    pub isometry_residual: f64,
    /// Max distance of a black node from its conformity constraint (or of two boundary corners
    /// from each other), over the mean render-mesh edge length.
    pub conformity_residual: f64,
    /// Kinetic energy `1/2 sum m |v|^2` in joules.
    pub kinetic_energy: f64,
    /// Gravitational potential `-sum m g . x` in joules (zero at the origin).
    pub gravitational_energy: f64,
    /// Bending energy in joules.
    pub bending_energy: f64,
}

impl Measures {
    /// Kinetic + gravitational + bending energy.
    pub fn energy(&self) -> f64 {
        self.kinetic_energy + self.gravitational_energy + self.bending_energy
    }
}

/// `|strain|` of one base edge at `x`, through its red node if it has one (the measure of
/// [`Measures::max_strain`]).
fn edge_strain(e: &StrainEdge, x: &[DVec3]) -> f64 {
    let (a, b) = (x[e.a as usize], x[e.b as usize]);
    let len = match e.mid {
        Some(m) => a.distance(x[m as usize]) + x[m as usize].distance(b),
        None => a.distance(b),
    };
    (len / e.rest_length - 1.0).abs()
}

/// Measures a cloth made from `model` at `positions` and `velocities` (node order) under
/// `gravity`.
pub(crate) fn measure(
    model: &ClothModel,
    positions: &[DVec3],
    velocities: &[DVec3],
    gravity: DVec3,
) -> Measures {
    let x = positions;
    let mesh = &model.mesh;
    let (mut max_strain, mut sum_strain, mut free_edges) = (0.0f64, 0.0, 0usize);
    let mut pinned_max_strain = 0.0f64;
    let pinned = &model.pinned_mask;
    for e in mesh.strain_edges() {
        let s = edge_strain(e, x);
        if pinned[e.a as usize] && pinned[e.b as usize] {
            pinned_max_strain = pinned_max_strain.max(s);
        } else {
            max_strain = max_strain.max(s);
            sum_strain += s;
            free_edges += 1;
        }
    }
    let r = &model.terms.rigid;
    let mut isometry_residual = 0.0f64;
    for (nodes, rest) in r.nodes.iter().zip(&r.rest_lengths) {
        for k in 0..3 {
            let d = x[nodes[k] as usize].distance(x[nodes[(k + 1) % 3] as usize]);
            isometry_residual = isometry_residual.max((d / rest[k] - 1.0).abs());
        }
    }
    let lin = &model.terms.linear;
    let conformity = (0..lin.len())
        .map(|row| lin.apply(row, x).length())
        .fold(0.0f64, f64::max);
    let m = &model.masses;
    Measures {
        max_strain,
        mean_strain: sum_strain / free_edges.max(1) as f64,
        pinned_max_strain,
        isometry_residual,
        conformity_residual: conformity / mesh.mean_render_edge_length(),
        kinetic_energy: velocities
            .iter()
            .zip(m)
            .map(|(v, &mi)| 0.5 * mi * v.length_squared())
            .sum(),
        gravitational_energy: -x
            .iter()
            .zip(m)
            .map(|(p, &mi)| mi * gravity.dot(*p))
            .sum::<f64>(),
        bending_energy: model.terms.bending_energy(x),
    }
}
