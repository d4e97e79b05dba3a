//! Stepping cloths that meet each other (layers): the three stages of a frame of
//! [`crate::layers`] over a set of cloths, in the manner of a physics pipeline's `step`.
//!
//! ```no_run
//! # use isocloth::{Cloth, ColliderSet, LayerSettings, layering::ClothLayers};
//! # fn run(mut cloths: Vec<Cloth>) -> Result<(), Box<dyn std::error::Error>> {
//! // A skirt (0) and a cape over it (1).
//! let mut layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]])?;
//! let mut reports = Vec::new();
//! layers.step(&mut cloths, 1.0 / 60.0, &ColliderSet::EMPTY, &mut reports)?;
//! # Ok(()) }
//! ```

use crate::cloth::{Cloth, StepReport};
use crate::collision::{ColliderSet, CollisionGroups};
use crate::error::ClothError;
use crate::layers::{ClothSurface, LayerError, LayerSettings, Partners};

/// Which cloths meet, and the frame's stages over them (see [`crate::layers`]): the cloths'
/// surfaces, each cloth's partners, its group's layer order and its round. The layer order is
/// the cloths' order: list inner layers first. Reuses its memory frame to frame: after the
/// first frames, a frame allocates nothing.
#[derive(Debug, Default)]
pub struct ClothLayers {
    settings: LayerSettings,
    count: usize,
    /// The pairs of cloths that may meet (lower index first, sorted, no repeats).
    pairs: Vec<[usize; 2]>,
    /// This frame's pairs whose cloths may come near each other.
    near: Vec<[usize; 2]>,
    /// Per cloth, this frame's partners.
    partners: Vec<Vec<usize>>,
    surfaces: Vec<ClothSurface>,
    /// Per cloth, the round it steps in this frame (its place in its group's layer order).
    round: Vec<u32>,
    /// Rounds this frame.
    rounds: u32,
    /// Union-find parents of the groups.
    parent: Vec<usize>,
}

impl ClothLayers {
    /// Layers over `count` cloths in layer order (inner first), the listed `pairs` meeting (in
    /// either order; repeats are merged). A pair naming one cloth twice, or a cloth past
    /// `count`, and settings out of range are errors.
    pub fn new(
        settings: LayerSettings,
        count: usize,
        pairs: &[[usize; 2]],
    ) -> Result<Self, LayerError> {
        settings.validate()?;
        let mut list = Vec::with_capacity(pairs.len());
        for &[a, b] in pairs {
            if a == b {
                return Err(LayerError::SelfPair(a));
            }
            if a >= count || b >= count {
                return Err(LayerError::NoSuchCloth { a, b, count });
            }
            list.push([a.min(b), a.max(b)]);
        }
        list.sort_unstable();
        list.dedup();
        Ok(Self {
            settings,
            count,
            pairs: list,
            partners: vec![Vec::new(); count],
            surfaces: vec![ClothSurface::new(); count],
            round: vec![0; count],
            parent: (0..count).collect(),
            ..Default::default()
        })
    }

    /// Layers over cloths (in layer order) whose collision groups are `groups`: every two whose
    /// groups meet ([`CollisionGroups::meets`]) may meet.
    pub fn by_groups(
        settings: LayerSettings,
        groups: &[CollisionGroups],
    ) -> Result<Self, LayerError> {
        let mut pairs = Vec::new();
        for (a, ga) in groups.iter().enumerate() {
            for (b, gb) in groups.iter().enumerate().skip(a + 1) {
                if ga.meets(*gb) {
                    pairs.push([a, b]);
                }
            }
        }
        Self::new(settings, groups.len(), &pairs)
    }

    /// The settings.
    pub fn settings(&self) -> &LayerSettings {
        &self.settings
    }

    /// The pairs of cloths that may meet (lower index first).
    pub fn pairs(&self) -> &[[usize; 2]] {
        &self.pairs
    }

