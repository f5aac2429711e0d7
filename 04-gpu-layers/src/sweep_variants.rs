//! The variants `gpu-layers --sweep` times (`sweep.rs`): a network's tiles with one value
//! changed each. The tests build and run every fused kernel with each variant of
//! [`FusedTiles::DEFAULT`], so the list lives in the library.

use crate::tiles::FusedTiles;

/// The variants of [`FusedTiles::DEFAULT`] ([`sweep_variants_of`]). The tests run every fused
/// kernel with each of them.
pub fn sweep_variants() -> Vec<(String, FusedTiles)> {
    sweep_variants_of(FusedTiles::DEFAULT)
}

/// The variants `gpu-layers --sweep` times for a network whose tiles are `base`
/// ([`FusedTiles::for_network`]), each `base` with ONE value changed (where that changes it), as
/// `(what changed, tiles)`; the first, "default", is `base` itself.
pub fn sweep_variants_of(base: FusedTiles) -> Vec<(String, FusedTiles)> {
    let d = base;
    let mut out = vec![("default".to_string(), d)];
    let mut add = |what: String, t: FusedTiles| {
        if t != d {
            out.push((what, t));
        }
    };
    for v in [16, 64] {
        add(format!("forward TN {v}"), FusedTiles { forward_tn: v, ..d });
    }
    for v in [8, 16, 32] {
        add(format!("forward KS {v}"), FusedTiles { forward_ks: v, ..d });
    }
    // 1,024 invocations: 16 columns and 64 slices; 8 rows with 4 loads in flight.
    add("forward TN 16 KS 64".into(), FusedTiles { forward_tn: 16, forward_ks: 64, ..d });
    add("forward KS 32 TR 8 U 4".into(), FusedTiles { forward_ks: 32, forward_tr: 8, forward_u: 4, ..d });
    for v in [1, 4, 8] {
        add(format!("forward TR {v}"), FusedTiles { forward_tr: v, ..d });
    }
    for v in [4, 16] {
        add(format!("forward U {v}"), FusedTiles { forward_u: v, ..d });
    }
    for v in [64, 128, 512, 1024] {
        add(format!("output WG {v}"), FusedTiles { output_wg: v, ..d });
    }
    for v in [2, 4, 8] {
        add(format!("output rows {v}"), FusedTiles { output_rows: v, ..d });
    }
    for v in [1, 2, 8] {
        add(format!("update batch slices {v}"), FusedTiles { update_batch_slices: v, ..d });
    }
    add("update T 16".into(), FusedTiles { update_t: 16, ..d });
    // (The split step kernel's batch slices too where 8 would not divide the round's quads.)
    add("update T 64 batch slices 2".into(), FusedTiles { update_t: 64, update_batch_slices: 2, split_step_batch_slices: 2, ..d });
    add("update R 32".into(), FusedTiles { update_r: 32, split_step_batch_slices: 4, ..d });
    add("update R 128".into(), FusedTiles { update_r: 128, ..d });
    add("update params late".into(), FusedTiles { update_preload: false, ..d });
    // 8 x 8 blocks per invocation: 64 multiply-adds per 4 loads of workgroup memory (tiles of
    // 64 with 2 batch slices, or of 32 with 8: 128 invocations, 32 KiB of workgroup memory).
    add("update B 8 T 64 batch slices 2".into(), FusedTiles { update_block: 8, update_t: 64, update_batch_slices: 2, split_step_batch_slices: 2, ..d });
    add("update B 8 batch slices 8".into(), FusedTiles { update_block: 8, update_batch_slices: 8, ..d });
    for v in [2, 4] {
        add(format!("split step batch slices {v}"), FusedTiles { split_step_batch_slices: v, ..d });
    }
    add("not merged".into(), FusedTiles { merge: false, ..d });
    add("merged KS 16".into(), FusedTiles { merged_ks: 16, ..d });
    add("merged KS 16 TR 2".into(), FusedTiles { merged_ks: 16, merged_tr: 2, ..d });
    add("merged TN 64 CB 2 KS 16".into(), FusedTiles { merged_tn: 64, merged_cb: 2, merged_ks: 16, ..d });
    add("merged TN 128 CB 1 KS 8".into(), FusedTiles { merged_tn: 128, merged_cb: 1, merged_ks: 8, ..d });
    // 256 columns per workgroup: a second hidden layer of 256 (784-512-256-10) merged with the
    // output layer, 4 dispatches a step instead of 5.
    add("merged TN 32 CB 8 KS 16".into(), FusedTiles { merged_tn: 32, merged_cb: 8, merged_ks: 16, ..d });
    add("merged TN 64 CB 4 KS 16".into(), FusedTiles { merged_tn: 64, merged_cb: 4, merged_ks: 16, ..d });
    // ... with 2 rows per workgroup: each workgroup reads that layer's weights for twice the rows.
    add("merged TN 32 CB 8 KS 8 TR 2".into(), FusedTiles { merged_tn: 32, merged_cb: 8, merged_ks: 8, merged_tr: 2, ..d });
    add("merged TN 64 CB 4 KS 8 TR 2".into(), FusedTiles { merged_tn: 64, merged_cb: 4, merged_ks: 8, merged_tr: 2, ..d });
    // linear_forward_tiled on every layer it can take, then one of its sizes changed; and
    // never (linear_forward everywhere).
    let tiled = FusedTiles { tiled_min: 1, ..d };
    add("tiled".into(), tiled);
    add("tiled S 1".into(), FusedTiles { tiled_s: 1, ..tiled });
    add("tiled S 4".into(), FusedTiles { tiled_s: 4, ..tiled });
    add("tiled M 64".into(), FusedTiles { tiled_m: 64, ..tiled });
    add("tiled N 128".into(), FusedTiles { tiled_n: 128, ..tiled });
    add("tiled M 16".into(), FusedTiles { tiled_m: 16, ..tiled });
    for k in [16, 64, 128] {
        add(format!("tiled K {k}"), FusedTiles { tiled_k: k, ..tiled });
    }
    add("never tiled".into(), FusedTiles { tiled_min: u32::MAX, ..d });
    // output_wide on every output layer it can take, and never (output_layer everywhere).
    add("output wide".into(), FusedTiles { wide_min: 1, ..d });
    add("never wide".into(), FusedTiles { wide_min: u32::MAX, ..d });
    // The tiled forward's k loop split over workgroups (k splits), output_wide adding up the parts.
    for v in [2, 4, 8] {
        add(format!("k splits {v}"), FusedTiles { k_splits: v, ..d });
    }
    // Two changes together, for wide layers in big batches: the split forward and the update
    // in 8 x 8 blocks.
    for v in [2, 4] {
        let b8 = FusedTiles { update_block: 8, update_t: 64, update_batch_slices: 2, split_step_batch_slices: 2, ..d };
        add(format!("k splits {v} update B 8 T 64 batch slices 2"), FusedTiles { k_splits: v, ..b8 });
    }
    // The split forward on the tensor cores (`--matmul f16-inputs`; elsewhere these run
    // linear_forward_tiled split as above): 32 x 32 or 32 x 64 outputs per workgroup.
    for v in [2, 4] {
        add(format!("k splits {v} coop 32 x 32"), FusedTiles { k_splits: v, coop_m: 32, coop_n: 32, ..d });
    }
    add("k splits 2 coop 32 x 64".into(), FusedTiles { k_splits: 2, coop_m: 32, ..d });
    for v in [1, 2] {
        add(format!("k splits 2 coop loads {v}"), FusedTiles { k_splits: 2, coop_loads: v, ..d });
    }
    // The update on the tensor cores with one batch slice per round (128 invocations).
    add("k splits 2 coop update batch slices 1".into(), FusedTiles { k_splits: 2, coop_update_batch_slices: 1, ..d });
    out
}
