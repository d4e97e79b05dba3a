//! The measures the crate reports, named as in DESIGN.md section 6.

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::cloth::ClothState;
use crate::mesh::{ClothMesh, StrainEdge};
use crate::model::ClothModel;

/// Quality and energy figures of a cloth state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Measures {
    /// Max over base edges `(a, b)` of `|(|x_a - r_ab| + |r_ab - x_b|) / rest_length - 1|`: the
    /// stretch of the *render* mesh, measured through black nodes.
    pub max_strain: f64,
    /// Mean of the same `|strain|` over base edges.
    pub mean_strain: f64,
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

/// Largest `|strain|` at `x` of the render-mesh edges at `node`: the half base edges from a
/// black node to the red nodes around it; from a red node, its two half edges and the edges of
/// the red (middle) triangles it is a corner of, whose rest length is half the base edge they
/// are parallel to. On a plain mesh, the base edges at the node.
pub(crate) fn node_strain(mesh: &ClothMesh, x: &[DVec3], node: usize) -> f64 {
    let nv = mesh.base_vertex_count();
    let edges = mesh.strain_edges();
    let strain = |p: usize, q: usize, rest: f64| (x[p].distance(x[q]) / rest - 1.0).abs();
    // The part of a base edge at its end `end`: half of it through the red node, or all of it.
    let half = |e: &StrainEdge, end: usize| match e.mid {
        Some(m) => strain(end, m as usize, 0.5 * e.rest_length),
        None => edge_strain(e, x),
    };
    let mut worst = 0.0f64;
    if node < nv {
        for &t in mesh.fan(node) {
            for &e in &mesh.triangle_edges()[t as usize] {
                let e = &edges[e as usize];
                if e.a as usize == node || e.b as usize == node {
                    worst = worst.max(half(e, node));
                }
            }
        }
        return worst;
    }
    let own = node - nv;
    let Some(e) = edges.get(own) else {
        return 0.0;
    };
    worst = worst.max(half(e, e.a as usize)).max(half(e, e.b as usize));
    for &t in &mesh.edge_triangles()[own] {
        let Some(tri) = mesh.triangle_edges().get(t as usize) else {
            continue; // no triangle on this side (boundary edge)
        };
        let k = tri.iter().position(|&f| f as usize == own).unwrap_or(0);
        // The other two red nodes of this triangle; each midpoint edge is parallel to the base
        // edge opposite to it, i.e. to the third edge of the triangle.
        for (other, opposite) in [
            (tri[(k + 1) % 3], tri[(k + 2) % 3]),
            (tri[(k + 2) % 3], tri[(k + 1) % 3]),
        ] {
            if let (Some(m), Some(o)) = (edges[other as usize].mid, edges.get(opposite as usize)) {
                worst = worst.max(strain(node, m as usize, 0.5 * o.rest_length));
            }
        }
    }
    worst
}

/// Measures `state` of a cloth made from `model` under `gravity`.
pub(crate) fn measure(model: &ClothModel, state: &ClothState, gravity: DVec3) -> Measures {
    let x = &state.positions;
    let mesh = &model.mesh;
    let (mut max_strain, mut sum_strain) = (0.0f64, 0.0);
    for e in mesh.strain_edges() {
        let s = edge_strain(e, x);
        max_strain = max_strain.max(s);
        sum_strain += s;
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
        mean_strain: sum_strain / mesh.strain_edges().len() as f64,
        isometry_residual,
        conformity_residual: conformity / mesh.mean_render_edge_length(),
        kinetic_energy: state
            .velocities
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
