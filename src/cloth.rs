//! A cloth instance: the state of one cape, banner or skirt, stepped with explicit arguments.
//!
//! [`Cloth`] owns positions, velocities and their history, and shares its [`ClothModel`] (mesh,
//! factor) with every other instance of the same asset; the scratch memory of a step lives in
//! a [`Workspace`] shared by the cloths stepped on one thread. Like rapier's
//! `PhysicsPipeline::step`, nothing is hidden: the game sets pin targets for the end of the frame,
//! calls [`Cloth::step`] with the frame's length, and reads back render positions and normals.
//!
//! Frames of any length run whole fixed substeps from an accumulator, at most
//! [`SolverSettings::max_substeps_per_step`] per call; pin targets are interpolated linearly across
//! the substeps of a frame. After the first frame the step allocates nothing.

use std::sync::Arc;

use glam::{DVec3, Vec3};

use crate::aero::Aerodynamics;
use crate::collision::{BodyExclusions, ColliderSet, ContactForce, ContactSettings, Pose};
use crate::contact::collision::pass::ResponseCache;
use crate::counters::StepCounters;
use crate::equilibrium::{RelaxReport, relax};
use crate::error::ClothError;
use crate::flags::NodeFlags;
use crate::layers::ClothSurface;
use crate::limits::{LimitFrame, LimitSettings, SkinFrame};
use crate::measures::{Measures, measure};
use crate::mesh::ClothMesh;
use crate::model::{ClothModel, SolverSettings};
pub use crate::pipeline::ClothState;
use crate::pipeline::{SubstepInputs, substep, substep_begin, substep_end};
use crate::self_contact::{RawPair, SelfCollisionSettings};
use crate::workspace::{Workspace, with_thread_workspace};

/// What one call to [`Cloth::step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Whether a non-finite position appeared and the cloth went back to its last good state
    /// (the state before this call), then stood still there.
    pub recovered: bool,
    /// Substeps run.
    pub substeps: u32,
    /// Local-global iterations run, over all substeps.
    pub iterations: u32,
    /// Substeps of backlog dropped by the catch-up cap.
    pub dropped_substeps: u32,
    /// Nodes in contact with a collider after the last substep.
    pub contacts: u32,
    /// Whether the cloth is asleep after this call (it ran no substep; see
    /// [`SleepSettings`](crate::SleepSettings)).
    pub asleep: bool,
    /// What each stage did, and whether a bound stopped one ([`StepCounters::work`]: the
    /// step's work in one figure).
    pub counters: StepCounters,
}

/// Everything a cloth needs to continue bit-identically: its state, pin interpolation, the
/// frame accumulator and which nodes touched a body, plus a fingerprint of the mesh and pin set
/// it came from. Serde-serialisable; restore with [`Cloth::restore`]. (Through JSON, enable
/// serde_json's `float_roundtrip` feature: its default float parsing is not exact, and the
/// continued run then drifts from the uninterrupted one.)
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClothSnapshot {
    /// Fingerprint of the mesh (topology and rest shape) and the pin set.
    pub fingerprint: u64,
    /// Positions and velocities with their history.
    pub state: ClothState,
    /// Pin positions at the start of the frame.
    pub pin_start: Vec<DVec3>,
    /// Pin targets for the end of the frame.
    pub pin_target: Vec<DVec3>,
    /// Time accumulated toward the next substep.
    pub accumulator: f64,
    /// Nodes touching a body after the last substep.
    pub touching: Vec<bool>,
    /// The contact forces the last step ended with, one per node a body pushed (the next
    /// step starts from them; empty: none).
    #[serde(default)]
    pub contact_forces: Vec<ContactForce>,
    /// The forces of the game constraints the last step ended with, one per limit (empty:
    /// none).
    #[serde(default)]
    pub limit_forces: Vec<f64>,
}

/// One simulated cloth. See the module docs.
#[derive(Debug)]
pub struct Cloth {
    model: Arc<ClothModel>,
    settings: SolverSettings,
    state: ClothState,
    /// Pin positions at the start of the current frame (one per model pin).
    pin_start: Vec<DVec3>,
    /// Pin positions wanted at the end of the current frame.
    pin_target: Vec<DVec3>,
    accumulator: f64,
    contact: ContactSettings,
    /// Per node: touching a body at the end of the last substep.
    touching: NodeFlags,
    /// The contact forces the last step ended with, one per node a body pushed: the warm
    /// start of the next step (only the nodes in contact are kept, not a per-node array).
    contact_forces: Vec<ContactForce>,
    /// The collective contact compliance last measured (a cache of the factor; see
    /// [`ResponseCache`]).
    contact_response: ResponseCache,
    aero: Aerodynamics,
    /// Game constraints and sleeping.
    limits: LimitSettings,
    /// The skinned pose max distance and backstops are measured from (empty until a limit
    /// needs it).
    skin: SkinFrame,
    /// The skin's rigid motion over the coming frame, when given without per-node targets
    /// ([`Cloth::set_skin_motion`]); used by the next [`Cloth::follow_skin`] and dropped at the
    /// end of the frame.
    skin_motion: Option<SkinMotion>,
    /// Per limit, the force it ended the last step with (the next step's warm start).
    limit_forces: Vec<f64>,
    /// The cloth against itself.
    self_collision: SelfCollisionSettings,
    /// The self-contact forces the last step ended with (the next step's warm start).
    self_forces: Vec<(RawPair, f64)>,
    /// Bodies that do not push some nodes ([`Cloth::set_body_exclusions`]).
    body_exclusions: BodyExclusions,
    sleep: Sleep,
    /// How many times the cloth went back to its last good state.
    recoveries: u64,
    /// A non-finite value appeared inside the current step (caught even if a later pass
    /// overwrote it).
    fault: bool,
}

/// The rigid motion that best carries a cloth's skinned pose from the last frame to the next
/// one (least squares over every skinned node): `x -> to + rotation * (x - from)`
/// ([`Cloth::set_skin_motion`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkinMotion {
    /// The rotation (unit).
    pub rotation: glam::DQuat,
    /// The skinned pose's centroid at the last frame.
    pub from: DVec3,
    /// Its centroid at the next.
    pub to: DVec3,
    /// Whether the skin moves at all (its bones moved). A still skin lets
    /// [`Cloth::follow_skin`] carry the free nodes by the pins' mean motion instead.
    pub moving: bool,
}

impl Cloth {
    /// A cloth at the mesh's initial shape, at rest, pins holding their initial positions.
    pub fn new(model: Arc<ClothModel>) -> Self {
        let x0 = model.mesh.initial_positions().to_vec();
        let n = x0.len();
        let pins: Vec<DVec3> = model.pins.iter().map(|&p| x0[p as usize]).collect();
        Self {
            settings: model.settings,
            state: ClothState {
                prev_positions: x0.clone(),
                positions: x0,
                velocities: vec![DVec3::ZERO; n],
                prev_velocities: vec![DVec3::ZERO; n],
                has_history: false,
            },
            pin_start: pins.clone(),
            pin_target: pins,
            accumulator: 0.0,
            contact: ContactSettings::default(),
            touching: NodeFlags::new(n),
            contact_forces: Vec::new(),
            contact_response: ResponseCache::default(),
            aero: Aerodynamics::default(),
            limits: LimitSettings::default(),
            skin: SkinFrame::default(),
            skin_motion: None,
            limit_forces: Vec::new(),
            self_collision: SelfCollisionSettings::default(),
            self_forces: Vec::new(),
            body_exclusions: BodyExclusions::default(),
            sleep: Sleep::default(),
            recoveries: 0,
            fault: false,
            model,
        }
    }

