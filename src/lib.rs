//! # isocloth
//!
//! Real-time inextensible cloth for game engines.
//!
//! A base triangle mesh (the artist's cape) is subdivided 4:1 into a red/black mesh
//! ([`ClothMesh`]) whose middle triangles stay rigid while the black vertices follow them linearly:
//! the cloth bends freely but does not stretch, and it does not lock. A [`ClothModel`] prefactors
//! the constant local-global (projective dynamics) matrix once; each [`Cloth`] then steps with a
//! fixed budget of substeps x iterations per frame, integrating with BDF2.
//!
//! The core is engine-agnostic and has plain data and explicit `step` arguments:
//!
//! ```
//! use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverSettings};
//!
//! // A 1 m square hanging from its two top corners.
//! let base = BaseMesh::rectangle(1.0, 1.0, 8, 8)?;
//! let mesh = ClothMesh::new(&base)?;
//! let pins = mesh.nodes_for_vertices(&[BaseMesh::grid_index(8, 0, 8), BaseMesh::grid_index(8, 8, 8)], false);
//! let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default())?;
//! for _ in 0..60 {
//!     cloth.step(1.0 / 60.0)?;
//! }
//! let m = cloth.measures();
//! assert!(m.max_strain < 0.05);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Stages
//! The source is in one folder per stage; every module is also re-exported at the crate root
//! (`isocloth::energy`, `isocloth::collision`, ...), so paths do not depend on the layout.
//!
//! | folder | stage | modules |
//! |---|---|---|
//! | `mesh/` | the artist's mesh and its 4:1 red/black subdivision | [`mesh`], [`obj`] (OBJ import: n-gons triangulated in their plane, seam vertices merged) |
//! | `dynamics/` | energy, the prefactored matrix, the iterations | [`energy`] (constraint terms and their local projections), [`aero`] (wind, drag, lift, damping), `factor` (the sparse Cholesky, the only place faer is used), [`model`] (the prepared, shareable form), `solver` (the local-global map accelerated by Anderson mixing, the product's iteration, or plain), `newton` (the projected Newton reference), [`integrator`] (BDF2, backward Euler), [`equilibrium`] (static equilibrium: pre-settling, converged references), [`measures`] (strain, isometry, conformity, energy), [`workspace`] (preallocated memory) |
//! | `contact/` | the character's bodies and contact | [`collision`] (kinematic capsules, spheres, planes; per-node frictional contact; the only place parry3d is used), [`limits`] (tethers, max distance, backstops, sleeping), [`self_contact`] (the cloth against itself) |
//! | `character/` | what drives the cloth from a skeleton | [`attachment`] (pins on bones, skinning, teleports, inertia scaling), [`rig`] (the procedural test character) |
//! | `engine/` | integration into a game | `ecs` (the bevy_ecs adapter), `scenario` (the scenario runner), [`tuning`] (budgets per platform from measured runs), [`lod`] (one frame budget for many cloths: rungs by priority from measured costs), [`worker`] (stepping on a worker thread, the only place crossbeam is used) |
//! | (root) | the façade and shared pieces | [`cloth`] (a cloth's state and its `step`), [`counters`] (what a step did, per stage), [`error`], [`load`] (settings files with errors at the line) |
//!
//! Dependencies run one way: `mesh` <- `dynamics` and `contact` <- `cloth` <- `character` <-
//! `engine` (the solver reads the contact forces; contact knows nothing of the solver).

#![warn(missing_docs)]
#![deny(unsafe_code)]

mod character;
pub mod cloth;
mod contact;
pub mod counters;
mod dynamics;
mod engine;
pub mod error;
mod flags;
pub mod load;
pub mod mesh;

pub use character::{attachment, rig};
pub(crate) use contact::bounds;
pub use contact::{collision, layers, limits, self_contact};
#[doc(hidden)]
pub use dynamics::stages;
pub use dynamics::{aero, energy, equilibrium, integrator, measures, model, strain_cap, workspace};
pub(crate) use dynamics::{anderson, factor, lanes, newton, pipeline, solver, sparse};
#[cfg(feature = "ecs")]
pub use engine::{ecs, scenario};
pub use engine::{layering, lod, tuning, worker};
pub use mesh::obj;

pub use aero::Aerodynamics;
pub use attachment::{AttachError, AttachmentSettings, Attachments, Influence, SkinUse};
pub use cloth::{Cloth, ClothSnapshot, ClothState, SkinMotion, StepReport};
pub use collision::{
    BodyExclusions, ColliderError, ColliderId, ColliderSet, ColliderShape, CollisionGroups,
    ContactForce, ContactSettings, ConvexHull, GroupError, HeightField, Pose, TriangleMesh,
};
pub use counters::StepCounters;
pub use energy::{BendingRest, Material, SolverWeights};
pub use equilibrium::RelaxReport;
pub use error::{ClothError, MeshError, ObjError, PolygonError, RonError};
pub use glam;
pub use integrator::Integrator;
pub use layering::ClothLayers;
pub use layers::{ClothSurface, LayerError, LayerSettings};
pub use limits::{LimitSettings, SleepSettings};
pub use lod::{ClothBudget, LodId, LodScheduler, Rung};
pub use measures::Measures;
pub use mesh::{BaseMesh, ClothMesh, Discretization, StrainEdge};
pub use model::{ClothModel, ModelStats, SolverMethod, SolverSettings};
pub use self_contact::SelfCollisionSettings;
pub use strain_cap::StrainCap;
pub use workspace::Workspace;
