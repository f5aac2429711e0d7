//! MNIST on the GPU: the data set uploaded once as bytes, and the gather kernel
//! (`shaders/gather.wgsl`) that writes batch after batch into a trainer's input buffers with
//! no CPU work between steps.
//!
//! The CPU reference is [`crate::data::gather_batch_cpu`]; the tests below compare the two on
//! random data, batch sizes that do not divide the set, and a short last batch.
//!
//! How a step finds its batch: every step has a 16-byte [`Slot`] (`first`, `count`, and the
//! normalization) in one uniform buffer, `stride` bytes apart (the device's
//! `min_uniform_buffer_offset_alignment`, 256 on most GPUs). The bind group's uniform binding
//! has a dynamic offset, so recording step `s` is `set_bind_group(0, group, &[s * stride])`
//! and a dispatch: nothing is written or read between steps, and 100 steps go in one submit.

use common::GpuContext;

use crate::data::{Dataset, PIXELS, SCALE, SHIFT};
use crate::error::{MnistError, Result};

const SHADER: &str = include_str!("../shaders/gather.wgsl");
const WORKGROUP: u32 = 256;
const WORDS_PER_IMAGE: u64 = (PIXELS / 4) as u64;

/// The uniform one gather step reads (see `shaders/gather.wgsl`): stage 04's `GatherSlot`,
/// because stage 04's gathering forward reads the same slots (see [`DeviceBatches::source`]).
pub use gpu_layers::GatherSlot as Slot;

/// The compiled gather pipeline and its bind group layout (make one per process and share it).
pub struct GatherKernel {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    /// Bytes between two slots: the dynamic-offset alignment.
    stride: u64,
}

impl GatherKernel {
    pub fn new(ctx: &GpuContext) -> Result<Self> {
        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let (pipeline, layout) = ctx.scoped(|| {
            let layout = ctx.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("gather"),
                entries: &[
                    storage(0, true),
                    storage(1, true),
                    storage(2, true),
                    storage(3, false),
                    storage(4, false),
                    wgpu::BindGroupLayoutEntry {
                        binding: 5,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Uniform,
                            // The step's slot is chosen by an offset given at set_bind_group.
                            has_dynamic_offset: true,
                            min_binding_size: wgpu::BufferSize::new(std::mem::size_of::<Slot>() as u64),
                        },
                        count: None,
                    },
                ],
            });
            let pipeline_layout = ctx.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("gather"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let module = ctx.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("gather.wgsl"),
                source: wgpu::ShaderSource::Wgsl(SHADER.into()),
            });
            let pipeline = ctx.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("gather"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
            (pipeline, layout)
        })?;
        let stride = (ctx.limits.min_uniform_buffer_offset_alignment as u64).max(std::mem::size_of::<Slot>() as u64);
        Ok(Self { pipeline, layout, stride })
    }
}

fn entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry { binding, resource: buffer.as_entire_binding() }
}

/// One set of MNIST (training or test) on the GPU, cut into batches of `batch` rows, bound to a trainer's
/// `x: [max_batch, 784]` f32 and `y: [max_batch]` u32 buffers.
pub struct DeviceBatches {
    /// `[len, 196]` u32: the pixels, 4 to a word.
    images: wgpu::Buffer,
    /// `[ceil(len / 4)]` u32: the labels, 4 to a word.
    labels: wgpu::Buffer,
    /// `[len]` u32: which image each row of the epoch takes (a shuffled permutation, or 0..len).
    order: wgpu::Buffer,
    /// One [`Slot`] per batch, `stride` bytes apart.
    slots: wgpu::Buffer,
    stride: u64,
    bind_group: wgpu::BindGroup,
    len: usize,
    batch: usize,
    groups: (u32, u32, u32),
}

