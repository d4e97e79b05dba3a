//! The contact pass of one substep: per-node frictional contact forces inside the solver's
//! iterations (docs/design.md section 5), the prefactored matrix untouched.
//!
//! A broad phase runs once per substep ([`ContactPass::prepare`]): the cloth's box (start
//! positions and predictions) against each collider's box swept over the substep, then each
//! node's box against the surviving colliders' boxes, giving a list of (node, collider)
//! candidates; only those are tested in the iterations.
//!
//! Each candidate carries a force that the global solve adds to the node's right-hand side.
//! After every solve ([`ContactPass::measure`]) each candidate's gap is measured **in the
//! collider's moving frame**: the node's path from its position at the start of the substep
//! (seen in the collider's start pose) to its current iterate (seen in the end pose) is a
//! segment in the collider's local frame, and a node whose path crossed the body's middle is
//! measured from the tangent plane where it entered, so a thin limb sweeping through a hanging
//! sheet pushes it instead of passing through it. The coupled contact step
//! ([`ContactPass::propose`], [`ContactPass::take_step`]; `crate::solver::contact_step`) moves
//! the forces: the normal part pushing only, the tangential part cancelling the slip relative
//! to the body's surface point the node started on, inside the Coulomb cone `|r_t| <= mu r_n`
//! (sticking inside it, sliding on its edge). Forces are warm-started across substeps and frames
//! (the cloth keeps them). A last pass ([`ContactPass::finish`]) puts nodes still inside on the
//! surface, restores conformity around them and checks every path against the bodies' swept
//! boxes, so no node is left inside a body deeper than rounding.
//!
//! Game constraints ([`crate::limits`]) and self-contact and layers
//! ([`crate::self_contact`]) ride the same pass.

use glam::DVec3;

use super::body::{Body, Surface, Swept};
use super::{BodyExclusions, ColliderSet, ContactForce, ContactSettings};
use crate::contact::bounds::Aabb;
use crate::contact::limits::NodeLimit;
use crate::contact::self_contact::{RawPair, SelfContact, SelfFrame};
use crate::flags::NodeFlags;

/// One (node, body) pair near enough to touch during a substep, with its contact force.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// Cloth node.
    pub node: u32,
    /// Collider index, or with `limit` the index of the substep's [`NodeLimit`].
    pub body: u32,
    /// Whether this is a game constraint ([`crate::limits`]): frictionless, not a contact.
    pub limit: bool,
    /// The force the body pushes the node with (world, newtons): normal and friction parts,
    /// carried over from iteration to iteration and from substep to substep.
    pub force: DVec3,
    /// The node's gap at the current iterate (see [`ContactPass::measure`]).
    gap: f64,
    /// World outward normal at the current iterate.
    normal: DVec3,
    /// Whether the node is in the contact set: pushed, or inside.
    engaged: bool,
    /// How far a unit normal force moves the node when every engaged node is pushed alike
    /// (m/N; see [`ContactPass::set_response`]).
    compliance: f64,
    /// Whether `compliance` was measured while the candidate was engaged.
    measured: bool,
    /// Gap at the previous iteration (NaN: none yet).
    prev_gap: f64,
    /// Where the node began the substep, in the body's frame at the substep's start.
    p0: DVec3,
    /// The point slip is measured from, carried with the body to the substep's end (world):
    /// `p0`, or for a node that stuck at the end of the last substep its anchor
    /// ([`ContactForce::anchor`]).
    anchor: DVec3,
    /// The anchor in the body's frame (NaN: the node did not stick, and `anchor` is `p0`
    /// carried with the body).
    anchor_local: DVec3,
    /// [`Body::start_depth`] of `p0`.
    start: Option<f64>,
    /// Compliance after the overshoots seen this substep (see [`ContactPass::update`]).
    overshoot: f64,
    /// The projected step proposed by [`ContactPass::propose`].
    step: DVec3,
    /// Where (world) the gap was last measured against a body.
    measured_at: DVec3,
    /// [`Gap::clear`] there: while its node stays within this distance of `measured_at`, an
    /// unpushed candidate is known to stay out of the contact set without a query (its `gap`
    /// and `normal` are then those last measured, and are not read).
    clear: f64,
}

impl Candidate {
    /// A candidate at the start of a substep, not yet measured: `force` is its warm start,
    /// `p0`, `carried` and `start` describe where its node began against a body (unused for a
    /// limit), `clear` how far from `carried` it is known to stay clear of it
    /// ([`Body::start_query`]).
    fn new(
        node: u32,
        body: u32,
        limit: bool,
        force: DVec3,
        (p0, carried, start, clear): (DVec3, DVec3, Option<f64>, f64),
    ) -> Self {
        Self {
            node,
            body,
            limit,
            force,
            gap: f64::INFINITY,
            normal: DVec3::ZERO,
            engaged: false,
            compliance: 0.0,
            measured: false,
            prev_gap: f64::NAN,
            overshoot: 0.0,
            step: DVec3::ZERO,
            p0,
            anchor: carried,
            anchor_local: DVec3::NAN,
            start,
            measured_at: carried,
            clear,
        }
    }

    /// Whether the node at `x` is still within [`Candidate::clear`] of where its gap was last
    /// measured (its gap is then positive and its path does not cross the body).
    fn stays_clear(&self, x: DVec3) -> bool {
        x.distance_squared(self.measured_at) < self.clear * self.clear
    }

    /// The node's motion relative to the surface point it started the substep on (or, for a
    /// node that sticks, its anchor), tangential to the current normal, for the node at `x`.
    fn slip(&self, x: DVec3) -> DVec3 {
        let rel = x - self.anchor;
        rel - rel.dot(self.normal) * self.normal
    }
}

/// `t` scaled into the disc of radius `limit` (the Coulomb cone's slice at a normal force).
fn cone(t: DVec3, limit: f64) -> DVec3 {
    let len = t.length();
    if len > limit {
        t * if len > 0.0 { limit / len } else { 0.0 }
    } else {
        t
    }
}

