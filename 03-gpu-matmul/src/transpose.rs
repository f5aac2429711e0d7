//! Which operand of a product is transposed, and the small helpers every part of the crate
//! shares about it: the three products in table order, their formulas, their `(m, k, n)`.

/// Which operand is transposed: `out = op(a) * op(b)`. The same type as stage 02's, so CPU
/// and GPU code share one vocabulary:
/// - `Transpose::None`: `a [m, k] * b [k, n] -> [m, n]`;
/// - `Transpose::A`: `A^T * B`, `a` stored `[k, m]` (weight gradients: `X^T * dY`);
/// - `Transpose::B`: `A * B^T`, `b` stored `[n, k]` (input gradients: `dY * W^T`).
pub use cpu_matrix::Transpose;

/// The three products, in the order tests and tables list them.
pub const TRANSPOSES: [Transpose; 3] = [Transpose::None, Transpose::A, Transpose::B];

/// The product as a formula, for messages and tables: `"A^T * B"`.
pub fn formula(t: Transpose) -> &'static str {
    match t {
        Transpose::None => "A * B",
        Transpose::A => "A^T * B",
        Transpose::B => "A * B^T",
    }
}

/// `(m, k, n)` of `op(a) * op(b)` from the stored shapes `a` and `b`, if the inner
/// dimensions agree.
pub fn product_dims(t: Transpose, a: (usize, usize), b: (usize, usize)) -> Option<(usize, usize, usize)> {
    let (m, k) = if t == Transpose::A { (a.1, a.0) } else { a };
    let (kb, n) = if t == Transpose::B { (b.1, b.0) } else { b };
    (k == kb).then_some((m, k, n))
}

/// The product's place in [`TRANSPOSES`] (which of a variant's pipelines it uses).
pub(crate) fn transpose_index(t: Transpose) -> usize {
    match t {
        Transpose::None => 0,
        Transpose::A => 1,
        Transpose::B => 2,
    }
}
