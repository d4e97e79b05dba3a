//! Game constraints (tethers, max distance, backstops) and sleeping, pinned on the demo cape
//! driven by the procedural character through the core API (no ECS).

mod common;

use glam::DVec3;
use isocloth::rig::{self, Animation, CharacterRig};
use isocloth::{Attachments, Cloth, ColliderSet, LimitSettings, SleepSettings, SolverSettings};

const DT: f64 = 1.0 / 60.0;

/// The demo cape on the procedural character, with the character's capsules.
struct Scene {
    rig: CharacterRig,
    cloth: Cloth,
    attachments: Attachments,
    colliders: ColliderSet,
    ids: Vec<(usize, usize, isocloth::Pose)>,
    poses: Vec<isocloth::Pose>,
}

impl Scene {
    fn new(limits: impl FnOnce(&Cloth) -> LimitSettings) -> Scene {
        let rig = CharacterRig::new(Animation::Run, DVec3::ZERO, 0.0);
        let mut poses = Vec::new();
        rig.poses(&mut poses);
        let mut cloth = rig::demo_cape(SolverSettings::default()).unwrap();
        let attachments = rig::demo_cape_attachments(&cloth, &poses).unwrap();
        let l = limits(&cloth);
        cloth.set_limit_settings(l).unwrap();
        let mut colliders = ColliderSet::new();
        let mut ids = Vec::new();
        for (b, pose) in poses.iter().enumerate() {
            if let Some((shape, offset)) = CharacterRig::bone_collider(b) {
                let id = colliders.add(shape, pose.mul(&offset)).unwrap();
                ids.push((b, id, offset));
            }
        }
        Scene {
            rig,
            cloth,
            attachments,
            colliders,
            ids,
            poses,
        }
    }

    /// Runs 1.5 s, then spins at 6 rad/s for 1.5 s from where it stands, calling `check`
    /// after every frame.
    fn sprint_and_spin(&mut self, mut check: impl FnMut(&Cloth, &Attachments)) {
        for frame in 0..180 {
            if frame == 90 {
                self.rig = CharacterRig::new(
                    Animation::Spin { rate: 6.0 },
                    self.rig.position,
                    self.rig.heading,
                );
            }
            self.rig.advance(DT);
            self.rig.poses(&mut self.poses);
            self.colliders.finish_frame();
            for &(b, id, offset) in &self.ids {
                self.colliders
                    .set_pose(id, self.poses[b].mul(&offset))
                    .unwrap();
            }
            self.attachments
                .apply(&mut self.cloth, &self.poses)
                .unwrap();
            self.cloth.step_with(DT, &self.colliders).unwrap();
            check(&self.cloth, &self.attachments);
        }
    }
}

/// Skinned render normals (area-weighted, the crate's rule) at `x`.
fn normals(cloth: &Cloth, x: &[DVec3]) -> Vec<DVec3> {
    let mut n = vec![DVec3::ZERO; x.len()];
    for t in cloth.render_indices().chunks(3) {
        let [a, b, c] = [t[0], t[1], t[2]].map(|i| x[i as usize]);
        let f = (b - a).cross(c - a);
        for &i in t {
            n[i as usize] += f;
        }
    }
    n.iter().map(|v| v.normalize()).collect()
}

