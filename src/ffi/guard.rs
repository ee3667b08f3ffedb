//! A panic that reaches Redis aborts the server: every entry point Redis calls (commands,
//! timers, blocked-client and event callbacks, INFO) runs its body through `guard`.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; a panic gives `fallback` instead. The state a caught panic leaves behind is
/// at worst a half-done change that the next command or timer step sees as is (every
/// structure here stays memory-safe across a panic), so unwind safety is asserted.
pub fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Like `guard`, but says whether it panicked (for callers that must reply).
pub fn caught<R>(f: impl FnOnce() -> R) -> Option<R> {
    catch_unwind(AssertUnwindSafe(f)).ok()
}
