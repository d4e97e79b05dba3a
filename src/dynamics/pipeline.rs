//! One substep of a cloth, as a function of plain data: the model, the settings, the bodies
//! and the state, stepped in a [`Workspace`]. [`crate::Cloth`] is a façade over it (its
//! accumulator, pin interpolation, recovery and snapshots); nothing here calls back into it.
//!
//! A substep predicts the inertial positions (BDF2, air, damping), keeps the prediction from
//! stretching the red triangles, runs the budgeted iterations with contact forces
//! ([`crate::solver`]), and shifts positions, velocities and their history.

use glam::DVec3;

use crate::aero::Aerodynamics;
use crate::collision::{BodyExclusions, ColliderSet, ContactSettings};
use crate::integrator::{History, Scheme, predict, velocity};
use crate::limits::LimitFrame;
use crate::model::{ClothModel, SolverSettings};
use crate::self_contact::SelfFrame;
use crate::solver::{Contact, contact_displacement, solve_substep};
use crate::workspace::Workspace;

/// Positions and velocities of a cloth, now and one substep back (what BDF2 needs).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClothState {
    /// Node positions in metres.
    pub positions: Vec<DVec3>,
    /// Node positions one substep back.
    pub prev_positions: Vec<DVec3>,
    /// Node velocities in m/s.
    pub velocities: Vec<DVec3>,
    /// Node velocities one substep back.
    pub prev_velocities: Vec<DVec3>,
    /// Whether a previous substep exists (else the next substep is backward Euler).
    pub has_history: bool,
}

/// What a substep reads besides the state.
pub(crate) struct SubstepInputs<'a> {
    /// The cloth's model (mesh, terms, factor).
    pub model: &'a ClothModel,
    /// The cloth's settings (gravity, iterations).
    pub settings: &'a SolverSettings,
    /// Air forces and damping.
    pub aero: &'a Aerodynamics,
    /// Contact settings.
    pub contact: &'a ContactSettings,
    /// The bodies.
    pub colliders: &'a ColliderSet,
    /// The fractions of the frame the substep spans (for the bodies' poses).
    pub span: (f64, f64),
    /// The cloth's game constraints, if it has any.
    pub limits: Option<LimitFrame<'a>>,
    /// The cloth's self-collision thickness, if it collides with itself.
    pub self_thickness: Option<f64>,
    /// Bodies that do not push some nodes.
    pub exclusions: &'a BodyExclusions,
}

/// One substep of `state`; pinned entries of `ws.x_new` already hold their positions for the
/// substep's end. Returns false when the prediction was not finite (the caller rolls back).
pub(crate) fn substep(
    inputs: &SubstepInputs<'_>,
    state: &mut ClothState,
    ws: &mut Workspace,
) -> bool {
    let finite = substep_begin(inputs, state, ws);
    let cap = &inputs.settings.strain_cap;
    let it = solve_substep(
        inputs.model,
        (inputs.settings.iterations, cap),
        &mut ws.x_new,
        &mut ws.scratch,
        &mut Contact::alone(&mut ws.contact_pass, &state.positions),
    );
    // Self-contact's last pass moves nodes after the cloth's own (its strain cap, its push-out
    // of the bodies): where it moved any, the cloth's own last pass runs again, then
    // self-contact's again in `substep_end`, which ends the substep uncrossed (as a layer
    // group does, `crate::engine::layering`).
    let model = inputs.model;
    let sc = &mut ws.contact_pass.self_contact;
    if sc.enabled
        && cap.is_on()
        && sc.finish(
            model.self_topology(),
            &model.masses,
            &model.pinned_mask,
            &state.positions,
            &mut ws.x_new,
        ) > 0
    {
        it.finish(
            model,
            cap,
            &mut ws.x_new,
            &mut ws.scratch,
            &mut Contact::alone(&mut ws.contact_pass, &state.positions),
        );
    }
    substep_end(inputs, state, ws, None);
    finite
}

