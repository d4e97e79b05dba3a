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
//! ## Modules
//! Each module is one stage, named for what it does: [`mesh`] (base mesh, subdivision),
//! [`energy`] (constraint terms and their local projections), `factor` (the sparse Cholesky, the
//! only place faer is used), [`model`] (the prepared, shareable form), `solver` (the local-global
//! iterations), [`integrator`] (BDF2 and backward Euler), [`cloth`] (state and stepping),
//! [`measures`] (strain, isometry, conformity, energy), [`aero`] (wind, drag, lift,
//! damping), [`worker`] (stepping on a worker thread, the only place crossbeam is used),
//! [`collision`] (kinematic capsules,
//! spheres and planes; the only place parry3d is used), [`attachment`] (pins driven by bones,
//! skinning, teleports, inertia scaling), [`equilibrium`] (static
//! equilibrium by Newton's method: pre-settling and converged references), [`obj`] (OBJ import:
//! n-gons triangulated in their plane, seam vertices merged), [`load`] (settings files with
//! errors at the line).

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod aero;
pub mod attachment;
pub mod cloth;
pub mod collision;
#[cfg(feature = "ecs")]
pub mod ecs;
pub mod energy;
pub mod equilibrium;
pub mod error;
mod factor;
mod flags;
pub mod integrator;
pub mod load;
pub mod measures;
pub mod mesh;
pub mod model;
pub mod obj;
pub mod rig;
#[cfg(feature = "ecs")]
pub mod scenario;
mod solver;
mod sparse;
#[doc(hidden)]
pub mod stages;
pub mod worker;
pub mod workspace;

pub use aero::Aerodynamics;
pub use attachment::{AttachError, AttachmentSettings, Attachments, Influence};
pub use cloth::{Cloth, ClothSnapshot, ClothState, StepReport};
pub use collision::{ColliderError, ColliderId, ColliderSet, ColliderShape, ContactSettings, Pose};
pub use energy::{BendingRest, Material};
pub use equilibrium::RelaxReport;
pub use error::{ClothError, MeshError, ObjError, PolygonError, RonError};
pub use glam;
pub use integrator::Integrator;
pub use measures::Measures;
pub use mesh::{BaseMesh, ClothMesh, Discretization, StrainEdge};
pub use model::{ClothModel, ModelStats, SolverMethod, SolverSettings};
pub use workspace::Workspace;
