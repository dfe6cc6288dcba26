//! seeds_text tests.
