//! Character: pins driven by bones with skin weights, teleports and inertia scaling
//! (`attachment`), and the procedural test character with its cape and colliders (`rig`).

pub mod attachment;
pub mod rig;
