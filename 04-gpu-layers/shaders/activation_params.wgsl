// activation_params.wgsl: the uniform of the four activation kernels (activation_forward,
// activation_backward, activation_copy_forward, activation_copy_backward): [batch, cols], an
// ACT_* code.

struct ActivationParams {
    cols: u32,
    act: u32,
    _pad0: u32,
    _pad1: u32,
}