    /// Builds mesh, model and cloth in one go: the common case for a single cloth.
    pub fn from_mesh(
        mesh: ClothMesh,
        material: crate::Material,
        pins: &[u32],
        settings: SolverSettings,
    ) -> Result<Self, ClothError> {
        Ok(Self::new(ClothModel::new(
            Arc::new(mesh),
            material,
            pins,
            settings,
        )?))
    }

    /// The shared model.
    pub fn model(&self) -> &Arc<ClothModel> {
        &self.model
    }
    /// The mesh.
    pub fn mesh(&self) -> &ClothMesh {
        &self.model.mesh
    }
    /// The state (positions, velocities, history).
    pub fn state(&self) -> &ClothState {
        &self.state
    }
    /// Node positions.
    pub fn positions(&self) -> &[DVec3] {
        &self.state.positions
    }
    /// Node velocities.
    pub fn velocities(&self) -> &[DVec3] {
        &self.state.velocities
    }
    /// The settings in force.
    pub fn settings(&self) -> &SolverSettings {
        &self.settings
    }

    /// Changes the settings. Iterations, gravity and the catch-up cap change at once. A different
    /// substep length, integrator or method rebuilds the model (a refactorisation, see
    /// [`ModelStats::build_seconds`](crate::ModelStats)), which this cloth then no longer shares.
    pub fn set_settings(&mut self, settings: SolverSettings) -> Result<(), ClothError> {
        settings.validate()?;
        let m = &self.model.settings;
        if !settings.factors_like(m) {
            let new_step = settings.substep() != m.substep();
            self.model = self.model.with_settings(settings)?;
            self.contact_response.clear();
            // BDF2's history is one step back: another step length restarts it from the
            // current velocities (see `Cloth::set_model`).
            if new_step {
                self.state.has_history = false;
            }
        }
        self.settings = settings;
        self.wake();
        Ok(())
    }

    /// Switches to `model`, a variant of this cloth's model factored for other settings (the
    /// same mesh, material and pins: [`ClothModel::with_settings`] of it, built once and shared
    /// by every cloth of that model, as [`crate::lod::LodModels`] does), and runs with
    /// `settings` (its substep length, integrator and method must be the model's; iterations,
    /// gravity and catch-up may differ). No refactorisation. Positions and velocities carry
    /// over; where the substep length changes, BDF2 restarts from the current velocities (a
    /// history one old step back would throw the cloth). Refused: another mesh, material or
    /// pin set, or settings the model was not factored for.
    pub fn set_model(
        &mut self,
        model: Arc<ClothModel>,
        settings: SolverSettings,
    ) -> Result<(), ClothError> {
        settings.validate()?;
        let same_cloth = Arc::ptr_eq(&model.mesh, &self.model.mesh)
            && model.material == self.model.material
            && model.pins == self.model.pins;
        if !same_cloth {
            return Err(ClothError::InvalidSetting {
                name: "model",
                reason: "not a variant of this cloth's model (mesh, material or pins differ)"
                    .into(),
            });
        }
        if !settings.factors_like(&model.settings) {
            return Err(ClothError::InvalidSetting {
                name: "settings",
                reason: "the model was factored for another substep, integrator, method or weights"
                    .into(),
            });
        }
        if !Arc::ptr_eq(&model, &self.model) {
            if model.settings.substep() != self.model.settings.substep() {
                self.state.has_history = false;
            }
            self.model = model;
            self.contact_response.clear();
        }
        self.settings = settings;
        Ok(())
    }

    /// A tick without simulation in which the cloth follows its skinned pose: the free nodes
    /// move as one rigid piece with the skin (the rotation and translation that best carry the
    /// skinned positions from the last frame's targets to this one's,
    /// [`Cloth::set_skin_targets`]: least squares, Horn's quaternion method), keeping the
    /// cloth's shape and so its strain, and then the fraction `blend` (in [0, 1]) of the way
    /// left to their skinned positions, the same fraction for every node, less where the
    /// farthest node would close faster than `max_speed` (m/s); pinned nodes go to their pin
    /// targets; the velocities become that motion over `dt` seconds. So a cloth stepping down
    /// from simulation keeps moving with its character (and, with `blend` above 0, eases onto
    /// the skinned pose as one piece) instead of jumping, and a cloth simulated again starts
    /// moving as it was shown. For far, cheap cloths
    /// ([`crate::lod::Rung::FollowSkin`]). Without skin targets the free nodes stay where they
    /// are. Refused: `dt` or `max_speed` not positive and finite, `blend` outside [0, 1].
    pub fn follow_skin(&mut self, dt: f64, blend: f64, max_speed: f64) -> Result<(), ClothError> {
        crate::error::positive("dt", dt)?;
        crate::error::positive("max_speed", max_speed)?;
        let max_step = max_speed * dt;
        if !(0.0..=1.0).contains(&blend) {
            return Err(ClothError::InvalidSetting {
                name: "blend",
                reason: format!("must be in [0, 1], got {blend}"),
            });
        }
        // One pass over the nodes where it can be (a crowd runs most of its cloths here, every
        // tick): the last positions and velocities become the previous ones by a swap, and
        // each node's carried position and its velocity are written together. (Copy, carry,
        // blend and velocity as four passes cost 15 us a 777-node cape on `crowd`, about a
        // third of the plaza's summed cloth time; in one, 8.7 us.)
        let st = &mut self.state;
        std::mem::swap(&mut st.prev_positions, &mut st.positions);
        std::mem::swap(&mut st.prev_velocities, &mut st.velocities);
        let skinned = self.skin.target.len() == st.positions.len();
        let motion = self.skin_motion.take();
        // The skin's motion over the frame: given (`set_skin_motion`) or fitted from the
        // targets. On a frame where the skin holds still (its first, when the targets were just
        // given) the pins' mean motion instead (a translation: a row of pins does not fix a
        // rotation), so that free nodes do not stay behind pins that moved.
        let skin_moves = motion.map_or(skinned && self.skin.moving(), |m| m.moving);
        let (rotation, from, to) = match motion {
            Some(m) if skin_moves => (m.rotation, m.from, m.to),
            None if skin_moves => rigid_fit(&self.skin.start, &self.skin.target),
            _ if (skinned || motion.is_some()) && !self.pin_start.is_empty() => {
                let mean = |v: &[DVec3]| v.iter().sum::<DVec3>() / v.len() as f64;
                (
                    glam::DQuat::IDENTITY,
                    mean(&self.pin_start),
                    mean(&self.pin_target),
                )
            }
            _ => (glam::DQuat::IDENTITY, DVec3::ZERO, DVec3::ZERO),
        };
        // Carried rigidly with the skin, then every node closes the same fraction of its
        // offset (so the cloth eases as one piece, not node by node): `blend`, or less where
        // the farthest node would move faster than `max_speed`.
        let carried = skinned || motion.is_some();
        let carry = |x0: DVec3| to + rotation * (x0 - from);
        let positions = st.positions.iter_mut().zip(&st.prev_positions);
        if skinned && blend > 0.0 {
            let mut farthest = 0.0f64;
            for ((x, x0), t) in positions.zip(&self.skin.target) {
                *x = carry(*x0);
                farthest = farthest.max(x.distance(*t));
            }
            let fraction = if farthest * blend > max_step {
                max_step / farthest
            } else {
                blend
            };
            for (x, t) in st.positions.iter_mut().zip(&self.skin.target) {
                *x += fraction * (*t - *x);
            }
            for ((v, x), x0) in st
                .velocities
                .iter_mut()
                .zip(&st.positions)
                .zip(&st.prev_positions)
            {
                *v = (*x - *x0) / dt;
            }
        } else {
            for ((x, x0), v) in positions.zip(st.velocities.iter_mut()) {
                *x = if carried { carry(*x0) } else { *x0 };
                *v = (*x - *x0) / dt;
            }
        }
        for (k, &p) in self.model.pins.iter().enumerate() {
            let p = p as usize;
            st.positions[p] = self.pin_target[k];
            st.velocities[p] = (st.positions[p] - st.prev_positions[p]) / dt;
        }
        // The history is this tick's motion, not a simulated step of the model's length.
        st.has_history = false;
        self.skip_frame();
        Ok(())
    }