/// The first part of a substep (see [`substep`]): the prediction, the initial guess, the
/// contact pass's broad phase and self-contact's impulse on the prediction; the solve comes
/// next. Returns false when the prediction was not finite.
pub(crate) fn substep_begin(
    inputs: &SubstepInputs<'_>,
    state: &mut ClothState,
    ws: &mut Workspace,
) -> bool {
    let mut finite = true;
    let model = inputs.model;
    let h = model.settings.substep();
    let st = state;
    let scheme = model.scheme();
    if scheme == Scheme::Bdf2 && !st.has_history {
        // No history yet (a new cloth, a reset, a recovery): BDF2 from the past of a free
        // fall, x_{n-1} = x_n - h v_n + h^2 g / 2 and v_{n-1} = v_n - h g, which makes the
        // first step exact for a released or thrown cloth (a constant-velocity past would
        // give it only 2/3 of gravity's impulse, a lag that never closes). A backward-Euler
        // first step would need a second factor (another h~): 824 KiB and 1.5 ms of build on
        // the 2,025-node sheet.
        let g = inputs.settings.gravity;
        for i in 0..st.positions.len() {
            let v = st.velocities[i];
            st.prev_velocities[i] = v - h * g;
            st.prev_positions[i] = st.positions[i] - h * v + 0.5 * h * h * g;
        }
    }
    // Air: per-node accelerations from this substep's start state.
    let air = inputs.aero.active();
    if air {
        ws.accel.clear();
        ws.accel.resize(st.positions.len(), DVec3::ZERO);
        inputs.aero.accumulate(
            model.mesh.render_triangles(),
            &st.positions,
            &st.velocities,
            &mut ws.accel,
        );
        for (a, &m) in ws.accel.iter_mut().zip(&model.masses) {
            *a /= m;
        }
    }
    predict(
        scheme,
        h,
        &History {
            x: &st.positions,
            x_prev: &st.prev_positions,
            v: &st.velocities,
            v_prev: &st.prev_velocities,
        },
        inputs.settings.gravity,
        air.then_some(&ws.accel[..]),
        (-inputs.aero.damping * h).exp(),
        &mut ws.scratch.x_tilde,
    );
    if !ws.scratch.x_tilde.iter().all(|p| p.is_finite()) {
        finite = false;
    }
    limit_prediction_strain(model, &st.positions, &mut ws.scratch.x_tilde);
    // Initial guess: the prediction for free nodes.
    for &node in &model.free_nodes {
        ws.x_new[node as usize] = ws.scratch.x_tilde[node as usize];
    }
    match &inputs.limits {
        Some(frame) => frame.build(
            inputs.span,
            &st.positions,
            &ws.x_new,
            &mut ws.contact_pass.limits,
        ),
        None => ws.contact_pass.limits.clear(),
    }
    ws.contact_pass.prepare(
        inputs.colliders,
        inputs.contact,
        h,
        inputs.span.0,
        inputs.span.1,
        &model.free_nodes,
        &st.positions,
        &ws.scratch.x_tilde,
        inputs.self_thickness.is_some().then(|| SelfFrame {
            topology: model.self_topology(),
            thickness: inputs.self_thickness,
            rest: model.mesh.metric_positions(),
            pinned: &model.pinned_mask,
            targets: &ws.x_new,
        }),
        inputs.exclusions,
    );
    if ws.contact_pass.self_contact.active() {
        // Self-contact's impulse on the prediction (see `self_contact`), before the iterations.
        ws.contact_pass.self_contact.push_apart(
            &model.masses,
            &model.pinned_mask,
            &mut ws.scratch.x_tilde,
        );
        for &node in &model.free_nodes {
            ws.x_new[node as usize] = ws.scratch.x_tilde[node as usize];
        }
    }
    finite
}

