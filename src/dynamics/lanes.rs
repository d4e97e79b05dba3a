//! Local-step kernels four elements at a time: each coordinate of four elements held in one
//! `[f64; 4]`, so that the compiler issues one packed instruction per operation where a
//! per-element kernel issues four scalar ones (square roots and divisions included, the local
//! step's slowest instructions). Every lane does exactly the operations of the per-element
//! kernel in the same order (no fused multiply-adds, which Rust never forms on its own), so the
//! results are bit-identical to it; a lane that meets a degenerate case (a collapsed triangle,
//! a non-finite value) is redone by the per-element kernel.

use glam::DVec3;

/// Elements per block.
pub(crate) const LANES: usize = 4;

/// One value per lane.
pub(crate) type Lanes = [f64; LANES];

#[inline(always)]
pub(crate) fn each(f: impl FnMut(usize) -> f64) -> Lanes {
    std::array::from_fn(f)
}

/// A vector per lane, by coordinate.
#[derive(Clone, Copy)]
pub(crate) struct V3 {
    pub x: Lanes,
    pub y: Lanes,
    pub z: Lanes,
}

impl V3 {
    #[inline(always)]
    pub fn gather(mut f: impl FnMut(usize) -> DVec3) -> Self {
        let p: [DVec3; LANES] = std::array::from_fn(&mut f);
        Self {
            x: each(|l| p[l].x),
            y: each(|l| p[l].y),
            z: each(|l| p[l].z),
        }
    }

    #[inline(always)]
    pub fn lane(&self, l: usize) -> DVec3 {
        DVec3::new(self.x[l], self.y[l], self.z[l])
    }

    /// `glam::DVec3::dot`, lane by lane.
    #[inline(always)]
    pub fn dot(&self, o: &V3) -> Lanes {
        each(|l| (self.x[l] * o.x[l]) + (self.y[l] * o.y[l]) + (self.z[l] * o.z[l]))
    }

    /// `glam::DVec3::cross`, lane by lane.
    #[inline(always)]
    pub fn cross(&self, r: &V3) -> V3 {
        V3 {
            x: each(|l| self.y[l] * r.z[l] - r.y[l] * self.z[l]),
            y: each(|l| self.z[l] * r.x[l] - r.z[l] * self.x[l]),
            z: each(|l| self.x[l] * r.y[l] - r.x[l] * self.y[l]),
        }
    }

    /// Each lane's vector divided by its scalar.
    #[inline(always)]
    pub fn div(&self, s: &Lanes) -> V3 {
        V3 {
            x: each(|l| self.x[l] / s[l]),
            y: each(|l| self.y[l] / s[l]),
            z: each(|l| self.z[l] / s[l]),
        }
    }

    /// `a * self + b * o` per lane (`a * self` and `b * o` formed first, as glam does).
    #[inline(always)]
    pub fn combine(&self, a: &Lanes, o: &V3, b: &Lanes) -> V3 {
        V3 {
            x: each(|l| a[l] * self.x[l] + b[l] * o.x[l]),
            y: each(|l| a[l] * self.y[l] + b[l] * o.y[l]),
            z: each(|l| a[l] * self.z[l] + b[l] * o.z[l]),
        }
    }

    /// Each lane's vector times its scalar.
    #[inline(always)]
    pub fn scale(&self, s: &Lanes) -> V3 {
        V3 {
            x: each(|l| self.x[l] * s[l]),
            y: each(|l| self.y[l] * s[l]),
            z: each(|l| self.z[l] * s[l]),
        }
    }

    #[inline(always)]
    pub fn sub(&self, o: &V3) -> V3 {
        V3 {
            x: each(|l| self.x[l] - o.x[l]),
            y: each(|l| self.y[l] - o.y[l]),
            z: each(|l| self.z[l] - o.z[l]),
        }
    }
}

/// [`crate::energy::nearest_rotation`] of four matrices `[a, b]`, lane by lane, with the lanes
/// that took none of its fallbacks marked: where `ok[l]` is false the caller redoes lane `l`
/// with the per-element kernel.
#[inline(always)]
pub(crate) fn nearest_rotation(a: &V3, b: &V3) -> ([V3; 2], [bool; LANES]) {
    let aa = a.dot(a);
    let la = each(|l| aa[l].sqrt());
    let u = a.div(&la);
    let n = u.cross(b);
    let nn = n.dot(&n);
    let ln = each(|l| nn[l].sqrt());
    let bb = b.dot(b);
    let lb = each(|l| bb[l].sqrt());
    let v = n.cross(&u).div(&ln);
    let vb = v.dot(b);
    let ub = u.dot(b);
    let p = each(|l| la[l] + vb[l]);
    let q = each(|l| -ub[l]);
    let h = each(|l| (p[l] * p[l] + q[l] * q[l]).sqrt());
    let c = each(|l| p[l] / h[l]);
    let s = each(|l| q[l] / h[l]);
    let ok = std::array::from_fn(|l| {
        la[l] > 1e-300 && ln[l] > 1e-12 * lb[l].max(1e-300) && h[l] > 1e-300
    });
    // c u + s v and c v - s u; `a + (-b)` rounds as `a - b`, so the second is the same bits.
    let neg_s = each(|l| -s[l]);
    let r0 = u.combine(&c, &v, &s);
    let r1 = v.combine(&c, &u, &neg_s);
    ([r0, r1], ok)
}