    /// A tick without simulation (a cloth asleep by level of detail, [`crate::lod::Rung::Sleep`]):
    /// the nodes stay where they are, at rest, and this frame's pin and skin targets count as
    /// reached, so that the next simulated frame starts from them instead of sweeping the pins
    /// over every frame missed. Contact forces are forgotten (the bodies moved on).
    pub fn hold(&mut self) {
        let st = &mut self.state;
        st.velocities.fill(DVec3::ZERO);
        st.prev_velocities.fill(DVec3::ZERO);
        st.prev_positions.copy_from_slice(&st.positions);
        st.has_history = false;
        self.skip_frame();
    }

    /// A frame passed without simulation: pin and skin targets reached, contact forces and
    /// the accumulated time dropped. The contact lists give their memory back: a cloth that
    /// is not simulated (a crowd's far capes, following their skins) holds none, and the next
    /// simulated frame takes it again.
    fn skip_frame(&mut self) {
        self.skin_motion = None;
        self.pin_start.copy_from_slice(&self.pin_target);
        if self.skin.moving() {
            self.skin.finish_frame();
        }
        self.contact_forces = Vec::new();
        self.contact_response = ResponseCache::default();
        self.accumulator = 0.0;
    }

    /// Pins a different node set (a refactorisation). Pins keep the nodes' current positions as
    /// their targets.
    pub fn set_pins(&mut self, pins: &[u32]) -> Result<(), ClothError> {
        self.model = self.model.with_pins(pins)?;
        self.contact_response.clear();
        self.limit_forces.clear();
        self.self_forces.clear();
        self.wake();
        let x = &self.state.positions;
        self.pin_start = self.model.pins.iter().map(|&p| x[p as usize]).collect();
        self.pin_target = self.pin_start.clone();
        Ok(())
    }

    /// Pinned nodes, sorted; [`Cloth::set_pin_targets`] takes targets in this order.
    pub fn pins(&self) -> &[u32] {
        &self.model.pins
    }

    /// Sets where every pinned node should be at the end of the next frame, in [`Cloth::pins`]
    /// order.
    pub fn set_pin_targets(&mut self, targets: &[DVec3]) -> Result<(), ClothError> {
        if targets.len() != self.pin_target.len() {
            return Err(ClothError::LengthMismatch {
                what: "pin targets",
                expected: self.pin_target.len(),
                found: targets.len(),
            });
        }
        if let Some(k) = targets.iter().position(|t| !t.is_finite()) {
            return Err(ClothError::NonFiniteInput {
                node: self.model.pins[k] as usize,
            });
        }
        self.pin_target.copy_from_slice(targets);
        Ok(())
    }

    /// Sets the end-of-frame target of one pinned node.
    pub fn set_pin_target(
        &mut self,
        node: u32,
        target: impl Into<DVec3>,
    ) -> Result<(), ClothError> {
        let target = target.into();
        let k = self
            .model
            .pins
            .binary_search(&node)
            .map_err(|_| ClothError::InvalidSetting {
                name: "node",
                reason: format!("node {node} is not pinned"),
            })?;
        if !target.is_finite() {
            return Err(ClothError::NonFiniteInput {
                node: node as usize,
            });
        }
        self.pin_target[k] = target;
        Ok(())
    }

    /// Wind, aerodynamic coefficients and damping.
    pub fn aerodynamics(&self) -> &Aerodynamics {
        &self.aero
    }

    /// Changes wind, aerodynamics and damping (validated; no refactorisation).
    pub fn set_aerodynamics(&mut self, aero: Aerodynamics) -> Result<(), ClothError> {
        aero.validate()?;
        self.aero = aero;
        self.wake();
        Ok(())
    }

    /// The game constraints and sleep settings in force.
    pub fn limit_settings(&self) -> &LimitSettings {
        &self.limits
    }

    /// Changes the game constraints and sleep settings (validated against this cloth's node
    /// count; no refactorisation). Max distance and backstops are measured from the skinned
    /// pose ([`Cloth::set_skin_targets`]); until one is given, from the cloth's positions when
    /// they were first needed. Wakes the cloth.
    pub fn set_limit_settings(&mut self, limits: LimitSettings) -> Result<(), ClothError> {
        limits.validate_for(self.state.positions.len())?;
        if limits.uses_skin() && self.skin.start.len() != self.state.positions.len() {
            self.skin = SkinFrame::still(
                &self.model.mesh,
                &self.state.positions,
                limits.uses_backstop(),
            );
        } else if limits.uses_backstop() {
            self.skin.ensure_normals(&self.model.mesh);
        }
        // Another limit set has another order of limits: no warm start.
        self.limit_forces.clear();
        self.limits = limits;
        self.wake();
        Ok(())
    }

    /// Sets which bodies do not push which nodes (replacing the last list; empty: every body
    /// pushes every node it meets). The ECS layer sets it from the cloth's attachments: the
    /// nodes a pin holds and the ring next to them are not pushed by the bodies of the bones
    /// that hold them (a collar capsule around the nodes pinned to the collar would fight the
    /// pins). Wakes the cloth.
    pub fn set_body_exclusions(&mut self, exclusions: BodyExclusions) -> Result<(), ClothError> {
        if !exclusions.is_empty() && exclusions.node_count() != n_nodes(self) {
            return Err(ClothError::InvalidSetting {
                name: "body exclusions",
                reason: format!(
                    "made for {} nodes, the cloth has {}",
                    exclusions.node_count(),
                    n_nodes(self)
                ),
            });
        }
        if exclusions != self.body_exclusions {
            self.body_exclusions = exclusions;
            self.wake();
        }
        Ok(())
    }

    /// The bodies that do not push which nodes ([`Cloth::set_body_exclusions`]).
    pub fn body_exclusions(&self) -> &BodyExclusions {
        &self.body_exclusions
    }

    /// The self-collision settings in force.
    pub fn self_collision(&self) -> &SelfCollisionSettings {
        &self.self_collision
    }

