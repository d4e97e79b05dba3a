//! Scenes shared by the integration tests.
#![allow(dead_code)]

use glam::Vec3;
use isocloth::{
    AttachmentSettings, Attachments, BaseMesh, Cloth, ClothMesh, Influence, Material, Pose,
    SolverSettings, SolverWeights,
};

/// A `width` x `height` m cape of `cells` x `cells` base cells hanging in the x-y plane,
/// centred on x = 0, its top row at y = 1.5 and pinned.
pub fn hanging_cape(width: f32, height: f32, cells: usize) -> Cloth {
    let base = BaseMesh::rectangle(width, height, cells, cells)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x - 0.5 * width, 1.5 - height + p.y, 0.0));
    let mesh = ClothMesh::new(&base).unwrap();
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap()
}

/// Binds every pinned node of `cloth` to bone 0 alone, at `pose`.
pub fn bind_pins_to_one_bone(
    cloth: &Cloth,
    pose: Pose,
    settings: AttachmentSettings,
) -> Attachments {
    let nodes: Vec<(u32, Vec<Influence>)> = cloth
        .pins()
        .iter()
        .map(|&n| {
            (
                n,
                vec![Influence {
                    bone: 0,
                    weight: 1.0,
                }],
            )
        })
        .collect();
    Attachments::bind(cloth, &nodes, &[pose], 0, settings).unwrap()
}

/// A horizontal capsule (radius 8 cm, 0.56 m long) at height 1 m, `z` in front of the cape.
pub fn capsule_at(z: f64) -> isocloth::ColliderSet {
    let mut colliders = isocloth::ColliderSet::new();
    colliders
        .add(
            isocloth::ColliderShape::Capsule {
                half_height: 0.2,
                radius: 0.08,
            },
            Pose::new(
                glam::DVec3::new(0.0, 1.0, z),
                glam::DQuat::from_rotation_z(std::f64::consts::FRAC_PI_2),
            ),
        )
        .unwrap();
    colliders
}

/// The largest node speed of `cloth`, m/s.
pub fn max_speed(cloth: &Cloth) -> f64 {
    cloth
        .velocities()
        .iter()
        .map(|v| v.length())
        .fold(0.0, f64::max)
}

/// Worst max and mean render-mesh strain over 2 s at the default budget, at `weights`, of the
/// 1 m two-pin square (`cells` x `cells` base cells) released from horizontal, pinned at two
/// corners 1 m apart.
pub fn released_two_pin_square_strain(
    cells: usize,
    material: Material,
    weights: SolverWeights,
) -> (f64, f64) {
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x, 1.0, -p.y));
    let mesh = ClothMesh::new(&base).unwrap();
    let corners = [
        BaseMesh::grid_index(cells, 0, 0),
        BaseMesh::grid_index(cells, cells, 0),
    ];
    let pins = mesh.nodes_for_vertices(&corners, false);
    let settings = SolverSettings {
        weights,
        ..Default::default()
    };
    let mut cloth = Cloth::from_mesh(mesh, material, &pins, settings).unwrap();
    let (mut max, mut mean) = (0.0f64, 0.0f64);
    for _ in 0..120 {
        cloth.step(1.0 / 60.0).unwrap();
        let m = cloth.measures();
        max = max.max(m.max_strain);
        mean = mean.max(m.mean_strain);
    }
    (max, mean)
}

/// A `size` m square sheet of `cells` x `cells` base cells, turned by `turn` and centred at
/// `centre`, pinned at the listed base corners (0..4: the grid's corners), at the default
/// budget.
pub fn turned_sheet(
    size: f32,
    cells: usize,
    turn: glam::DQuat,
    centre: glam::DVec3,
    corners: &[usize],
) -> Cloth {
    let base = BaseMesh::rectangle(size, size, cells, cells)
        .unwrap()
        .map_positions(|p| {
            let q = glam::DVec3::new(
                f64::from(p.x - 0.5 * size),
                0.0,
                f64::from(p.y - 0.5 * size),
            );
            (turn * q + centre).as_vec3()
        });
    let mesh = ClothMesh::new(&base).unwrap();
    let all = [
        BaseMesh::grid_index(cells, 0, 0),
        BaseMesh::grid_index(cells, cells, 0),
        BaseMesh::grid_index(cells, 0, cells),
        BaseMesh::grid_index(cells, cells, cells),
    ];
    let pinned: Vec<u32> = corners.iter().map(|&k| all[k]).collect();
    let pins = mesh.nodes_for_vertices(&pinned, false);
    Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap()
}
