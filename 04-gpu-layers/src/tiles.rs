//! The tile sizes of the fused kernels ([`FusedTiles`]), written into their preludes: the
//! defaults measured on the H200, the presets for big batches and wide layers, and the check
//! that every kernel can be built with a set of them.

/// The tile sizes of the three fused kernels, written into their preludes. `Kernels::new` uses
/// [`FusedTiles::DEFAULT`], the fastest combination `gpu-layers --sweep` measured on the H200 for
/// the MNIST step; `Kernels::with_tiles` takes others (the sweep, the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FusedTiles {
    /// `linear_forward`: columns per workgroup (WGSL `TN`, `workgroup_size.x`).
    pub forward_tn: u32,
    /// `linear_forward`: slices of the k loop (`KS`, `workgroup_size.y`).
    pub forward_ks: u32,
    /// `linear_forward`: rows per workgroup, one accumulator each per invocation (`TR`).
    pub forward_tr: u32,
    /// `linear_forward`: weight loads in flight per invocation before the first multiply (`U`).
    pub forward_u: u32,
    /// `output_layer`: invocations per workgroup (`OUT_WG`).
    pub output_wg: u32,
    /// `output_layer`: rows per workgroup, at most.
    pub output_rows: u32,
    /// `linear_update`: batch slices per workgroup, `(T / 4)^2` invocations each
    /// (`UPDATE_BATCH_SLICES`).
    pub update_batch_slices: u32,
    /// `linear_update`: each workgroup owns a `T x T` tile of one layer's parameters (`T`: 16,
    /// 32 or 64); its invocations own 4 x 4 blocks of it.
    pub update_t: u32,
    /// `linear_update`: the side of each invocation's block of parameters (`UPD_B`: 4 or 8, at
    /// most `T / 2`); the split step's update always takes 4.
    pub update_block: u32,
    /// `linear_update`: rows of the batch staged per round (`UPD_R`: 32, 64 or 128), as vec4
    /// quads of the tile's x and dy columns: `2 x UPD_R x T / 4` vec4 of workgroup memory, which
    /// then holds the batch slices' partial sums (`UPDATE_BATCH_SLICES x (T / 4)^2 x 4` vec4), whichever
    /// is larger.
    pub update_r: u32,
    /// `linear_update`: whether each invocation loads the parameters it moves (and their
    /// optimizer state) before the rounds over the batch, so the loads overlap them (`UPD_PRE`
    /// 1), or after the gradient is summed (0), which holds 4-12 fewer registers through the
    /// rounds.
    pub update_preload: bool,
    /// Whether a `LinearForward` and the `OutputLayer` on top of it run as ONE dispatch,
    /// `forward_output` (where the shapes and the device allow it: [`FusedTiles::merges`]).
    pub merge: bool,
    /// Whether a gathered training step of one merged hidden layer runs SPLIT: each
    /// `linear_update` also writes the next batch's partial sums of `x W1` for its tile of `W1`,
    /// and `forward_output` only adds them up (where the device allows it:
    /// [`FusedTiles::runs_split_step`]; `GpuTrainer::record_gathered_steps`).
    pub split: bool,
    /// The split step's `linear_update`: batch slices per workgroup (its `UPDATE_BATCH_SLICES`;
    /// the unsplit kernel's is `update_batch_slices`). More invocations share its last phase, the next
    /// batch's partial sums.
    pub split_step_batch_slices: u32,
    /// `forward_output`: columns per block (WGSL `TN`, `workgroup_size.x`); each invocation
    /// takes `merged_cb` blocks, so a hidden layer of up to `merged_tn x merged_cb` is merged.
    pub merged_tn: u32,
    /// `forward_output`: column blocks per invocation (`CB`).
    pub merged_cb: u32,
    /// `forward_output`: slices of the k loop (`KS`, `workgroup_size.y`).
    pub merged_ks: u32,
    /// `forward_output`: rows per workgroup (`TR`); it uses `forward_u` loads in flight (the
    /// sweep's "forward U" variants change both forwards).
    pub merged_tr: u32,
    /// A `LinearForward` of at least this many outputs (`batch x width`, the batch the tape is
    /// sized for) runs `linear_forward_tiled` (a register-blocked matmul with the bias and the
    /// activation fused) instead of `linear_forward`, where the device allows it
    /// ([`FusedTiles::forward_tiled`]); `u32::MAX`: never.
    pub tiled_min: u32,
    /// `linear_forward_tiled`: rows per workgroup (`FT_M`, a multiple of 4).
    pub tiled_m: u32,
    /// `linear_forward_tiled`: columns per workgroup (`FT_N`, a multiple of 4).
    pub tiled_n: u32,
    /// `linear_forward_tiled`: values of k staged per round (`FT_K`: 16, 32, 64 or 128).
    pub tiled_k: u32,
    /// `linear_forward_tiled`: slices of each k round (`FT_S`: 1, 2, 4 or 8, at most `FT_K / 4`).
    pub tiled_s: u32,
    /// An `OutputLayer` on an `h` of at least this many columns, with at most
    /// [`crate::wgsl::OUTPUT_WIDE_CLASSES`] classes, runs `output_wide` (each invocation holds a few columns
    /// of `h` and all classes) instead of `output_layer`, where the device allows it
    /// ([`FusedTiles::output_wide`]); `u32::MAX`: never.
    pub wide_min: u32,
    /// Workgroups the k loop of a `linear_forward_tiled` is split over (grid z) when an
    /// `output_wide` reads its output: each writes raw partial sums, and `output_wide` adds
    /// them up with the bias and the activation ([`FusedTiles::runs_k_split`]); 1: never split.
    pub k_splits: u32,
    /// `linear_forward_coop` (a forward split over k on the tensor cores, where the products take
    /// f16 inputs): rows of the output per workgroup (`CF_M`: 32 or 64, a subgroup per 32).
    pub coop_m: u32,
    /// `linear_forward_coop`: columns of the output per workgroup (`CF_N`: 32 or 64).
    pub coop_n: u32,
    /// `linear_update_coop`: the fewest outputs of a layer whose gradient it computes
    /// ([`FusedTiles::coop_updates`]). In the wide-layer grid of `gpu-layers --sweep --grid` on the
    /// H200 (`results/h200-tensor-cores/`), the tensor-core step was slower at every batch for
    /// 128 hidden units (91.3 against 71.8 us at batch 1024, the one such cell with enough
    /// outputs for the tiled forward's rule) and faster wherever that rule takes a layer of 256
    /// or more.
    pub coop_min: u32,
    /// `linear_forward_coop`: how its invocations read the tiles they stage (`COOP_LOADS`): 0, a
    /// quad each as four 4-byte loads; 1, a quad each as one 16-byte load where the rows are
    /// whole quads; 2, single values, neighbouring invocations neighbouring values.
    pub coop_loads: u32,
    /// `linear_update_coop`: batch slices of each round (`UC_S`): 2, 256 invocations
    /// (2 slices x 4 subgroups of 32 x 32 parameters, 16 parameters each); 1, 128 invocations
    /// (each subgroup takes the whole round, 32 parameters each), half the workgroup memory. On
    /// the H200 at 784-1024, batch 256, one slice took 40.4 us against 26.5 with two
    /// (`results/h200-tensor-cores/10-update-slices/`).
    pub coop_update_batch_slices: u32,
}

