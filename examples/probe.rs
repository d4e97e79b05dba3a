use glam::DVec3;
use isocloth::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sub: u32 = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(2);
    let it: u32 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(5);
    let w: f64 = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(2e3);
    let cells = 11;
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells).unwrap();
    let mesh = ClothMesh::new(&base).unwrap();
    let pins = mesh.nodes_for_vertices(
        &[
            BaseMesh::grid_index(cells, 0, cells),
            BaseMesh::grid_index(cells, cells, cells),
        ],
        false,
    );
    let mat = Material {
        stretch_stiffness: w,
        ..Default::default()
    };
    let s = SolverSettings {
        substeps: sub,
        iterations: it,
        ..Default::default()
    };
    let mut cloth = Cloth::from_mesh(mesh, mat, &pins, s).unwrap();
    println!("{:?}", cloth.model().stats());
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let t0 = std::time::Instant::now();
    for f in 0..600 {
        cloth.step(1.0 / 60.0).unwrap();
        if f % 60 == 59 {
            let m = cloth.measures();
            let sag = top
                .iter()
                .map(|&v| 1.0 - cloth.positions()[v as usize].y)
                .fold(0.0, f64::max);
            println!(
                "t={:.1} strain max {:.2e} mean {:.2e} iso {:.2e} conf {:.2e} sag {:.2}mm E {:.4} com {:?}",
                (f + 1) as f64 / 60.0,
                m.max_strain,
                m.mean_strain,
                m.isometry_residual,
                m.conformity_residual,
                sag * 1e3,
                m.energy(),
                cloth.center_of_mass()
            );
        }
    }
    println!("{:?} per frame", t0.elapsed() / 600);
    let _ = DVec3::ZERO;
}
