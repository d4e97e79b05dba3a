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

use crate::cloth::{Cloth, Frame, StepReport};
use crate::collision::{ColliderSet, CollisionGroups};
use crate::error::ClothError;
use crate::layers::{ClothSurface, LayerContact, LayerError, LayerSettings};
use crate::solver::{Contact, Iterations, contact_displacement};
use crate::workspace::Workspace;

/// Something a layer group steps: a [`Cloth`], or an item that holds one (the ECS layer's
/// query items).
pub trait HoldsCloth: Send {
    /// The cloth.
    fn cloth(&self) -> &Cloth;
    /// The cloth, to step.
    fn cloth_mut(&mut self) -> &mut Cloth;
}

impl HoldsCloth for Cloth {
    fn cloth(&self) -> &Cloth {
        self
    }
    fn cloth_mut(&mut self) -> &mut Cloth {
        self
    }
}

/// Which cloths meet, and the frame's stages over them (see [`crate::layers`]): the cloths'
/// surfaces, the pairs that may meet this frame, the groups they link, and per group the
/// contact between its cloths. The layer order is the cloths' order (list inner layers
/// first): a group's cloths are numbered in it. Reuses its memory frame to frame: after the
/// first frames, a frame allocates nothing.
#[derive(Debug, Default)]
pub struct ClothLayers {
    settings: LayerSettings,
    count: usize,
    /// The pairs of cloths that may meet (lower index first, sorted, no repeats).
    pairs: Vec<[usize; 2]>,
    /// This frame's pairs whose cloths may come near each other.
    near: Vec<[usize; 2]>,
    surfaces: Vec<ClothSurface>,
    /// Union-find parents of the groups; after [`ClothLayers::begin_frame`], each cloth's
    /// group's first cloth.
    parent: Vec<usize>,
    /// The cloths in group order (each group's cloths together, in layer order), where each
    /// cloth is in it, and the groups' spans of it (start, length).
    order: Vec<usize>,
    place: Vec<usize>,
    spans: Vec<(usize, usize)>,
    /// Per cloth: a workspace, and the contact of the group it leads (kept with the group's
    /// first cloth: its warm start).
    workspaces: Vec<Workspace>,
    contacts: Vec<LayerContact>,
    /// Per cloth, its frame (group order).
    frames: Vec<Frame>,
    /// Whether the cloths are in group order (between the two permutations of a step).
    permuted: bool,
    /// Scratch of a permutation: the places done.
    visited: Vec<bool>,
    /// Pairs the last frame's groups dropped past the bound.
    dropped: usize,
    /// The most pairs a group held in a substep of the last frame.
    most: usize,
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
            surfaces: vec![ClothSurface::new(); count],
            parent: (0..count).collect(),
            order: (0..count).collect(),
            place: (0..count).collect(),
            workspaces: (0..count).map(|_| Workspace::new()).collect(),
            contacts: (0..count).map(|_| LayerContact::default()).collect(),
            frames: Vec::with_capacity(count),
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
    /// frame of `dt` seconds (by their own motion, and by the motion of `colliders` that may
    /// carry them: a body driven through one layer into another), and links them into groups
    /// (each cloth's group: its [`ClothLayers::group`]). `cloths` are the cloths the layers
    /// were made for, in order.
    pub fn begin_frame<'c>(
        &mut self,
        cloths: impl ExactSizeIterator<Item = &'c Cloth>,
        dt: f64,
        colliders: &ColliderSet,
    ) -> Result<(), LayerError> {
        if cloths.len() != self.count {
            return Err(LayerError::CountChanged {
                expected: self.count,
                given: cloths.len(),
            });
        }
        for (surface, cloth) in self.surfaces.iter_mut().zip(cloths) {
            cloth.surface(surface);
            surface.reach_bodies(colliders, dt, self.settings.thickness);
        }
        self.near.clear();
        for (k, p) in self.parent.iter_mut().enumerate() {
            *p = k;
        }
        let reach = self.settings.thickness;
        for &[a, b] in &self.pairs {
            if self.surfaces[a].may_meet(&self.surfaces[b], dt, reach) {
                self.near.push([a, b]);
                let (ra, rb) = (find(&mut self.parent, a), find(&mut self.parent, b));
                // The group's root is its first cloth in layer order.
                self.parent[ra.max(rb)] = ra.min(rb);
            }
        }
        for k in 0..self.count {
            let root = find(&mut self.parent, k);
            self.parent[k] = root;
        }
        // Group order: by group (its first cloth), then layer order.
        self.order.clear();
        self.order.extend(0..self.count);
        let parent = &self.parent;
        self.order.sort_unstable_by_key(|&k| (parent[k], k));
        for (p, &k) in self.order.iter().enumerate() {
            self.place[k] = p;
        }
        self.spans.clear();
        let mut start = 0;
        for p in 1..=self.count {
            if p == self.count || parent[self.order[p]] != parent[self.order[start]] {
                self.spans.push((start, p - start));
                start = p;
            }
        }
        // Each group's pairs, numbered in the group (its cloths in layer order).
        for c in &mut self.contacts {
            c.near.clear();
        }
        for &[a, b] in &self.near {
            let root = self.parent[a];
            let first = self.place[root];
            let (la, lb) = (self.place[a] - first, self.place[b] - first);
            self.contacts[root].near.push([la.min(lb), la.max(lb)]);
        }
        Ok(())
    }

    /// The group of cloth `index` this frame (its first cloth in layer order), after
    /// [`ClothLayers::begin_frame`].
    pub fn group(&self, index: usize) -> usize {
        self.parent.get(index).copied().unwrap_or(index)
    }

    /// Whether the last frame degraded: a layer group met more cloth-against-cloth pairs in
    /// a substep than [`LayerSettings::max_pairs`] and kept only the nearest (the layers
    /// still never cross; they may come closer than the thickness). See
    /// [`ClothLayers::dropped_pairs`].
    pub fn degraded(&self) -> bool {
        self.dropped > 0
    }

    /// How many pairs the last frame's groups dropped past [`LayerSettings::max_pairs`],
    /// over their substeps (0: not degraded).
    pub fn dropped_pairs(&self) -> usize {
        self.dropped
    }

    /// The most cloth-against-cloth pairs a layer group held in a substep of the last frame
    /// (at most [`LayerSettings::max_pairs`]): what to size that bound by.
    pub fn most_pairs(&self) -> usize {
        self.most
    }

    /// This frame's pairs near each other (after [`ClothLayers::begin_frame`]).
    pub fn near_pairs(&self) -> &[[usize; 2]] {
        &self.near
    }

    /// Steps every cloth one frame of `dt` seconds against `colliders`, each layer group as one
    /// system ([`crate::layers`]), the groups in parallel (rayon). Writes each cloth's report
    /// into `reports` (its memory reused).
    pub fn step(
        &mut self,
        cloths: &mut [Cloth],
        dt: f64,
        colliders: &ColliderSet,
        reports: &mut Vec<StepReport>,
    ) -> Result<(), ClothError> {
        self.begin_frame(cloths.iter(), dt, colliders)?;
        reports.clear();
        reports.resize(cloths.len(), StepReport::default());
        self.step_groups(cloths, dt, colliders, reports)
    }

    /// Stages 2 and 3 over items holding the cloths (after [`ClothLayers::begin_frame`] on
    /// their cloths, in the same order): every group stepped as one system, the groups in
    /// parallel; `reports` (one per item) take each cloth's report. The items are put in
    /// group order for the step and back after it.
    pub fn step_groups<T: HoldsCloth>(
        &mut self,
        items: &mut [T],
        dt: f64,
        colliders: &ColliderSet,
        reports: &mut [StepReport],
    ) -> Result<(), ClothError> {
        if items.len() != self.count || reports.len() != self.count {
            return Err(LayerError::CountChanged {
                expected: self.count,
                given: items.len(),
            }
            .into());
        }
        // Group order: items, reports and the groups' contacts (each at its group's first
        // place) moved there, and back after.
        self.permute(items, reports, true);
        for c in &mut self.contacts {
            c.dropped = 0;
            c.most = 0;
        }
        self.frames.clear();
        self.frames.resize(
            self.count,
            Frame {
                report: StepReport::default(),
                run: 0,
                asleep: true,
            },
        );
        let result = run_spans(
            &self.spans,
            0,
            Slices {
                items,
                reports,
                workspaces: &mut self.workspaces,
                contacts: &mut self.contacts,
                frames: &mut self.frames,
            },
            &|slices: Slices<'_, T>| step_group(slices, dt, colliders, &self.settings),
        );
        self.permute(items, reports, false);
        self.dropped = self.contacts.iter().map(|c| c.dropped).sum();
        self.most = self.contacts.iter().map(|c| c.most).max().unwrap_or(0);
        result
    }

    /// Puts `items`, `reports` and the contacts in group order (`forward`) or back.
    fn permute<T>(&mut self, items: &mut [T], reports: &mut [StepReport], forward: bool) {
        if self.permuted == forward {
            return;
        }
        self.permuted = forward;
        // Cycle by cycle, each place taking its element by swaps along the cycle.
        let mut done = std::mem::take(&mut self.visited);
        done.clear();
        done.resize(self.count, false);
        for start in 0..self.count {
            let mut p = start;
            while !done[p] {
                done[p] = true;
                // Forward, place p takes the element at `order[p]`; back, the inverse
                // permutation (`place`) does the same.
                let q = if forward {
                    self.order[p]
                } else {
                    self.place[p]
                };
                if q == start {
                    break;
                }
                items.swap(p, q);
                reports.swap(p, q);
                self.contacts.swap(p, q);
                p = q;
            }
        }
        self.visited = done;
    }
}

