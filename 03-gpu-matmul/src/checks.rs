//! [`Checks`]: the runtime checks naga compiles into a kernel's shader module, and what each
//! setting costs.

use std::fmt;

/// The runtime checks naga compiles into a shader module.
///
/// wgpu's default ([`Checks::All`]) makes every shader memory-safe whatever it does: each
/// array index is clamped into range, each loop gets a hidden iteration bound, each integer
/// division is guarded. That costs little in simple kernels and, on the H200, a factor of 13
/// to 36 in the register-blocked kernels 03-05 (the README's checks table). [`Checks::None`] drops them (`create_shader_module_trusted`):
/// only for kernels that guard every access themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Checks {
    /// Every check naga has (wgpu's default, `ShaderRuntimeChecks::checked()`).
    All,
    /// Index clamping only: no forced loop bounds, no division guards.
    BoundsOnly,
    /// No runtime checks at all (`ShaderRuntimeChecks::unchecked()`).
    None,
}

impl Checks {
    /// What naga is told to compile in.
    pub(crate) fn runtime_checks(self) -> wgpu::ShaderRuntimeChecks {
        match self {
            Checks::All => wgpu::ShaderRuntimeChecks::checked(),
            Checks::BoundsOnly => {
                wgpu::ShaderRuntimeChecks { bounds_checks: true, ..wgpu::ShaderRuntimeChecks::unchecked() }
            }
            Checks::None => wgpu::ShaderRuntimeChecks::unchecked(),
        }
    }
}

impl fmt::Display for Checks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Checks::All => "all checks",
            Checks::BoundsOnly => "bounds checks only",
            Checks::None => "no checks",
        })
    }
}
