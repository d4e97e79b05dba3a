use glam::DVec3;
use isocloth::*;
fn main() {
    let base = BaseMesh::jittered_rectangle(0.5, 0.15, 12, 4, 0.3, 7).unwrap();
    for plain in [false, true] {
        let mesh = if plain {
            ClothMesh::plain(&base).unwrap()
        } else {
            ClothMesh::new(&base).unwrap()
        };
        let area = mesh.area();
        let mat = Material {
            bending_stiffness: 1.0,
            ..Default::default()
        };
        let mut cloth = Cloth::from_mesh(mesh, mat, &[], SolverSettings::default()).unwrap();
        for r in [1.0f64, 0.5, 0.25] {
            // bend along x: cylinder axis along y (width direction)
            let x: Vec<DVec3> = cloth
                .mesh()
                .initial_positions()
                .iter()
                .map(|p| {
                    let th = p.x / r;
                    DVec3::new(r * th.sin(), p.y, r * (1.0 - th.cos()))
                })
                .collect();
            cloth.set_positions(&x).unwrap();
            let e = cloth.measures().bending_energy;
            println!(
                "plain={plain} R={r} E={e:.4} expected={:.4} ratio {:.3}",
                0.5 * area / (r * r),
                e / (0.5 * area / (r * r))
            );
        }
    }
}
