//! Engine integration: the bevy_ecs adapter (`ecs`: components, the config resource with
//! per-entity override, budget presets, step-numbered system sets), the scenario runner
//! (`scenario`, RON files run headless through the ECS layer), cloths that meet each other
//! (`layering`: the frame's stages of layers) and stepping on a worker thread
//! (`worker`, the only place crossbeam is used), and picking a budget per platform from measured
//! runs (`tuning`, which needs no ECS).

#[cfg(feature = "ecs")]
pub mod ecs;
pub mod layering;
pub mod lod;
#[cfg(feature = "ecs")]
pub mod scenario;
pub mod tuning;
pub mod worker;
