//! Fidelity at the default budget (2 substeps x 5 iterations of the accelerated local-global
//! map per 1/60 s frame): the
//! parts of the fidelity issue's targets that are met, pinned so that they do not regress.
//! The same scenes, and the targets not met yet (trajectory error, the clamped strip's strain),
//! are measured by `cargo run --release --example budget_sweep` (docs/lab/fidelity.md section 6).

mod common;

use common::released_two_pin_square_strain;
use isocloth::{Material, SolverWeights};

/// At the stiff weights ([`SolverWeights::STIFF`], the default until the weights became the
/// solver's), from silk (k_b = 1e-6) through the default (1e-4) to leather (1e-2), the falling,
/// swinging two-pin square keeps its worst mean strain under the 0.1 % target at the default budget
/// (measured 0.068 / 0.072 / 0.088 %) and its worst max strain within 1.1 % (measured 1.006 /
/// 1.005 / 1.057 %). The 1 % max-strain target is missed by a hair since the default moved
/// from L-BFGS (0.67 / 0.67 / 0.62 %, at 1.3x the accelerated map's frame in free motion:
/// docs/lab/2026-11-27-one-iteration.md) to the accelerated local-global map; that worst frame
/// was accepted when L-BFGS left the crate (2026-11-28), and is pinned here so that it does not
/// slip further.
#[test]
fn two_pin_square_stays_inextensible_at_the_default_budget_from_silk_to_leather() {
    for kb in [1e-6, 1e-4, 1e-2] {
        let material = Material {
            bending_stiffness: kb,
            ..Default::default()
        };
        let (max, mean) = released_two_pin_square_strain(12, material, SolverWeights::STIFF);
        assert!(max < 0.011, "k_b {kb}: max strain {max}");
        assert!(mean < 0.001, "k_b {kb}: mean strain {mean}");
    }
}
