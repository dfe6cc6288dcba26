//! subspace tests.