impl FusedTiles {
    /// The fastest of `gpu-layers --sweep`'s variants on the H200 for the MNIST step (784-128-10,
    /// batch 64), each change measured alone (the sweeps in `results/`): the forward with 2 rows
    /// per workgroup (5.80 us against 7.00 with 4), the output layer with one row per
    /// workgroup of 256 invocations (5.22 against 6.04 with 4 rows; 11.39 with 64
    /// invocations), the update with the batch split 4 ways (4.73 against 11.95 unsplit); the
    /// merged forward_output with one row per workgroup, 32 columns x 4 blocks per invocation and
    /// its k loop split 32 ways (9.79 us alone against 11.54 for its first tiles, 2 rows and
    /// 64 x 2 columns split 16 ways: `results/h200-sweep-merged-first.txt`,
    /// `results/h200-sweep-merged-second.txt`); `linear_forward_tiled` from 128 Ki outputs, where
    /// it starts to beat `linear_forward` in the wide-layer grid of `results/h200-sweep.txt`,
    /// with 32 x 64 outputs per workgroup, rounds of 32 and 2 slices (26.2 us alone at 784-1024,
    /// batch 256, against 29.5-41.1 for each neighbouring size:
    /// `results/h200-sweep-1024-b256.txt`).
    pub const DEFAULT: FusedTiles = FusedTiles {
        forward_tn: 32,
        forward_ks: 16,
        forward_tr: 2,
        forward_u: 8,
        output_wg: 256,
        output_rows: 1,
        update_batch_slices: 4,
        update_t: 32,
        update_block: 4,
        update_r: 64,
        update_preload: true,
        merge: true,
        split: true,
        split_step_batch_slices: 8,
        merged_tn: 32,
        merged_cb: 4,
        merged_ks: 32,
        merged_tr: 1,
        tiled_min: 128 * 1024,
        tiled_m: 32,
        tiled_n: 64,
        tiled_k: 32,
        tiled_s: 2,
        wide_min: 256,
        k_splits: 1,
        coop_m: 64,
        coop_n: 64,
        coop_loads: 0,
        coop_min: 256,
        coop_update_batch_slices: 2,
    };

