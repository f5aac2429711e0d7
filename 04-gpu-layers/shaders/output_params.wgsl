// output_params.wgsl: the uniform and the bindings 1-7 that output_layer.wgsl and
// output_wide.wgsl share (each declares its own h at binding 0: output_wide may write it).

struct OutputLayerParams {
    inputs: u32,
    classes: u32,
    mode: u32,
    // The activation of h, for dh; ACT_NONE when h is the network input (no layer below).
    hidden_act: u32,
    // output_layer: rows per workgroup, the grid has ceil(batch / rows_per_group) workgroups;
    // output_wide: 1.
    rows_per_group: u32,
    // output_wide only: 1 when it computes h from the layer below's partial sums (and writes
    // it), with that layer's inputs (its bias is row below_inputs of below_params) and ACT_* code.
    sums: u32,
    below_inputs: u32,
    below_act: u32,
    // h's dropout (training only): for dh, and in output_wide's sums for h itself.
    drop: DropoutMask,
    // LOSS_CE (softmax cross-entropy) or LOSS_MSE (mean squared error against one-hot labels).
    loss: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(1) var<storage, read> out_params: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> dh: array<f32>;
@group(0) @binding(5) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> batch: Batch;
@group(0) @binding(7) var<uniform> p: OutputLayerParams;
