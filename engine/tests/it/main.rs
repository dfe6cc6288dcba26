//! What only the reference engine offers (crash images, restarts, planted
//! state), the injected clock and generator, and the capability answers.
//! `MemEngine` runs the conformance suite in `strata-engine-testkit`.

mod ab_method;
mod edges;
mod mem;
