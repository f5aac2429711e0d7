//! The whole wgpu compute boilerplate, written out once, in order, as a tutorial.
//!
//! Doubling an array needs seven steps on the GPU:
//!
//! 1. instance, adapter, device and queue;
//! 2. shader module;
//! 3. input, output and staging buffers (plus a tiny uniform with the length);
//! 4. bind group layout and bind group;
//! 5. pipeline layout and pipeline;
//! 6. command encoder and compute pass;
//! 7. upload, dispatch, download.
//!
//! [`double_walkthrough`] does all seven, by hand, on purpose: this is the one place in the
//! project that does not use `common`'s helpers, so that you see what they hide. Every later
//! stage (and [`crate::DoubleGpu`] next door) uses `common::GpuContext` and its helpers instead:
//! step 1 is `GpuContext::new`, steps 2 and 5 `compute_pipeline`, step 3 `storage_buffer` and
//! friends, step 4 `bind_group`, the download half of step 7 `read`.
//!
//! Run it: `cargo run --release -p double -- --walkthrough`.

use wgpu::util::DeviceExt;

use common::GpuError;

use crate::{SHADER, WORKGROUP_SIZE};

/// Doubles `input` on the GPU with every wgpu step written out: `input: [n] -> [n]`.
///
/// Returns the adapter it ran on and the doubled values. It makes a new instance and device on
/// every call (slow: tens of milliseconds) and picks the adapter with wgpu's own
/// `request_adapter` (honouring `WGPU_BACKEND`, but not `common`'s `WGPU_ADAPTER_NAME`). That
/// is fine for a lesson and wrong for a program: programs make one [`common::GpuContext`] and
/// reuse it, as [`crate::double_gpu`] and [`crate::DoubleGpu`] do.
pub fn double_walkthrough(input: &[f32]) -> Result<(wgpu::AdapterInfo, Vec<f32>), GpuError> {
    // wgpu's API is async (it also runs in browsers); on a desktop we simply block on it.
    pollster::block_on(double_walkthrough_async(input))
}

