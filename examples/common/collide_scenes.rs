//! The scenes of the `collide` example, shared with `contact_gallery`: the two-body drop and the
//! fast limb sweeping through a hanging sheet.

use glam::{DQuat, DVec3, Vec3};
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderId, ColliderSet, ColliderShape, Material, Pose,
    SolverSettings,
};

/// A capsule (axis along local Y) lying along world X, centred at `center`.
pub fn lying(center: DVec3) -> Pose {
    Pose::new(center, DQuat::from_rotation_z(-std::f64::consts::FRAC_PI_2))
}

/// The drop: a 0.8 m sheet (16 x 16 cells), flat at y = 0.35, over a lying capsule (radius
/// 0.1 m, centre 0.15 m behind the origin) and a sphere (radius 0.12 m) beside it, both resting
/// on y = 0 at their centres. The sheet falls 0.25 m onto the capsule's top.
pub fn two_body_drop(
    settings: SolverSettings,
) -> Result<(Cloth, ColliderSet), Box<dyn std::error::Error>> {
    let cells = 16;
    let base = BaseMesh::rectangle(0.8, 0.8, cells, cells)?
        .map_positions(|p| Vec3::new(p.x - 0.4, 0.35, -(p.y - 0.4)));
    let mesh = ClothMesh::new(&base)?;
    let cloth = Cloth::from_mesh(mesh, Material::default(), &[], settings)?;
    let mut colliders = ColliderSet::new();
    colliders.add(
        ColliderShape::Capsule {
            half_height: 0.3,
            radius: 0.1,
        },
        lying(DVec3::new(0.0, 0.0, -0.15)),
    )?;
    colliders.add(
        ColliderShape::Sphere { radius: 0.12 },
        Pose::from_translation(DVec3::new(0.1, 0.0, 0.2)),
    )?;
    Ok((cloth, colliders))
}

/// The fast limb: a 1 m sheet (16 x 16 cells) hanging in the plane z = 0 from its pinned top edge
/// (y = 1), and a capsule lying along X at height 0.4 m that sweeps along +z from z = -0.4 to
/// z = 0.4 at `speed`, then stops.
#[derive(Debug, Clone, Copy)]
pub struct LimbSweep {
    /// Capsule radius in metres.
    pub radius: f64,
    /// Sweep speed in m/s.
    pub speed: f64,
    /// A tapered limb's radius at its +X end (`radius` at its -X end); `None`: a capsule.
    pub taper: Option<f64>,
}

impl LimbSweep {
    /// Half the capsule's axis.
    pub const HALF_HEIGHT: f64 = 0.2;
    /// Height of the capsule's axis.
    pub const HEIGHT: f64 = 0.4;
    const START_Z: f64 = -0.4;
    const END_Z: f64 = 0.4;

    /// The hanging sheet and the capsule at its start.
    pub fn setup(
        &self,
        settings: SolverSettings,
    ) -> Result<(Cloth, ColliderSet, ColliderId), Box<dyn std::error::Error>> {
        let cells = 16;
        let base = BaseMesh::rectangle(1.0, 1.0, cells, cells)?
            .map_positions(|p| Vec3::new(p.x - 0.5, p.y, 0.0));
        let mesh = ClothMesh::new(&base)?;
        let top: Vec<u32> = (0..=cells)
            .map(|i| BaseMesh::grid_index(cells, i, cells))
            .collect();
        let pins = mesh.nodes_for_vertices(&top, true);
        let cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings)?;
        let mut colliders = ColliderSet::new();
        let shape = match self.taper {
            None => ColliderShape::Capsule {
                half_height: Self::HALF_HEIGHT,
                radius: self.radius,
            },
            Some(top_radius) => ColliderShape::TaperedCapsule {
                half_height: Self::HALF_HEIGHT,
                bottom_radius: self.radius,
                top_radius,
            },
        };
        let limb = colliders.add(shape, self.pose_after(None))?;
        Ok((cloth, colliders, limb))
    }

    /// The capsule's z at the end of frame `frame` (0-based) at 60 Hz; its start with `None`.
    pub fn z_after(&self, frame: Option<usize>) -> f64 {
        let travelled = frame.map_or(0.0, |f| self.speed * (f + 1) as f64 / 60.0);
        (Self::START_Z + travelled).min(Self::END_Z)
    }

    /// The capsule's pose at the end of frame `frame`; its start with `None`.
    pub fn pose_after(&self, frame: Option<usize>) -> Pose {
        lying(DVec3::new(0.0, Self::HEIGHT, self.z_after(frame)))
    }

    /// Frames, from the first, over which the footprint count is taken: the sweep and the 5
    /// frames after it.
    pub fn footprint_frames(&self) -> usize {
        let moving = ((Self::END_Z - Self::START_Z) / (self.speed / 60.0)).ceil() as usize;
        moving + 5
    }

    /// Nodes behind the limb (at `z`) inside its footprint: they would have passed through it.
    pub fn behind(&self, positions: &[DVec3], z: f64) -> usize {
        positions
            .iter()
            .filter(|p| {
                p.x.abs() < Self::HALF_HEIGHT && (p.y - Self::HEIGHT).abs() < self.radius && p.z < z
            })
            .count()
    }
}
