// linear_update_b.wgsl: the second layer's buffers of linear_update.wgsl, on devices that allow
// 11 storage buffers per shader stage (every native adapter of this project).

@group(0) @binding(5) var<storage, read> x_b: array<f32>;
@group(0) @binding(6) var<storage, read> dy_b: array<f32>;
@group(0) @binding(7) var<storage, read_write> params_b: array<f32>;
@group(0) @binding(8) var<storage, read_write> grads_b: array<f32>;
@group(0) @binding(9) var<storage, read_write> state_b: array<f32>;