    /// The tiles for batches of up to `max_batch` rows: [`FusedTiles::DEFAULT`], and above 64
    /// rows 4 forward rows per workgroup (each weight read shared by more rows) and an output
    /// layer of 512 invocations per row (at 784-1024-10, batch 256, on the H200: 14.6 us alone
    /// against 19.0 with 256; at 784-512-10, batch 512, 18.9 against 21.2; `--sweep --hidden
    /// 1024 --batch 256` and `--hidden 512 --batch 512`, `results/h200-sweep-1024-b256.txt`).
    /// The widths and batches of `--sweep`'s wide-layer table are measured with these.
    pub fn for_batch(max_batch: usize) -> FusedTiles {
        if max_batch > 64 { FusedTiles::BIG_ROWS } else { FusedTiles::DEFAULT }
    }

    /// [`FusedTiles::DEFAULT`] with 4 forward rows per workgroup and 512 output-layer
    /// invocations per row: the tiles of big batches and of wide layers.
    const BIG_ROWS: FusedTiles = FusedTiles { forward_tr: 4, output_wg: 512, ..FusedTiles::DEFAULT };

    /// The tiles for a network whose layers are `[inputs] -> [outputs]` (`shapes`, first to last)
    /// in batches of up to `max_batch` rows: [`FusedTiles::for_batch`], and the same bigger
    /// forward and output tiles in smaller batches where a layer has at least 512 outputs. At
    /// 784-512-10, batch 64, on the H200 (`gpu-layers --sweep --hidden 512 --batch 64`,
    /// `results/h200-sweep-512-b64.txt`): `linear_forward` with 4 rows per workgroup 9.31 us
    /// alone against 11.44 with 2, `output_layer` with 512 invocations 7.01 against 8.46; at
    /// 784-256-10 they were even (7.39 against 7.28; 5.26 against 5.42), and at 784-128-10 the
    /// merged `forward_output` uses neither.
    /// Networks of two hidden layers take the same 16 slices of the k loop: with its inputs
    /// staged transposed, `linear_forward` holds 64 registers, so a workgroup of 32 slices (1,024
    /// invocations) fills a multiprocessor alone. At 784-512-256-10, batch 64, on an H100
    /// (`gpu-layers --sweep --hidden 512,256`, `results/h100-staged-rows/`): the first forward
    /// 6.98 us alone with 16 slices against 9.27 with 32, the second 4.36 against 4.63. A
    /// network with a layer of at least `tiled_min` outputs at `max_batch` rows (a tiled
    /// forward) takes `FusedTiles::WIDE`.
    pub fn for_network(max_batch: usize, shapes: &[(usize, usize)]) -> FusedTiles {
        let d = FusedTiles::DEFAULT;
        if shapes.iter().any(|&(_, outputs)| (max_batch * outputs) as u64 >= d.tiled_min as u64) {
            FusedTiles::WIDE
        } else if shapes.iter().any(|&(_, outputs)| outputs >= 512) {
            FusedTiles::BIG_ROWS
        } else {
            FusedTiles::for_batch(max_batch)
        }
    }

    /// [`FusedTiles::BIG_ROWS`] for a network with a layer that runs the tiled forward: its k
    /// loop split 2 ways, `output_wide` adding up the parts (at 784-1024-10, batch 256, on the
    /// H200: the forward 21.60 us alone against 27.88 unsplit, 24.59 split 4 ways and 29.56 8
    /// ways, `output_wide` 7.86 against 7.19; a step 62.22 against 69.06; `gpu-layers --sweep
    /// --hidden 1024 --batch 256 --variants "never wide,k splits,update B"`,
    /// `results/h200-sweep-1024-b256-splits.txt`).
    const WIDE: FusedTiles = FusedTiles { k_splits: 2, ..FusedTiles::BIG_ROWS };

