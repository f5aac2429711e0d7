//! `--csv`: the runner, on tiny sizes (on lavapipe where that is the adapter), writes a CSV whose
//! header is the documented one and whose every row parses, with finite, positive TFLOP/s.

use std::process::Command;

/// Cuts one CSV line into fields (double-quoted fields may hold commas and doubled quotes).
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let (mut quoted, mut chars) = (false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    assert!(!quoted, "unterminated quote in {line:?}");
    out
}

#[test]
fn csv_rows_parse_with_positive_tflops() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gpu-matmul-{}.csv", std::process::id()));
    let cublas = concat!(env!("CARGO_MANIFEST_DIR"), "/results/h200-torch-matmul.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-matmul"))
        .args(["0", "1", "5", "--sizes", "16,8x12x20", "--transposes", "--reps", "1", "--warmup", "0", "--no-mnist"])
        .args(["--no-checks-study", "--cublas", cublas, "--csv"])
        .arg(&path)
        .output()
        .expect("run gpu-matmul");
    assert!(out.status.success(), "gpu-matmul failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).expect("the CSV file");
    std::fs::remove_file(&path).ok();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("kernel,name,product,n,tflops,ms,percent_of_cublas,adapter"));
    let mut kernels = Vec::new();
    let mut cublas_rows = 0;
    for line in lines {
        let f = fields(line);
        assert_eq!(f.len(), 8, "{line:?}");
        let tflops: f64 = f[4].parse().unwrap_or_else(|e| panic!("tflops in {line:?}: {e}"));
        assert!(tflops.is_finite() && tflops > 0.0, "{line:?}");
        for (i, what) in [(5, "ms"), (6, "percent_of_cublas")] {
            if !f[i].is_empty() {
                let v: f64 = f[i].parse().unwrap_or_else(|e| panic!("{what} in {line:?}: {e}"));
                assert!(v.is_finite() && v > 0.0, "{line:?}");
            }
        }
        assert!(!f[7].is_empty(), "no adapter in {line:?}");
        if f[0].starts_with("cublas_") {
            cublas_rows += 1;
        } else {
            assert!(["A*B", "A^T*B", "A*B^T"].contains(&f[2].as_str()), "{line:?}");
            assert!(["16", "8x12x20"].contains(&f[3].as_str()), "{line:?}");
            assert!(!f[5].is_empty(), "no ms in {line:?}");
            kernels.push((f[0].clone(), f[1].clone(), f[2].clone(), f[3].clone()));
        }
    }
    // The CPU reference and kernels 01 and 05, at both sizes, in the three products.
    assert_eq!(kernels.len(), 3 * 2 * 3, "{text}");
    for (kernel, name) in [("00", "cpu"), ("01", "naive"), ("05", "double_buffered")] {
        assert_eq!(kernels.iter().filter(|k| k.0 == kernel && k.1 == name).count(), 6, "{text}");
    }
    // FP32, TF32 and FP16 inputs for every line of the cuBLAS file.
    assert!(cublas_rows > 0 && cublas_rows % 3 == 0, "{text}");
}