impl DeviceBatches {
    /// Uploads `data` (pixels and labels as bytes, plus the order 0..len) and writes one slot
    /// per batch. `x` and `y` must hold at least `batch` rows.
    pub fn new(
        ctx: &GpuContext,
        kernel: &GatherKernel,
        data: &Dataset,
        batch: usize,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        name: &str,
    ) -> Result<Self> {
        if batch == 0 || data.is_empty() {
            return Err(MnistError::InvalidArgument(format!("{name}: a batch of {batch} rows from {} images", data.len())));
        }
        let need_x = (batch * PIXELS * 4) as u64;
        if x.size() < need_x || y.size() < (batch * 4) as u64 {
            return Err(MnistError::InvalidArgument(format!(
                "{name}: the input buffers hold {} and {} bytes, a batch of {batch} needs {need_x} and {}",
                x.size(),
                y.size(),
                batch * 4
            )));
        }
        let len = data.len();
        // The images are the one large upload (47 MB for the training set): the fast path.
        let images = ctx.storage_buffer_uploaded(&format!("{name} images (u8)"), &data.images)?;
        let labels = ctx.storage_buffer(&format!("{name} labels (u8)"), &data.labels)?;
        let identity: Vec<u32> = (0..len as u32).collect();
        let order = ctx.storage_buffer(&format!("{name} order"), &identity)?;

        let steps = len.div_ceil(batch);
        let stride = kernel.stride as usize;
        let mut slot_bytes = vec![0u8; steps * stride];
        for s in 0..steps {
            let first = s * batch;
            let slot = Slot { first: first as u32, count: batch.min(len - first) as u32, scale: SCALE, shift: SHIFT };
            slot_bytes[s * stride..s * stride + std::mem::size_of::<Slot>()].copy_from_slice(bytemuck::bytes_of(&slot));
        }
        let slots = ctx.buffer_init("gather slots", &slot_bytes, wgpu::BufferUsages::UNIFORM)?;
        let bind_group = ctx.scoped(|| {
            ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(name),
                layout: &kernel.layout,
                entries: &[
                    entry(0, &images),
                    entry(1, &labels),
                    entry(2, &order),
                    entry(3, x),
                    entry(4, y),
                    wgpu::BindGroupEntry {
                        binding: 5,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &slots,
                            offset: 0,
                            size: wgpu::BufferSize::new(std::mem::size_of::<Slot>() as u64),
                        }),
                    },
                ],
            })
        })?;
        let groups = ctx.workgroups_1d(batch as u64 * WORDS_PER_IMAGE, WORKGROUP)?;
        Ok(Self { images, labels, order, slots, stride: kernel.stride, bind_group, len, batch, groups })
    }

    /// The set as stage 04's gathering forward reads it: a step that gathers batch `s` itself
    /// (`GpuTrainer::record_gathered_step(.., s, ..)`) needs no [`DeviceBatches::record`].
    pub fn source(&self) -> gpu_layers::ByteImages<'_> {
        gpu_layers::ByteImages { images: &self.images, labels: &self.labels, order: &self.order, slots: &self.slots, stride: self.stride }
    }

    /// Images in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Batches per pass over the set (the last one may be short).
    pub fn steps(&self) -> usize {
        self.len.div_ceil(self.batch)
    }

    /// Rows in batch `step`.
    pub fn rows(&self, step: usize) -> usize {
        self.batch.min(self.len - step * self.batch)
    }

    /// Bytes on the device for the images (for the log).
    pub fn image_bytes(&self) -> u64 {
        self.images.size()
    }

    /// Sets the order rows are taken in (a permutation of `0..len`); takes effect at the next submit.
    pub fn set_order(&self, ctx: &GpuContext, order: &[u32]) -> Result<()> {
        if order.len() != self.len || order.iter().any(|&i| i as usize >= self.len) {
            return Err(MnistError::InvalidArgument(format!("an order of {} indices for {} images", order.len(), self.len)));
        }
        ctx.scoped(|| ctx.queue.write_buffer(&self.order, 0, bytemuck::cast_slice(order)))?;
        Ok(())
    }

    // ANCHOR: record
    /// Records the gather of batch `step` into `pass`: one dispatch, no CPU-side writes.
    pub fn record(&self, kernel: &GatherKernel, pass: &mut wgpu::ComputePass<'_>, step: usize) {
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[(step as u64 * kernel.stride) as u32]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, self.groups.2);
    }
    // ANCHOR_END: record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::gather_batch_cpu;
    use rand::{Rng, SeedableRng, seq::SliceRandom};

    fn random_dataset(n: usize, seed: u64) -> Dataset {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let images = (0..n * PIXELS).map(|_| rng.random::<u8>()).collect();
        let labels = (0..n).map(|_| rng.random_range(0..10u8)).collect();
        Dataset::new(images, labels).unwrap()
    }

    #[test]
    fn gather_matches_the_cpu_reference_on_awkward_batches() {
        let ctx = common::test_context();
        let kernel = GatherKernel::new(ctx).unwrap();
        for (n, batch) in [(1, 1), (37, 17), (130, 63), (130, 65), (64, 64)] {
            let data = random_dataset(n, n as u64 * 31 + batch as u64);
            let x = ctx.storage_buffer_empty("x", (batch * PIXELS * 4) as u64).unwrap();
            let y = ctx.storage_buffer_empty("y", (batch * 4) as u64).unwrap();
            let batches = DeviceBatches::new(ctx, &kernel, &data, batch, &x, &y, "test").unwrap();
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(5));
            batches.set_order(ctx, &order).unwrap();
            for step in 0..batches.steps() {
                ctx.poison(&x);
                ctx.poison(&y);
                ctx.submit_pass("gather", |pass| batches.record(&kernel, pass, step));
                let rows = batches.rows(step);
                let (want_x, want_y) = gather_batch_cpu(&data, &order, step * batch, rows);
                let got_x: Vec<f32> = ctx.read(&x, batch * PIXELS).unwrap();
                let got_y: Vec<u32> = ctx.read(&y, batch).unwrap();
                common::assert_close(&got_x[..rows * PIXELS], &want_x, 1e-6, 1e-6);
                let want_y: Vec<u32> = want_y.iter().map(|&l| l as u32).collect();
                assert_eq!(&got_y[..rows], &want_y[..], "labels, n {n} batch {batch} step {step}");
                // Rows past a short batch are left alone (still poison).
                assert!(got_x[rows * PIXELS..].iter().all(|v| v.is_nan()), "wrote past the batch");
                assert!(got_y[rows..].iter().all(|&v| v == u32::MAX));
            }
        }
    }

    #[test]
    fn many_steps_in_one_submission_take_successive_batches() {
        let ctx = common::test_context();
        let kernel = GatherKernel::new(ctx).unwrap();
        let (n, batch) = (50, 16);
        let data = random_dataset(n, 9);
        let x = ctx.storage_buffer_empty("x", (batch * PIXELS * 4) as u64).unwrap();
        let y = ctx.storage_buffer_empty("y", (batch * 4) as u64).unwrap();
        let batches = DeviceBatches::new(ctx, &kernel, &data, batch, &x, &y, "test").unwrap();
        let order: Vec<u32> = (0..n as u32).rev().collect();
        batches.set_order(ctx, &order).unwrap();
        // Labels of every step, copied out between passes of ONE command buffer.
        let steps = batches.steps();
        let history = ctx.storage_buffer_empty("history", (steps * batch * 4) as u64).unwrap();
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        for step in 0..steps {
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                batches.record(&kernel, &mut pass, step);
            }
            encoder.copy_buffer_to_buffer(&y, 0, &history, (step * batch * 4) as u64, (batch * 4) as u64);
        }
        ctx.queue.submit([encoder.finish()]);
        let got: Vec<u32> = ctx.read(&history, steps * batch).unwrap();
        for step in 0..steps {
            let rows = batches.rows(step);
            let want: Vec<u32> = order[step * batch..step * batch + rows].iter().map(|&i| data.labels[i as usize] as u32).collect();
            assert_eq!(&got[step * batch..step * batch + rows], &want[..], "step {step}");
        }
    }

    #[test]
    fn bad_orders_and_small_buffers_are_errors() {
        let ctx = common::test_context();
        let kernel = GatherKernel::new(ctx).unwrap();
        let data = random_dataset(10, 1);
        let x = ctx.storage_buffer_empty("x", (4 * PIXELS * 4) as u64).unwrap();
        let y = ctx.storage_buffer_empty("y", 16).unwrap();
        assert!(DeviceBatches::new(ctx, &kernel, &data, 8, &x, &y, "t").is_err());
        let b = DeviceBatches::new(ctx, &kernel, &data, 4, &x, &y, "t").unwrap();
        assert_eq!((b.steps(), b.rows(2)), (3, 2));
        assert!(b.set_order(ctx, &[0; 9]).is_err());
        assert!(b.set_order(ctx, &[10; 10]).is_err());
    }
}