    /// `linear_update`'s invocations per workgroup: a block of the tile each (`update_block` on a
    /// side), per slice of the batch.
    pub fn update_invocations(&self) -> u32 {
        let blocks = self.update_t / self.update_block.max(1);
        blocks * blocks * self.update_batch_slices
    }

    /// `linear_forward_tiled`'s invocations per workgroup: a 4 x 4 block of outputs each, per
    /// slice of the k rounds.
    pub fn tiled_invocations(&self) -> u32 {
        (self.tiled_m / 4) * (self.tiled_n / 4) * self.tiled_s
    }

    /// Errors unless every kernel can be built with these sizes (`max_invocations`: the
    /// adapter's limit per workgroup).
    pub fn check(&self, max_invocations: u32) -> Result<(), String> {
        let t = self;
        let pow2 = |v: u32| v.is_power_of_two();
        let fail = |what: String| Err(format!("fused tiles {t:?}: {what}"));
        if t.forward_tn == 0 || t.forward_ks == 0 || t.forward_tr == 0 || t.forward_u == 0 || t.forward_tr > 16 || t.forward_u > 32 {
            return fail("linear_forward needs TN, KS >= 1, 1 <= TR <= 16, 1 <= U <= 32".into());
        }
        let (ut, ur) = (t.update_t, t.update_r);
        if ![4, 8].contains(&t.update_block) || t.update_block > ut / 2 {
            return fail("linear_update needs blocks of 4 or 8, at most half its tile side".into());
        }
        if ![32, 64].contains(&t.coop_m) || ![32, 64].contains(&t.coop_n) || t.coop_loads > 2 {
            return fail("linear_forward_coop takes 32 or 64 rows and columns per workgroup, and loads 0, 1 or 2".into());
        }
        if ![1, 2].contains(&t.coop_update_batch_slices) {
            return fail("linear_update_coop takes 1 or 2 batch slices of each round".into());
        }
        if !(1..=16).contains(&t.k_splits) {
            return fail("linear_forward_tiled splits its k loop 1 to 16 ways".into());
        }
        for (us, ub) in [(t.update_batch_slices, t.update_block), (t.split_step_batch_slices, 4)] {
            let update_threads = (ut / ub) * (ut / ub) * us;
            if !pow2(us) || us > 8 || ![16, 32, 64].contains(&ut) || ![32, 64, 128].contains(&ur) || !(ur * ut / 4).is_multiple_of(update_threads) {
                return fail(format!(
                    "linear_update needs 1, 2, 4 or 8 batch slices (split step or not), T of 16, 32 or 64, 32, 64 or 128 rows per round, and its \
                     {update_threads} invocations to divide the round's {} quads",
                    ur * ut / 4
                ));
            }
        }
        if t.output_rows == 0 || t.output_rows > t.output_wg {
            return fail("output_layer needs 1 <= rows <= invocations".into());
        }
        if t.merged_tn == 0 || t.merged_ks == 0 || !(1..=8).contains(&t.merged_cb) || !(1..=16).contains(&t.merged_tr) {
            return fail("forward_output needs TN, KS >= 1, 1 <= CB <= 8, 1 <= TR <= 16".into());
        }
        let (m, n, k, s) = (t.tiled_m, t.tiled_n, t.tiled_k, t.tiled_s);
        let threads = t.tiled_invocations();
        let whole = |v: u32| threads > 0 && v.is_multiple_of(threads);
        let shapes = m > 0 && n > 0 && m.is_multiple_of(4) && n.is_multiple_of(4) && [16, 32, 64, 128].contains(&k);
        if !shapes || ![1, 2, 4, 8].contains(&s) || s > k / 4 || !whole(m * k) || !whole(k * n) || threads < m {
            return fail(format!(
                "linear_forward_tiled needs M and N multiples of 4, K of 16, 32, 64 or 128, 1, 2, 4 or 8 slices (at most K / 4), \
                 and its {threads} invocations to divide both tiles ({m} x {k} and {k} x {n}) and to be at least M"
            ));
        }
        for (name, n) in [
            ("linear_forward", t.forward_tn * t.forward_ks),
            ("output_layer", t.output_wg),
            ("linear_update", t.update_invocations()),
        ] {
            if n > max_invocations {
                return fail(format!("{name} needs {n} invocations per workgroup; the adapter allows {max_invocations}"));
            }
        }
        Ok(())
    }
}
