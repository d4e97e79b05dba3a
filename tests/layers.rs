//! Layers (`isocloth::layers`, `isocloth::layering`): cloths that meet each other never pass
//! through each other, keep their thickness apart and come to rest, at the console preset
//! (the crate's default).

use glam::{DQuat, DVec3, Vec3};
use isocloth::layers::{layer_crossings, layer_separation};
use isocloth::{
    BaseMesh, Cloth, ClothLayers, ClothMesh, ColliderSet, ColliderShape, LayerError,
    LayerSettings, Material, Pose, SolverSettings,
};

const DT: f64 = 1.0 / 60.0;

/// A `size` m square sheet of `cells` x `cells` cells, turned by `tilt` and centred at
/// `centre`, pinned at the listed base corners (0..4: the grid's corners), thrown at
/// `velocity`.
fn sheet(size: f32, cells: usize, tilt: DQuat, centre: DVec3, pins: &[usize], velocity: DVec3) -> Cloth {
    let base = BaseMesh::rectangle(size, size, cells, cells)
        .unwrap()
        .map_positions(|p| {
            let q = DVec3::new(f64::from(p.x - 0.5 * size), 0.0, f64::from(p.y - 0.5 * size));
            (tilt * q + centre).as_vec3()
        });
    let mesh = ClothMesh::new(&base).unwrap();
    let corners = [
        BaseMesh::grid_index(cells, 0, 0),
        BaseMesh::grid_index(cells, cells, 0),
        BaseMesh::grid_index(cells, 0, cells),
        BaseMesh::grid_index(cells, cells, cells),
    ];
    let pinned: Vec<u32> = pins.iter().map(|&k| corners[k]).collect();
    let pins = mesh.nodes_for_vertices(&pinned, false);
    let mut settings = SolverSettings::default();
    if let Ok(v) = std::env::var("ISO_SUB") {
        settings.substeps = v.parse().unwrap();
    }
    if let Ok(v) = std::env::var("ISO_IT") {
        settings.iterations = v.parse().unwrap();
    }
    let mut cloth = Cloth::from_mesh(mesh, Material::default(), &pins, settings).unwrap();
    let v = vec![velocity; cloth.positions().len()];
    cloth.set_velocities(&v).unwrap();
    cloth
}

fn crossings(a: &Cloth, b: &Cloth) -> usize {
    layer_crossings(
        (a.model().mesh().render_triangles(), a.positions()),
        (b.model().mesh().render_triangles(), b.positions()),
    )
}

fn separation(a: &Cloth, b: &Cloth) -> f64 {
    layer_separation(
        (a.model().mesh().render_triangles(), a.positions()),
        (b.model().mesh().render_triangles(), b.positions()),
        0.05,
    )
}

fn ground() -> ColliderSet {
    let mut c = ColliderSet::new();
    c.add(ColliderShape::Plane, Pose::default()).unwrap();
    c
}

/// What a run of two layered cloths did: the most crossed triangle pairs at any frame's end,
/// the least separation seen, the largest speed at the end, and whether everything stayed
/// finite.
#[derive(Debug)]
struct Run {
    worst_crossings: usize,
    least_separation: f64,
    end_speed: f64,
    max_strain: f64,
}

fn run(mut cloths: Vec<Cloth>, colliders: &ColliderSet, frames: usize, layered: bool) -> (Run, Vec<Cloth>) {
    let mut layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]]).unwrap();
    let mut reports = Vec::new();
    let mut r = Run {
        worst_crossings: 0,
        least_separation: f64::INFINITY,
        end_speed: 0.0,
        max_strain: 0.0,
    };
    for _ in 0..frames {
        if layered {
            layers.step(&mut cloths, DT, colliders, &mut reports).unwrap();
        } else {
            for c in cloths.iter_mut() {
                c.step_with(DT, colliders).unwrap();
            }
        }
        r.worst_crossings = r.worst_crossings.max(crossings(&cloths[0], &cloths[1]));
        r.least_separation = r.least_separation.min(separation(&cloths[0], &cloths[1]));
        for c in &cloths {
            r.max_strain = r.max_strain.max(c.measures().max_strain);
        }
        if std::env::var("LAYERS_TRACE").is_ok() {
            let sp = |c: &Cloth| c.velocities().iter().fold(0.0f64, |m, v| m.max(v.length()));
            println!(
                "{layered} cross {} rec {} {} strain {:.3} {:.3} speed {:.3} {:.3} sep {:.4}",
                crossings(&cloths[0], &cloths[1]),
                cloths[0].recoveries(),
                cloths[1].recoveries(),
                cloths[0].measures().max_strain,
                cloths[1].measures().max_strain,
                sp(&cloths[0]),
                sp(&cloths[1]),
                separation(&cloths[0], &cloths[1])
            );
        }
    }
    r.end_speed = cloths
        .iter()
        .flat_map(|c| c.velocities())
        .fold(0.0f64, |m, v| m.max(v.length()));
    (r, cloths)
}

