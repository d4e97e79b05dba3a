//! Stepping a cloth on a worker thread while the game renders the last frame's meshes.
//!
//! [`ClothWorker`] moves a [`Cloth`] onto its own thread. Each frame the game
//! [`submits`](ClothWorker::submit) the frame's inputs (length, pin targets, colliders) and
//! later [`receives`](ClothWorker::receive) the resulting render mesh; in between, the game is
//! free to render the previous one. Inputs and results travel over crossbeam channels (the only
//! module that uses crossbeam), and their buffers circulate back and forth, so after the first
//! frames nothing is allocated and no lock is taken on the game's side. Results are
//! bit-identical to stepping the same cloth synchronously.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};
use glam::{DVec3, Vec3};

use crate::cloth::{Cloth, StepReport};
use crate::collision::ColliderSet;
use crate::error::ClothError;

/// One frame's inputs for the worker.
#[derive(Debug, Default)]
pub struct FrameInput {
    /// Frame length in seconds.
    pub dt: f64,
    /// End-of-frame pin targets in [`Cloth::pins`] order (empty: keep the previous ones).
    pub pin_targets: Vec<DVec3>,
    /// End-of-frame skinned positions of every node, for max distance and backstops
    /// ([`Cloth::set_skin_targets`]; empty: keep the previous ones).
    pub skin_targets: Vec<DVec3>,
    /// The bodies of this frame (poses for its end, as [`ColliderSet::set_pose`] sets them).
    pub colliders: ColliderSet,
}

/// One frame's result: the render mesh after the step and what the step did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FrameOutput {
    /// Render positions (one per node).
    pub positions: Vec<Vec3>,
    /// Render normals (one per node).
    pub normals: Vec<Vec3>,
    /// The step's report.
    pub report: StepReport,
    /// The step's error, if it failed (the cloth is then left as it was).
    pub error: Option<ClothError>,
}

// Boxing the large variant would allocate every frame; the messages move through a channel of
// two slots, so their size costs a copy of about 200 bytes a frame, nothing more.
#[allow(clippy::large_enum_variant)]
enum Message {
    Step(FrameInput, FrameOutput),
    Stop,
}

/// A cloth stepped on its own thread. See the module docs.
pub struct ClothWorker {
    to_worker: Sender<Message>,
    from_worker: Receiver<(FrameInput, FrameOutput)>,
    spare_inputs: Vec<FrameInput>,
    spare_outputs: Vec<FrameOutput>,
    handle: Option<JoinHandle<Cloth>>,
    in_flight: usize,
}

impl std::fmt::Debug for ClothWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClothWorker")
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl ClothWorker {
    /// Moves `cloth` onto a new worker thread.
    pub fn spawn(cloth: Cloth) -> Self {
        let (to_worker, inbox) = bounded::<Message>(2);
        let (outbox, from_worker) = bounded(2);
        let handle = std::thread::spawn(move || {
            let mut cloth = cloth;
            while let Ok(Message::Step(input, mut output)) = inbox.recv() {
                let result = if input.pin_targets.is_empty() {
                    Ok(())
                } else {
                    cloth.set_pin_targets(&input.pin_targets)
                }
                .and_then(|_| {
                    if input.skin_targets.is_empty() {
                        Ok(())
                    } else {
                        cloth.set_skin_targets(&input.skin_targets)
                    }
                })
                .and_then(|_| cloth.step_with(input.dt, &input.colliders));
                match result {
                    Ok(report) => {
                        output.report = report;
                        output.error = None;
                    }
                    Err(e) => output.error = Some(e),
                }
                cloth.write_render_positions(&mut output.positions);
                cloth.write_render_normals(&mut output.normals);
                if outbox.send((input, output)).is_err() {
                    break;
                }
            }
            cloth
        });
        Self {
            to_worker,
            from_worker,
            spare_inputs: Vec::with_capacity(4),
            spare_outputs: Vec::with_capacity(4),
            handle: Some(handle),
            in_flight: 0,
        }
    }

    /// A reusable input buffer: fill it and pass it to [`ClothWorker::submit`].
    pub fn input(&mut self) -> FrameInput {
        self.spare_inputs.pop().unwrap_or_default()
    }

    /// Starts stepping one frame with `input` on the worker. At most two frames wait in the
    /// channel; a further submit waits for the worker to take one.
    pub fn submit(&mut self, input: FrameInput) {
        let output = self.spare_outputs.pop().unwrap_or_default();
        if self.to_worker.send(Message::Step(input, output)).is_ok() {
            self.in_flight += 1;
        }
    }

    /// Waits for the oldest submitted frame's result. The returned buffers go back to the
    /// worker through [`ClothWorker::recycle`] (or are dropped).
    pub fn receive(&mut self) -> Option<(FrameInput, FrameOutput)> {
        if self.in_flight == 0 {
            return None;
        }
        let r = self.from_worker.recv().ok()?;
        self.in_flight -= 1;
        Some(r)
    }

    /// Hands used buffers back for the next frames (so the frame loop does not allocate).
    pub fn recycle(&mut self, input: FrameInput, output: FrameOutput) {
        if self.spare_inputs.len() < 4 {
            self.spare_inputs.push(input);
        }
        if self.spare_outputs.len() < 4 {
            self.spare_outputs.push(output);
        }
    }

    /// Stops the worker after the frames in flight and returns the cloth.
    pub fn join(mut self) -> Option<Cloth> {
        while self.receive().is_some() {}
        let _ = self.to_worker.send(Message::Stop);
        self.handle.take()?.join().ok()
    }
}

impl Drop for ClothWorker {
    fn drop(&mut self) {
        let _ = self.to_worker.send(Message::Stop);
    }
}
