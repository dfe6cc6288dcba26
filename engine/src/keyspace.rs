//! Keyspaces: declarations, profiles, and handles that name their engine.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::contract::Commit;
use crate::error::{CommitError, EngineError, ReadError};

/// How a keyspace will be used; an engine may tune for it (compaction,
/// compression, bloom filters). A hint only: every profile keeps every key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// Mostly point reads and writes.
    PointLookup,
    /// Keys written once in increasing order, read by range (event logs).
    AppendOnly,
    /// Written at the tail, read and deleted at the head (outboxes). Never
    /// served by size- or age-triggered deletion: a queue loses nothing.
    Queue,
    /// No particular pattern.
    General,
}

/// A keyspace an engine is opened with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyspaceSpec {
    /// Its name: unique within the engine.
    pub name: String,
    /// Its profile hint.
    pub profile: Profile,
}

impl KeyspaceSpec {
    /// A keyspace named `name` with profile `profile`.
    pub fn new(name: impl Into<String>, profile: Profile) -> Self {
        Self {
            name: name.into(),
            profile,
        }
    }
}

/// A handle to a declared keyspace, from [`Engine::keyspace`](crate::Engine::keyspace).
///
/// A handle carries the identity of the engine instance that issued it and
/// cannot be made any other way. An engine refuses a handle of another
/// instance (another engine, or the same database before a reopen) with an
/// `UnknownKeyspace` error, never misreading it as one of its own; wrappers
/// of one engine (`&E`, a fault-injecting engine) share its handles. After
/// a reopen, obtain handles again by name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Keyspace {
    engine: u64,
    index: u32,
}

impl Keyspace {
    /// Its position in the declaration order of its engine.
    pub const fn index(self) -> usize {
        self.index as usize
    }
}

// The engine identity is left out on purpose: it differs between runs of
// one seed in one process, and traces and messages must not.
impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyspace({})", self.index)
    }
}

impl std::fmt::Display for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "keyspace #{}", self.index)
    }
}

/// Engine identities come from one process-wide counter: unique for the
/// life of the process, and independent of the injected randomness, so a
/// simulation's choices do not depend on how many engines were opened.
static NEXT_ENGINE: AtomicU64 = AtomicU64::new(1);

/// The declared keyspaces of one open engine instance, and the identity its
/// handles carry. Every engine keeps one: it checks names for duplicates,
/// maps names to handles and handles back to positions, and refuses
/// handles issued by another instance.
#[derive(Debug)]
pub struct Keyspaces {
    engine: u64,
    specs: Vec<KeyspaceSpec>,
}

