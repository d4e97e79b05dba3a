//! Dynamics: the energy of the red/black mesh, its prefactored matrix, and the iterations that
//! step it. The terms and their local projections (`energy`, air forces in `aero`) are assembled
//! into the constant matrix and factored once (`sparse`, `factor`, held by a shareable `model`);
//! each substep predicts with the integrator (`integrator`: BDF2, backward Euler) and runs the
//! budgeted iterations (`solver`: the local-global map accelerated by Anderson mixing,
//! `anderson`) in preallocated memory (`workspace`); `newton` is the projected Newton reference
//! that `equilibrium` also drapes with; `pipeline` is one
//! substep as a function of plain data, which [`crate::Cloth`] drives; `strain_cap` brings the edges a budgeted solve left stretched back within the cloth's
//! tolerance, with contact; `measures` reads strain, isometry, conformity and energy off the
//! result. `lanes` holds the local step's kernels four
//! elements at a time.

pub mod aero;
pub(crate) mod anderson;
pub mod energy;
pub mod equilibrium;
pub(crate) mod factor;
pub mod integrator;
pub(crate) mod lanes;
pub mod measures;
pub mod model;
pub(crate) mod newton;
pub(crate) mod pipeline;
pub(crate) mod solver;
pub(crate) mod sparse;
#[doc(hidden)]
pub mod stages;
pub mod strain_cap;
pub mod workspace;
