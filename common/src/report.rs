//! What the runners and benches print about the machine and their measurements, written once:
//! the CPU's model (from `/proc/cpuinfo`), times with a unit, and (with the `plot` feature)
//! the embedded font that plots draw their text with.

/// A field of the first processor in `/proc/cpuinfo` (Linux), e.g. `"model name"` or
/// `"cpu MHz"`; `None` elsewhere or when the field is missing.
pub fn cpuinfo(field: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == field).then(|| value.trim().to_string())
    })
}

/// The CPU's model name (`"Intel(R) Xeon(R) ..."`), so a CPU column says what it measured.
pub fn cpu_model() -> Option<String> {
    cpuinfo("model name")
}

/// Seconds with the unit that keeps three significant digits: `1.50 ns`, `25.0 µs`, `125 ms`,
/// `3.00 s`.
pub fn fmt_time(s: f64) -> String {
    let (v, unit) = if s < 1e-6 {
        (s * 1e9, "ns")
    } else if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    if v >= 100.0 { format!("{v:.0} {unit}") } else if v >= 10.0 { format!("{v:.1} {unit}") } else { format!("{v:.2} {unit}") }
}

/// Registers DejaVu Sans, embedded in the binary by the `dejavu` crate, as plotters'
/// `"sans-serif"` (regular and bold). plotters' default "ttf" feature asks the system
/// (fontconfig) for fonts, so a plot would fail, or the binary would not even start, on a
/// machine without them; with the "ab_glyph" feature and this font, plots draw the same on any
/// machine. Registers once per process; later calls do nothing.
#[cfg(feature = "plot")]
pub fn register_fonts() {
    use plotters::style::{FontStyle, register_font};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
            // The font is compiled in and known to parse; a failure would only lose text in plots.
            if register_font("sans-serif", style, bytes).is_err() {
                eprintln!("warning: could not register the embedded DejaVu font; plots will lack text");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_three_digits() {
        assert_eq!(fmt_time(1.5e-9), "1.50 ns");
        assert_eq!(fmt_time(2.5e-5), "25.0 µs");
        assert_eq!(fmt_time(0.125), "125 ms");
        assert_eq!(fmt_time(3.0), "3.00 s");
    }

    #[test]
    fn cpuinfo_reads_linux_fields() {
        if std::path::Path::new("/proc/cpuinfo").exists() {
            assert!(cpuinfo("processor").is_some(), "every Linux /proc/cpuinfo lists processors");
        }
        assert_eq!(cpuinfo("no such field"), None);
    }
}
