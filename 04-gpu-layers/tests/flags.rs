//! Every flag of the `gpu-layers` runner at its boundaries: each value runs, or is refused with a
//! message naming the flag (exit code 2 from the parser, 1 from the runner); none panics. The
//! runs are tiny so the table takes seconds on the software adapter.
//!
//! Valid values that only cost time are not run: `--xor-steps 1000000`, `--steps 100000`, `--reps 1000`.

use std::process::Command;

use common::flags::Want::{self, Refused, Runs, RunsOrRefused};
use common::flags::assert_flags;

/// Small, fast defaults, flag by flag; a case that sets a flag replaces its default.
const BASE: &[&[&str]] = &[&["--xor-steps", "1"], &["--spiral-epochs", "1"], &["--spiral-points", "2"], &["--steps", "1"], &["--batch", "1"], &["--hidden", "1"], &["--reps", "1"], &["--chunk", "1"]];

#[test]
fn boundary_values_of_every_flag() {
    let cases: &[(&[&str], Want)] = &[
        (&[], Runs),
        (&["--xor-steps", "0"], Refused(2, "--xor-steps")),
        (&["--xor-steps", "1000001"], Refused(2, "--xor-steps")),
        (&["--spiral-epochs", "0"], Refused(2, "--spiral-epochs")),
        (&["--spiral-points", "1"], Refused(2, "--spiral-points")),
        (&["--spiral-points", "4294967296"], Refused(2, "--spiral-points")),
        (&["--bench-only"], Runs),
        (&["--bench-only", "--gpu-limits", "webgpu"], Runs),
        (&["--gpu-limits", "invocations=99999999999"], Refused(2, "--gpu-limits")),
        (&["--gpu-limits", "workgroup-storage=4294967295"], Refused(1, "offers at most")),
        (&["--bench-only", "--steps", "0"], Refused(2, "--steps")),
        (&["--bench-only", "--batch", "0"], Refused(2, "--batch")),
        (&["--bench-only", "--batch", "65537"], Refused(2, "--batch")),
        (&["--bench-only", "--batch", "65536"], RunsOrRefused("error:")),
        (&["--bench-only", "--hidden", "0"], Refused(2, "--hidden")),
        (&["--bench-only", "--hidden", "65536"], RunsOrRefused("error:")),
        (&["--bench-only", "--hidden", "65536", "--batch", "65536"], RunsOrRefused("error:")),
        (&["--bench-only", "--reps", "0"], Refused(2, "--reps")),
        (&["--bench-only", "--reps", "1001"], Refused(2, "--reps")),
        (&["--bench-only", "--chunk", "0"], Refused(2, "--chunk")),
        (&["--bench-only", "--chunk", "100000"], Runs),
        (&["--bench-only", "--chunk", "100001"], Refused(2, "--chunk")),
        (&["--bench-only", "--deeper"], Runs),
        // Any layer list of the MNIST shape: GELU beside the fused kernels, or composed only.
        (&["--bench-only", "--layers", "784-5-gelu-dropout0.2-3-tanh-10,784-3-relu-10-sigmoid"], Runs),
        (&["--bench-only", "--layers", "784-5-relx-10"], Refused(1, "--layers")),
        (&["--bench-only", "--layers", "783-5-10"], Refused(1, "--layers")),
        // The driver decides: lavapipe (Mesa 22) lacks the extension `--compiled` reads.
        (&["--compiled", "plain"], RunsOrRefused("VK_KHR_pipeline_executable_properties")),
        (&["--compiled", "bogus"], Refused(2, "--compiled")),
        // f16 inputs: the tensor cores where the adapter has them, else f32 (and it says so).
        (&["--bench-only", "--matmul", "f16-inputs"], Runs),
        (&["--bench-only", "--matmul", "f16"], Refused(2, "--matmul")),
        // A --variants word that names no variant of --sweep: refused before anything is timed.
        (&["--sweep", "--variants", "tiled splitz"], Refused(1, "--variants")),
    ];
    assert_flags(|| Command::new(env!("CARGO_BIN_EXE_gpu-layers")), BASE, cases);
}
