//! Working memory for stepping cloths: everything a step needs that does not outlive it.
//!
//! A [`Cloth`](crate::Cloth) holds only its state (positions, velocities and their history, pin
//! targets, which nodes touch a body). The prediction, right-hand sides, projections, Anderson
//! mixing's vectors, contact buffers and forces, and the copy of the positions
//! kept for rolling back a fault live in a [`Workspace`], which any number of cloths stepped one
//! after another share, in the manner of faer's preallocated scratch. Its buffers only grow: once
//! it has served the largest cloth it will see, stepping allocates nothing. Buffers that only some
//! steps need (contact with bodies, air, one-iteration substeps) are sized by the first step that
//! needs them, so a workspace that never steps a cloth among bodies does not hold them.
//!
//! [`Cloth::step`](crate::Cloth::step) uses one workspace per thread (a thread local), so
//! cloths stepped in parallel with rayon use one per worker; [`Cloth::step_in`](crate::Cloth)
//! takes an explicit one.

use std::cell::RefCell;

use glam::DVec3;

use crate::contact::collision::pass::ContactPass;
use crate::counters::StepCounters;
use crate::model::ClothModel;
use crate::solver::Scratch;

/// Scratch memory for [`Cloth::step_in`](crate::Cloth::step_in); see the module docs.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(crate) scratch: Scratch,
    /// Positions being solved for.
    pub(crate) x_new: Vec<DVec3>,
    /// Per-node acceleration from the air, this substep (sized on the first substep with air).
    pub(crate) accel: Vec<DVec3>,
    /// The positions before the current step, to go back to (at rest) if a non-finite value
    /// appears.
    pub(crate) last_good: Vec<DVec3>,
    pub(crate) contact_pass: ContactPass,
    /// Per node, whether the contact velocity split changed its velocity this substep (all
    /// false between substeps).
    pub(crate) split: Vec<bool>,
}

impl Workspace {
    /// An empty workspace; it sizes itself on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sizes the buffers for `model`, reusing the memory already held.
    pub(crate) fn ensure(&mut self, model: &ClothModel) {
        let n = model.mesh.node_count();
        self.scratch.ensure(model);
        self.x_new.resize(n, DVec3::ZERO);
        self.split.resize(n, false);
    }

    /// The counts the stages gathered since the last call, summed, and theirs cleared.
    pub(crate) fn take_counters(&mut self) -> StepCounters {
        let mut c = std::mem::take(&mut self.scratch.counters);
        c += std::mem::take(&mut self.scratch.cap.counters);
        c.contact_tests += std::mem::take(&mut self.contact_pass.tests);
        c.self_pair_visits += std::mem::take(&mut self.contact_pass.self_contact.visits);
        c
    }
}

thread_local! {
    static THREAD_WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::new());
}

/// Runs `f` with this thread's workspace (or a fresh one if it is already in use further up
/// the stack, which the crate itself never does).
pub(crate) fn with_thread_workspace<R>(f: impl FnOnce(&mut Workspace) -> R) -> R {
    THREAD_WORKSPACE.with(|ws| match ws.try_borrow_mut() {
        Ok(mut ws) => f(&mut ws),
        Err(_) => f(&mut Workspace::new()),
    })
}
