//! Fault points: the one mechanism every crate uses for its planted bugs.
//!
//! A planted bug is a deliberate, plausible mistake that the simulation
//! must catch (`cargo xtask sim --plant NAME`). Each one is a *fault
//! point* in the code that would make the mistake, written
//! [`fault_point!`](crate::fault_point)`("name")`: an expression that is `true` where the bug
//! named `name` is planted. In a crate built without its `planted-bugs`
//! feature (every normal build) the macro is the constant `false`, so the
//! branch it guards is dead code the compiler removes; nothing of this
//! module is reached.
//!
//! A bug is planted for a thread, by name ([`plant`]): the simulation
//! plants the bug of a run on the thread that runs the seed, and other
//! threads (other seeds, other tests) are unaffected. A crate that hands
//! work to a thread of its own (the outbox's worker, the search runner)
//! carries the planting along with [`Planting::here`] and
//! [`Planting::enter`], so a bug reaches the code wherever it runs.
//!
//! The names form one catalogue, `strata_sim::planted::PLANTED`, with the
//! workload that must catch each bug and a seed recorded to catch it;
//! `cargo xtask tidy` checks that every fault point is in it, that every
//! entry has its fault point, and that no crate switches a planted bug
//! any other way.
//!
//! ```
//! # // A crate without the `planted-bugs` feature: the point is `false`.
//! strata_engine::faults::plant(Some("some-bug"));
//! assert!(!strata_engine::fault_point!("some-bug"));
//! strata_engine::faults::plant(None);
//! ```

use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static PLANTED: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Plants the bug named `name` on this thread (`None` removes it). One bug
/// is planted at a time; planting another replaces it.
pub fn plant(name: Option<&str>) {
    PLANTED.with(|p| *p.borrow_mut() = name.map(Arc::from));
}

/// Whether the bug named `name` is planted on this thread. Use
/// [`fault_point!`](crate::fault_point), which is `false` without the calling crate's
/// `planted-bugs` feature, rather than this function.
pub fn planted(name: &str) -> bool {
    PLANTED.with(|p| p.borrow().as_deref() == Some(name))
}

/// The bug planted on a thread, to plant on another one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Planting(Option<Arc<str>>);

impl Planting {
    /// The bug planted on this thread, if any.
    pub fn here() -> Self {
        Self(PLANTED.with(|p| p.borrow().clone()))
    }

    /// Plants the same bug on this thread.
    pub fn enter(&self) {
        PLANTED.with(|p| p.borrow_mut().clone_from(&self.0));
    }

    /// The planted bug's name.
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// `true` where the bug named by the string literal is planted on this
/// thread; the constant `false` in a crate built without its
/// `planted-bugs` feature. Several names (`fault_point!("a" | "b")`) make
/// one point where either bug is planted: two bugs that are the same
/// mistake seen from two layers. See the [module docs](crate::faults).
///
/// ```
/// fn stored_len(len: usize) -> usize {
///     if strata_engine::fault_point!("length-off-by-one") {
///         return len + 1;
///     }
///     len
/// }
/// assert_eq!(stored_len(3), 3);
/// ```
#[macro_export]
macro_rules! fault_point {
    ($($name:literal)|+) => {{
        #[cfg(feature = "planted-bugs")]
        let planted = false $(|| $crate::faults::planted($name))+;
        #[cfg(not(feature = "planted-bugs"))]
        let planted = false;
        planted
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bug_is_planted_for_one_thread_and_carried_on_request() {
        plant(Some("a"));
        assert!(planted("a"));
        assert!(!planted("b"));
        let here = Planting::here();
        assert_eq!(here.name(), Some("a"));
        let elsewhere = std::thread::spawn(|| planted("a")).join();
        assert_eq!(elsewhere.ok(), Some(false), "another thread has no bug");
        let carried = std::thread::spawn(move || {
            here.enter();
            planted("a")
        })
        .join();
        assert_eq!(carried.ok(), Some(true), "a carried planting holds");
        plant(Some("b"));
        assert!(!planted("a"), "planting another bug replaces the first");
        plant(None);
        assert!(!planted("b"));
        assert_eq!(Planting::here(), Planting::default());
    }
}
