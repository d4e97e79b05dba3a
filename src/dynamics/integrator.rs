//! Time integration: the inertial prediction `x~` before a step and the velocity after it.
//!
//! One implicit step minimises `1/(2 h~^2) |x - x~|_M^2 + E(x)` (docs/design.md sections 3-4):
//!
//! * **BDF2**: `x~ = 4/3 x_n - 1/3 x_{n-1} + 8/9 h v_n - 2/9 h v_{n-1} + 4/9 h^2 a`,
//!   `h~ = 2h/3`, `v_{n+1} = (3/2 x_{n+1} - 2 x_n + 1/2 x_{n-1}) / h`. About ten times less
//!   numerical damping than backward Euler (English and Bridson 2008, section 5).
//! * **Backward Euler**: `x~ = x_n + h v_n + h^2 a`, `h~ = h`, `v_{n+1} = (x_{n+1} - x_n) / h`.
//!   Selectable on its own. BDF2's first step (no history yet) runs from the past of a free
//!   fall, `x_{n-1} = x_n - h v_n + h^2 g / 2`, `v_{n-1} = v_n - h g`, so a model needs only the
//!   BDF2 factor.

use glam::DVec3;
use serde::{Deserialize, Serialize};

/// The implicit integrator used for each substep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Integrator {
    /// Backward Euler: strongly damped, one step of history.
    BackwardEuler,
    /// Second-order backward differentiation (the default): little damping, stiffly stable.
    /// Its first step, and the first after a reset, starts from the past of a free fall.
    #[default]
    Bdf2,
}

/// The scheme one particular substep uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    BackwardEuler,
    Bdf2,
}

impl Scheme {
    /// The effective step `h~` scaling inertia in the minimisation.
    pub fn effective_step(self, h: f64) -> f64 {
        match self {
            Scheme::BackwardEuler => h,
            Scheme::Bdf2 => 2.0 * h / 3.0,
        }
    }
}

/// State history an integrator reads: positions and velocities now and one step back.
pub(crate) struct History<'a> {
    pub x: &'a [DVec3],
    pub x_prev: &'a [DVec3],
    pub v: &'a [DVec3],
    pub v_prev: &'a [DVec3],
}

/// Writes the inertial prediction `x~` for a step of length `h` under the uniform acceleration
/// `accel` plus, where given, a per-node acceleration `extra[i]`; the extrapolated velocities
/// are scaled by `keep` (1 = no damping).
pub(crate) fn predict(
    scheme: Scheme,
    h: f64,
    hist: &History<'_>,
    accel: DVec3,
    extra: Option<&[DVec3]>,
    keep: f64,
    out: &mut [DVec3],
) {
    let extra_at = |i: usize| extra.map_or(DVec3::ZERO, |e| e[i]);
    match scheme {
        Scheme::BackwardEuler => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = hist.x[i] + keep * h * hist.v[i] + h * h * (accel + extra_at(i));
            }
        }
        Scheme::Bdf2 => {
            let c = (4.0 / 9.0) * h * h;
            for (i, o) in out.iter_mut().enumerate() {
                *o = (4.0 / 3.0) * hist.x[i] - (1.0 / 3.0) * hist.x_prev[i]
                    + keep * ((8.0 / 9.0) * h * hist.v[i] - (2.0 / 9.0) * h * hist.v_prev[i])
                    + c * (accel + extra_at(i));
            }
        }
    }
}

/// Velocity at the end of a step that moved `x_n` (with `x_{n-1}` before it) to `x_new`.
#[inline]
pub(crate) fn velocity(scheme: Scheme, h: f64, x_new: DVec3, x_n: DVec3, x_prev: DVec3) -> DVec3 {
    match scheme {
        Scheme::BackwardEuler => (x_new - x_n) / h,
        Scheme::Bdf2 => (1.5 * x_new - 2.0 * x_n + 0.5 * x_prev) / h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both schemes integrate free fall exactly (constant acceleration is within their order):
    /// after one step the position and velocity match x0 + v0 h + a h^2/2 to 1e-12 for BDF2 given
    /// an exact history, and BE's velocity is v0 + a h.
    #[test]
    fn free_fall_is_exact_for_bdf2_with_exact_history() {
        let (h, a, v0) = (0.01, DVec3::new(0.0, -9.81, 0.0), DVec3::new(1.0, 2.0, 0.0));
        let at = |t: f64| v0 * t + 0.5 * a * t * t;
        let vel = |t: f64| v0 + a * t;
        let hist = History {
            x: &[at(0.0)],
            x_prev: &[at(-h)],
            v: &[vel(0.0)],
            v_prev: &[vel(-h)],
        };
        let mut out = [DVec3::ZERO];
        predict(Scheme::Bdf2, h, &hist, a, None, 1.0, &mut out);
        assert!((out[0] - at(h)).length() < 1e-12);
        let v = velocity(Scheme::Bdf2, h, out[0], at(0.0), at(-h));
        assert!((v - vel(h)).length() < 1e-12);
        predict(Scheme::BackwardEuler, h, &hist, a, None, 1.0, &mut out);
        let v = velocity(Scheme::BackwardEuler, h, out[0], at(0.0), at(-h));
        assert!((v - vel(h)).length() < 1e-12);
    }
}