/// The last part of a substep, after the solve (see [`substep`]): self-collision's last pass,
/// then velocities, the contact velocity split and the history. `external` are the forces of
/// the cloth's layer group on its nodes (`crate::layering`), which the split counts with the
/// contact forces; `group_impact`, whether the group's contact pushed or sent back one of the
/// cloth's nodes this substep (an impact, as a body's).
pub(crate) fn substep_end(
    inputs: &SubstepInputs<'_>,
    state: &mut ClothState,
    ws: &mut Workspace,
    external: Option<(&[DVec3], bool)>,
) {
    let model = inputs.model;
    let h = model.settings.substep();
    let st = state;
    let scheme = model.scheme();
    // The last pass of self-collision (see `self_contact`).
    let sc = &mut ws.contact_pass.self_contact;
    if sc.enabled {
        sc.finish(
            model.self_topology(),
            &model.masses,
            &model.pinned_mask,
            &st.positions,
            &mut ws.x_new,
        );
    }
    // Velocities and history shift. A substep in which a body stopped part of the cloth
    // ends with backward-Euler velocities: BDF2 differentiates a quadratic through the last
    // three positions, and after a sudden stop that quadratic rebounds (velocity -v/2),
    // which would make every impact bounce. BDF2 resumes once contact is steady.
    let impact = ws.contact_pass.impacts > 0
        || ws.contact_pass.self_contact.impacts > 0
        || external.is_some_and(|e| e.1);
    let vscheme = if impact {
        Scheme::BackwardEuler
    } else {
        scheme
    };
    for i in 0..st.positions.len() {
        let v = velocity(
            vscheme,
            h,
            ws.x_new[i],
            st.positions[i],
            st.prev_positions[i],
        );
        st.prev_velocities[i] = st.velocities[i];
        st.velocities[i] = v;
        st.prev_positions[i] = st.positions[i];
        st.positions[i] = ws.x_new[i];
    }
    // The velocity the contact forces may give (split impulses): a force may stop a node's
    // motion along its push, not throw it. `u = K^-1 r` is how far the forces moved each node
    // in the last solve (the whole cloth answers a push: the flap beyond a bar's contact line
    // is lifted with it while the iterations have not yet let it bend); the velocity without
    // it is `v - c u / h` (`c` the scheme's weight of the new position), and along `u` the
    // node keeps at most the larger of that and zero. A sheet dropped on a bar then rests
    // where it lands instead of leaving with the lift (`ContactSettings::split_impulses`,
    // docs/lab/2026-11-27-one-iteration.md).
    let pushed =
        ws.contact_pass.active() && ws.contact_pass.node_force.iter().any(|f| *f != DVec3::ZERO);
    let split = inputs.contact.split_impulses
        && match external {
            Some((external, _)) if external.iter().any(|f| *f != DVec3::ZERO) => {
                // The group's forces with the cloth's own (the right-hand side is free
                // after the solve).
                let mut force = std::mem::take(&mut ws.scratch.rhs);
                force.clear();
                force.extend_from_slice(external);
                if pushed {
                    for (f, r) in force.iter_mut().zip(&ws.contact_pass.node_force) {
                        *f += *r;
                    }
                }
                let done = contact_displacement(model, &force, &mut ws.scratch);
                ws.scratch.rhs = force;
                done
            }
            _ => {
                pushed && contact_displacement(model, &ws.contact_pass.node_force, &mut ws.scratch)
            }
        };
    let mut split_any = false;
    if split {
        let weight = match vscheme {
            Scheme::BackwardEuler => 1.0,
            Scheme::Bdf2 => 1.5,
        };
        for &node in &model.free_nodes {
            let i = node as usize;
            let u = ws.scratch.response[i];
            let len = u.length();
            if len <= SPLIT_MIN_DISPLACEMENT {
                continue;
            }
            let n = u / len;
            let v = st.velocities[i];
            let along = v.dot(n);
            let free = along - weight * len / h;
            let keep = free.max(0.0);
            if along > keep {
                st.velocities[i] = v - (along - keep) * n;
                ws.split[i] = true;
                split_any = true;
            }
        }
    }
    // Contact is inelastic: a node on a body leaves the substep with the body's normal
    // velocity, neither approaching it nor thrown off by the push that resolved it.
    for &(i, n, body_move) in &ws.contact_pass.touched {
        let i = i as usize;
        let v = st.velocities[i];
        let body_v = body_move / h;
        st.velocities[i] = v - (v - body_v).dot(n) * n;
    }
    if impact {
        // Restart the history from this substep: a constant-velocity past.
        for i in 0..st.positions.len() {
            st.prev_velocities[i] = st.velocities[i];
            st.prev_positions[i] = st.positions[i] - h * st.velocities[i];
        }
    }
    if split_any {
        // The same for the nodes whose velocity the split changed (BDF2 would otherwise
        // differentiate the lift back in), unless the impact restarted every node.
        for (i, split) in ws.split.iter_mut().enumerate() {
            if std::mem::take(split) && !impact {
                st.prev_velocities[i] = st.velocities[i];
                st.prev_positions[i] = st.positions[i] - h * st.velocities[i];
            }
        }
    }
    st.has_history = true;
}

