//! Scenes shared by the benchmarks.

use std::sync::Arc;

use isocloth::{BaseMesh, ClothMesh};

/// The hanging sheet: 1 m square of `cells` x `cells` base cells, and the nodes pinning its top
/// row (vertices and the edges between them). 22 cells is the 45x45-node sheet.
pub fn hanging_sheet(cells: usize) -> (Arc<ClothMesh>, Vec<u32>) {
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells).expect("valid rectangle");
    let mesh = ClothMesh::new(&base).expect("valid mesh");
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    (Arc::new(mesh), pins)
}