    /// Turns self-collision on or off, or changes its thickness (validated; no
    /// refactorisation). Wakes the cloth. See [`crate::self_contact`].
    pub fn set_self_collision(
        &mut self,
        settings: SelfCollisionSettings,
    ) -> Result<(), ClothError> {
        settings.validate()?;
        self.self_collision = settings;
        self.self_forces.clear();
        self.wake();
        Ok(())
    }

    /// Sets every node's skinned position for the end of the next frame (node order): the
    /// rest pose carried by the character's bones, which max distance and backstops are
    /// measured from ([`crate::attachment::Attachments::with_skin`] computes it). Substeps
    /// interpolate from the last frame's.
    pub fn set_skin_targets(&mut self, targets: &[DVec3]) -> Result<(), ClothError> {
        let n = per_node_input("skin targets", targets, n_nodes(self))?;
        let normals = self.limits.uses_backstop();
        if self.skin.start.len() != n {
            self.skin = SkinFrame::still(&self.model.mesh, targets, normals);
        } else {
            self.skin.set_target(&self.model.mesh, targets, normals);
        }
        Ok(())
    }

    /// The skinned positions wanted at the end of the next frame (empty if none was ever
    /// needed).
    pub fn skin_targets(&self) -> &[DVec3] {
        &self.skin.target
    }

    /// Sets every node's skinned position now and at the end of the next frame: a skin that
    /// holds still over the frame ([`Cloth::set_skin_targets`] interpolates from the last
    /// frame's targets instead). For a skin given again after frames without one
    /// ([`crate::attachment::SkinUse`]), so that the limits do not sweep from a stale pose.
    pub fn set_skin_pose(&mut self, targets: &[DVec3]) -> Result<(), ClothError> {
        // In place once the skin exists: a cloth stepping up from following its skin
        // allocates nothing.
        self.set_skin_targets(targets)?;
        self.skin.finish_frame();
        Ok(())
    }

    /// Sets the skin's rigid motion over the coming frame without per-node skin targets: what
    /// the next [`Cloth::follow_skin`] carries the free nodes by, in place of the fit of the
    /// targets ([`crate::attachment::Attachments::apply_using`] with
    /// [`crate::attachment::SkinUse::Motion`] computes it from the bones alone, whatever the
    /// node count). Dropped at the end of the frame. Refused: a pose that is not finite or a
    /// rotation that is not unit.
    pub fn set_skin_motion(&mut self, motion: SkinMotion) -> Result<(), ClothError> {
        let pose = Pose::new(motion.to - motion.rotation * motion.from, motion.rotation);
        if !(pose.is_valid() && motion.from.is_finite() && motion.to.is_finite()) {
            return Err(ClothError::InvalidSetting {
                name: "skin motion",
                reason: "needs finite points and a unit rotation".into(),
            });
        }
        self.skin_motion = Some(motion);
        Ok(())
    }

    /// Whether the cloth is asleep: its nodes, pins, skin and nearby bodies stayed still for
    /// [`SleepSettings::time`](crate::SleepSettings::time), and steps cost only the checks
    /// that wake it (a pin or skin target that moves, a body near it that moves, a collider
    /// added or removed, any change of state or settings).
    pub fn is_sleeping(&self) -> bool {
        self.sleep.asleep
    }

    /// Wakes the cloth (and restarts its stillness clock).
    pub fn wake(&mut self) {
        self.sleep = Sleep::default();
    }

    /// Contact settings (thickness, friction).
    pub fn contact_settings(&self) -> &ContactSettings {
        &self.contact
    }

    /// Changes the contact settings (validated; no refactorisation).
    pub fn set_contact_settings(&mut self, contact: ContactSettings) -> Result<(), ClothError> {
        contact.validate()?;
        self.contact = contact;
        self.wake();
        Ok(())
    }

    /// Sets the gravity (no refactorisation).
    pub fn set_gravity(&mut self, gravity: DVec3) -> Result<(), ClothError> {
        let mut s = self.settings;
        s.gravity = gravity;
        s.validate()?;
        self.settings = s;
        self.wake();
        Ok(())
    }

    /// Puts every node at `positions` with zero velocity and forgets the history (the next
    /// substep is backward Euler).
    pub fn set_positions(&mut self, positions: &[DVec3]) -> Result<(), ClothError> {
        per_node_input("positions", positions, n_nodes(self))?;
        self.state.positions.copy_from_slice(positions);
        self.state.prev_positions.copy_from_slice(positions);
        self.state.velocities.fill(DVec3::ZERO);
        self.state.prev_velocities.fill(DVec3::ZERO);
        self.state.has_history = false;
        // Forces that held the cloth where it was would push it from where it is now.
        self.contact_forces.clear();
        self.limit_forces.clear();
        self.self_forces.clear();
        self.wake();
        for (k, &p) in self.model.pins.iter().enumerate() {
            self.pin_start[k] = positions[p as usize];
            self.pin_target[k] = positions[p as usize];
        }
        self.accumulator = 0.0;
        Ok(())
    }

    /// Sets every node's velocity (history is reset to the same velocity).
    pub fn set_velocities(&mut self, velocities: &[DVec3]) -> Result<(), ClothError> {
        per_node_input("velocities", velocities, n_nodes(self))?;
        self.state.velocities.copy_from_slice(velocities);
        self.state.has_history = false;
        self.wake();
        Ok(())
    }

    /// Back to the mesh's initial shape, at rest.
    pub fn reset(&mut self) {
        self.reset_to(&Pose::IDENTITY);
    }

    /// Back to the mesh's initial shape carried by `pose` (for example the character's current
    /// root pose relative to its bind pose), at rest, history forgotten.
    pub fn reset_to(&mut self, pose: &Pose) {
        let x0: Vec<DVec3> = self
            .model
            .mesh
            .initial_positions()
            .iter()
            .map(|&p| pose.transform_point(p))
            .collect();
        if x0.iter().all(|p| p.is_finite()) {
            // Cannot fail: same length, finite.
            let _ = self.set_positions(&x0);
        }
    }

    /// Moves the whole cloth rigidly by `transform` (world = transform * old): positions and
    /// their history are carried, velocities and their history rotated, pin targets carried.
    /// Strain, speeds and the shape are exactly unchanged, so a character that jumps (a respawn,
    /// a cut, a 100 m teleport) takes its cape along without a spike. Allocates nothing.
    pub fn teleport(&mut self, transform: &Pose) -> Result<(), ClothError> {
        if !transform.is_valid() {
            return Err(ClothError::InvalidSetting {
                name: "transform",
                reason: "teleport needs a finite pose with a unit rotation".into(),
            });
        }
        let st = &mut self.state;
        for p in st.positions.iter_mut().chain(st.prev_positions.iter_mut()) {
            *p = transform.transform_point(*p);
        }
        for v in st
            .velocities
            .iter_mut()
            .chain(st.prev_velocities.iter_mut())
        {
            *v = transform.transform_vector(*v);
        }
        for p in self.pin_start.iter_mut().chain(self.pin_target.iter_mut()) {
            *p = transform.transform_point(*p);
        }
        for f in &mut self.contact_forces {
            f.force = transform.transform_vector(f.force);
        }
        self.skin.transform(transform);
        if let Some(m) = &mut self.skin_motion {
            // The motion seen from the teleported world: `T M T^-1`.
            m.rotation = transform.rotation * m.rotation * transform.rotation.inverse();
            m.from = transform.transform_point(m.from);
            m.to = transform.transform_point(m.to);
        }
        self.wake();
        Ok(())
    }