/// A group's (or several groups') share of a step's slices.
struct Slices<'a, T> {
    items: &'a mut [T],
    reports: &'a mut [StepReport],
    workspaces: &'a mut [Workspace],
    contacts: &'a mut [LayerContact],
    frames: &'a mut [Frame],
}

/// Runs `f` on every group of `spans` (places from `base` on), halving the list with
/// `rayon::join` (no allocation; each group is one unit of work).
fn run_spans<T: HoldsCloth>(
    spans: &[(usize, usize)],
    base: usize,
    s: Slices<'_, T>,
    f: &(impl Fn(Slices<'_, T>) -> Result<(), ClothError> + Sync),
) -> Result<(), ClothError> {
    match spans.len() {
        0 => Ok(()),
        1 => f(s),
        n => {
            let mid = spans[n / 2].0 - base;
            let (ia, ib) = s.items.split_at_mut(mid);
            let (ra, rb) = s.reports.split_at_mut(mid);
            let (wa, wb) = s.workspaces.split_at_mut(mid);
            let (ca, cb) = s.contacts.split_at_mut(mid);
            let (fa, fb) = s.frames.split_at_mut(mid);
            let (a, b) = rayon::join(
                || {
                    run_spans(
                        &spans[..n / 2],
                        base,
                        Slices {
                            items: ia,
                            reports: ra,
                            workspaces: wa,
                            contacts: ca,
                            frames: fa,
                        },
                        f,
                    )
                },
                || {
                    run_spans(
                        &spans[n / 2..],
                        spans[n / 2].0,
                        Slices {
                            items: ib,
                            reports: rb,
                            workspaces: wb,
                            contacts: cb,
                            frames: fb,
                        },
                        f,
                    )
                },
            );
            a.and(b)
        }
    }
}

/// Steps one layer group (its cloths in layer order) one frame as one system (see
/// [`crate::layers`]): one substep loop on the first cloth's clock; per substep every cloth's
/// prediction, the group's pairs and their impulse, then the iterations (every cloth's map,
/// then the pairs' forces from both sides' iterates), every cloth's last pass against the
/// bodies, the group's last pass (then, where it moved a cloth, that cloth's last pass and the
/// group's once more), and every cloth's velocities. A group iterates as many
/// times as its most-iterated cloth (a cloth whose budget is spent waits). A cloth alone
/// steps as [`Cloth::step_in`].
fn step_group<T: HoldsCloth>(
    s: Slices<'_, T>,
    dt: f64,
    colliders: &ColliderSet,
    settings: &LayerSettings,
) -> Result<(), ClothError> {
    let Slices {
        items,
        reports,
        workspaces: wss,
        contacts,
        frames,
    } = s;
    let n = items.len();
    if n == 1 {
        reports[0] = items[0].cloth_mut().step_in(dt, colliders, &mut wss[0])?;
        return Ok(());
    }
    let lc = &mut contacts[0];
    let h0 = items[0].cloth().model().settings().substep();
    for (k, item) in items.iter().enumerate().skip(1) {
        let h = item.cloth().model().settings().substep();
        if (h - h0).abs() > 1e-12 * h0 {
            return Err(LayerError::SubstepsDiffer {
                a: 0,
                b: k,
                h_a: h0,
                h_b: h,
            }
            .into());
        }
    }
    // Asleep together, or awake together.
    if items.iter().all(|i| i.cloth().stays_asleep(colliders)) {
        for ((item, report), ws) in items.iter_mut().zip(reports.iter_mut()).zip(wss.iter_mut()) {
            *report = item.cloth_mut().step_in(dt, colliders, ws)?;
        }
        return Ok(());
    }
    let clock = items[0].cloth().accumulator();
    for item in items.iter_mut() {
        let cloth = item.cloth_mut();
        if cloth.is_sleeping() {
            cloth.wake();
        }
        cloth.set_accumulator(clock);
    }
    for ((item, frame), ws) in items.iter_mut().zip(frames.iter_mut()).zip(wss.iter_mut()) {
        *frame = item.cloth_mut().begin_frame(dt, colliders, true, ws)?;
    }
    let run = frames[0].run;
    lc.begin(items.iter().map(|i| &**i.cloth().model()), settings);
    let most = items
        .iter()
        .map(|i| i.cloth().settings().iterations)
        .max()
        .unwrap_or(0);
    for k in 1..=run {
        let mut span = (0.0, 1.0);
        for (i, (item, ws)) in items.iter_mut().zip(wss.iter_mut()).enumerate() {
            let cloth = item.cloth_mut();
            span = cloth.substep_pins(k, run, ws);
            cloth.group_substep_begin(ws, colliders, span);
            lc.set_substep(i, cloth.positions(), &ws.x_new);
            lc.carry(i, &ws.contact_pass);
        }
        lc.prepare(|i| &**items[i].cloth().model(), settings);
        let mut active = lc.active();
        // No impulse on the predictions here (self-contact's stage 2): pushing both cloths'
        // predictions apart threw a cape dropped on a draped sheet 12 m up at its first touch
        // (docs/lab/2026-11-28-layers-one-solve.md); the forces inside the iterations and the
        // last pass keep the thickness.
        lc.iterations.clear();
        for (item, ws) in items.iter().zip(wss.iter_mut()) {
            let (model, _, iterations) = item.cloth().solve_parts();
            let it = Iterations::begin(model, iterations, &mut ws.x_new, &mut ws.scratch);
            // Plain local-global while the group has pairs (see `Iterations::without_mixing`).
            lc.iterations
                .push(if active { it.without_mixing() } else { it });
        }
        for _ in 0..most {
            for (i, (item, ws)) in items.iter().zip(wss.iter_mut()).enumerate() {
                let (model, x_start, _) = item.cloth().solve_parts();
                let mut it = lc.iterations[i];
                let ws = &mut *ws;
                it.step(
                    model,
                    &mut ws.x_new,
                    &mut ws.scratch,
                    &mut Contact {
                        pass: &mut ws.contact_pass,
                        x_start,
                        external: active.then(|| lc.force_of(i)),
                    },
                );
                lc.iterations[i] = it;
            }
            for (i, ws) in wss.iter().enumerate() {
                lc.set_positions(i, &ws.x_new);
            }
            // A node dragged out of the box its pairs were found in: the pairs found again
            // (plain local-global from here on if that gave the group its first pairs).
            if lc.refresh(|i| &**items[i].cloth().model(), settings) && !active {
                active = lc.active();
                if active {
                    for it in lc.iterations.iter_mut() {
                        *it = it.without_mixing();
                    }
                }
            }
            if active {
                if lc.measure() {
                    // The collective compliance: each cloth answers the engaged nodes'
                    // unit push with its own factor.
                    for (i, (item, ws)) in items.iter().zip(wss.iter_mut()).enumerate() {
                        let range = lc.range(i);
                        let model = item.cloth().model();
                        if contact_displacement(model, &lc.response[range.clone()], &mut ws.scratch)
                        {
                            lc.response[range].copy_from_slice(&ws.scratch.response);
                        }
                    }
                    lc.take_response();
                }
                lc.update();
            }
        }
        for (i, (item, ws)) in items.iter().zip(wss.iter_mut()).enumerate() {
            own_last_pass(item.cloth(), &lc.iterations[i], ws);
        }
        // The group's last pass runs whether or not the substep held pairs: its check has its
        // own broad phase over the nodes' paths, and a substep without pairs (none admitted,
        // or every one dropped past `max_pairs`) still moves nodes through the other layers in
        // each cloth's own last pass (its strain cap, its push-out of the bodies). Skipped
        // there, two curtains pressed at 6 m/s with `max_pairs` 300 ended a substep with 46
        // crossed pairs that no later check could undo.
        //
        // The group's last pass moves nodes after each cloth's own (its strain cap and its
        // push-out of the bodies): each cloth it moved has its own last pass again, then the
        // group's again, which ends the substep uncrossed. Three curtains pressed by a limb at
        // 6 m/s: 5.7 -> 3.0 % strain (`--gap 0.02`: 39.5 -> 3.4 %; `--gap 0.03 --height 1.5`
        // at 10 m/s: 160 % and 33 nodes inside -> 4.5 %, none;
        // docs/lab/2026-11-29-layers-driven.md).
        for again in [false, true] {
            for (i, ws) in wss.iter().enumerate() {
                lc.set_positions(i, &ws.x_new);
                lc.hold(i, &ws.contact_pass);
            }
            lc.finish(|i| &**items[i].cloth().model());
            // Whether a cloth's own pass moved what the group's left (else that stands).
            let mut moved = false;
            for (i, (item, ws)) in items.iter().zip(wss.iter_mut()).enumerate() {
                let x = lc.positions(i);
                if x == &ws.x_new[..] {
                    continue;
                }
                ws.x_new.copy_from_slice(x);
                lc.impact[i] = true;
                if !again {
                    own_last_pass(item.cloth(), &lc.iterations[i], ws);
                    moved |= lc.positions(i) != &ws.x_new[..];
                }
            }
            if !moved || again {
                break;
            }
        }
        for (i, (item, ws)) in items.iter_mut().zip(wss.iter_mut()).enumerate() {
            let external = (lc.force_of(i), lc.impact[i]);
            item.cloth_mut()
                .group_substep_end(ws, colliders, span, external);
        }
    }
    for (((item, frame), ws), report) in items
        .iter_mut()
        .zip(frames.iter_mut())
        .zip(wss.iter_mut())
        .zip(reports.iter_mut())
    {
        frame.run = run;
        item.cloth_mut().end_frame(frame, colliders, ws);
        *report = frame.report;
    }
    reports[0].counters.layer_pair_visits += lc.pair_visits;
    Ok(())
}

/// A cloth's own last pass of a group's substep (after its iterations `it`): its bodies and
/// limits, with its strain cap inside ([`Iterations::finish`]).
fn own_last_pass(cloth: &Cloth, it: &Iterations, ws: &mut Workspace) {
    let (model, x_start, _) = cloth.solve_parts();
    it.finish(
        model,
        &cloth.settings().strain_cap,
        &mut ws.x_new,
        &mut ws.scratch,
        &mut Contact::alone(&mut ws.contact_pass, x_start),
    );
}

/// The root of `k`'s group (halving the path).
fn find(parent: &mut [usize], mut k: usize) -> usize {
    while parent[k] != k {
        parent[k] = parent[parent[k]];
        k = parent[k];
    }
    k
}