/// Smallest contact displacement (metres) in a substep whose direction the velocity split
/// trusts.
const SPLIT_MIN_DISPLACEMENT: f64 = 1e-9;

/// Strain the inertial prediction may add to a red triangle edge beyond what it already has.
const PREDICTION_STRAIN_TOLERANCE: f64 = 1e-3;
/// `(1 - PREDICTION_STRAIN_TOLERANCE)^2` and `(1 + PREDICTION_STRAIN_TOLERANCE)^2`, each moved
/// inwards by 1e-9 (far beyond the rounding of the squared and the exact test), so that an edge
/// inside `[BAND_LO, BAND_HI] x rest^2` passes the exact test too.
const BAND_LO: f64 =
    (1.0 - PREDICTION_STRAIN_TOLERANCE) * (1.0 - PREDICTION_STRAIN_TOLERANCE) * (1.0 + 1e-9);
const BAND_HI: f64 =
    (1.0 + PREDICTION_STRAIN_TOLERANCE) * (1.0 + PREDICTION_STRAIN_TOLERANCE) * (1.0 - 1e-9);

/// Keeps the inertial prediction `x_tilde` from stretching (or compressing) any red triangle
/// edge further than the current positions `x` already do, beyond 0.1 %: one Gauss-Seidel sweep
/// that moves the two ends of an offending edge along it, weighted by inverse mass (pinned
/// nodes stay), so momentum is unchanged.
///
/// The prediction extrapolates the last substeps' motion, including the rate at which an
/// unconverged solve left the triangles deforming. A budgeted solve removes only part of that
/// each substep, and the extrapolation adds it back doubled: measured on the soak test, a local
/// distortion from one contact grew from 0.6 % to 43 % isometry residual in five substeps
/// (prediction 6 %, 24 %, 42 %, 60 %). Inextensible cloth has no stretching velocity, so this
/// takes none of the physical motion; it also removes the stretch that extrapolating a fast
/// rotation along straight lines would add.
///
/// One sweep, not more: where pins stop abruptly (the soak's character halting from 4 m/s in
/// one frame) the prediction next to them is distorted by up to 170 % and one sweep leaves
/// much of it, but ten sweeps did not make the soak measurably better: fewer frames over 10 %
/// strain, a higher 99th percentile, over nine seeds (`docs/lab/fidelity.md` section 5.1).
fn limit_prediction_strain(model: &ClothModel, x: &[DVec3], x_tilde: &mut [DVec3]) {
    let rigid = &model.terms.rigid;
    let pinned = &model.pinned_mask;
    let inv_mass = |n: usize| {
        if pinned[n] {
            0.0
        } else {
            1.0 / model.masses[n]
        }
    };
    for (nodes, rest) in rigid.nodes.iter().zip(&rigid.rest_lengths) {
        for k in 0..3 {
            let (i, j) = (nodes[k] as usize, nodes[(k + 1) % 3] as usize);
            let rest = rest[k];
            let d = x_tilde[j] - x_tilde[i];
            // Within the tolerance it is within the limit, whatever the current strain: most
            // edges stop here, first on squared lengths without a square root or a division
            // (perf: this sweep was 6 % of a 10 x 1 frame).
            let (dd, rest2) = (d.length_squared(), rest * rest);
            if dd >= rest2 * BAND_LO && dd <= rest2 * BAND_HI {
                continue;
            }
            let len = dd.sqrt();
            let predicted = len / rest - 1.0;
            if predicted.abs() <= PREDICTION_STRAIN_TOLERANCE || len == 0.0 {
                continue;
            }
            let now = x[j].distance(x[i]) / rest - 1.0;
            let limit = now.abs().max(PREDICTION_STRAIN_TOLERANCE);
            if predicted.abs() <= limit {
                continue;
            }
            let (wi, wj) = (inv_mass(i), inv_mass(j));
            if wi + wj == 0.0 {
                continue;
            }
            let target = rest * (1.0 + limit.copysign(predicted));
            let correction = (len - target) / (wi + wj) * (d / len);
            x_tilde[i] += wi * correction;
            x_tilde[j] -= wj * correction;
        }
    }
}
