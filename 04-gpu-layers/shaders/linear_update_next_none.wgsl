// linear_update_next_none.wgsl: linear_update.wgsl outside the split step: no last phase.

fn next_prefetch(layer: u32, shape: LayerShape, k0: u32, li: u32) {}

fn next_partials(layer: u32, shape: LayerShape, k0: u32, j0: u32, li: u32, moved: array<f32, PER_THREAD>) {}