    /// Advances by a frame of `dt` seconds: runs as many fixed substeps as the accumulated time
    /// holds (capped), interpolating pins from their positions at the start of the frame to the
    /// targets. `dt` must be finite and non-negative. No colliders: see [`Cloth::step_with`].
    pub fn step(&mut self, dt: f64) -> Result<StepReport, ClothError> {
        self.step_with(dt, &ColliderSet::EMPTY)
    }

    /// [`Cloth::step`] against kinematic bodies: each substep sees the colliders at their pose
    /// interpolated across the frame (see [`crate::collision`]). Uses this thread's
    /// [`Workspace`].
    pub fn step_with(
        &mut self,
        dt: f64,
        colliders: &ColliderSet,
    ) -> Result<StepReport, ClothError> {
        with_thread_workspace(|ws| self.step_in(dt, colliders, ws))
    }

    /// [`Cloth::step_with`] with an explicit [`Workspace`] (any number of cloths, of any models,
    /// may share one; the results do not depend on which workspace is used).
    pub fn step_in(
        &mut self,
        dt: f64,
        colliders: &ColliderSet,
        ws: &mut Workspace,
    ) -> Result<StepReport, ClothError> {
        self.step_inner(dt, colliders, ws)
    }

    /// This cloth's surface for its layers' partners (stage 1 of [`crate::layers`]): its
    /// model and positions copied into `surface` (its memory reused), with its fastest node's
    /// speed (how far it may move this frame).
    pub fn surface(&self, surface: &mut ClothSurface) {
        surface.capture(&self.model, &self.state.positions, &self.state.velocities);
    }

    fn step_inner(
        &mut self,
        dt: f64,
        colliders: &ColliderSet,
        ws: &mut Workspace,
    ) -> Result<StepReport, ClothError> {
        let mut frame = self.begin_frame(dt, colliders, false, ws)?;
        if frame.asleep {
            return Ok(frame.report);
        }
        for k in 1..=frame.run {
            let (s0, s) = self.substep_pins(k, frame.run, ws);
            self.substep_with_pins_in_x_new(ws, colliders, s0, s);
        }
        self.end_frame(&mut frame, colliders, ws);
        Ok(frame.report)
    }

    /// The start of a frame of `dt` seconds (see [`Cloth::step`]): the time check, sleeping,
    /// the substeps to run, the workspace loaded with the cloth's warm starts and the
    /// positions to go back to. `layered`: the cloth steps in a layer group
    /// ([`crate::layering`]), whose contact forces join its own.
    pub(crate) fn begin_frame(
        &mut self,
        dt: f64,
        colliders: &ColliderSet,
        layered: bool,
        ws: &mut Workspace,
    ) -> Result<Frame, ClothError> {
        if !(dt.is_finite() && dt >= 0.0) {
            return Err(ClothError::InvalidSetting {
                name: "dt",
                reason: format!("frame time must be finite and non-negative, got {dt}"),
            });
        }
        let h = self.model.settings.substep();
        if self.sleep.asleep {
            if !layered && self.sleep.woken(self, colliders) {
                self.wake();
            } else if !layered || self.sleep.asleep {
                self.accumulator = 0.0;
                return Ok(Frame {
                    report: StepReport {
                        asleep: true,
                        ..StepReport::default()
                    },
                    run: 0,
                    asleep: true,
                });
            }
        }
        self.accumulator += dt;
        let wanted = ((self.accumulator / h) + 1e-6).floor() as u64;
        let cap = self.settings.max_substeps_per_step() as u64;
        let run = wanted.min(cap) as u32;
        let report = StepReport {
            substeps: run,
            iterations: run * self.settings.iterations,
            dropped_substeps: (wanted - run as u64).min(u32::MAX as u64) as u32,
            contacts: 0,
            recovered: false,
            asleep: false,
            counters: StepCounters::default(),
        };
        if wanted > cap {
            self.accumulator = 0.0;
        } else {
            self.accumulator = (self.accumulator - run as f64 * h).max(0.0);
        }
        ws.ensure(&self.model);
        // Counts left by a frame that did not end (a fault mid-frame) are not this one's.
        ws.take_counters();
        let bodies = self.contact.enabled && !colliders.is_empty();
        ws.contact_pass.load(
            &self.touching,
            &self.contact_forces,
            &mut self.contact_response,
            &mut self.limit_forces,
            bodies,
            self.limits.any(),
            self.self_collision.enabled,
            &mut self.self_forces,
        );
        // Keep the positions to go back to if a non-finite value appears (reusing the buffer):
        // a recovery restarts the cloth at rest there, so nothing else of the state is needed.
        ws.last_good.clone_from(&self.state.positions);
        Ok(Frame {
            report,
            run,
            asleep: false,
        })
    }

    /// Puts the pins' positions for substep `k` of `run` (from 1) into `ws.x_new`; returns the
    /// fractions of the frame the substep spans.
    pub(crate) fn substep_pins(&self, k: u32, run: u32, ws: &mut Workspace) -> (f64, f64) {
        let s = k as f64 / run as f64;
        for (i, &p) in self.model.pins.iter().enumerate() {
            ws.x_new[p as usize] = self.pin_start[i].lerp(self.pin_target[i], s);
        }
        ((k - 1) as f64 / run as f64, s)
    }

    /// The end of a frame begun by [`Cloth::begin_frame`]: the warm starts stored, a
    /// non-finite state rolled back, sleeping, the pins' and skin's frame advanced.
    pub(crate) fn end_frame(
        &mut self,
        frame: &mut Frame,
        colliders: &ColliderSet,
        ws: &mut Workspace,
    ) {
        let run = frame.run;
        let h = self.model.settings.substep();
        let report = &mut frame.report;
        self.touching.assign(ws.contact_pass.touching());
        ws.contact_pass.store(
            &mut self.contact_forces,
            &mut self.contact_response,
            &mut self.limit_forces,
            &mut self.self_forces,
        );
        report.contacts = ws.contact_pass.last_contacts as u32;
        report.counters = ws.take_counters();
        let st = &self.state;
        let finite = |v: &[DVec3]| v.iter().all(|p| p.is_finite());
        if std::mem::take(&mut self.fault)
            || !finite(&st.positions)
            || !finite(&st.velocities)
            || !finite(&st.prev_positions)
            || !finite(&st.prev_velocities)
        {
            // Back to the last good positions, at rest there, history forgotten.
            self.state.positions.clone_from(&ws.last_good);
            self.state.velocities.fill(DVec3::ZERO);
            self.state.prev_velocities.fill(DVec3::ZERO);
            self.state
                .prev_positions
                .copy_from_slice(&self.state.positions);
            self.state.has_history = false;
            self.contact_forces.clear();
            self.limit_forces.clear();
            self.self_forces.clear();
            self.recoveries += 1;
            report.recovered = true;
        }
        if run > 0 {
            if self.limits.sleep.enabled && !report.recovered {
                self.settle(run as f64 * h, &ws.last_good, colliders);
                report.asleep = self.sleep.asleep;
            }
            self.pin_start.copy_from_slice(&self.pin_target);
            self.skin_motion = None;
            if self.skin.moving() {
                self.skin.finish_frame();
            }
        } else {
            report.iterations = 0;
        }
    }

