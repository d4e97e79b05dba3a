//! Air: per-triangle drag and lift against a wind velocity, and velocity damping.
//!
//! Each render triangle with area `A`, unit normal `n` (oriented along the relative velocity)
//! and relative velocity `u = v - wind` (`v` the mean of its nodes' velocities) feels
//!
//! * drag `-1/2 rho C_d A |u|^2 cos(t) u^`, opposing the flow in proportion to the area it
//!   presents (`cos(t) = n . u^`);
//! * lift `1/2 rho C_l A |u|^2 cos(t) (cos(t) u^ - n)`, across the flow in the plane of `n` and
//!   `u`, vanishing when the triangle faces the flow or lies along it (magnitude
//!   `cos(t) sin(t)`).
//!
//! The force is shared equally by the triangle's three nodes and enters the step explicitly
//! (evaluated at the start of each substep, in the inertial prediction). Damping scales the
//! velocities the prediction extrapolates by `exp(-damping h)`.

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::error::ClothError;

/// Wind, aerodynamic coefficients and damping of one cloth: plain data, serde-loadable.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Aerodynamics {
    /// Wind velocity in m/s. Default zero.
    pub wind: DVec3,
    /// Air density in kg/m^3. Default 1.2 (sea level); 0 switches the air off.
    pub air_density: f64,
    /// Drag coefficient of a triangle facing the flow. Default 0 (no air forces; see
    /// [`Aerodynamics::cloth`] for typical values).
    pub drag: f64,
    /// Lift coefficient. Default 0.
    pub lift: f64,
    /// Velocity damping in 1/s (`exp(-damping h)` per substep, on all motion). Default 0.
    pub damping: f64,
}

impl Default for Aerodynamics {
    fn default() -> Self {
        Self {
            wind: DVec3::ZERO,
            air_density: 1.2,
            drag: 0.0,
            lift: 0.0,
            damping: 0.0,
        }
    }
}

impl Aerodynamics {
    /// Typical cloth in air: drag 1.0, lift 0.5, sea-level density, with `wind`. (A 0.2 kg/m^2
    /// sheet then falls flat at about 1.8 m/s at most.)
    pub fn cloth(wind: DVec3) -> Self {
        Self {
            wind,
            drag: 1.0,
            lift: 0.5,
            ..Default::default()
        }
    }

    /// Checks ranges: finite wind under 200 m/s, density in [0, 100], coefficients in
    /// [0, 10], damping in [0, 1000].
    pub fn validate(&self) -> Result<(), ClothError> {
        let bad =
            |name: &'static str, reason: String| Err(ClothError::InvalidSetting { name, reason });
        if !(self.wind.is_finite() && self.wind.length() < 200.0) {
            return bad(
                "wind",
                format!("must be finite and under 200 m/s, got {}", self.wind),
            );
        }
        let range = |v: f64, hi: f64| v.is_finite() && (0.0..=hi).contains(&v);
        if !range(self.air_density, 100.0) {
            return bad(
                "air_density",
                format!("must be in [0, 100], got {}", self.air_density),
            );
        }
        if !range(self.drag, 10.0) || !range(self.lift, 10.0) {
            return bad(
                "drag/lift",
                format!("must be in [0, 10], got {} and {}", self.drag, self.lift),
            );
        }
        if !range(self.damping, 1000.0) {
            return bad(
                "damping",
                format!("must be in [0, 1000] 1/s, got {}", self.damping),
            );
        }
        Ok(())
    }

    /// Whether any aerodynamic force can act.
    pub(crate) fn active(&self) -> bool {
        self.air_density > 0.0 && (self.drag > 0.0 || self.lift > 0.0)
    }

    /// Adds each node's aerodynamic force (N) for positions `x` and velocities `v` into
    /// `force` (which the caller zeroed).
    pub(crate) fn accumulate(
        &self,
        triangles: &[[u32; 3]],
        x: &[DVec3],
        v: &[DVec3],
        force: &mut [DVec3],
    ) {
        let half_rho = 0.5 * self.air_density;
        for t in triangles {
            let [a, b, c] = t.map(|i| i as usize);
            let cross = (x[b] - x[a]).cross(x[c] - x[a]);
            let area2 = cross.length();
            if area2 <= 0.0 {
                continue;
            }
            let u = (v[a] + v[b] + v[c]) / 3.0 - self.wind;
            let speed = u.length();
            if speed <= 0.0 {
                continue;
            }
            let uh = u / speed;
            let mut n = cross / area2;
            let mut cos = n.dot(uh);
            if cos < 0.0 {
                n = -n;
                cos = -cos;
            }
            let q = half_rho * 0.5 * area2 * speed * speed * cos;
            let f = -self.drag * q * uh + self.lift * q * (cos * uh - n);
            let share = f / 3.0;
            force[a] += share;
            force[b] += share;
            force[c] += share;
        }
    }
}
