//! The step's counters (`isocloth::counters`): what each stage did, counted exactly, and the
//! work figure built from them.

mod common;

use isocloth::{ColliderSet, ColliderShape, Pose, StrainCap};

/// A counted figure is the same from run to run: two identical capes stepped 60 frames report
/// identical counters every frame, each frame's local-global solves are substeps x iterations
/// (2 x 5, nothing touching), each over every free node, and a frame's work is at least those
/// solves' and local steps' (every other stage adds to it).
#[test]
fn counters_are_exact_and_repeat_from_run_to_run() {
    let (mut a, mut b) = (
        common::hanging_cape(0.6, 0.6, 8),
        common::hanging_cape(0.6, 0.6, 8),
    );
    let free = (a.positions().len() - a.pins().len()) as u64;
    for _ in 0..60 {
        let (ra, rb) = (a.step(1.0 / 60.0).unwrap(), b.step(1.0 / 60.0).unwrap());
        assert_eq!(ra.counters, rb.counters);
        let c = ra.counters;
        assert_eq!(c.solves, ra.substeps * 5);
        assert_eq!(c.solve_nodes, u64::from(c.solves) * free);
        assert_eq!(c.contact_visits, 0);
        assert!(c.work() >= (c.solve_nodes + c.local_nodes) as f64);
    }
}

/// A hanging cape with a sphere pressed into its middle counts its contact: the frames it
/// touches visit contact candidates, test nodes against the body, and run more solves than the
/// iterations' (the coupled contact step solves once more an iteration), so they count more
/// work than a frame without the sphere.
#[test]
fn contact_work_is_counted_where_the_cloth_touches() {
    let mut cloth = common::hanging_cape(0.6, 0.6, 8);
    let mut colliders = ColliderSet::new();
    let centre = cloth.center_of_mass() + glam::DVec3::new(0.0, 0.0, 0.08);
    colliders
        .add(
            ColliderShape::Sphere { radius: 0.1 },
            Pose::from_translation(centre),
        )
        .unwrap();
    let cap_off = isocloth::SolverSettings {
        strain_cap: StrainCap::OFF,
        ..*cloth.settings()
    };
    cloth.set_settings(cap_off).unwrap();
    let quiet = cloth.step(1.0 / 60.0).unwrap().counters;
    let mut touched = None;
    for _ in 0..60 {
        let r = cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        colliders.finish_frame();
        if r.contacts > 0 {
            touched = Some(r.counters);
        }
    }
    let t = touched.expect("the cape never touched the sphere");
    assert!(t.contact_visits > 0 && t.contact_tests > 0);
    assert!(t.solves > quiet.solves, "{} solves", t.solves);
    assert!(t.work() > quiet.work());
}