impl Keyspaces {
    /// The keyspaces of a newly opened engine instance, with a fresh
    /// identity.
    ///
    /// # Errors
    /// [`EngineError::DuplicateKeyspace`] when two share a name;
    /// [`EngineError::TooManyKeyspaces`] beyond `u32::MAX`.
    pub fn new(specs: Vec<KeyspaceSpec>) -> Result<Self, EngineError> {
        let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(EngineError::DuplicateKeyspace {
                name: pair[0].to_owned(),
            });
        }
        if u32::try_from(specs.len()).is_err() {
            return Err(EngineError::TooManyKeyspaces(specs.len()));
        }
        Ok(Self {
            engine: NEXT_ENGINE.fetch_add(1, Ordering::Relaxed),
            specs,
        })
    }

    /// The declarations, in order.
    pub fn specs(&self) -> &[KeyspaceSpec] {
        &self.specs
    }

    /// How many keyspaces are declared.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether none is declared.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The handle of the keyspace named `name`.
    ///
    /// # Errors
    /// [`EngineError::UnknownKeyspaceName`].
    pub fn get(&self, name: &str) -> Result<Keyspace, EngineError> {
        self.specs
            .iter()
            .position(|s| s.name == name)
            .and_then(|i| self.at(i))
            .ok_or_else(|| EngineError::UnknownKeyspaceName {
                name: name.to_owned(),
            })
    }

    /// The handle of the keyspace at `index` in the declaration order.
    pub fn at(&self, index: usize) -> Option<Keyspace> {
        (index < self.specs.len()).then(|| Keyspace {
            engine: self.engine,
            // In range: `new` refuses more than u32::MAX keyspaces.
            index: u32::try_from(index).unwrap_or(u32::MAX),
        })
    }

    /// Every handle, in declaration order.
    pub fn handles(&self) -> impl Iterator<Item = Keyspace> + '_ {
        (0..self.specs.len()).filter_map(|i| self.at(i))
    }

    /// The position of `ks` if this instance issued it.
    pub fn index_of(&self, ks: Keyspace) -> Option<usize> {
        (ks.engine == self.engine && ks.index() < self.specs.len()).then_some(ks.index())
    }

    /// The declaration of `ks` if this instance issued it.
    pub fn spec(&self, ks: Keyspace) -> Option<&KeyspaceSpec> {
        self.index_of(ks).map(|i| &self.specs[i])
    }

    /// The position of `ks`, for a read.
    ///
    /// # Errors
    /// [`ReadError::UnknownKeyspace`] for a handle of another instance.
    pub fn for_read(&self, ks: Keyspace) -> Result<usize, ReadError> {
        self.index_of(ks).ok_or(ReadError::UnknownKeyspace(ks))
    }

    /// Checks that every keyspace a commit names was issued here.
    ///
    /// # Errors
    /// [`CommitError::UnknownKeyspace`] naming the first foreign handle.
    pub fn check_commit(&self, commit: &Commit) -> Result<(), CommitError> {
        match commit.keyspaces().find(|ks| self.index_of(*ks).is_none()) {
            Some(ks) => Err(CommitError::UnknownKeyspace(ks)),
            None => Ok(()),
        }
    }

    /// The name an embedded engine stores keyspace `index` under (a redb
    /// table, a RocksDB column family): `ks.` and the declared name, so no
    /// keyspace can collide with the engine's own `strata.` tables.
    pub fn storage_name(&self, index: usize) -> Option<String> {
        self.specs.get(index).map(|s| format!("ks.{}", s.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<KeyspaceSpec> {
        vec![
            KeyspaceSpec::new("a", Profile::General),
            KeyspaceSpec::new("b", Profile::Queue),
        ]
    }

    #[test]
    fn handles_of_another_instance_are_refused() {
        let one = Keyspaces::new(two()).unwrap();
        let other = Keyspaces::new(two()).unwrap();
        let b = one.get("b").unwrap();
        assert_eq!(one.index_of(b), Some(1));
        assert_eq!(other.index_of(b), None, "same index, other instance");
        assert!(matches!(other.for_read(b), Err(ReadError::UnknownKeyspace(k)) if k == b));
        assert_eq!(other.get("b").unwrap().index(), 1);
        assert_ne!(other.get("b").unwrap(), b);
    }

    #[test]
    fn duplicates_and_unknown_names_are_typed_errors() {
        let dup = vec![
            KeyspaceSpec::new("x", Profile::General),
            KeyspaceSpec::new("y", Profile::General),
            KeyspaceSpec::new("x", Profile::Queue),
        ];
        assert!(
            matches!(Keyspaces::new(dup), Err(EngineError::DuplicateKeyspace { name: n }) if n == "x")
        );
        let ks = Keyspaces::new(two()).unwrap();
        assert!(
            matches!(ks.get("c"), Err(EngineError::UnknownKeyspaceName { name: n }) if n == "c")
        );
        assert_eq!(ks.at(2), None);
        assert_eq!(
            ks.handles().map(Keyspace::index).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(ks.storage_name(1).as_deref(), Some("ks.b"));
        assert_eq!(ks.storage_name(2), None);
    }

    #[test]
    fn a_commit_naming_a_foreign_handle_is_refused() {
        let one = Keyspaces::new(two()).unwrap();
        let other = Keyspaces::new(two()).unwrap();
        let mine = one.get("a").unwrap();
        let foreign = other.get("a").unwrap();
        let ok = Commit::new().put(mine, b"k".to_vec(), b"v".to_vec());
        assert!(one.check_commit(&ok).is_ok());
        let bad = ok.delete(foreign, b"k".to_vec());
        assert!(
            matches!(one.check_commit(&bad), Err(CommitError::UnknownKeyspace(k)) if k == foreign)
        );
    }

    #[test]
    fn debug_and_display_show_the_position_only() {
        let ks = Keyspaces::new(two()).unwrap().get("b").unwrap();
        assert_eq!(format!("{ks:?} / {ks}"), "Keyspace(1) / keyspace #1");
    }
}
