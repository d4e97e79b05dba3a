//! Axis-aligned boxes, the broad phases' bounds (body contact's and self-collision's).

use glam::DVec3;

/// Axis-aligned box.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Aabb {
    pub min: DVec3,
    pub max: DVec3,
}

impl Default for Aabb {
    /// [`Aabb::EMPTY`].
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Aabb {
    /// The box of no point: growing it by a point gives that point's box.
    pub const EMPTY: Aabb = Aabb {
        min: DVec3::splat(f64::INFINITY),
        max: DVec3::splat(f64::NEG_INFINITY),
    };

    /// The box of the segment from `a` to `b` (a node's path over a substep).
    pub fn spanning(a: DVec3, b: DVec3) -> Aabb {
        Aabb {
            min: a.min(b),
            max: a.max(b),
        }
    }

    /// Grows the box to hold `p`.
    pub fn grow(&mut self, p: DVec3) {
        self.min = self.min.min(p);
        self.max = self.max.max(p);
    }

    /// The box holding both.
    pub fn union(self, o: Aabb) -> Aabb {
        Aabb {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }

    /// The box grown by `m` on every side (shrunk for a negative `m`).
    pub fn inflate(self, m: f64) -> Aabb {
        Aabb {
            min: self.min - DVec3::splat(m),
            max: self.max + DVec3::splat(m),
        }
    }

    /// Whether `p` lies in the box (its faces included).
    pub fn contains(&self, p: DVec3) -> bool {
        self.min.cmple(p).all() && p.cmple(self.max).all()
    }

    /// Whether the boxes meet (touching faces included). Without branches: broad phases
    /// test many boxes whose answers no predictor guesses.
    pub fn overlaps(&self, o: &Aabb) -> bool {
        let m = self.min.cmple(o.max) & o.min.cmple(self.max);
        m.x & m.y & m.z
    }
}
