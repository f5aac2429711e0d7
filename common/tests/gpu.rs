//! The context and helpers on a real adapter (the software one in CI).

use common::{GpuError, GpuTimer, test_context, wgpu};

const ADD_ONE: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if i < arrayLength(&data) { data[i] = data[i] + 1.0; }
}
"#;

#[test]
fn context_reports_an_adapter() {
    let ctx = test_context();
    let line = ctx.adapter_line();
    assert!(line.contains(&ctx.info.name), "{line}");
    // We asked for the adapter's own limits, not wgpu's 128 MiB default... which lavapipe
    // happens to equal, so check we got at least the default.
    assert!(ctx.limits.max_storage_buffer_binding_size >= 128 << 20);
}

#[test]
fn round_trip_and_dispatch_past_one_dimension() {
    let ctx = test_context();
    // 65,535 workgroups of 64 cover 4,194,240 elements; go past that so y = 2 is used.
    let len = 65_535 * 64 + 100;
    let input: Vec<f32> = (0..len).map(|i| (i % 1000) as f32 - 500.25).collect();
    let buf = ctx.storage_buffer("data", &input).unwrap();
    let pipeline = ctx.compute_pipeline("add one", ADD_ONE, "main").unwrap();
    let bind = ctx.bind_group("add one", &pipeline, 0, &[&buf]).unwrap();
    let (x, y, z) = ctx.workgroups_1d(len as u64, 64).unwrap();
    assert_eq!(y, 2);
    let timer = GpuTimer::new(ctx);
    let seconds = timer
        .time_pass(ctx, "add one", |pass| {
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(x, y, z);
        })
        .unwrap();
    assert!(seconds > 0.0 && seconds.is_finite());
    let out: Vec<f32> = ctx.read(&buf, len).unwrap();
    let expected: Vec<f32> = input.iter().map(|v| v + 1.0).collect();
    common::assert_same(&out, &expected);
}

#[test]
fn poison_makes_nan_and_reads_reuse_staging() {
    let ctx = test_context();
    let buf = ctx.storage_buffer_empty("poisoned", 4 * 17).unwrap();
    ctx.poison(&buf);
    let out: Vec<f32> = ctx.read(&buf, 17).unwrap();
    assert!(out.iter().all(|v| v.is_nan()));
    let small: Vec<f32> = ctx.read(&buf, 3).unwrap();
    assert_eq!(small.len(), 3);
    // Odd byte counts (u8 data) round trip too.
    let bytes = ctx.storage_buffer("bytes", &[1u8, 2, 3, 4, 5]).unwrap();
    let back: Vec<u8> = ctx.read(&bytes, 5).unwrap();
    assert_eq!(back, vec![1, 2, 3, 4, 5]);
}

#[test]
fn trusted_pipeline_without_checks_computes_the_same() {
    let ctx = test_context();
    let input: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
    let buf = ctx.storage_buffer("data", &input).unwrap();
    // SAFETY: ADD_ONE guards its only access with `i < arrayLength(&data)`.
    let pipeline =
        unsafe { ctx.compute_pipeline_trusted("add one", ADD_ONE, "main", wgpu::ShaderRuntimeChecks::unchecked()) }
            .unwrap();
    let bind = ctx.bind_group("add one", &pipeline, 0, &[&buf]).unwrap();
    let (x, y, z) = ctx.workgroups_1d(input.len() as u64, 64).unwrap();
    GpuTimer::new(ctx)
        .time_pass(ctx, "add one", |pass| {
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(x, y, z);
        })
        .unwrap();
    let out: Vec<f32> = ctx.read(&buf, input.len()).unwrap();
    let expected: Vec<f32> = input.iter().map(|v| v + 1.0).collect();
    common::assert_same(&out, &expected);
}

#[test]
fn bad_wgsl_is_an_error_not_a_panic() {
    let ctx = test_context();
    let err = ctx.compute_pipeline("broken", "fn main( {", "main").unwrap_err();
    assert!(matches!(err, GpuError::Validation(_)), "{err:?}");
}

#[test]
fn buffer_over_the_limit_is_a_clear_error() {
    let ctx = test_context();
    let too_big = ctx.limits.max_storage_buffer_binding_size + 4;
    let err = ctx.storage_buffer_empty("huge", too_big).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("max_storage_buffer_binding_size"), "{text}");
}

#[test]
fn reading_more_than_the_buffer_is_an_error() {
    let ctx = test_context();
    let buf = ctx.storage_buffer("four", &[1.0f32; 4]).unwrap();
    assert!(ctx.read::<f32>(&buf, 5).is_err());
}