/// The collective compliance a cloth last measured: the contact set's nodes (engaged
/// candidates in candidate order) and the compliance each one took. It depends only on the
/// factor and the set, so a later substep or step whose contact set is the same takes it from
/// here instead of solving again, with bit-identical results: a cloth resting on a body keeps
/// one contact set from substep to substep. The cloth keeps it; [`ContactPass::load`] and
/// [`ContactPass::store`] swap it in and out (no copy). Cleared when the cloth's factor changes.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResponseCache {
    nodes: Vec<u32>,
    compliance: Vec<f64>,
}

impl ResponseCache {
    /// Forgets the measurement (the factor changed).
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.compliance.clear();
    }
}

/// A friction force below this fraction of the Coulomb limit `mu r_n` at a substep's end
/// counts as sticking: the node keeps its anchor ([`ContactForce::anchor`]).
const STICK: f64 = 0.99;

/// Farthest (metres) a sticking node's start may be from its anchor before the anchor is
/// dropped (the node then slips from where it starts the substep, as a sliding node does).
const MAX_ANCHOR_SLIP: f64 = 0.01;

/// Per-substep broad phase and per-node frictional contact for one cloth (see the module
/// docs).
#[derive(Debug, Default)]
pub(crate) struct ContactPass {
    /// (node, body) pairs near enough to touch during the substep, with their forces.
    pub candidates: Vec<Candidate>,
    /// Per node: the sum of its candidates' forces, which the global solve adds to the node's
    /// right-hand side (zero for nodes touching nothing).
    pub node_force: Vec<DVec3>,
    /// Colliders whose swept box meets the cloth's box this substep.
    near: Vec<u32>,
    /// Swept box of each collider over the substep (inflated by the thickness).
    swept: Vec<Swept>,
    bodies0: Vec<Body>,
    bodies1: Vec<Body>,
    /// Coulomb friction coefficient this substep.
    friction: f64,
    /// Farthest a node that starts a substep inside a body is pushed out during it.
    max_push: f64,
    /// Nodes touching a body after the last substep (a limit's touches are not counted).
    pub last_contacts: usize,
    /// Nodes that came into contact this substep (after [`ContactPass::finish`]).
    pub impacts: usize,
    /// Per node: in contact at the end of the previous substep.
    was_touching: Vec<bool>,
    /// Nodes the last pass put on a body (held while the solver restores the linear
    /// constraints).
    held: Vec<bool>,
    /// Per node, in [`ContactPass::finish`]: a body its path is known to stay clear of
    /// ([`Candidate::stays_clear`]; `u32::MAX`: none), which the final guard need not query.
    clear_of: Vec<u32>,
    /// After [`ContactPass::finish`]: each node in contact, the outward normal and the
    /// displacement over the substep of the body's surface point under it.
    pub touched: Vec<(u32, DVec3, DVec3)>,
    /// Per node: the contact force it ended the last substep with, and its body (`u32::MAX`:
    /// none); the next substep starts from them.
    warm_force: Vec<DVec3>,
    warm_body: Vec<u32>,
    /// Per node, its sticking anchor in the warm body's frame (NaN: none; see
    /// [`ContactForce::anchor`]).
    warm_anchor: Vec<DVec3>,
    /// Size of the contact set when the collective compliance was last measured this substep.
    response_set: usize,
    /// Largest collective compliance of the last measurement.
    w_max: f64,
    /// The cloth's last measurement (swapped in by `load`, out by `store`).
    cache: ResponseCache,
    /// The substep's game constraints in node order (filled before [`ContactPass::prepare`];
    /// see [`crate::limits`]).
    pub limits: Vec<NodeLimit>,
    /// Per limit: the force (newtons, along its push) it ended the last substep with; the
    /// cloth's (swapped in by `load`, out by `store`).
    limit_warm: Vec<f64>,
    /// The cloth against itself (see [`crate::self_contact`]).
    pub(crate) self_contact: SelfContact,
    /// Self-contact pairs engaged at the last [`ContactPass::measure`].
    self_engaged: usize,
    /// Forces saved by [`ContactPass::save_forces`]: per candidate, then the node sums at the
    /// candidates' and the self-contact pairs' nodes, in that order (every other node's sum is
    /// zero throughout the substep).
    saved_force: Vec<DVec3>,
    saved_node_force: Vec<DVec3>,
    /// The frame's node-against-body tests (gathered by `Workspace::take_counters` as
    /// [`crate::counters::StepCounters::contact_tests`]).
    pub(crate) tests: u64,
}

/// A node this close to a body's inflated surface (metres) at the end of a substep, or pushed
/// by it, counts as touching.
const TOUCH: f64 = 1e-4;

/// A contact set that differs from the last measured one by at most `1 / REUSE_CHANGE` of it
/// reuses that measurement ([`ContactPass::reuse_response`]). Measured on the contact gallery:
/// at 1/5 and 1/20 the stale compliances of the tilting capsule's resting sheet let friction 0.8
/// creep 15.7 and 12.8 mm at the console preset (8.9 mm when measured every substep); at 1/50,
/// 74 of 78 cells are bit-identical and the others within 1.3 points of max strain.
const REUSE_CHANGE: usize = 50;

/// How far beyond its predicted path a node may wander during the iterations and still be
/// tested against a limit's sphere (metres; the last pass clamps any that went farther).
const LIMIT_SLACK: f64 = 0.002;

/// How far beyond its predicted path a node may wander during the iterations and still be
/// tested (metres).
pub(super) const SLACK: f64 = 0.02;

