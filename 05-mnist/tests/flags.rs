//! Every flag of `mnist train` (the stage 05 runner) at its boundaries: each value runs, or is
//! refused with a message naming the flag (exit code 2 from the parser, 1 from the runner);
//! none panics. The runs are tiny (64 images, one epoch, on the CPU unless a case says
//! otherwise), about 10 s in all.
//!
//! Valid values that only cost time are not run (`--epochs 1000` on all 60,000 images).

mod support;

use std::process::Command;

use common::flags::Want::{self, Refused, Runs};
use common::flags::assert_flags;

/// Small, fast defaults, flag by flag; a case that sets a flag replaces its default.
const BASE: &[&[&str]] = &[&["--device", "cpu"], &["--epochs", "1"], &["--limit-train", "64"], &["--limit-test", "64"], &["--preview", "0"]];

#[test]
fn boundary_values_of_every_flag() {
    let cases: &[(&[&str], Want)] = &[
        (&[], Runs),
        (&["--batch-size", "0"], Refused(2, "--batch-size")),
        (&["--batch-size", "1"], Runs),
        (&["--batch-size", "18446744073709551615"], Runs),
        (&["--epochs", "0"], Refused(2, "--epochs")),
        (&["--lr", "0"], Refused(2, "--lr")),
        (&["--lr=-1"], Refused(2, "--lr")),
        (&["--lr", "nan"], Refused(2, "--lr")),
        (&["--lr", "inf"], Refused(2, "--lr")),
        (&["--lr", "1e-45"], Runs),
        (&["--lr", "3e38", "--optimizer", "sgd"], Refused(1, "the loss became NaN or infinite")),
        (&["--momentum", "1"], Refused(2, "--momentum")),
        (&["--momentum=-0.1"], Refused(2, "--momentum")),
        (&["--momentum", "0.9999", "--optimizer", "sgd"], Runs),
        (&["--hidden", "0"], Refused(2, "--hidden")),
        (&["--hidden", "none"], Runs),
        (&["--hidden", "1,1,1,1,1,1,1,1"], Runs),
        (&["--hidden", "99999999999"], Refused(1, "parameters")),
        // Under the parameter cap, but the activations of 60,000 rows take hundreds of GiB.
        (&["--hidden", "300000", "--batch-size", "60000", "--limit-train", "60000"], Refused(1, "needs about")),
        // On the GPU: 2,000 rows of 30,000 units is 229 MiB per activation buffer, over the
        // software adapter's 128 MiB per buffer: refused before anything is allocated.
        (&["--device", "gpu", "--hidden", "30000", "--batch-size", "2000", "--limit-train", "2000"], Refused(1, "allows for one buffer")),
        (&["--hidden", "18446744073709551616"], Refused(2, "--hidden")),
        (&["--steps-per-submit", "0"], Refused(2, "--steps-per-submit")),
        (&["--steps-per-submit", "18446744073709551615"], Runs),
        (&["--limit-train", "0"], Refused(2, "--limit-train")),
        (&["--limit-train", "1"], Runs),
        (&["--limit-train", "18446744073709551615", "--batch-size", "60000", "--hidden", "none"], Runs),
        (&["--limit-test", "0"], Refused(2, "--limit-test")),
        (&["--limit-test", "1"], Runs),
        (&["--preview", "18446744073709551615"], Runs),
        (&["--seed", "18446744073709551615"], Runs),
        (&["--seed=-1"], Refused(2, "--seed")),
        (&["--optimizer", "rmsprop"], Refused(2, "--optimizer")),
        (&["--schedule", "constant"], Runs),
        (&["--device", "quantum"], Refused(2, "--device")),
        // Held to WebGPU's defaults (a browser's kernels) on the software adapter, or to less
        // than it offers; more than it offers, less than WebGPU's defaults, or a limit by a wrong name,
        // is refused.
        (&["--device", "gpu", "--gpu-limits", "webgpu"], Runs),
        (&["--device", "gpu", "--gpu-limits", "storage-buffers=10,invocations=256"], Runs),
        (&["--device", "gpu", "--gpu-limits", "invocations=128"], Refused(1, "at least 256")),
        (&["--device", "gpu", "--gpu-limits", "storage-buffers=4294967295"], Refused(1, "offers at most")),
        (&["--gpu-limits", "storage-buffers=0"], Refused(2, "--gpu-limits")),
        (&["--gpu-limits", "registers=64"], Refused(2, "--gpu-limits")),
        (&["--plot", "x.gif"], Refused(1, "--plot")),
    ];
    // Outputs such as `--plot x.gif` are relative: run in a scratch folder.
    let scratch = tempfile::tempdir().unwrap();
    let command = || {
        let mut runner = Command::new(env!("CARGO_BIN_EXE_mnist"));
        runner.current_dir(scratch.path()).env("MNIST_DIR", support::mnist_dir());
        runner
    };
    assert_flags(command, BASE, cases);
}