/// The async read-back path (the only one in a browser) natively: the same bytes as `read`, the
/// work submitted before it is finished when it completes, and `wait_async` waits.
#[test]
fn async_read_back_sees_the_submitted_work() {
    let ctx = test_context();
    let input: Vec<f32> = (0..4099).map(|i| (i % 97) as f32 * 0.5 - 11.0).collect();
    let buf = ctx.storage_buffer("data", &input).unwrap();
    let pipeline = ctx.compute_pipeline("add one", ADD_ONE, "main").unwrap();
    let bind = ctx.bind_group("add one", &pipeline, 0, &[&buf]).unwrap();
    let (x, y, z) = ctx.workgroups_1d(input.len() as u64, 64).unwrap();
    let add_one = || {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(x, y, z);
        }
        ctx.queue.submit([encoder.finish()]);
    };
    // Submitted, not waited for: the read is queued behind the kernel.
    add_one();
    let once: Vec<f32> = common::block_on(ctx.read_async(&buf, input.len())).unwrap();
    common::assert_same(&once, &input.iter().map(|v| v + 1.0).collect::<Vec<_>>());
    // Twice more, then only a wait: a blocking read afterwards needs no further work.
    add_one();
    add_one();
    common::block_on(ctx.wait_async()).unwrap();
    let thrice: Vec<f32> = ctx.read(&buf, input.len()).unwrap();
    common::assert_same(&thrice, &input.iter().map(|v| v + 3.0).collect::<Vec<_>>());
    // Odd sizes and a prefix through the async path, into a caller's slice.
    let mut head = [0f32; 3];
    common::block_on(ctx.read_into_async(&buf, &mut head)).unwrap();
    assert_eq!(head, [input[0] + 3.0, input[1] + 3.0, input[2] + 3.0]);
    assert!(common::block_on(ctx.read_async::<f32>(&buf, input.len() + 1)).is_err());
    ctx.check_errors().unwrap();
}

/// Read-backs from several threads at once: each takes the shared staging buffer or, while
/// another read holds it, makes its own; every read gets its own buffer's bytes.
#[test]
fn concurrent_read_backs_each_get_their_own_bytes() {
    let ctx = test_context();
    let buffers: Vec<(Vec<u32>, wgpu::Buffer)> = (0..4u32)
        .map(|t| {
            let data: Vec<u32> = (0..1000 + 37 * t).map(|i| i * 7 + t * 100_000).collect();
            let buf = ctx.storage_buffer("data", &data).unwrap();
            (data, buf)
        })
        .collect();
    std::thread::scope(|s| {
        for (data, buf) in &buffers {
            s.spawn(move || {
                for _ in 0..20 {
                    let got: Vec<u32> = ctx.read(buf, data.len()).unwrap();
                    assert_eq!(&got, data);
                }
            });
        }
    });
}

/// The driver compiles a kernel for `common::compiled` and reports on it, or, where the driver
/// lacks `VK_KHR_pipeline_executable_properties` (Mesa 22's lavapipe in CI), the error says so.
/// On the H200 this test runs too (its binary is carried there with the runners).
#[test]
fn the_driver_reports_what_it_compiled() {
    use common::compiled::{Inspector, Robustness};
    let ctx = test_context();
    if ctx.info.backend != wgpu::Backend::Vulkan {
        panic!("this test needs a Vulkan adapter; got {}", ctx.adapter_line());
    }
    assert!(matches!(Inspector::open("no such adapter", Robustness::Off), Err(GpuError::AdapterNotFound { .. })));
    for robustness in [Robustness::AsWgpu, Robustness::Off] {
        let inspector = match Inspector::open(&ctx.info.name, robustness) {
            Ok(inspector) => inspector,
            Err(e) => {
                assert!(matches!(e, GpuError::MissingFeature(_)), "{e}");
                assert!(e.to_string().contains("VK_KHR_pipeline_executable_properties"), "{e}");
                eprintln!("{}: {e}", ctx.info.name);
                continue;
            }
        };
        let executables = inspector.inspect(ADD_ONE, "main").unwrap();
        assert!(!executables.is_empty(), "no executable for {}", inspector.adapter);
        for e in &executables {
            eprintln!("{} ({robustness:?}): {} / {} / subgroup {}", inspector.adapter, e.name, e.description, e.subgroup_size);
            for s in &e.statistics {
                eprintln!("  {} = {} ({})", s.name, s.value, s.description);
            }
            for (name, text) in &e.representations {
                eprintln!("  representation {name}: {} lines", text.lines().count());
            }
            assert!(!e.statistics.is_empty(), "{}: no statistics", e.name);
        }
        assert!(matches!(inspector.inspect(ADD_ONE, "no_such_entry"), Err(GpuError::Validation(_))));
    }
}
