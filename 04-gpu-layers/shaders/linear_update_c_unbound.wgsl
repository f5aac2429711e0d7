// linear_update_c_unbound.wgsl: linear_update.wgsl with at most TWO layers per dispatch, where
// the device allows fewer than the 16 storage buffers three layers take, and in the split step
// (whose bindings 13-17 are its own). Bindings 18-22 are not declared; these private stand-ins
// only let the shared code compile. They are never read or written: the host gives layer c no
// workgroups (its first_group is the grid's size), so no workgroup's layer is 2.

var<private> x_c: array<f32, 1>;
var<private> dy_c: array<f32, 1>;
var<private> params_c: array<f32, 1>;
var<private> grads_c: array<f32, 1>;
var<private> state_c: array<f32, 1>;