    /// Stage 1: copies every cloth's surface, finds which pairs may come near each other in a
    /// frame of `dt` seconds (partners this frame), groups partners linked together and gives
    /// each cloth its round (its place in its group, in layer order). `cloths` are the cloths
    /// the layers were made for, in order.
    pub fn begin_frame<'c>(
        &mut self,
        cloths: impl ExactSizeIterator<Item = &'c Cloth>,
        dt: f64,
    ) -> Result<(), LayerError> {
        if cloths.len() != self.count {
            return Err(LayerError::CountChanged {
                expected: self.count,
                given: cloths.len(),
            });
        }
        for (surface, cloth) in self.surfaces.iter_mut().zip(cloths) {
            cloth.surface(surface);
        }
        self.near.clear();
        for p in &mut self.partners {
            p.clear();
        }
        for (k, p) in self.parent.iter_mut().enumerate() {
            *p = k;
        }
        let reach = self.settings.thickness;
        for &[a, b] in &self.pairs {
            if self.surfaces[a].may_meet(&self.surfaces[b], dt, reach) {
                self.near.push([a, b]);
                self.partners[a].push(b);
                self.partners[b].push(a);
                let (ra, rb) = (find(&mut self.parent, a), find(&mut self.parent, b));
                // The group's root is its first cloth in layer order.
                self.parent[ra.max(rb)] = ra.min(rb);
            }
        }
        for p in &mut self.partners {
            p.sort_unstable();
        }
        // Rounds: each cloth's place among the cloths of its group before it. The group's
        // members are counted at their root as they come, in layer order.
        self.rounds = 0;
        for r in self.round.iter_mut() {
            *r = 0;
        }
        for k in 0..self.count {
            let root = find(&mut self.parent, k);
            // `round[root]` counts the members seen so far; the root itself is round 0.
            let place = if root == k { 0 } else { self.round[root] + 1 };
            if root != k {
                self.round[root] = place;
            }
            self.round[k] = place;
            self.rounds = self.rounds.max(place + 1);
        }
        // The roots' entries were used as counters: put them back to 0.
        for k in 0..self.count {
            if find(&mut self.parent, k) == k {
                self.round[k] = 0;
            }
        }
        Ok(())
    }

    /// The rounds of this frame (at least 1 with any cloth).
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The round cloth `index` steps in this frame.
    pub fn round(&self, index: usize) -> u32 {
        self.round.get(index).copied().unwrap_or(0)
    }

    /// Stage 2's input for cloth `index`: its partners this frame.
    pub fn partners(&self, index: usize) -> Partners<'_> {
        Partners {
            surfaces: &self.surfaces,
            which: self.partners.get(index).map_or(&[][..], |p| &p[..]),
            settings: &self.settings,
        }
    }

    /// Stage 3: cloth `index` has stepped (to `cloth`'s positions); the later cloths of its
    /// group see its motion.
    pub fn end_cloth(&mut self, index: usize, cloth: &Cloth) {
        if let Some(s) = self.surfaces.get_mut(index) {
            s.set_end(cloth.positions());
        }
    }

    /// This frame's pairs near each other (after [`ClothLayers::begin_frame`]).
    pub fn near_pairs(&self) -> &[[usize; 2]] {
        &self.near
    }

    /// Steps every cloth one frame of `dt` seconds among the others, against `colliders`: the
    /// stages in order, round by round, the cloths of a round stepped in parallel (rayon).
    /// Writes each cloth's report into `reports` (its memory reused).
    pub fn step(
        &mut self,
        cloths: &mut [Cloth],
        dt: f64,
        colliders: &ColliderSet,
        reports: &mut Vec<StepReport>,
    ) -> Result<(), ClothError> {
        use rayon::prelude::*;
        self.begin_frame(cloths.iter(), dt)?;
        reports.clear();
        reports.resize(cloths.len(), StepReport::default());
        for round in 0..self.rounds {
            let this = &*self;
            cloths
                .par_iter_mut()
                .zip(reports.par_iter_mut())
                .enumerate()
                .filter(|(i, _)| this.round(*i) == round)
                .try_for_each(|(i, (cloth, report))| {
                    *report = crate::workspace::with_thread_workspace(|ws| {
                        cloth.step_among(dt, colliders, this.partners(i), ws)
                    })?;
                    Ok::<_, ClothError>(())
                })?;
            for (i, cloth) in cloths.iter().enumerate() {
                if self.round[i] == round && !self.partners[i].is_empty() {
                    self.end_cloth(i, cloth);
                }
            }
        }
        Ok(())
    }
}

/// The root of `k`'s group (halving the path).
fn find(parent: &mut [usize], mut k: usize) -> usize {
    while parent[k] != k {
        parent[k] = parent[parent[k]];
        k = parent[k];
    }
    k
}
