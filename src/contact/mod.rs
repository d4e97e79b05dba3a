//! Contact: the character's bodies (kinematic capsules, spheres and planes, posed by the game
//! every frame), the broad phase, and the per-node frictional contact forces the solver's
//! iterations correct (`collision`; the only place parry3d is used), and the game constraints
//! solved the same way (`limits`: tethers, max distance, backstops; sleeping), and the cloth
//! against itself (`self_contact`: proximity forces in the iterations, a continuous check after),
//! and against other cloths (`layers`: the same, against their surfaces, with a separation
//! after the frame).

pub(crate) mod bounds;
pub mod collision;
pub mod layers;
pub mod limits;
pub mod self_contact;
