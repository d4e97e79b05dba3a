use isocloth::*;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let w: f64 = a[1].parse().unwrap();
    let kb: f64 = a[2].parse().unwrap();
    let iters: u32 = a[3].parse().unwrap();
    let plain = a.get(4).map(|s| s == "plain").unwrap_or(false);
    let integ = if a.get(5).map(|s| s == "bdf2").unwrap_or(false) {
        Integrator::Bdf2
    } else {
        Integrator::BackwardEuler
    };
    let (cx, cy) = (12, 4);
    let base = BaseMesh::jittered_rectangle(0.5, 0.15, cx, cy, 0.3, 7)
        .unwrap()
        .map_positions(|p| glam::Vec3::new(p.x, 0.0, p.y));
    let mesh = if plain {
        ClothMesh::plain(&base).unwrap()
    } else {
        ClothMesh::new(&base).unwrap()
    };
    let clamp: Vec<u32> = (0..=cy)
        .flat_map(|j| {
            [
                BaseMesh::grid_index(cx, 0, j),
                BaseMesh::grid_index(cx, 1, j),
            ]
        })
        .collect();
    let tip: Vec<u32> = (0..=cy).map(|j| BaseMesh::grid_index(cx, cx, j)).collect();
    let pins = mesh.nodes_for_vertices(&clamp, true);
    let mat = Material {
        stretch_stiffness: w,
        bending_stiffness: kb,
        ..Default::default()
    };
    let ft: f64 = a.get(6).map(|s| s.parse().unwrap()).unwrap_or(1.0 / 60.0);
    let s = SolverSettings {
        frame_time: ft,
        substeps: 1,
        iterations: iters,
        integrator: integ,
        ..Default::default()
    };
    let mut cloth = Cloth::from_mesh(mesh, mat, &pins, s).unwrap();
    let t0 = std::time::Instant::now();
    let mut prev = cloth.positions().to_vec();
    for step in 0..20000 {
        cloth.substep();
        let change = cloth
            .positions()
            .iter()
            .zip(&prev)
            .map(|(a, b)| a.distance(*b))
            .fold(0.0, f64::max);
        prev.copy_from_slice(cloth.positions());
        let droop = -tip
            .iter()
            .map(|&v| cloth.positions()[v as usize].y)
            .sum::<f64>()
            / tip.len() as f64;
        if step % 500 == 0 || change < 1e-9 {
            let m = cloth.measures();
            println!(
                "step {step} droop {:.2}mm change {:.1e} strain {:.2e} conf {:.1e}",
                droop * 1e3,
                change,
                m.max_strain,
                m.conformity_residual
            );
        }
        if change < 1e-9 {
            break;
        }
    }
    println!("{:?}", t0.elapsed());
    let m = cloth.measures();
    println!("final {:?}", m);
    let x = cloth.positions();
    let mut worst = Vec::new();
    for e in cloth.mesh().strain_edges() {
        let len = match e.mid {
            Some(mm) => {
                x[e.a as usize].distance(x[mm as usize]) + x[mm as usize].distance(x[e.b as usize])
            }
            None => x[e.a as usize].distance(x[e.b as usize]),
        };
        worst.push(((len / e.rest_length - 1.0).abs(), e.a, e.b));
    }
    worst.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    for w in &worst[..6] {
        let p = cloth.mesh().initial_positions();
        println!("{:.3e} {:?} {:?}", w.0, p[w.1 as usize], p[w.2 as usize]);
    }
}
