//! The one checker every stage uses to compare a GPU result with its CPU reference.
//!
//! An element passes when `|actual - expected| <= abs + |expected| * rel`. That comparison is
//! false for NaN, so a NaN anywhere fails (a checker that let NaN through once blessed a broken
//! kernel with a record GFLOP/s figure). Equal infinities pass. A failure reports how many
//! elements are off, the worst one, and the first few, so a wrong index shows at a glance.

use std::fmt;

/// How far the largest error was from the expected values, for a check that passed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CloseStats {
    /// Largest `|actual - expected|` over all elements.
    pub max_abs_err: f64,
    /// Largest `|actual - expected| / |expected|` over elements with `expected != 0`.
    pub max_rel_err: f64,
}

/// One element that failed the tolerance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub actual: f32,
    pub expected: f32,
    /// The error allowed at this element: `abs + |expected| * rel`.
    pub allowed: f64,
}

/// Why a comparison failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckError {
    Length { actual: usize, expected: usize },
    Values {
        /// How many elements failed.
        count: usize,
        len: usize,
        /// The element with the largest error relative to what it was allowed (NaN counts as worst).
        worst: Mismatch,
        /// The first few failures in index order.
        first: Vec<Mismatch>,
        rel: f64,
        abs: f64,
    },
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Length { actual, expected } => {
                write!(f, "length mismatch: got {actual} elements, expected {expected}")
            }
            CheckError::Values { count, len, worst, first, rel, abs } => {
                writeln!(f, "{count} of {len} elements outside tolerance (abs {abs:e} + rel {rel:e} * |expected|)")?;
                writeln!(
                    f,
                    "  worst: [{}] got {} expected {} (allowed error {:e})",
                    worst.index, worst.actual, worst.expected, worst.allowed
                )?;
                for m in first {
                    writeln!(f, "  [{}] got {} expected {} (allowed error {:e})", m.index, m.actual, m.expected, m.allowed)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for CheckError {}

/// How many failures a report lists after the worst one.
const FIRST_MISMATCHES: usize = 5;

/// Compares `actual` with `expected` element by element: `|a - e| <= abs + |e| * rel`.
///
/// NaN in either slice fails; equal infinities pass. Returns the error statistics on success.
pub fn check_close(actual: &[f32], expected: &[f32], rel: f64, abs: f64) -> Result<CloseStats, CheckError> {
    if actual.len() != expected.len() {
        return Err(CheckError::Length { actual: actual.len(), expected: expected.len() });
    }
    let mut stats = CloseStats { max_abs_err: 0.0, max_rel_err: 0.0 };
    let mut count = 0;
    let mut first = Vec::new();
    let mut worst: Option<(f64, Mismatch)> = None;
    for (index, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let (a64, e64) = (a as f64, e as f64);
        let allowed = abs + e64.abs() * rel;
        // Equal infinities are equal. Any other pair with a NaN or an infinity fails: a
        // tolerance scaled by an infinite `expected` would otherwise accept anything.
        let ok = a == e || (a.is_finite() && e.is_finite() && (a64 - e64).abs() <= allowed);
        if ok {
            if a != e {
                let err = (a64 - e64).abs();
                stats.max_abs_err = stats.max_abs_err.max(err);
                if e != 0.0 {
                    stats.max_rel_err = stats.max_rel_err.max(err / e64.abs());
                }
            }
            continue;
        }
        let m = Mismatch { index, actual: a, expected: e, allowed };
        count += 1;
        if first.len() < FIRST_MISMATCHES {
            first.push(m);
        }
        let badness = (a64 - e64).abs() / allowed.max(f64::MIN_POSITIVE);
        let badness = if badness.is_nan() { f64::INFINITY } else { badness };
        if worst.is_none_or(|(b, _)| badness > b) {
            worst = Some((badness, m));
        }
    }
    match worst {
        None => Ok(stats),
        Some((_, worst)) => Err(CheckError::Values { count, len: actual.len(), worst, first, rel, abs }),
    }
}

/// Panics with a full report unless `actual` matches `expected` within `abs + |expected| * rel`.
/// NaN fails. Use this in tests; runners call [`check_close`] and print the error.
#[track_caller]
pub fn assert_close(actual: &[f32], expected: &[f32], rel: f64, abs: f64) -> CloseStats {
    match check_close(actual, expected, rel, abs) {
        Ok(stats) => stats,
        Err(e) => panic!("GPU and reference disagree: {e}"),
    }
}

/// Panics unless both slices hold the same values exactly, where NaN matches NaN (any payload)
/// and nothing else. For operations that must be exact, such as doubling (`x * 2` is exact in
/// binary floating point, and keeps infinities and NaN).
#[track_caller]
pub fn assert_same(actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len(), "length mismatch");
    let bad: Vec<usize> = (0..actual.len())
        .filter(|&i| {
            let (a, e) = (actual[i], expected[i]);
            !(a == e || (a.is_nan() && e.is_nan()))
        })
        .collect();
    if let Some(&i) = bad.first() {
        let shown: Vec<String> = bad
            .iter()
            .take(FIRST_MISMATCHES)
            .map(|&j| format!("[{j}] got {} expected {}", actual[j], expected[j]))
            .collect();
        panic!("{} of {} elements differ (first at {i}): {}", bad.len(), actual.len(), shown.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_within_tolerance_and_reports_error() {
        let stats = check_close(&[1.0, 2.001, -3.0], &[1.0, 2.0, -3.0], 1e-3, 0.0).unwrap();
        assert!((stats.max_abs_err - 0.001).abs() < 1e-6, "{stats:?}");
        assert!(stats.max_rel_err > 0.0);
    }

    #[test]
    fn nan_fails_even_with_huge_tolerance() {
        let err = check_close(&[1.0, f32::NAN], &[1.0, 2.0], 1e9, 1e9).unwrap_err();
        match err {
            CheckError::Values { count, worst, .. } => {
                assert_eq!(count, 1);
                assert_eq!(worst.index, 1);
            }
            other => panic!("unexpected {other:?}"),
        }
        // A NaN in the reference fails too: a broken reference must not bless anything.
        assert!(check_close(&[f32::NAN], &[f32::NAN], 1.0, 1.0).is_err());
    }

    #[test]
    fn infinities_must_match() {
        assert!(check_close(&[f32::INFINITY], &[f32::INFINITY], 0.0, 0.0).is_ok());
        assert!(check_close(&[f32::INFINITY], &[f32::NEG_INFINITY], 1.0, 1.0).is_err());
        assert!(check_close(&[f32::INFINITY], &[1.0], 1.0, 1.0).is_err());
    }

    #[test]
    fn reports_worst_and_first_mismatches() {
        let expected = vec![1.0f32; 20];
        let mut actual = expected.clone();
        actual[3..12].fill(1.5);
        actual[15] = 9.0;
        let err = check_close(&actual, &expected, 0.0, 0.1).unwrap_err();
        let CheckError::Values { count, worst, first, .. } = &err else { panic!() };
        assert_eq!(*count, 10);
        assert_eq!(worst.index, 15);
        assert_eq!(first.len(), FIRST_MISMATCHES);
        assert_eq!(first[0].index, 3);
        let text = err.to_string();
        assert!(text.contains("10 of 20"), "{text}");
    }

    #[test]
    fn length_mismatch_fails() {
        assert!(matches!(check_close(&[1.0], &[1.0, 2.0], 1.0, 1.0), Err(CheckError::Length { .. })));
    }

    #[test]
    #[should_panic(expected = "differ")]
    fn assert_same_catches_one_ulp() {
        assert_same(&[1.0, f32::NAN], &[1.0 + f32::EPSILON, f32::NAN]);
    }

    #[test]
    fn assert_same_accepts_nan_and_infinity() {
        assert_same(&[f32::NAN, f32::INFINITY, -0.5], &[f32::NAN, f32::INFINITY, -0.5]);
    }
}