impl ContactPass {
    /// Sizes the per-node buffers for a cloth of `nodes` nodes (reusing memory) and takes which
    /// of its nodes touched a body after its last substep, and with what force. With `bodies`
    /// (the step has colliders) it also reserves room for every node being a candidate, so that
    /// the passes of this step allocate only when a node meets several bodies at once; a
    /// workspace that never steps a cloth among bodies does not hold that room.
    /// With `limits` (the cloth has game constraints) it sizes the per-node forces and takes
    /// the cloth's last limit forces (`limit_forces`, swapped in); with `self_collision` it
    /// sizes the per-node forces and takes the cloth's last self-contact forces
    /// (`self_forces`, swapped in).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        &mut self,
        touching: &NodeFlags,
        forces: &[ContactForce],
        cache: &mut ResponseCache,
        limit_forces: &mut Vec<f64>,
        bodies: bool,
        limits: bool,
        self_collision: bool,
        self_forces: &mut Vec<(RawPair, f64)>,
    ) {
        self.self_contact.reset();
        std::mem::swap(&mut self.self_contact.warm, self_forces);
        std::mem::swap(&mut self.cache, cache);
        std::mem::swap(&mut self.limit_warm, limit_forces);
        self.limits.clear();
        self.was_touching.clear();
        self.was_touching.extend(touching.iter());
        let nodes = self.was_touching.len();
        self.held.resize(nodes, false);
        self.clear_of.resize(nodes, u32::MAX);
        self.candidates.clear();
        self.touched.clear();
        self.warm_force.clear();
        self.warm_body.clear();
        self.warm_anchor.clear();
        self.node_force.clear();
        if bodies {
            self.warm_force.resize(nodes, DVec3::ZERO);
            self.warm_body.resize(nodes, u32::MAX);
            self.warm_anchor.resize(nodes, DVec3::NAN);
            for f in forces {
                let i = f.node as usize;
                if i < nodes {
                    self.warm_force[i] = f.force;
                    self.warm_body[i] = f.body;
                    self.warm_anchor[i] = f.anchor.unwrap_or(DVec3::NAN);
                }
            }
        }
        if bodies || limits || self_collision {
            self.node_force.resize(nodes, DVec3::ZERO);
            self.candidates.reserve(nodes);
            self.touched.reserve(nodes);
        }
    }

    /// Writes the forces the cloth's nodes ended the step with, one entry per node a body
    /// pushes, for the next step's warm start (empty after a step without bodies). The list keeps
    /// its memory: it grows to the most nodes ever in contact at once, then holds.
    /// The cloth's [`ResponseCache`] goes back to it.
    /// The limit forces go back to `limit_forces`.
    pub(crate) fn store(
        &mut self,
        forces: &mut Vec<ContactForce>,
        cache: &mut ResponseCache,
        limit_forces: &mut Vec<f64>,
        self_forces: &mut Vec<(RawPair, f64)>,
    ) {
        std::mem::swap(&mut self.self_contact.warm, self_forces);
        std::mem::swap(&mut self.cache, cache);
        std::mem::swap(&mut self.limit_warm, limit_forces);
        forces.clear();
        // A cloth's contact forces are at most one per node: a list that must grow grows to
        // that bound at once, so a cloth whose contact set jitters to a new most does not
        // allocate in a later frame.
        let engaged = self.warm_body.iter().filter(|&&b| b != u32::MAX).count();
        if engaged > forces.capacity() {
            forces.reserve_exact(self.warm_body.len());
        }
        for (i, ((&body, &force), &anchor)) in self
            .warm_body
            .iter()
            .zip(&self.warm_force)
            .zip(&self.warm_anchor)
            .enumerate()
        {
            if body != u32::MAX {
                forces.push(ContactForce {
                    node: i as u32,
                    body,
                    force,
                    anchor: anchor.is_finite().then_some(anchor),
                });
            }
        }
    }

    /// Broad phase for a substep spanning fractions `s0..s1` of the frame: which free nodes
    /// (moving from `x_start` toward `x_pred`) may touch which colliders, and which may reach
    /// the boundary of one of their [`ContactPass::limits`]. Each candidate starts from the
    /// force its node ended the last substep with against the same body (or limit). With
    /// `self_collision`, also the cloth's pairs against itself.
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
        self_collision: Option<SelfFrame<'_>>,
        exclusions: &BodyExclusions,
    ) {
        // The last substep's forces leave the sums (a node that was a candidate then may not
        // be one now).
        if !self.node_force.is_empty() {
            for c in &self.candidates {
                self.node_force[c.node as usize] = DVec3::ZERO;
            }
            self.self_contact.clear_forces(&mut self.node_force);
        }
        self.self_engaged = 0;
        // Before any return below: a substep that finds no body must not inherit the last
        // substep's (or another cloth's) measurement.
        self.response_set = 0;
        self.w_max = 0.0;
        match self_collision {
            Some(frame) => self.self_contact.prepare(&frame, x_start),
            None => self.self_contact.reset(),
        }
        self.candidates.clear();
        self.near.clear();
        self.bodies0.clear();
        self.bodies1.clear();
        self.swept.clear();
        self.touched.clear();
        self.last_contacts = 0;
        self.impacts = 0;
        self.max_push = settings.max_depenetration_speed * h;
        self.friction = settings.friction;
        if self.limit_warm.len() != self.limits.len() {
            // Another limit set (the settings or the pins changed): no warm start.
            self.limit_warm.clear();
            self.limit_warm.resize(self.limits.len(), 0.0);
        }
        if settings.enabled && !colliders.is_empty() {
            self.near_bodies(colliders, settings, s0, s1, free_nodes, x_start, x_pred);
        } else if self.limits.is_empty() {
            // Nothing to touch (with limits, `finish` records what touched them).
            self.was_touching.fill(false);
        }
        if self.near.is_empty() {
            self.warm_force.fill(DVec3::ZERO);
            self.warm_body.fill(u32::MAX);
            self.warm_anchor.fill(DVec3::NAN);
            if self.limits.is_empty() {
                return;
            }
        }
        self.tests += (self.near.len() * free_nodes.len()) as u64;
        let mut next_limit = 0;
        for &i in free_nodes {
            let (a, b) = (x_start[i as usize], x_pred[i as usize]);
            let slack = SLACK + a.distance(b);
            let limit_slack = LIMIT_SLACK + a.distance(b);
            if !self.near.is_empty() {
                self.body_candidates(i, a, b, slack, exclusions);
            }
            while next_limit < self.limits.len() && self.limits[next_limit].node <= i {
                let k = next_limit;
                next_limit += 1;
                let l = &self.limits[k];
                if l.node < i {
                    continue; // a limit on a pinned node
                }
                if !l.may_reach(a, b, limit_slack) && self.limit_warm[k] == 0.0 {
                    continue;
                }
                self.candidates.push(Candidate::new(
                    i,
                    k as u32,
                    true,
                    self.limit_warm[k] * l.gap(b).1,
                    (DVec3::ZERO, DVec3::ZERO, None, 0.0),
                ));
            }
        }
        self.sum_forces();
    }

    /// The bodies of the substep, and which come near the cloth (`near`).
    #[allow(clippy::too_many_arguments)]
    fn near_bodies(
        &mut self,
        colliders: &ColliderSet,
        settings: &ContactSettings,
        s0: f64,
        s1: f64,
        free_nodes: &[u32],
        x_start: &[DVec3],
        x_pred: &[DVec3],
    ) {
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
                .push(Body::new(&e.shape, p0, settings.thickness));
            self.bodies1
                .push(Body::new(&e.shape, p1, settings.thickness));
            self.swept
                .push(Swept::new(&e.shape, &p0, &p1, settings.thickness));
            if !e.removed
                && settings.groups.meets(e.groups)
                && Swept::new(&e.shape, &p0, &p1, margin).overlaps(&cloth)
            {
                self.near.push(c as u32);
            }
        }
    }

    /// Candidates of node `i` (moving from `a` toward `b`, tested within `slack` of its path)
    /// against the nearby bodies.
    fn body_candidates(
        &mut self,
        i: u32,
        a: DVec3,
        b: DVec3,
        slack: f64,
        exclusions: &BodyExclusions,
    ) {
        let node = Aabb::spanning(a, b).inflate(slack);
        for &c in &self.near {
            if self.swept[c as usize].overlaps(&node) && !exclusions.excludes(i, c) {
                let warm = self.warm_body[i as usize] == c;
                let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
                let p0 = b0.pose.inverse_transform_point(a);
                let force = if warm {
                    self.warm_force[i as usize]
                } else {
                    DVec3::ZERO
                };
                let (depth, clear) = b1.start_query(p0);
                let start = (p0, b1.pose.transform_point(p0), depth, clear);
                let mut candidate = Candidate::new(i, c, false, force, start);
                let anchor = self.warm_anchor[i as usize];
                if warm && anchor.is_finite() && anchor.distance(p0) < MAX_ANCHOR_SLIP {
                    candidate.anchor_local = anchor;
                    candidate.anchor = b1.pose.transform_point(anchor);
                }
                self.candidates.push(candidate);
            }
        }
    }

    /// `node_force` from the candidates' forces (the self-contact pairs' forces are added by
    /// [`ContactPass::update`]).
    fn sum_forces(&mut self) {
        for c in &self.candidates {
            self.node_force[c.node as usize] = DVec3::ZERO;
        }
        self.self_contact.clear_forces(&mut self.node_force);
        for c in &self.candidates {
            self.node_force[c.node as usize] += c.force;
        }
    }

    /// Saves the contact forces (candidates', self-contact pairs' and their node sums, at the
    /// nodes they touch), for an iteration that may have to go back to them
    /// ([`ContactPass::restore_forces`]). Reuses its buffers: allocates only while they grow.
    pub fn save_forces(&mut self) {
        self.saved_force.clear();
        self.saved_force
            .extend(self.candidates.iter().map(|c| c.force));
        self.saved_node_force.clear();
        let nodes = (self.candidates.iter().map(|c| c.node))
            .chain(self.self_contact.nodes(self.node_force.len()));
        self.saved_node_force
            .extend(nodes.map(|i| self.node_force[i as usize]));
        self.self_contact.save_forces();
    }

    /// Puts back the forces of the last [`ContactPass::save_forces`] (the candidates are those
    /// of the same substep).
    pub fn restore_forces(&mut self) {
        for (c, &f) in self.candidates.iter_mut().zip(&self.saved_force) {
            c.force = f;
        }
        let nodes = (self.candidates.iter().map(|c| c.node))
            .chain(self.self_contact.nodes(self.node_force.len()));
        for (i, &f) in nodes.zip(&self.saved_node_force) {
            self.node_force[i as usize] = f;
        }
        self.self_contact.restore_forces();
    }

    /// A key of the contact set at the last [`ContactPass::measure`]: which candidates were
    /// engaged, and how many self-contact pairs. Equal keys mean, but for a hash collision, the
    /// same set; an accelerated iteration clears its history when the key changes.
    pub fn contact_set_key(&self) -> u64 {
        // FNV-1a over the engaged candidates' indices.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (k, c) in self.candidates.iter().enumerate() {
            if c.engaged {
                h = (h ^ k as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        (h ^ self.self_engaged as u64).wrapping_mul(0x0100_0000_01b3)
    }

    /// Whether any candidates or self-contact pairs exist this substep.
    pub fn active(&self) -> bool {
        !self.candidates.is_empty() || self.self_contact.active()
    }

    /// Whether the substep has game constraints (the last pass then runs even without
    /// candidates, to keep every limit).
    pub fn has_limits(&self) -> bool {
        !self.limits.is_empty()
    }

    /// First half of a contact iteration at the iterate `x` (after a global solve): each
    /// candidate's gap and normal, and which candidates form the contact set (pushed or
    /// inside). Returns whether the set has changed enough since the collective compliance
    /// was last measured that it should be measured again ([`ContactPass::response_rhs`]).
    pub fn measure(&mut self, x: &[DVec3]) -> bool {
        let mut engaged = 0usize;
        for c in &mut self.candidates {
            let i = c.node as usize;
            if c.limit {
                (c.gap, c.normal) = self.limits[c.body as usize].gap(x[i]);
            } else if c.force == DVec3::ZERO && c.stays_clear(x[i]) {
                c.engaged = false;
                continue;
            } else {
                let b1 = &self.bodies1[c.body as usize];
                let p1 = b1.pose.inverse_transform_point(x[i]);
                let g = b1.gap_from(c.p0, c.start, p1, self.max_push);
                c.gap = g.gap;
                c.normal = b1.pose.transform_vector(g.normal);
                c.measured_at = x[i];
                c.clear = g.clear;
            }
            c.engaged = c.force != DVec3::ZERO || c.gap < 0.0;
            engaged += c.engaged as usize;
        }
        self.self_engaged = self.self_contact.measure(x);
        engaged += self.self_engaged;
        // Measured again when the set grew by a fifth (an impact spreading) or more.
        engaged > 0 && 5 * engaged > 6 * self.response_set
    }

    /// Right-hand side (node order, every node) of the solve that measures the collective
    /// compliance: 1 in the first lane of each engaged node (`rhs` comes in zeroed; the matrix
    /// acts alike on the three coordinates, so one lane is the scalar solve).
    pub fn response_rhs(&mut self, rhs: &mut [DVec3]) {
        let mut engaged = 0;
        for c in &self.candidates {
            if c.engaged {
                rhs[c.node as usize] = DVec3::X;
                engaged += 1;
            }
        }
        self.self_contact.response_rhs(rhs);
        self.response_set = engaged + self.self_engaged;
    }

    /// Takes the solve of [`ContactPass::response_rhs`], `u = K^-1 1_C` (node order, first
    /// lane): `u_i` is the sum of row `i` of `K^-1` over the contact set `C`. The Delassus
    /// operator of the contact, `N^T K^-1 N` (entries `(K^-1)_ij n_i . n_j`), has row sums of
    /// absolute values at most `u_i` wherever `K^-1` is non-negative, as it is to within
    /// rounding for the mass-dominated cloth matrix. Each engaged candidate's compliance becomes
    /// the larger of `u_i` and its own `(K^-1)_ii`. With a compliance at least the absolute row
    /// sum the projected Jacobi iteration on the contact forces converges (`2W - D` is
    /// diagonally dominant), whatever the signs of the coupling: on a plane all normals agree,
    /// around a thin bar they point apart, and pushing the top line lifts the wrapped sides.
    /// Measured (`docs/lab/2026-11-25-per-node-contact.md`): a unit push on every engaged node
    /// moves each by 25-60 times its own `(K^-1)_ii` on a sheet falling flat; the node's own
    /// compliance overshoots by that factor and throws the cloth, the signed row sum
    /// (`n_i . (K^-1 N 1)_i`) underestimates the coupling around a bar and diverges there.
    pub fn set_response(&mut self, u: &[DVec3], compliance: &[f64]) {
        self.w_max = 0.0;
        self.cache.clear();
        // The measured set has at most an entry per candidate: a list too small for them takes
        // the node count (or the candidates, if more) at once (see `store`).
        let bound = self.candidates.len();
        if bound > self.cache.nodes.capacity() {
            let bound = bound.max(u.len());
            self.cache.nodes.reserve_exact(bound);
            self.cache.compliance.reserve_exact(bound);
        }
        for c in &mut self.candidates {
            c.measured = c.engaged;
            if c.engaged {
                let i = c.node as usize;
                c.compliance = compliance[i].max(u[i].x);
                self.w_max = self.w_max.max(c.compliance);
                self.cache.nodes.push(c.node);
                self.cache.compliance.push(c.compliance);
            }
        }
        self.self_contact.set_response(u, compliance);
    }

    /// When the contact set differs from the one last measured (the [`ResponseCache`]) by at
    /// most `1 / REUSE_CHANGE` of that set (nodes that joined plus nodes that left), takes the compliances
    /// from it instead of solving again, and returns true; otherwise false, and the caller
    /// solves. A node still in the set keeps its measured compliance (a row sum over a set
    /// that has since lost a few nodes: slightly more than today's, which only slows its
    /// updates); a node that joined takes the largest measured one, as a node that joins within
    /// a substep does. The set is compared with the measured one, not the last reused one, so
    /// it cannot drift. A cloth resting on a body keeps nearly one contact set from substep to
    /// substep: measured on the 2,025-node cape trailing on the floor, reusing only an
    /// identical set still solved in 84 % of the substeps, reusing within 2 % in 12 %.
    pub fn reuse_response(&mut self) -> bool {
        let cached = &self.cache.nodes;
        if cached.is_empty() || self.self_engaged > 0 {
            return false;
        }
        // Both lists are in candidate order (ascending node, a node's bodies together).
        let (mut k, mut joined, mut common) = (0, 0, 0);
        for c in self.candidates.iter().filter(|c| c.engaged) {
            while k < cached.len() && cached[k] < c.node {
                k += 1;
            }
            if k < cached.len() && cached[k] == c.node {
                common += 1;
                k += 1;
            } else {
                joined += 1;
            }
        }
        let left = cached.len() - common;
        if REUSE_CHANGE * (joined + left) > cached.len() {
            return false;
        }
        self.response_set = cached.len();
        self.w_max = self.cache.compliance.iter().fold(0.0, |a, &w| a.max(w));
        let mut k = 0;
        for c in self.candidates.iter_mut().filter(|c| c.engaged) {
            while k < cached.len() && cached[k] < c.node {
                k += 1;
            }
            c.measured = k < cached.len() && cached[k] == c.node;
            if c.measured {
                c.compliance = self.cache.compliance[k];
                k += 1;
            }
        }
        true
    }

    /// Second half of a contact iteration: each candidate's force is corrected by what would
    /// close its node's gap and cancel its slip, the node's compliance telling how far a force
    /// moves it. The normal part stays pushing (`>= 0`); the tangential part, which opposes the
    /// node's slip relative to the body since the substep began, stays inside the Coulomb cone
    /// (`|r_t| <= mu r_n`: sticking inside, sliding on its edge). `node_force` then holds the
    /// new sums.
    ///
    /// The compliance is the larger of the node's own `(K^-1)_ii` and the collective one
    /// ([`ContactPass::set_response`]); a candidate that joined the contact set since that was
    /// measured takes the largest measured one. It doubles each time a correction carries its
    /// node across the surface (the gap changes sign while the body pushes): the iterations of
    /// the local-global loop answers a push more softly than `K` alone (the local
    /// step follows the pushed node), by 2-3 times on the cape's back (measured: a lone node
    /// on a shoulder blade flipping between 0 and 60 N each iteration, gaps -1.8 / +2.9 mm).
    ///
    /// A limit ([`crate::limits`]) is frictionless: its force stays along its push.
    pub fn update(&mut self, x: &[DVec3], compliance: &[f64]) {
        for c in &mut self.candidates {
            if !c.engaged {
                continue;
            }
            let i = c.node as usize;
            let mut w = c.compliance.max(compliance[i]);
            if !c.measured {
                w = w.max(self.w_max);
            }
            let n = c.normal;
            let rn = c.force.dot(n);
            let rt = c.force - rn * n;
            if c.prev_gap * c.gap < 0.0 && rn > 0.0 {
                c.overshoot = 2.0 * w.max(c.overshoot);
            }
            c.prev_gap = c.gap;
            let w = w.max(c.overshoot);
            if w <= 0.0 {
                continue;
            }
            let rn = (rn - c.gap / w).max(0.0);
            if c.limit {
                c.force = rn * n;
                continue;
            }
            let rt = cone(rt - c.slip(x[i]) / w, self.friction * rn);
            c.force = rn * n + rt;
        }
        self.sum_forces();
        self.self_contact
            .update(compliance, self.w_max, &mut self.node_force);
    }

    /// The coupled contact step's direction (see `solver::contact_step`), from the iterate `x`
    /// after [`ContactPass::measure`]: each engaged candidate's projected step
    /// `delta = P(r - u / w) - r`, where `u` is its gap along the normal plus its slip since the
    /// substep began (the contact problem's gradient), `w` its node's own compliance
    /// `(K^-1)_ii` and `P` the projection onto its Coulomb cone (a limit's: onto its push).
    /// The own compliance alone overshoots wherever nodes move together (25-60 times on a
    /// falling patch); the caller measures the step's response and scales it. Adds each node's
    /// summed step into `rhs` (node order, zeroed by the caller) and returns `sum delta . u`,
    /// negative for a step that lowers the contact problem's energy.
    pub fn propose(&mut self, x: &[DVec3], compliance: &[f64], rhs: &mut [DVec3]) -> f64 {
        let mut slope = 0.0;
        let mu = self.friction;
        for c in &mut self.candidates {
            c.step = DVec3::ZERO;
            if !c.engaged {
                continue;
            }
            let i = c.node as usize;
            let w = compliance[i];
            if w <= 0.0 {
                continue;
            }
            let n = c.normal;
            let rn = c.force.dot(n);
            let rt = c.force - rn * n;
            let rn_new = (rn - c.gap / w).max(0.0);
            let (new, u) = if c.limit {
                (rn_new * n, c.gap * n)
            } else {
                let slip = c.slip(x[i]);
                let t = cone(rt - slip / w, mu * rn_new);
                (rn_new * n + t, c.gap * n + slip)
            };
            c.step = new - c.force;
            slope += c.step.dot(u);
            rhs[i] += c.step;
        }
        slope
    }

    /// Takes the fraction `alpha` of the steps of [`ContactPass::propose`] (a convex
    /// combination of the forces and their projections for `alpha` in `[0, 1]`, so every force
    /// stays in its cone); `node_force` then holds the new sums.
    pub fn take_step(&mut self, alpha: f64) {
        for c in &mut self.candidates {
            c.force += alpha * c.step;
        }
        self.sum_forces();
    }

    /// Flags the nodes that the last projection put on a body or a limit.
    fn mark_held(&mut self, moved: &[bool]) {
        self.held.fill(false);
        for (c, &m) in self.candidates.iter().zip(moved) {
            self.held[c.node as usize] |= m;
        }
    }

    /// Puts every node outside one of its limits on it, candidate or not (the iterations can
    /// carry a node farther than the broad phase's allowance), flagging it in `held`. Returns
    /// whether any moved.
    fn clamp_limits(&mut self, x: &mut [DVec3]) -> bool {
        let mut any = false;
        for l in &self.limits {
            let i = l.node as usize;
            if let Some(q) = l.project(x[i]) {
                x[i] = q;
                self.held[i] = true;
                any = true;
            }
        }
        any
    }

    /// Puts every candidate node still inside its body on the surface: nodes on their own side
    /// go to the nearest surface point, nodes whose path crossed the body's middle go back to
    /// where they entered it (`Body::resolve`). Writes into `moved` which candidates moved.
    fn push_out_all(&self, x: &mut [DVec3], moved: &mut [bool]) {
        self.push_out_each(x, |k| moved[k] = true);
    }

    /// Where this substep's bodies and limits put `x` (a cloth's positions): every candidate
    /// node inside a body at its end pose (or whose path the body's sweep crossed) on its
    /// surface, every node past a limit on it. After [`ContactPass::prepare`]; a layer group
    /// pushes its cloths' predictions so, to see the layers a body carries into each other.
    pub(crate) fn push_out(&self, x: &mut [DVec3]) {
        self.push_out_each(x, |_| {});
    }

    /// How far this substep's bodies may carry each node near them beyond its predicted path
    /// (after [`ContactPass::prepare`]; the nodes moving from `x_start` toward `x_pred`): for
    /// each node a body may touch, how far the body's point where the node began the substep
    /// moves against the node's predicted motion, written into `carry` (per node; only
    /// raised). A cape carried by a running body moves with it (little); a curtain a limb is
    /// driven through, by the limb's whole motion.
    pub(crate) fn carry_reach(&self, x_start: &[DVec3], x_pred: &[DVec3], carry: &mut [f64]) {
        for c in self.candidates.iter().filter(|c| !c.limit) {
            let i = c.node as usize;
            let (b0, b1) = (
                &self.bodies0[c.body as usize],
                &self.bodies1[c.body as usize],
            );
            let body = b1.pose.transform_point(c.p0) - b0.pose.transform_point(c.p0);
            let own = x_pred[i] - x_start[i];
            // At most the body's own motion: a node flung against the body's path is not
            // carried farther than the body goes.
            if let Some(r) = carry.get_mut(i) {
                *r = r.max((body - own).length().min(body.length()));
            }
        }
    }

    /// Calls `near(node, outward normal)` for every node of `x` (a cloth's positions at the
    /// substep's end) within `within` metres of a body's surface, or touching a limit
    /// (after [`ContactPass::finish`]): what a layer group holds in its last pass (a node on
    /// or just off a body is not pushed into it, nor sent back through it).
    pub(crate) fn near_bodies_at(
        &self,
        x: &[DVec3],
        within: f64,
        mut near: impl FnMut(u32, DVec3),
    ) {
        for &(i, n, _) in &self.touched {
            near(i, n);
        }
        for c in self.candidates.iter().filter(|c| !c.limit) {
            let b1 = &self.bodies1[c.body as usize];
            let p = x[c.node as usize];
            if c.stays_clear(p) && c.clear > within {
                continue;
            }
            let s = b1.surface(b1.pose.inverse_transform_point(p));
            if s.signed < within {
                near(c.node, b1.pose.transform_vector(s.normal));
            }
        }
    }

    /// [`ContactPass::push_out`], calling `moved(k)` for each candidate `k` that moved a node.
    fn push_out_each(&self, x: &mut [DVec3], mut moved: impl FnMut(usize)) {
        for (k, c) in self.candidates.iter().enumerate() {
            let i = c.node as usize;
            if c.limit {
                if let Some(q) = self.limits[c.body as usize].project(x[i]) {
                    x[i] = q;
                    moved(k);
                }
                continue;
            }
            if c.stays_clear(x[i]) {
                continue;
            }
            let b1 = &self.bodies1[c.body as usize];
            let p0 = c.p0;
            let p1 = b1.pose.inverse_transform_point(x[i]);
            let g = b1.gap_from(p0, c.start, p1, self.max_push);
            if g.gap >= 0.0 {
                continue;
            }
            let q = if g.through {
                match b1.resolve(p0, p1, self.max_push) {
                    Some((q, _, _)) => q,
                    None => continue,
                }
            } else {
                p1 - g.gap * g.normal
            };
            x[i] = b1.pose.transform_point(q);
            moved(k);
        }
    }

    /// The last pass of a substep, after the last iteration's force update: every node still
    /// inside a body goes on its surface (a small correction once the forces have converged),
    /// `restore` repairs the linear constraints around the moved nodes (flagged), nodes are
    /// pushed out once more, and a final guard runs over every free node whose actual path over
    /// the substep meets a nearby body's swept box (the iterations can carry a node farther
    /// than the broad phase's allowance), so that no node tunnels or stays inside. Records
    /// which nodes touch, and the forces to start the next substep from. Last, `cap`'s steps
    /// (at most `cap_steps`, each returning whether it moved anything; the strain cap), each
    /// followed by the push-out and the limits, the paths guarded once more and the limits
    /// applied once more.
    pub fn finish(
        &mut self,
        x_start: &[DVec3],
        x: &mut [DVec3],
        free_nodes: &[u32],
        scratch_moved: &mut Vec<bool>,
        restore: impl FnOnce(&mut [DVec3], &[bool]),
        (cap_steps, mut cap): (
            u32,
            impl FnMut(&mut [DVec3], &[(u32, DVec3, DVec3)]) -> bool,
        ),
    ) {
        scratch_moved.clear();
        scratch_moved.resize(self.candidates.len(), false);
        self.push_out_all(x, scratch_moved);
        self.mark_held(scratch_moved);
        // Without candidates (only limits, all slack at the broad phase) the linear constraints
        // are repaired only if a limit moved a node, so that slack limits change nothing.
        if self.clamp_limits(x) || self.active() {
            restore(x, &self.held);
            self.push_out_all(x, scratch_moved);
            self.clamp_limits(x);
        }
        self.touched.clear();
        self.impacts = 0;
        self.last_contacts = 0;
        self.limit_warm.fill(0.0);
        for (k, c) in self.candidates.iter().enumerate() {
            let i = c.node as usize;
            if c.limit {
                // A limit that stops a node is a contact with the limit's sphere: inelastic,
                // like a body's (else BDF2 throws the node back off it).
                let l = &self.limits[c.body as usize];
                self.limit_warm[c.body as usize] = c.force.length();
                let (gap, n) = l.gap(x[i]);
                if (c.force != DVec3::ZERO || scratch_moved[k]) && gap < TOUCH {
                    self.touched.push((c.node, n, l.moved));
                    if !self.was_touching[i] {
                        self.impacts += 1;
                    }
                }
                continue;
            }
            let (b0, b1) = (
                &self.bodies0[c.body as usize],
                &self.bodies1[c.body as usize],
            );
            let local = b1.pose.inverse_transform_point(x[i]);
            let pressed = c.force != DVec3::ZERO;
            let surface = (pressed || scratch_moved[k]).then(|| b1.surface(local));
            if let Some(Surface { normal: n, .. }) = surface.filter(|s| s.signed < TOUCH) {
                let moved = x[i] - b0.pose.transform_point(local);
                self.touched
                    .push((c.node, b1.pose.transform_vector(n), moved));
                self.last_contacts += 1;
                if !self.was_touching[i] {
                    self.impacts += 1;
                }
            }
        }
        self.was_touching.fill(false);
        for &(i, _, _) in &self.touched {
            self.was_touching[i as usize] = true;
        }
        // Warm start of the next substep: each node's strongest pushing contact, and where it
        // sticks if its friction force ended inside the cone.
        self.warm_body.fill(u32::MAX);
        self.warm_force.fill(DVec3::ZERO);
        self.warm_anchor.fill(DVec3::NAN);
        for c in self.candidates.iter().filter(|c| !c.limit) {
            let i = c.node as usize;
            if c.force != DVec3::ZERO
                && (self.warm_body[i] == u32::MAX
                    || c.force.length_squared() > self.warm_force[i].length_squared())
            {
                self.warm_body[i] = c.body;
                self.warm_force[i] = c.force;
                let rn = c.force.dot(c.normal);
                let rt = (c.force - rn * c.normal).length();
                let sticks = self.friction > 0.0 && rn > 0.0 && rt < STICK * self.friction * rn;
                self.warm_anchor[i] = if !sticks {
                    DVec3::NAN
                } else if c.anchor_local.is_finite() {
                    c.anchor_local
                } else {
                    self.bodies1[c.body as usize]
                        .pose
                        .inverse_transform_point(x[i])
                };
            }
        }
        self.guard_paths(x_start, x, free_nodes);
        // The strain cap's steps (`crate::dynamics::strain_cap`), each followed by the bodies
        // and limits, so that the cap never leaves a node inside a body or past a limit; last,
        // the paths once more (a step may carry a node across a thin body), then the limits
        // (a node the guard sent back along its path can land past its max distance: 1.04 mm
        // in `tests/limits.rs`'s sprinting cape once the cap's steps converged).
        let mut capped = false;
        for _ in 0..cap_steps {
            if !cap(x, &self.touched) {
                break;
            }
            capped = true;
            self.push_out_all(x, scratch_moved);
            self.clamp_limits(x);
        }
        if capped {
            self.guard_paths(x_start, x, free_nodes);
            self.clamp_limits(x);
        }
    }

    /// The guard of [`ContactPass::finish`]: every free node whose actual path over the
    /// substep (from `x_start` to `x`) meets a nearby body's swept box, but for the candidates
    /// still within their clear radius (whose paths stay outside), is put back where its path
    /// entered the body if it crossed it.
    fn guard_paths(&mut self, x_start: &[DVec3], x: &mut [DVec3], free_nodes: &[u32]) {
        self.clear_of.fill(u32::MAX);
        for c in self.candidates.iter().filter(|c| !c.limit) {
            if c.stays_clear(x[c.node as usize]) {
                self.clear_of[c.node as usize] = c.body;
            }
        }
        self.tests += (self.near.len() * free_nodes.len()) as u64;
        for &c in &self.near {
            let (b0, b1) = (&self.bodies0[c as usize], &self.bodies1[c as usize]);
            let swept = &self.swept[c as usize];
            for &i in free_nodes {
                let i = i as usize;
                if self.clear_of[i] == c {
                    continue;
                }
                let (a, b) = (x_start[i], x[i]);
                let path = Aabb::spanning(a, b);
                if !swept.overlaps(&path) {
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

    /// Per node: touching a body after the last substep (of the cloth [`ContactPass::load`]ed).
    pub fn touching(&self) -> &[bool] {
        &self.was_touching
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate of node `node` against body 0, normal +Y, no force, measured nowhere.
    fn test_candidate(node: u32, engaged: bool) -> Candidate {
        Candidate {
            node,
            body: 0,
            limit: false,
            force: DVec3::ZERO,
            gap: 0.0,
            normal: DVec3::Y,
            engaged,
            compliance: 0.0,
            measured: false,
            prev_gap: f64::NAN,
            p0: DVec3::ZERO,
            anchor: DVec3::ZERO,
            anchor_local: DVec3::NAN,
            start: None,
            overshoot: 0.0,
            step: DVec3::ZERO,
            measured_at: DVec3::ZERO,
            clear: 0.0,
        }
    }

    /// An accelerated iteration that refuses a step goes back to the forces it saved: every
    /// candidate's force and the node sums are restored exactly, and the contact-set key tells
    /// one engaged set from another (and equal sets apart from nothing).
    #[test]
    fn saved_forces_come_back_exactly_and_the_set_key_follows_the_engaged_set() {
        let candidate = |node: u32, engaged: bool| Candidate {
            force: DVec3::new(0.0, node as f64, 0.0),
            ..test_candidate(node, engaged)
        };
        let mut pass = ContactPass {
            candidates: (0..4).map(|n| candidate(n, n % 2 == 0)).collect(),
            node_force: vec![DVec3::ZERO; 4],
            ..Default::default()
        };
        pass.sum_forces();
        let key = pass.contact_set_key();
        let (forces, sums): (Vec<DVec3>, Vec<DVec3>) = (
            pass.candidates.iter().map(|c| c.force).collect(),
            pass.node_force.clone(),
        );
        pass.save_forces();
        for c in &mut pass.candidates {
            c.step = DVec3::X;
        }
        pass.take_step(0.5);
        assert_ne!(pass.node_force, sums);
        pass.restore_forces();
        let after: Vec<DVec3> = pass.candidates.iter().map(|c| c.force).collect();
        assert_eq!(after, forces);
        assert_eq!(pass.node_force, sums);
        assert_eq!(pass.contact_set_key(), key);
        pass.candidates[1].engaged = true;
        assert_ne!(pass.contact_set_key(), key);
    }

    /// The collective compliance is taken from the cache when the contact set is the one measured
    /// or differs from it by at most 1/50 of it (joiners take the largest measured compliance,
    /// and are not marked measured), and is solved again beyond that.
    #[test]
    fn compliance_is_reused_only_while_the_contact_set_stays_within_a_fiftieth() {
        let candidate = test_candidate;
        let mut pass = ContactPass::default();
        assert!(!pass.reuse_response(), "nothing measured yet");
        pass.candidates = (0..100).map(|n| candidate(n, true)).collect();
        let u: Vec<DVec3> = (0..101).map(|n| DVec3::X * (1.0 + n as f64)).collect();
        pass.set_response(&u, &[0.0; 101]);
        // Same set: every compliance as measured.
        for c in &mut pass.candidates {
            c.compliance = 0.0;
        }
        assert!(pass.reuse_response());
        assert!(
            pass.candidates
                .iter()
                .all(|c| c.measured && c.compliance == 1.0 + c.node as f64)
        );
        // One node left and one joined: 2 changes in 100, reused; the joiner is unmeasured.
        pass.candidates[0].engaged = false;
        pass.candidates.push(candidate(100, true));
        assert!(pass.reuse_response());
        assert!(!pass.candidates[100].measured);
        assert_eq!(pass.w_max, 100.0);
        // A third change: measured again.
        pass.candidates[1].engaged = false;
        assert!(!pass.reuse_response());
    }
}