/// The largest amount (metres) by which a free node of `cloth` is farther from its tether's
/// pin than `scale` times its rest geodesic distance.
fn past_tethers(cloth: &Cloth, scale: f64) -> f64 {
    let t = cloth.model().tethers();
    let x = cloth.positions();
    t.anchor
        .iter()
        .zip(&t.length)
        .enumerate()
        .filter(|(_, (a, _))| **a != u32::MAX)
        .map(|(i, (&a, &l))| x[i].distance(x[a as usize]) - scale * l)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// Tethers of scale 1 hold at every frame of a sprint then a fast spin, bodies on: no free
/// node ends a frame farther than its rest geodesic distance from its pin's current position,
/// to within 1 mm (the tolerance).
#[test]
fn tethers_hold_every_frame_of_a_sprinting_spinning_character() {
    let mut scene = Scene::new(|_| LimitSettings {
        tether_scale: 1.0,
        ..Default::default()
    });
    let mut worst = f64::NEG_INFINITY;
    scene.sprint_and_spin(|cloth, _| worst = worst.max(past_tethers(cloth, 1.0)));
    assert!(worst <= 1e-3, "a node ended {worst} m past its tether");
}

/// Tethers bind where the budget lets the cloth stretch: a cape yanked down at 20 m/s and
/// stepped at 1 x 2 local-global stretches more than 1 cm past its rest geodesic lengths
/// without tethers, and stays within 1 mm of them with tethers of scale 1.
#[test]
fn tethers_stop_a_yanked_cape_from_stretching() {
    let worst = |scale: f64| {
        let mut cloth = common::hanging_cape(0.5, 0.8, 8);
        let settings = SolverSettings {
            substeps: 1,
            iterations: 2,
            method: isocloth::SolverMethod::LocalGlobal,
            ..SolverSettings::default()
        };
        cloth.set_settings(settings).unwrap();
        cloth
            .set_limit_settings(LimitSettings {
                tether_scale: scale,
                ..Default::default()
            })
            .unwrap();
        let v = vec![DVec3::new(0.0, -20.0, 0.0); cloth.positions().len()];
        cloth.set_velocities(&v).unwrap();
        let mut worst = f64::NEG_INFINITY;
        for _ in 0..30 {
            cloth.step(DT).unwrap();
            worst = worst.max(past_tethers(&cloth, 1.0));
        }
        worst
    };
    let without = worst(0.0);
    assert!(without > 0.01, "the cape stretched only {without} m");
    let with = worst(1.0);
    assert!(with <= 1e-3, "a node ended {with} m past its tether");
}

/// Max distance painted from 0 at the collar to 0.4 m at the hem holds at every frame of a
/// sprint then a fast spin, bodies on: no node ends a frame farther than its radius from its
/// skinned position, to within 1 mm. Without it some node goes more than 5 cm past.
#[test]
fn max_distance_holds_every_frame_of_a_sprinting_spinning_character() {
    let worst = |limits: bool| {
        let mut radius = Vec::new();
        let mut scene = Scene::new(|cloth| {
            radius = rig::demo_cape_limits(cloth).max_distance;
            LimitSettings {
                max_distance: if limits { radius.clone() } else { Vec::new() },
                ..Default::default()
            }
        });
        let mut worst = f64::NEG_INFINITY;
        scene.sprint_and_spin(|cloth, att| {
            let skin = att.skin_targets();
            for (i, x) in cloth.positions().iter().enumerate() {
                if !cloth.pins().contains(&(i as u32)) {
                    worst = worst.max(x.distance(skin[i]) - radius[i] as f64);
                }
            }
        });
        worst
    };
    let with = worst(true);
    assert!(with <= 1e-3, "a node ended {with} m past its max distance");
    let without = worst(false);
    assert!(without > 0.05, "the max distance never bound ({without} m)");
}

/// A backstop 1 cm behind the skinned cape (1 m spheres on the body's side) holds at every
/// frame of a sprint then a fast spin, bodies on: no node ends a frame inside its sphere by
/// more than 1 mm.
#[test]
fn backstop_holds_every_frame_of_a_sprinting_spinning_character() {
    let mut scene = Scene::new(|cloth| {
        let l = rig::demo_cape_limits(cloth);
        LimitSettings {
            backstop_distance: vec![0.01; l.backstop_radius.len()],
            backstop_radius: l.backstop_radius,
            backstop_flip: l.backstop_flip,
            ..Default::default()
        }
    });
    let limits = scene.cloth.limit_settings().clone();
    let mut worst = f64::NEG_INFINITY;
    scene.sprint_and_spin(|cloth, att| {
        let skin = att.skin_targets();
        let n = normals(cloth, skin);
        for (i, x) in cloth.positions().iter().enumerate() {
            if cloth.pins().contains(&(i as u32)) {
                continue;
            }
            let r = limits.backstop_radius[i] as f64;
            let d = limits.backstop_distance[i] as f64;
            let away = if limits.backstop_flip { -n[i] } else { n[i] };
            let centre = skin[i] - (d + r) * away;
            worst = worst.max(r - x.distance(centre));
        }
    });
    assert!(worst <= 1e-3, "a node ended {worst} m inside its backstop");
}

/// The demo cape's render normal points at the body (+z, the character faces +z and the cape
/// hangs behind it), which is what `demo_cape_limits`' `backstop_flip` says.
#[test]
fn demo_cape_normal_points_at_the_body() {
    let cloth = rig::demo_cape(SolverSettings::default()).unwrap();
    let n = normals(&cloth, cloth.positions());
    assert!(n.iter().all(|n| n.z > 0.99));
    assert!(rig::demo_cape_limits(&cloth).backstop_flip);
}

/// Limits that never bind change nothing: a cape on the running character with tethers of
/// scale 3, a max distance of 5 m and a backstop 5 m behind ends 2 s bit-identical to the same
/// cape without them.
#[test]
fn slack_limits_change_nothing() {
    let run = |limits: bool| {
        let mut scene = Scene::new(|cloth| {
            if !limits {
                return LimitSettings::default();
            }
            let n = cloth.positions().len();
            LimitSettings {
                tether_scale: 3.0,
                max_distance: vec![5.0; n],
                backstop_distance: vec![5.0; n],
                backstop_radius: vec![1.0; n],
                backstop_flip: true,
                ..Default::default()
            }
        });
        scene.sprint_and_spin(|_, _| {});
        scene.cloth.positions().to_vec()
    };
    assert_eq!(run(true), run(false));
}

/// A cape hanging still falls asleep: with sleep on (0.01 m/s for 0.5 s), a cape hanging at
/// rest sleeps within 4 s; asleep, a frame runs no substep and moves nothing; a ball moving
/// 0.4 m in front of it does not wake it, the frame the ball comes within 2 cm it wakes and
/// steps; asleep again with the ball still, the frame a pin target moves it wakes.
#[test]
fn a_still_cape_sleeps_and_wakes_when_touched() {
    let mut cloth = common::hanging_cape(0.5, 0.8, 8);
    cloth
        .set_limit_settings(LimitSettings {
            sleep: SleepSettings {
                enabled: true,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    let mut set = ColliderSet::new();
    let at = |z: f64| isocloth::Pose::from_translation(DVec3::new(0.0, 1.0, z));
    let ball = set
        .add(isocloth::ColliderShape::Sphere { radius: 0.1 }, at(0.6))
        .unwrap();
    let sleep = |cloth: &mut Cloth, set: &mut ColliderSet| {
        let mut frames = 0;
        while !cloth.is_sleeping() {
            set.finish_frame();
            let r = cloth.step_with(DT, set).unwrap();
            assert_eq!(r.asleep, cloth.is_sleeping());
            frames += 1;
            assert!(frames < 240, "still awake after 4 s");
        }
    };
    sleep(&mut cloth, &mut set);
    let x = cloth.positions().to_vec();
    set.finish_frame();
    let r = cloth.step_with(DT, &set).unwrap();
    assert_eq!((r.substeps, r.asleep), (0, true));
    assert_eq!(cloth.positions(), &x[..]);
    // The ball moves, 0.4 m away: still asleep.
    set.finish_frame();
    set.set_pose(ball, at(0.5)).unwrap();
    assert!(cloth.step_with(DT, &set).unwrap().asleep);
    // The ball comes within 2 cm: awake.
    set.finish_frame();
    set.set_pose(ball, at(0.12)).unwrap();
    let r = cloth.step_with(DT, &set).unwrap();
    assert!(!r.asleep && r.substeps > 0);
    sleep(&mut cloth, &mut set);
    let mut targets: Vec<DVec3> = cloth
        .pins()
        .iter()
        .map(|&p| cloth.positions()[p as usize])
        .collect();
    targets[0].z += 0.01;
    cloth.set_pin_targets(&targets).unwrap();
    set.finish_frame();
    let r = cloth.step_with(DT, &set).unwrap();
    assert!(!r.asleep && r.substeps > 0 && !cloth.is_sleeping());
}

/// A max distance of 0 holds a node on its skinned position: a cape pinned only at its top
/// corners, whose bottom row has radius 0 around a skinned pose that swings back 0.4 rad about
/// the top edge over a second (a rigid motion, so nothing need stretch), keeps that row within
/// 1 mm of it at every frame, and the cape between (no limit) under 2 % max strain.
#[test]
fn max_distance_zero_holds_nodes_on_their_skinned_position() {
    use isocloth::{BaseMesh, ClothMesh, Material};
    let cells = 8;
    let base = BaseMesh::rectangle(0.5, 0.5, cells, cells)
        .unwrap()
        .map_positions(|p| glam::Vec3::new(p.x - 0.25, 1.0 + p.y, 0.0));
    let mesh = ClothMesh::new(&base).unwrap();
    let corners = [
        BaseMesh::grid_index(cells, 0, cells),
        BaseMesh::grid_index(cells, cells, cells),
    ];
    let pins = mesh.nodes_for_vertices(&corners, false);
    let bottom: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, 0))
        .collect();
    let held = mesh.nodes_for_vertices(&bottom, true);
    let mut cloth =
        Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap();
    let rest = cloth.positions().to_vec();
    let mut radius = vec![f32::INFINITY; rest.len()];
    for &n in &held {
        radius[n as usize] = 0.0;
    }
    cloth
        .set_limit_settings(LimitSettings {
            max_distance: radius,
            ..Default::default()
        })
        .unwrap();
    let (mut worst, mut strain) = (0.0f64, 0.0f64);
    for frame in 1..=60 {
        let swing = glam::DQuat::from_rotation_x(-0.4 * frame as f64 / 60.0);
        let top = DVec3::new(0.0, 1.5, 0.0);
        let skin: Vec<DVec3> = rest.iter().map(|&p| top + swing * (p - top)).collect();
        cloth.set_skin_targets(&skin).unwrap();
        cloth.step(DT).unwrap();
        for &n in &held {
            worst = worst.max(cloth.positions()[n as usize].distance(skin[n as usize]));
        }
        strain = strain.max(cloth.measures().max_strain);
    }
    assert!(
        worst <= 1e-3,
        "a held node ended {worst} m off its skinned position"
    );
    assert!(strain < 0.02, "max strain {strain}");
}