    /// Whether the cloth is asleep and nothing among `colliders` wakes it.
    pub(crate) fn stays_asleep(&self, colliders: &ColliderSet) -> bool {
        self.sleep.asleep && !self.sleep.woken(self, colliders)
    }

    /// The time accumulated toward the next substep.
    pub(crate) fn accumulator(&self) -> f64 {
        self.accumulator
    }

    /// Sets the time accumulated toward the next substep (a layer group runs its cloths on
    /// its first cloth's clock).
    pub(crate) fn set_accumulator(&mut self, accumulator: f64) {
        self.accumulator = accumulator;
    }

    /// The first part of a substep spanning fractions `s0..s1` of the frame (pins already in
    /// `ws.x_new`; see [`crate::pipeline::substep_begin`]).
    pub(crate) fn group_substep_begin(
        &mut self,
        ws: &mut Workspace,
        colliders: &ColliderSet,
        span: (f64, f64),
    ) {
        let mut state = std::mem::take(&mut self.state);
        let finite = substep_begin(&substep_inputs(self, colliders, span), &mut state, ws);
        self.state = state;
        self.fault |= !finite;
    }

    /// The last part of such a substep, after the group's solve (see
    /// [`crate::pipeline::substep_end`]).
    pub(crate) fn group_substep_end(
        &mut self,
        ws: &mut Workspace,
        colliders: &ColliderSet,
        span: (f64, f64),
        external: (&[DVec3], bool),
    ) {
        let mut state = std::mem::take(&mut self.state);
        substep_end(
            &substep_inputs(self, colliders, span),
            &mut state,
            ws,
            Some(external),
        );
        self.state = state;
    }

    /// The model, the positions at the substep's start and the iteration count, for a group's
    /// solve.
    pub(crate) fn solve_parts(&self) -> (&ClothModel, &[DVec3], u32) {
        (&self.model, &self.state.positions, self.settings.iterations)
    }

    /// After a frame of `elapsed` seconds that began at `start`: counts the time every node,
    /// pin, the skin and every nearby body stayed still, and puts the cloth to sleep (at rest,
    /// history at rest) once that reaches the sleep time.
    fn settle(&mut self, elapsed: f64, start: &[DVec3], colliders: &ColliderSet) {
        let st = &self.limits.sleep;
        let reach = st.speed * elapsed;
        let (min, max) = bounds(&self.state.positions);
        let still = self.pin_start == self.pin_target
            && !self.skin.moving()
            && !colliders.moved_near(min, max, self.contact.thickness + reach)
            && self
                .state
                .positions
                .iter()
                .zip(start)
                .all(|(a, b)| a.distance_squared(*b) <= reach * reach);
        if !still {
            self.sleep.still_for = 0.0;
            return;
        }
        self.sleep.still_for += elapsed;
        if self.sleep.still_for >= st.time {
            let s = &mut self.state;
            s.velocities.fill(DVec3::ZERO);
            s.prev_velocities.fill(DVec3::ZERO);
            s.prev_positions.copy_from_slice(&s.positions);
            self.sleep = Sleep {
                asleep: true,
                still_for: self.sleep.still_for,
                colliders: colliders.revision(),
                min,
                max,
            };
        }
    }

    /// Runs exactly one fixed substep with pins jumping to their targets (for tests and tools that
    /// drive the clock themselves).
    pub fn substep(&mut self) {
        with_thread_workspace(|ws| {
            ws.ensure(&self.model);
            ws.contact_pass.load(
                &self.touching,
                &self.contact_forces,
                &mut self.contact_response,
                &mut self.limit_forces,
                false,
                self.limits.any(),
                self.self_collision.enabled,
                &mut self.self_forces,
            );
            for (i, &p) in self.model.pins.iter().enumerate() {
                ws.x_new[p as usize] = self.pin_target[i];
            }
            self.substep_with_pins_in_x_new(ws, &ColliderSet::EMPTY, 0.0, 1.0);
            self.touching.assign(ws.contact_pass.touching());
            ws.contact_pass.store(
                &mut self.contact_forces,
                &mut self.contact_response,
                &mut self.limit_forces,
                &mut self.self_forces,
            );
        });
        self.pin_start.copy_from_slice(&self.pin_target);
    }

    /// One substep spanning fractions `s0..s1` of the frame (for the colliders' poses); pinned
    /// entries of `x_new` already hold their positions for the substep's end.
    fn substep_with_pins_in_x_new(
        &mut self,
        ws: &mut Workspace,
        colliders: &ColliderSet,
        s0: f64,
        s1: f64,
    ) {
        let mut state = std::mem::take(&mut self.state);
        let finite = substep(&substep_inputs(self, colliders, (s0, s1)), &mut state, ws);
        self.state = state;
        self.fault |= !finite;
    }

    /// Fault injection for tests of the recovery path: makes `node`'s velocity NaN, as a solver
    /// fault would. Not part of the supported API.
    #[doc(hidden)]
    pub fn poison_velocity_for_tests(&mut self, node: usize) {
        if let Some(v) = self.state.velocities.get_mut(node) {
            *v = DVec3::NAN;
        }
    }

    /// How many steps found a non-finite position and went back to the last good state.
    pub fn recoveries(&self) -> u64 {
        self.recoveries
    }