async fn double_walkthrough_async(input: &[f32]) -> Result<(wgpu::AdapterInfo, Vec<f32>), GpuError> {
    // ---------------------------------------------------------------------------------------
    // Step 1: instance, adapter, device and queue.
    // ---------------------------------------------------------------------------------------
    // The instance is wgpu itself: it loads the APIs it can find (Vulkan, Metal, DX12, GL).
    // `..._from_env` lets `WGPU_BACKEND=vulkan` (or gl, metal, dx12) restrict the choice.
    // ANCHOR: step1_device
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());

    // An adapter is one physical device behind one API: "NVIDIA H200 on Vulkan", or Mesa's
    // "llvmpipe" (a CPU pretending to be a GPU). We ask for the fast one and take what we get.
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            // A "fallback" adapter is a software one; don't insist on it.
            force_fallback_adapter: false,
            // We draw nothing, so no window surface has to be compatible.
            compatible_surface: None,
            apply_limit_buckets: false,
        })
        .await
        .map_err(|_| GpuError::NoAdapter)?;
    let info = adapter.get_info();

    // wgpu's default limits are the lowest common denominator (128 MiB per storage binding).
    // Ask for everything this adapter can do instead, and check our buffer against it: a
    // clear error here beats a validation panic later.
    let limits = adapter.limits();
    let n = input.len();
    // Bindings may never be empty, so an empty input still gets a 4-byte buffer.
    let buffer_bytes = (4 * n as u64).max(4);
    if buffer_bytes > limits.max_storage_buffer_binding_size {
        return Err(GpuError::TooLarge {
            what: format!("the walkthrough's input of {n} floats"),
            bytes: buffer_bytes,
            limit: limits.max_storage_buffer_binding_size,
            limit_name: "max_storage_buffer_binding_size",
        });
    }

    // The device is our logical connection to the adapter: it creates every object below. The
    // queue is where finished command buffers (and buffer writes) go to be executed.
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("walkthrough device"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        })
        .await
        .map_err(|e| GpuError::RequestDevice(e.to_string()))?;

    // wgpu checks every call below, but reports mistakes (a typo in the WGSL, a buffer bound
    // with the wrong usage) later and, by default, by panicking. An error scope collects them
    // instead, so we can return them as an `Err`.
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    // ANCHOR_END: step1_device

    // ---------------------------------------------------------------------------------------
    // Step 2: the shader module.
    // ---------------------------------------------------------------------------------------
    // wgpu compiles WGSL (with naga) to what the driver eats: SPIR-V for Vulkan, MSL, HLSL...
    // Read shaders/double.wgsl now: one invocation doubles one element.
    // ANCHOR: step2_module
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("double.wgsl"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    // ANCHOR_END: step2_module

    // ---------------------------------------------------------------------------------------
    // Step 3: buffers. The GPU cannot see our `&[f32]`; it needs its own memory.
    // ---------------------------------------------------------------------------------------
    // The input: STORAGE so the shader can read it, COPY_DST so we can upload into it.
    // ANCHOR: step3_buffers
    let input_buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("input"),
        size: buffer_bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    // The output: STORAGE so the shader can write it, COPY_SRC so we can copy it out.
    let output_buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("output"),
        size: buffer_bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    // The staging buffer: the only kind the CPU may map and read (MAP_READ). It cannot be
    // bound to a shader, so the result travels output -> staging -> our Vec.
    let staging_buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("staging"),
        size: buffer_bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    // The length, as a uniform (small, read-only constants). The shader needs it because the
    // buffers can be longer than the data (here only when n = 0; in `DoubleGpu` always).
    let len = u32::try_from(n).map_err(|_| GpuError::Validation(format!("{n} elements do not fit a u32 index")))?;
    let len_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("len"),
        contents: bytemuck::bytes_of(&len),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    // ANCHOR_END: step3_buffers

    // ---------------------------------------------------------------------------------------
    // Step 4: bind group layout and bind group.
    // ---------------------------------------------------------------------------------------
    // The layout is the *type* of the shader's resources: binding 0 a read-only storage
    // buffer, binding 1 a read-write one, binding 2 a uniform, all seen by compute shaders.
    // (wgpu can also derive it from the shader, with `layout: None` in step 5, as `common`
    // does; written out here so you see what the shader's `@binding`s mean.)
    // ANCHOR: step4_bind_group
    let storage = |read_only| wgpu::BindingType::Buffer {
        ty: wgpu::BufferBindingType::Storage { read_only },
        has_dynamic_offset: false,
        min_binding_size: None,
    };
    let bind_group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("double layout"),
        entries: &[
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(true),
                count: None,
            },
            wgpu::BindGroupLayoutEntry {
                binding: 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(false),
                count: None,
            },
            wgpu::BindGroupLayoutEntry {
                binding: 2,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
        ],
    });
    // The bind group is the *value*: these actual buffers at those bindings.
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("double bind group"),
        layout: &bind_group_layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: input_buffer.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: output_buffer.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 2, resource: len_buffer.as_entire_binding() },
        ],
    });
    // ANCHOR_END: step4_bind_group

    // ---------------------------------------------------------------------------------------
    // Step 5: pipeline layout and pipeline.
    // ---------------------------------------------------------------------------------------
    // The pipeline layout lists the bind group layouts by group number: `@group(0)` is ours.
    // ANCHOR: step5_pipeline
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("double pipeline layout"),
        bind_group_layouts: &[Some(&bind_group_layout)],
        immediate_size: 0,
    });
    // The pipeline is the compiled program: module + entry point + layout. Creating it is the
    // expensive step (the driver compiles to machine code), so real programs make it once.
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("double pipeline"),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    // ANCHOR_END: step5_pipeline

    // ---------------------------------------------------------------------------------------
    // Step 6: command encoder and compute pass.
    // ---------------------------------------------------------------------------------------
    // Nothing runs yet: the encoder *records* commands into a command buffer.
    // ANCHOR: step6_encoder
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("double") });
    {
        // How many workgroups: ceil(n / 256), and never more than 65,535 in one dimension, so
        // long arrays spill into y (the shader rebuilds the flat index). At least one, so an
        // empty input still makes a valid (and harmless: `i >= len`) dispatch.
        let groups = (n as u64).div_ceil(WORKGROUP_SIZE as u64).max(1);
        let max_per_dim = limits.max_compute_workgroups_per_dimension as u64;
        let x = groups.min(max_per_dim);
        let y = groups.div_ceil(x);
        if y > max_per_dim {
            return Err(GpuError::TooLarge {
                what: format!("a dispatch of {n} invocations"),
                bytes: n as u64,
                limit: max_per_dim * max_per_dim * WORKGROUP_SIZE as u64,
                limit_name: "max_compute_workgroups_per_dimension squared",
            });
        }

        let mut pass = encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("double pass"), timestamp_writes: None });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(x as u32, y as u32, 1);
    } // The pass ends when it is dropped.
    // After the kernel, copy the result into the staging buffer (still only recorded).
    encoder.copy_buffer_to_buffer(&output_buffer, 0, &staging_buffer, 0, buffer_bytes);
    // ANCHOR_END: step6_encoder

    // ---------------------------------------------------------------------------------------
    // Step 7: upload, dispatch, download.
    // ---------------------------------------------------------------------------------------
    // Upload: `write_buffer` copies our data into wgpu's own staging memory; the GPU copy runs
    // at the start of the next submit, before our commands.
    // ANCHOR: step7_run
    if n > 0 {
        queue.write_buffer(&input_buffer, 0, bytemuck::cast_slice(input));
    }
    // Dispatch: hand the recorded commands to the GPU. This returns at once; the GPU works on.
    queue.submit([encoder.finish()]);

    // Every call since `push_error_scope` has been checked by now: turn a mistake into an Err.
    if let Some(error) = validation.pop().await {
        return Err(error.into());
    }

    // Download: ask to map the staging buffer. The callback fires once the GPU has finished
    // everything submitted so far *and* the device is polled, which is what `poll` does.
    let slice = staging_buffer.slice(..);
    let (sender, receiver) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |result| {
        // The receiver lives until we read from it below, so this send cannot fail.
        let _ = sender.send(result);
    });
    device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Device(e.to_string()))?;
    receiver
        .recv()
        .map_err(|e| GpuError::Device(format!("map callback dropped: {e}")))?
        .map_err(|e| GpuError::Device(format!("mapping the staging buffer failed: {e}")))?;
    let mut output = vec![0.0f32; n];
    {
        let bytes = slice.get_mapped_range().map_err(|e| GpuError::Device(e.to_string()))?;
        // The buffer may hold a 4-byte pad (n = 0); copy the first n floats' bytes.
        bytemuck::cast_slice_mut::<f32, u8>(&mut output).copy_from_slice(&bytes[..4 * n]);
    } // The mapped view must be dropped before `unmap`.
    staging_buffer.unmap();
    // ANCHOR_END: step7_run

    Ok((info, output))
}
