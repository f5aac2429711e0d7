// linear_update_c.wgsl: the third layer's buffers of linear_update.wgsl, on devices that allow
// 16 storage buffers per shader stage (three layers, and the counters).

@group(0) @binding(18) var<storage, read> x_c: array<f32>;
@group(0) @binding(19) var<storage, read> dy_c: array<f32>;
@group(0) @binding(20) var<storage, read_write> params_c: array<f32>;
@group(0) @binding(21) var<storage, read_write> grads_c: array<f32>;
@group(0) @binding(22) var<storage, read_write> state_c: array<f32>;
