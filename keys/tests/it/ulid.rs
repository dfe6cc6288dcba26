//! ulid tests.
