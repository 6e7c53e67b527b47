//! The four C math functions microtab calls (`exp`, `log`, `pow`, `cos`:
//! from the statistics and the charts), defined here from the `libm` crate
//! (a port of musl's libm) so that the executable does not need
//! `libm.so.6`.
//!
//! Why: a cold query starts by loading the executable and every shared
//! library it needs from disk. `libc.so.6` is almost always in the page
//! cache already (every shell uses it), `libm.so.6` usually is not, and
//! reading it is a separate small, latency-bound disk request. Measured
//! after dropping the page cache: `microtab --version` took 9.1 ms with
//! `libm.so.6` and `libgcc_s.so.1` as dependencies (build.rs links the
//! unwinder statically instead). See docs/BENCHMARKS.md.
//!
//! The linker resolves the calls to these definitions before it reaches
//! `-lm`, and with `--as-needed` (rustc's default) then drops `libm.so.6`.

#[no_mangle]
extern "C" fn exp(x: f64) -> f64 {
    libm::exp(x)
}

#[no_mangle]
extern "C" fn log(x: f64) -> f64 {
    libm::log(x)
}

#[no_mangle]
extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[no_mangle]
extern "C" fn cos(x: f64) -> f64 {
    libm::cos(x)
}
