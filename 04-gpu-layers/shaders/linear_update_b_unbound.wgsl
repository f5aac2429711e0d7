// linear_update_b_unbound.wgsl: linear_update.wgsl with ONE layer per dispatch, for devices that
// allow fewer than the 11 storage buffers per shader stage two layers take (WebGPU guarantees
// 8, and browsers often offer no more). Bindings 5-9 are not declared, so the pipeline binds 6
// storage buffers; these private stand-ins only let the shared code compile. They are never read
// or written: the host gives layer b no workgroups (its first_group is the grid's size), so
// no workgroup's layer is 1.

var<private> x_b: array<f32, 1>;
var<private> dy_b: array<f32, 1>;
var<private> params_b: array<f32, 1>;
var<private> grads_b: array<f32, 1>;
var<private> state_b: array<f32, 1>;
