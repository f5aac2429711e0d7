//! Which limits a context asks its adapter for (`--gpu-limits` of the runners): the adapter's
//! own (the default), WebGPU's defaults (what every browser offers), or the adapter's own with
//! some of them lowered, say to what a browser granted on the same GPU. The kernels a stage
//! picks depend on these limits (workgroup sizes, workgroup memory, storage buffers per
//! kernel), so a native run held to a browser's limits runs the browser's kernels.

use std::fmt;
use std::str::FromStr;

/// The limits a [`crate::GpuContext`] asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GpuLimits {
    /// The adapter's own: the largest buffers, bindings and workgroups it can do.
    #[default]
    Adapter,
    /// WebGPU's defaults (`wgpu::Limits::defaults()`): 8 storage buffers per kernel, 16 KiB of
    /// workgroup memory, 256 invocations per workgroup, 128 MiB per storage binding.
    WebGpu,
    /// The adapter's own, with each of these lowered to the value given (no lower than WebGPU's
    /// default for it: every WebGPU device offers that much).
    Lowered(Vec<(LimitKey, u64)>),
}

/// A limit [`GpuLimits::Lowered`] can set, by the name the command line gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKey {
    /// `storage-buffers`: storage buffers per shader stage.
    StorageBuffers,
    /// `workgroup-storage`: bytes of workgroup memory.
    WorkgroupStorage,
    /// `invocations`: invocations per workgroup.
    Invocations,
    /// `storage-binding`: bytes of one storage binding.
    StorageBinding,
}

impl LimitKey {
    const ALL: [LimitKey; 4] = [LimitKey::StorageBuffers, LimitKey::WorkgroupStorage, LimitKey::Invocations, LimitKey::StorageBinding];

    fn name(self) -> &'static str {
        match self {
            LimitKey::StorageBuffers => "storage-buffers",
            LimitKey::WorkgroupStorage => "workgroup-storage",
            LimitKey::Invocations => "invocations",
            LimitKey::StorageBinding => "storage-binding",
        }
    }

    fn get(self, l: &wgpu::Limits) -> u64 {
        match self {
            LimitKey::StorageBuffers => l.max_storage_buffers_per_shader_stage as u64,
            LimitKey::WorkgroupStorage => l.max_compute_workgroup_storage_size as u64,
            LimitKey::Invocations => l.max_compute_invocations_per_workgroup as u64,
            LimitKey::StorageBinding => l.max_storage_buffer_binding_size,
        }
    }

    /// Sets the limit (and, for invocations, the workgroup's sides it bounds) to `v`, which the
    /// caller has checked fits a `u32` where it must.
    fn set(self, l: &mut wgpu::Limits, v: u64) {
        let v32 = v as u32;
        match self {
            LimitKey::StorageBuffers => l.max_storage_buffers_per_shader_stage = v32,
            LimitKey::WorkgroupStorage => l.max_compute_workgroup_storage_size = v32,
            LimitKey::Invocations => {
                l.max_compute_invocations_per_workgroup = v32;
                l.max_compute_workgroup_size_x = l.max_compute_workgroup_size_x.min(v32);
                l.max_compute_workgroup_size_y = l.max_compute_workgroup_size_y.min(v32);
                l.max_compute_workgroup_size_z = l.max_compute_workgroup_size_z.min(v32);
            }
            LimitKey::StorageBinding => l.max_storage_buffer_binding_size = v,
        }
    }
}

impl GpuLimits {
    /// The limits to request of an adapter that offers `adapter`. A lowered limit above the
    /// adapter's own, or below WebGPU's default for it, is an error that names both.
    pub fn resolve(&self, adapter: &wgpu::Limits) -> Result<wgpu::Limits, String> {
        match self {
            GpuLimits::Adapter => Ok(adapter.clone()),
            GpuLimits::WebGpu => Ok(wgpu::Limits::defaults()),
            GpuLimits::Lowered(set) => {
                let mut l = adapter.clone();
                for &(key, v) in set {
                    let (offered, floor) = (key.get(adapter), key.get(&wgpu::Limits::defaults()));
                    if v < floor {
                        return Err(format!(
                            "--gpu-limits {}={v}: every WebGPU device offers at least {floor} (WebGPU's default), and this project's kernels are sized for no less",
                            key.name()
                        ));
                    }
                    if v > offered {
                        return Err(format!(
                            "--gpu-limits {}={v}: this adapter offers at most {offered}; the limits can only be lowered",
                            key.name()
                        ));
                    }
                    key.set(&mut l, v);
                }
                Ok(l)
            }
        }
    }