    /// A fingerprint of the mesh (topology and rest shape) and pin set.
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a over the render triangles, rest positions and pins.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |v: u64| {
            for b in v.to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x100_0000_01b3);
            }
        };
        let mesh = &self.model.mesh;
        eat(mesh.node_count() as u64);
        for t in mesh.render_triangles() {
            for &i in t {
                eat(i as u64);
            }
        }
        for p in mesh.metric_positions() {
            eat(p.x.to_bits());
            eat(p.y.to_bits());
            eat(p.z.to_bits());
        }
        for &p in &self.model.pins {
            eat(p as u64);
        }
        h
    }

    /// Everything needed to continue this cloth later, bit-identically (allocates).
    pub fn snapshot(&self) -> ClothSnapshot {
        ClothSnapshot {
            fingerprint: self.fingerprint(),
            state: self.state.clone(),
            pin_start: self.pin_start.clone(),
            pin_target: self.pin_target.clone(),
            accumulator: self.accumulator,
            touching: self.touching.to_vec(),
            contact_forces: self.contact_forces.clone(),
            limit_forces: self.limit_forces.clone(),
        }
    }

    /// Continues from `snapshot`. Refused (and nothing changes) if it comes from another mesh or
    /// pin set, or holds non-finite, mis-sized or absurd data (a coordinate beyond 1e9 m, a
    /// speed beyond 1e5 m/s, or more than one frame of accumulated time).
    pub fn restore(&mut self, snapshot: &ClothSnapshot) -> Result<(), ClothError> {
        let mismatch = |reason: String| Err(ClothError::SnapshotMismatch { reason });
        if snapshot.fingerprint != self.fingerprint() {
            return mismatch("taken from a different mesh or pin set".into());
        }
        let n = self.state.positions.len();
        let st = &snapshot.state;
        let sizes = [
            st.positions.len(),
            st.prev_positions.len(),
            st.velocities.len(),
            st.prev_velocities.len(),
            snapshot.touching.len(),
        ];
        if sizes.iter().any(|&l| l != n)
            || snapshot.contact_forces.iter().any(|f| f.node as usize >= n)
            || snapshot.pin_start.len() != self.pin_start.len()
            || snapshot.pin_target.len() != self.pin_target.len()
        {
            return mismatch("array sizes differ from this cloth".into());
        }
        let finite = st
            .positions
            .iter()
            .chain(&st.prev_positions)
            .chain(&st.velocities)
            .chain(&st.prev_velocities)
            .chain(&snapshot.pin_start)
            .chain(&snapshot.pin_target)
            .chain(snapshot.contact_forces.iter().map(|f| &f.force))
            .all(|v| v.is_finite())
            && snapshot.limit_forces.iter().all(|f| f.is_finite());
        if !(finite && snapshot.accumulator.is_finite() && snapshot.accumulator >= 0.0) {
            return mismatch("non-finite values".into());
        }
        // Far beyond anything a cloth reaches (10 minutes of free fall is 1.8e6 m), but well
        // inside what the solve can difference without overflow.
        const MAX_COORDINATE: f64 = 1e9;
        const MAX_SPEED: f64 = 1e5;
        let in_range = st
            .positions
            .iter()
            .chain(&st.prev_positions)
            .chain(&snapshot.pin_start)
            .chain(&snapshot.pin_target)
            .all(|p| p.abs().max_element() <= MAX_COORDINATE)
            && st
                .velocities
                .iter()
                .chain(&st.prev_velocities)
                .all(|v| v.abs().max_element() <= MAX_SPEED)
            && snapshot.accumulator <= self.settings().frame_time;
        if !in_range {
            return mismatch(format!(
                "values out of range (positions within {MAX_COORDINATE} m, speeds within \
                 {MAX_SPEED} m/s, accumulator within one frame)"
            ));
        }
        self.state.clone_from(st);
        self.pin_start.copy_from_slice(&snapshot.pin_start);
        self.pin_target.copy_from_slice(&snapshot.pin_target);
        self.accumulator = snapshot.accumulator;
        self.touching.assign(&snapshot.touching);
        self.contact_forces.clone_from(&snapshot.contact_forces);
        self.limit_forces.clone_from(&snapshot.limit_forces);
        self.wake();
        Ok(())
    }

    /// Quality and energy measures of the current state (allocates; not for the frame loop).
    pub fn measures(&self) -> Measures {
        measure(
            &self.model,
            &self.state.positions,
            &self.state.velocities,
            self.settings.gravity,
        )
    }

    /// Largest static force residual over free nodes, `|grad E(x) - M g|` in newtons, ignoring
    /// velocities: how far the current shape is from an equilibrium. A diagnostic (allocates),
    /// not part of the frame loop.
    pub fn force_residual(&mut self) -> f64 {
        let mut grad = vec![DVec3::ZERO; self.model.free_nodes.len()];
        with_thread_workspace(|ws| {
            ws.ensure(&self.model);
            crate::newton::static_gradient(
                &self.model,
                &self.state.positions,
                self.settings.gravity,
                &mut ws.scratch,
                &mut grad,
            )
        });
        grad.iter().map(|g| g.length()).fold(0.0, f64::max)
    }

    /// Moves the cloth to static equilibrium under gravity with its pins at their targets, by
    /// Newton's method on the full energy (see [`crate::equilibrium`]), and leaves it at rest
    /// there. Stops when the largest nodal force residual is below `tolerance` newtons or after
    /// `max_iterations`. Use it to drape a cloth before its first frame, or as the converged
    /// reference for a budgeted run. It allocates and refactors each iteration: not for the frame
    /// loop.
    pub fn relax(
        &mut self,
        tolerance: f64,
        max_iterations: u32,
    ) -> Result<RelaxReport, ClothError> {
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(ClothError::InvalidSetting {
                name: "tolerance",
                reason: format!("must be finite and non-negative, got {tolerance}"),
            });
        }
        let mut x = self.state.positions.clone();
        for (i, &p) in self.model.pins.iter().enumerate() {
            x[p as usize] = self.pin_target[i];
        }
        let report = with_thread_workspace(|ws| {
            ws.ensure(&self.model);
            relax(
                &self.model,
                &mut x,
                self.settings.gravity,
                tolerance,
                max_iterations,
                &mut ws.scratch,
            )
        })?;
        self.set_positions(&x)?;
        Ok(report)
    }

    /// Centre of mass.
    pub fn center_of_mass(&self) -> DVec3 {
        let m = &self.model.masses;
        let total: f64 = m.iter().sum();
        self.state
            .positions
            .iter()
            .zip(m)
            .map(|(&x, &mi)| mi * x)
            .sum::<DVec3>()
            / total
    }

    /// Writes render positions (f32, one per node) into `out`, reusing its allocation.
    pub fn write_render_positions(&self, out: &mut Vec<Vec3>) {
        out.clear();
        out.extend(self.state.positions.iter().map(|p| p.as_vec3()));
    }

    /// Writes area-weighted vertex normals of the render mesh into `out`, reusing its allocation.
    pub fn write_render_normals(&self, out: &mut Vec<Vec3>) {
        let x = &self.state.positions;
        out.clear();
        out.resize(x.len(), Vec3::ZERO);
        for t in self.model.mesh.render_triangles() {
            let [a, b, c] = t.map(|i| x[i as usize]);
            let n = (b - a).cross(c - a).as_vec3();
            for &i in t {
                out[i as usize] += n;
            }
        }
        for n in out.iter_mut() {
            *n = n.normalize_or(Vec3::Z);
        }
    }

    /// Writes render positions and area-weighted vertex normals (f32, one each per node) into
    /// `positions` and `normals`, reusing their allocations: the normals from the f32
    /// positions just written, in one call (what [`Cloth::write_render_positions`] and
    /// [`Cloth::write_render_normals`] give, to f32 rounding, for a fraction of the time: on
    /// `crowd` the render meshes were a sixth of the tick).
    pub fn write_render_mesh(&self, positions: &mut Vec<Vec3>, normals: &mut Vec<Vec3>) {
        self.write_render_positions(positions);
        self.normals_of(positions, normals);
    }

    /// [`Cloth::write_render_mesh`] in another frame: positions carried by `world_to_local`
    /// (an entity's inverse transform) as they are written, normals those of the carried mesh
    /// (right under any invertible `world_to_local`, a non-uniform scale included).
    pub fn write_render_mesh_in(
        &self,
        world_to_local: &glam::DAffine3,
        positions: &mut Vec<Vec3>,
        normals: &mut Vec<Vec3>,
    ) {
        positions.clear();
        positions.extend(
            self.state
                .positions
                .iter()
                .map(|p| world_to_local.transform_point3(*p).as_vec3()),
        );
        self.normals_of(positions, normals);
    }

    /// Area-weighted unit vertex normals of the render mesh at `x` into `normals`.
    fn normals_of(&self, x: &[Vec3], normals: &mut Vec<Vec3>) {
        normals.clear();
        normals.resize(x.len(), Vec3::ZERO);
        for t in self.model.mesh.render_triangles() {
            let [a, b, c] = t.map(|i| x[i as usize]);
            let n = (b - a).cross(c - a);
            for &i in t {
                normals[i as usize] += n;
            }
        }
        for n in normals.iter_mut() {
            *n = n.normalize_or(Vec3::Z);
        }
    }

    /// Render triangle indices (flattened, three per triangle).
    pub fn render_indices(&self) -> Vec<u32> {
        self.model
            .mesh
            .render_triangles()
            .iter()
            .flatten()
            .copied()
            .collect()
    }
}