/// Two 0.6 m sheets thrown into each other at 3 m/s each, crossed at right angles, falling on
/// the ground: with layers no triangle pair crosses at the end of any frame over 3 s, nothing
/// explodes (max strain under 50 %) and they rest (every node under 0.05 m/s at the end).
/// Without layers they pass through each other (over 10 crossed pairs at some frame).
#[test]
fn two_sheets_thrown_into_each_other_never_cross_and_come_to_rest() {
    let make = || {
        vec![
            sheet(0.6, 10, DQuat::from_rotation_z(1.4), DVec3::new(-0.5, 0.8, 0.0), &[], DVec3::new(3.0, 0.0, 0.0)),
            sheet(0.6, 10, DQuat::from_rotation_x(1.4), DVec3::new(0.5, 0.85, 0.1), &[], DVec3::new(-3.0, 0.0, 0.0)),
        ]
    };
    let g = ground();
    let (off, _) = run(make(), &g, 180, false);
    let (on, _) = run(make(), &g, 180, true);
    println!("off {off:?}\non {on:?}");
    assert!(off.worst_crossings > 10, "{off:?}");
    assert_eq!(on.worst_crossings, 0, "{on:?}");
    assert!(on.max_strain < 0.5, "{on:?}");
    assert!(on.end_speed < 0.05, "{on:?}");
}

/// A 0.5 m cape dropped from 0.3 m onto a 1 m sheet draped over a sphere: no crossing at any
/// frame's end over 3 s, the cape rests on the sheet (every node under 0.05 m/s, its lowest
/// node above the sheet's lowest), at least the thickness less 1 mm from it.
#[test]
fn a_cape_dropped_on_a_draped_sheet_rests_on_it() {
    let mut colliders = ground();
    colliders
        .add(ColliderShape::Sphere { radius: 0.3 }, Pose::from_translation(DVec3::new(0.0, 0.3, 0.0)))
        .unwrap();
    let drape = sheet(1.0, 14, DQuat::IDENTITY, DVec3::new(0.0, 0.65, 0.0), &[], DVec3::ZERO);
    // Let the sheet drape first.
    let mut first = drape;
    for _ in 0..120 {
        first.step_with(DT, &colliders).unwrap();
    }
    let cape = sheet(0.5, 10, DQuat::from_rotation_y(0.5), DVec3::new(0.05, 0.95, 0.02), &[], DVec3::ZERO);
    let (on, cloths) = run(vec![first, cape], &colliders, 180, true);
    println!("on {on:?}");
    assert_eq!(on.worst_crossings, 0, "{on:?}");
    assert!(on.max_strain < 0.5, "{on:?}");
    assert!(on.end_speed < 0.05, "{on:?}");
    let top = cloths[1].positions().iter().fold(f64::INFINITY, |m, p| m.min(p.y));
    let below = cloths[0].positions().iter().fold(f64::INFINITY, |m, p| m.min(p.y));
    assert!(top > below, "{top} {below}");
    assert!(on.least_separation > LayerSettings::default().thickness - 1e-3, "{on:?}");
    let _ = Vec3::ZERO;
}

/// A pair naming one cloth twice, a cloth that is not there, a negative or infinite thickness
/// and a negative friction are typed errors.
#[test]
fn bad_layer_settings_are_typed_errors() {
    let ok = LayerSettings::default();
    assert_eq!(ClothLayers::new(ok, 2, &[[1, 1]]).unwrap_err(), LayerError::SelfPair(1));
    assert!(matches!(
        ClothLayers::new(ok, 2, &[[0, 2]]).unwrap_err(),
        LayerError::NoSuchCloth { a: 0, b: 2, count: 2 }
    ));
    for t in [-0.01, 0.0, f64::INFINITY, f64::NAN, 1.5] {
        let bad = LayerSettings { thickness: t, ..ok };
        assert!(matches!(ClothLayers::new(bad, 2, &[[0, 1]]), Err(LayerError::Thickness(_))), "{t}");
    }
    let bad = LayerSettings { friction: -1.0, ..ok };
    assert!(matches!(ClothLayers::new(bad, 2, &[[0, 1]]), Err(LayerError::Friction(_))));
}