    /// The banner's line for limits other than the adapter's own (None for those): the choice
    /// and the four limits it gave (`l`).
    pub fn banner(&self, l: &wgpu::Limits) -> Option<String> {
        let which = match self {
            GpuLimits::Adapter => return None,
            GpuLimits::WebGpu => "WebGPU's defaults",
            GpuLimits::Lowered(_) => "the adapter's own, lowered",
        };
        let each: Vec<String> = LimitKey::ALL.iter().map(|k| format!("{} {}", k.name(), k.get(l))).collect();
        Some(format!("limits: {which} ({})", each.join(", ")))
    }
}

impl FromStr for GpuLimits {
    type Err = String;

    /// `adapter`, `webgpu`, or `KEY=VALUE,...` with KEY one of `storage-buffers`,
    /// `workgroup-storage`, `invocations`, `storage-binding`.
    fn from_str(s: &str) -> Result<Self, String> {
        let keys = || LimitKey::ALL.map(LimitKey::name).join(", ");
        match s.trim() {
            "adapter" => return Ok(GpuLimits::Adapter),
            "webgpu" => return Ok(GpuLimits::WebGpu),
            _ => {}
        }
        let mut set = Vec::new();
        for part in s.split(',').map(str::trim) {
            let Some((name, value)) = part.split_once('=') else {
                return Err(format!("`{part}`: use adapter, webgpu, or KEY=VALUE pairs separated by commas (KEY: {})", keys()));
            };
            let key = LimitKey::ALL
                .into_iter()
                .find(|k| k.name() == name.trim())
                .ok_or_else(|| format!("`{}` is not a limit this option sets; use one of {}", name.trim(), keys()))?;
            let v: u64 = value.trim().parse().map_err(|_| format!("{}={}: the value must be a whole number", key.name(), value.trim()))?;
            let fits = key == LimitKey::StorageBinding || v <= u32::MAX as u64;
            if v == 0 || !fits {
                return Err(format!("{}={v}: use 1 to {}", key.name(), if key == LimitKey::StorageBinding { u64::MAX } else { u32::MAX as u64 }));
            }
            if set.iter().any(|&(k, _)| k == key) {
                return Err(format!("{} is given twice", key.name()));
            }
            set.push((key, v));
        }
        Ok(GpuLimits::Lowered(set))
    }
}

impl fmt::Display for GpuLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuLimits::Adapter => write!(f, "adapter"),
            GpuLimits::WebGpu => write!(f, "webgpu"),
            GpuLimits::Lowered(set) => {
                let parts: Vec<String> = set.iter().map(|(k, v)| format!("{}={v}", k.name())).collect();
                write!(f, "{}", parts.join(","))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowered_limits_replace_only_those_named() {
        let adapter = wgpu::Limits { max_storage_buffers_per_shader_stage: 96, max_compute_workgroup_storage_size: 49_152, ..wgpu::Limits::defaults() };
        let choice: GpuLimits = "storage-buffers=10, workgroup-storage=32768".parse().unwrap();
        let l = choice.resolve(&adapter).unwrap();
        assert_eq!(l.max_storage_buffers_per_shader_stage, 10);
        assert_eq!(l.max_compute_workgroup_storage_size, 32_768);
        assert_eq!(l.max_compute_invocations_per_workgroup, adapter.max_compute_invocations_per_workgroup);
        assert_eq!(choice.to_string(), "storage-buffers=10,workgroup-storage=32768");
        assert_eq!("webgpu".parse::<GpuLimits>().unwrap().resolve(&adapter).unwrap(), wgpu::Limits::defaults());
        assert_eq!("adapter".parse::<GpuLimits>().unwrap().resolve(&adapter).unwrap(), adapter);
    }

    #[test]
    fn invocations_bound_the_workgroup_sides() {
        let adapter = wgpu::Limits { max_compute_invocations_per_workgroup: 1024, max_compute_workgroup_size_x: 1024, ..wgpu::Limits::defaults() };
        let l = "invocations=512".parse::<GpuLimits>().unwrap().resolve(&adapter).unwrap();
        assert_eq!((l.max_compute_invocations_per_workgroup, l.max_compute_workgroup_size_x), (512, 512));
    }

    #[test]
    fn bad_values_are_refused_with_what_to_write() {
        let adapter = wgpu::Limits::defaults();
        for (text, says) in [
            ("fast", "use adapter, webgpu, or KEY=VALUE"),
            ("buffers=3", "`buffers` is not a limit"),
            ("storage-buffers=ten", "must be a whole number"),
            ("storage-buffers=0", "use 1 to"),
            ("invocations=4294967296", "use 1 to 4294967295"),
            ("invocations=64,invocations=32", "given twice"),
        ] {
            let err = text.parse::<GpuLimits>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        let err = "storage-buffers=9".parse::<GpuLimits>().unwrap().resolve(&adapter).unwrap_err();
        assert!(err.contains("offers at most 8"), "{err}");
        let err = "invocations=128".parse::<GpuLimits>().unwrap().resolve(&adapter).unwrap_err();
        assert!(err.contains("at least 256"), "{err}");
    }
}
