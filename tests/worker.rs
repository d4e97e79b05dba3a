//! Stepping on a worker thread gives the same meshes as stepping synchronously.

use glam::DVec3;
use isocloth::worker::ClothWorker;

mod common;

/// 60 frames of a cape whose pins sway, which hits a capsule and is held within 5 cm of its
/// swaying rest pose (max distance from skin targets), stepped on a worker (one frame in flight
/// while the "game" uses the previous mesh) hand back render positions and normals
/// bit-identical to the same frames stepped synchronously.
#[test]
fn worker_meshes_equal_synchronous_ones() {
    let mut sync = common::hanging_cape(0.6, 0.8, 10);
    let mut worker_cloth = common::hanging_cape(0.6, 0.8, 10);
    let rest = sync.positions().to_vec();
    let limits = isocloth::LimitSettings {
        max_distance: vec![0.05; rest.len()],
        ..Default::default()
    };
    sync.set_limit_settings(limits.clone()).unwrap();
    worker_cloth.set_limit_settings(limits).unwrap();
    let start: Vec<DVec3> = sync
        .pins()
        .iter()
        .map(|&p| sync.positions()[p as usize])
        .collect();
    let colliders = common::capsule_at(-0.1);
    let shift = |k: usize| DVec3::new(0.0, 0.0, 0.2 * (k as f64 * 0.1).sin());
    let targets = |k: usize| -> Vec<DVec3> { start.iter().map(|&p| p + shift(k)).collect() };
    let skin = |k: usize| -> Vec<DVec3> { rest.iter().map(|&p| p + shift(k)).collect() };
    let mut expected = Vec::new();
    for k in 0..60 {
        sync.set_pin_targets(&targets(k)).unwrap();
        sync.set_skin_targets(&skin(k)).unwrap();
        sync.step_with(1.0 / 60.0, &colliders).unwrap();
        let (mut p, mut n) = (Vec::new(), Vec::new());
        sync.write_render_positions(&mut p);
        sync.write_render_normals(&mut n);
        expected.push((p, n));
    }
    let mut worker = ClothWorker::spawn(worker_cloth);
    let mut got = Vec::new();
    for k in 0..60 {
        let mut input = worker.input();
        input.dt = 1.0 / 60.0;
        input.pin_targets.clear();
        input.pin_targets.extend(targets(k));
        input.skin_targets.clear();
        input.skin_targets.extend(skin(k));
        input.colliders.clone_from(&colliders);
        worker.submit(input);
        if k > 0 {
            // The previous frame's mesh arrives while this one is being stepped.
            let (input, output) = worker.receive().unwrap();
            assert!(output.error.is_none());
            got.push((output.positions.clone(), output.normals.clone()));
            worker.recycle(input, output);
        }
    }
    let (_, output) = worker.receive().unwrap();
    got.push((output.positions.clone(), output.normals.clone()));
    assert!(worker.join().is_some());
    assert_eq!(got.len(), expected.len());
    for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "frame {k}");
    }
}