/// The cloth's node count.
/// A frame of a cloth between [`Cloth::begin_frame`] and [`Cloth::end_frame`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    /// The report so far.
    pub report: StepReport,
    /// Substeps to run.
    pub run: u32,
    /// The cloth sleeps through the frame (nothing to run, no end to call).
    pub asleep: bool,
}

/// What a substep of `cloth` spanning `span` of the frame reads besides its state.
fn substep_inputs<'a>(
    cloth: &'a Cloth,
    colliders: &'a ColliderSet,
    span: (f64, f64),
) -> SubstepInputs<'a> {
    SubstepInputs {
        model: &cloth.model,
        settings: &cloth.settings,
        aero: &cloth.aero,
        contact: &cloth.contact,
        colliders,
        span,
        limits: cloth.limits.any().then_some(LimitFrame {
            settings: &cloth.limits,
            tethers: &cloth.model.tethers,
            skin: &cloth.skin,
            pinned: &cloth.model.pinned_mask,
        }),
        self_thickness: cloth
            .self_collision
            .enabled
            .then_some(cloth.self_collision.thickness),
        exclusions: &cloth.body_exclusions,
    }
}

fn n_nodes(cloth: &Cloth) -> usize {
    cloth.state.positions.len()
}

/// Checks a per-node input: one finite vector per node. Returns the node count.
fn per_node_input(what: &'static str, values: &[DVec3], n: usize) -> Result<usize, ClothError> {
    if values.len() != n {
        return Err(ClothError::LengthMismatch {
            what,
            expected: n,
            found: values.len(),
        });
    }
    match values.iter().position(|p| !p.is_finite()) {
        Some(node) => Err(ClothError::NonFiniteInput { node }),
        None => Ok(n),
    }
}

/// A cloth's sleep: whether it is asleep, how long it has been still, and what it saw when it
/// fell asleep (the colliders' count, its own bounds).
#[derive(Debug, Clone, Copy, Default)]
struct Sleep {
    asleep: bool,
    still_for: f64,
    colliders: u64,
    min: DVec3,
    max: DVec3,
}

impl Sleep {
    /// Whether something that touches the sleeping `cloth` moves this frame: a pin or skin
    /// target, a body near it, or the collider set.
    fn woken(&self, cloth: &Cloth, colliders: &ColliderSet) -> bool {
        cloth.pin_start != cloth.pin_target
            || cloth.skin.moving()
            || colliders.revision() != self.colliders
            || colliders.moved_near(self.min, self.max, cloth.contact.thickness)
    }
}

/// The box around `x`.
fn bounds(x: &[DVec3]) -> (DVec3, DVec3) {
    x.iter().fold(
        (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
        |(lo, hi), p| (lo.min(*p), hi.max(*p)),
    )
}

/// The rotation `r` and centroids `a`, `b` of the rigid motion `x -> b + r (x - a)` that best
/// carries the points `from` onto `to` (least squares, equal weights): Horn's method, the unit
/// quaternion of the largest eigenvalue of his 4 x 4 matrix of the cross-covariance, found by
/// power iteration from the identity (the motion between two frames is small, so a few
/// iterations converge; 64 are run). Empty input gives the identity.
fn rigid_fit(from: &[DVec3], to: &[DVec3]) -> (glam::DQuat, DVec3, DVec3) {
    let n = from.len().min(to.len());
    if n == 0 {
        return (glam::DQuat::IDENTITY, DVec3::ZERO, DVec3::ZERO);
    }
    // One pass: the sums of the points and of their products, taken about the first pair
    // (so that the products stay the size of the cloth, not of its distance from the
    // origin), give the centroids and `s[i][j] = sum (from - a)_i (to - b)_j`.
    let (p0, q0) = (from[0], to[0]);
    let (mut sp, mut sq) = (DVec3::ZERO, DVec3::ZERO);
    let mut s = [[0.0f64; 3]; 3];
    for (p, q) in from[..n].iter().zip(&to[..n]) {
        let (p, q) = (*p - p0, *q - q0);
        sp += p;
        sq += q;
        let (p, q) = (p.to_array(), q.to_array());
        for i in 0..3 {
            for j in 0..3 {
                s[i][j] += p[i] * q[j];
            }
        }
    }
    let (mp, mq) = (sp / n as f64, sq / n as f64);
    let (a, b) = (p0 + mp, q0 + mq);
    let (mp, sq) = (mp.to_array(), sq.to_array());
    for i in 0..3 {
        for j in 0..3 {
            s[i][j] -= mp[i] * sq[j];
        }
    }
    (fit_rotation(s), a, b)
}

/// The rotation `r` that maximises `sum (r p) . q` given `s[i][j] = sum p_i q_j` over centred
/// point pairs (Horn's quaternion method: the dominant eigenvector of his 4 x 4 matrix, by
/// shifted power iteration).
pub(crate) fn fit_rotation(s: [[f64; 3]; 3]) -> glam::DQuat {
    let [[xx, xy, xz], [yx, yy, yz], [zx, zy, zz]] = s;
    let m = [
        [xx + yy + zz, yz - zy, zx - xz, xy - yx],
        [yz - zy, xx - yy - zz, xy + yx, zx + xz],
        [zx - xz, xy + yx, -xx + yy - zz, yz + zy],
        [xy - yx, zx + xz, yz + zy, -xx - yy + zz],
    ];
    // Shift every eigenvalue positive (they are bounded by the sum of |s_ij|).
    let shift: f64 = s.iter().flatten().map(|v| v.abs()).sum::<f64>() + 1e-300;
    let mut v = [1.0f64, 0.0, 0.0, 0.0];
    for _ in 0..64 {
        let mut w = [0.0f64; 4];
        for (i, wi) in w.iter_mut().enumerate() {
            *wi = shift * v[i] + (0..4).map(|j| m[i][j] * v[j]).sum::<f64>();
        }
        let len = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !(len > 0.0 && len.is_finite()) {
            break;
        }
        v = w.map(|x| x / len);
    }
    glam::DQuat::from_xyzw(v[1], v[2], v[3], v[0]).normalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rigid fit recovers a rigid motion exactly: 50 scattered points turned by 0.3 rad
    /// about a tilted axis and moved give back that rotation and the centroids, every point
    /// carried onto its image to 1e-9 m; a flat set (a cloth lying in a plane) too.
    #[test]
    fn rigid_fit_recovers_a_rigid_motion() {
        let turn = glam::DQuat::from_axis_angle(DVec3::new(0.3, 1.0, -0.2).normalize(), 0.3);
        let shift = DVec3::new(0.5, -1.0, 2.0);
        let mut seed = 1u64;
        let mut unit = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for flat in [false, true] {
            let from: Vec<DVec3> = (0..50)
                .map(|_| DVec3::new(unit(), if flat { 0.0 } else { unit() }, unit()))
                .collect();
            let to: Vec<DVec3> = from.iter().map(|p| turn * *p + shift).collect();
            let (r, a, b) = rigid_fit(&from, &to);
            for (p, q) in from.iter().zip(&to) {
                let carried = b + r * (*p - a);
                assert!(carried.distance(*q) < 1e-9, "flat {flat}: {carried} vs {q}");
            }
        }
    }
}
