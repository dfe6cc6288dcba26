//! The extension seam: declared keyspaces for the rows of crates above
//! the store, and the catalog (see [`Space`]).

use strata_engine::{Keyspace, Profile};
use strata_keys::{KeyRange, tuple};

/// A declared keyspace for an extension's own rows (an outbox's entries, a
/// search index's state, a schema's own layouts), written in the same
/// transactions and commits as typed rows, under the same limits and
/// quota.
///
/// Declared on the options before the engine opens
/// ([`StoreOptions::space`](crate::StoreOptions::space)); the handle comes
/// from [`Store::space`](crate::Store::space) and is bound to that store's
/// engine instance, so on another engine the commit is refused
/// ([`CommitError::UnknownKeyspace`](strata_engine::CommitError::UnknownKeyspace)),
/// and there is no public way to build one. Rows are raw bytes in a layout
/// the declaring crate chooses ([`Tx::put_in`](crate::Tx::put_in) and the
/// other `*_in` methods).
///
/// # Catalog
///
/// The system keyspace holds a catalog: rows `("k", kind, name)` whose
/// value is the tuple `(version, detail)` (a format version and bytes the
/// declaring crate chooses).
/// [`Store::publish_catalog`](crate::Store::publish_catalog) records the
/// store's own keyspaces and every declared space (kind `"keyspace"`, detail
/// `(role, profile)`, and `(role, profile, true)` for a charged space;
/// kind `"quota"`, name `"scope"`, detail `("tuple-prefix", n)` for a
/// scope given by
/// [`StoreOptions::quota_scope_tuple_prefix`](crate::StoreOptions::quota_scope_tuple_prefix);
/// a scope function is code and is not recorded); crates add their own kinds (topics, consumers,
/// indexes) with [`Tx::catalog_put`](crate::Tx::catalog_put);
/// [`Store::catalog`](crate::Store::catalog) lists it all, so a tool can
/// describe a database without the application's code. Opening a store
/// writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Space {
    pub(crate) ks: Keyspace,
    pub(crate) charged: bool,
}

impl Space {
    /// The engine keyspace underneath, for reads outside the store.
    pub fn keyspace(&self) -> Keyspace {
        self.ks
    }

    /// Whether its rows are charged to quota scopes.
    pub fn is_charged(&self) -> bool {
        self.charged
    }
}

/// A space as declared on the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpaceSpec {
    pub(crate) name: String,
    pub(crate) profile: Profile,
    pub(crate) charged: bool,
}

/// One catalog row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// What is described: `"keyspace"`, or a kind a crate chose (`"topic"`,
    /// `"consumer"`, …).
    pub kind: String,
    /// The name it was declared under (a keyspace's engine name, a
    /// topic's, …).
    pub name: String,
    /// The format version its declaring crate wrote.
    pub version: u64,
    /// Bytes the declaring crate chose (for a keyspace: the tuple
    /// `(role, profile)`, role `"data"`, `"system"` or `"space"`).
    pub detail: Vec<u8>,
}

const CATALOG: &str = "k";

/// The catalog row of `(kind, name)`.
pub(crate) fn catalog_key(kind: &str, name: &str) -> Vec<u8> {
    tuple::pack(&(CATALOG, kind, name))
}

/// Every catalog row.
pub(crate) fn catalog_range() -> KeyRange {
    KeyRange::tuple_prefix(&tuple::pack(&(CATALOG,)))
}

/// A catalog row's value.
pub(crate) fn catalog_value(version: u64, detail: &[u8]) -> Vec<u8> {
    tuple::pack(&(version, detail))
}

/// Reads a catalog row; `None` for a row that is not one.
pub(crate) fn read_catalog(key: &[u8], value: &[u8]) -> Option<CatalogEntry> {
    let (tag, kind, name) = tuple::unpack::<(String, String, String)>(key).ok()?;
    if tag != CATALOG {
        return None;
    }
    let (version, detail) = tuple::unpack::<(u64, Vec<u8>)>(value).ok()?;
    Some(CatalogEntry {
        kind,
        name,
        version,
        detail,
    })
}

/// The profile a catalog name stands for (`General` for a name this
/// version does not know).
pub(crate) fn profile_of(name: &str) -> Profile {
    match name {
        "point-lookup" => Profile::PointLookup,
        "append-only" => Profile::AppendOnly,
        "queue" => Profile::Queue,
        _ => Profile::General,
    }
}

/// The name of a profile in the catalog.
pub(crate) fn profile_name(p: Profile) -> &'static str {
    match p {
        Profile::PointLookup => "point-lookup",
        Profile::AppendOnly => "append-only",
        Profile::Queue => "queue",
        _ => "general",
    }
}
