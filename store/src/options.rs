//! How a store is configured.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use strata_codec::Limits;
use strata_engine::{Durability, KeyspaceSpec, Profile};
use strata_keys::Key;

/// Maps a data key to the quota scope it is charged to, if any.
pub type ScopeFn = Arc<dyn Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync>;

/// The packed bytes of the first `elements` tuple elements of `key`, when
/// it is a tuple of at least that many.
fn tuple_prefix(key: &[u8], elements: usize) -> Option<Vec<u8>> {
    use strata_keys::tuple::{self, Element, MAX_TUPLE_DEPTH};
    let canonical = |head: &[u8]| {
        let elements = tuple::unpack_bounded::<Vec<Element<'_>>>(head).ok()?;
        (tuple::pack(&elements) == head).then(|| head.to_vec())
    };
    if tuple::nests_deeper_than(key, MAX_TUPLE_DEPTH) {
        // Too deep to unpack whole (the stack), yet charged like any other
        // key, or nesting would be a way past the quota: its first elements
        // are found by their extents, and unpacked alone.
        let (head, _) = tuple::split_prefix(key, elements)?;
        return canonical(head);
    }
    let all = tuple::unpack::<Vec<Element<'_>>>(key).ok()?;
    if all.len() < elements {
        return None;
    }
    let prefix = tuple::pack(&all[..elements].to_vec());
    key.starts_with(&prefix).then_some(prefix)
}

/// How a transaction retries after a conflict.
///
/// Attempt `n` (from 1) that conflicts waits a random time between half
/// and all of `min(max_backoff_ms, base_backoff_ms * 2^(n-1))`, taken from
/// the store's injected clock and rng, then runs the closure again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Backoff before the second attempt, in milliseconds.
    pub base_backoff_ms: u64,
    /// Largest backoff, in milliseconds.
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    /// 10 attempts, backoff from 1 ms doubling up to 100 ms.
    fn default() -> Self {
        Self {
            max_attempts: 10,
            base_backoff_ms: 1,
            max_backoff_ms: 100,
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retry.
    pub const NONE: Self = Self {
        max_attempts: 1,
        base_backoff_ms: 0,
        max_backoff_ms: 0,
    };

    /// The upper bound of the wait after failed attempt `attempt` (from 1).
    pub(crate) fn ceiling_ms(&self, attempt: u32) -> u64 {
        let doubled = self.base_backoff_ms.saturating_mul(
            1u64.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u64::MAX),
        );
        doubled.min(self.max_backoff_ms)
    }
}

/// Everything a [`Store`](crate::Store) is opened with.
///
/// ```
/// use strata_codec::Limits;
/// use strata_store::StoreOptions;
///
/// let options = StoreOptions::new(Limits::ACTOR_KV.with_quota(1 << 20))
///     // Every key under byte 7 plus the next 17 bytes (a tuple UUID) is
///     // one actor's quota scope.
///     .quota_scope(|key: &[u8]| (key.first() == Some(&7) && key.len() >= 18).then(|| key[..18].to_vec()));
/// assert_eq!(options.limits.max_batch_entries, 128);
/// ```
#[derive(Clone)]
pub struct StoreOptions {
    /// The limits every atomic commit respects, and the quota of every
    /// scope ([`Limits::quota_bytes`]).
    pub limits: Limits,
    /// Name of the engine keyspace holding the typed rows (default `"data"`).
    pub data_keyspace: String,
    /// Name of the engine keyspace holding chunks, quota counters and the
    /// expiry index (default `"strata.system"`).
    pub system_keyspace: String,
    /// Durability of commits (default [`Durability::Immediate`]).
    pub durability: Durability,
    /// Retries of [`Store::transact`](crate::Store::transact).
    pub retry: RetryPolicy,
    /// Size of a chunk row; `None` means the value limit (capped at 1 MiB).
    /// 0, or more than `u32::MAX`, fails [`Store::open`](crate::Store::open)
    /// with [`StoreError::InvalidOptions`](crate::StoreError::InvalidOptions).
    pub chunk_size: Option<usize>,
    /// Verify each value's CRC-32 on read, and refuse a value without one
    /// (the store writes one on every value, so its absence is damage; by
    /// default, yes). Turning it off
    /// trusts the engine's own checksums and gives a value copied under
    /// another key no chance of being noticed; it makes scans cheaper (see
    /// the README's performance section). Chunked values are always
    /// verified whole.
    pub verify_checksums: bool,
    pub(crate) chunked: Vec<TypeId>,
    pub(crate) scope: Option<ScopeFn>,
    /// How the scope was given, for the catalog: `Some(n)` for
    /// [`StoreOptions::quota_scope_tuple_prefix`].
    pub(crate) scope_rule: Option<usize>,
    pub(crate) spaces: Vec<crate::space::SpaceSpec>,
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("limits", &self.limits)
            .field("data_keyspace", &self.data_keyspace)
            .field("system_keyspace", &self.system_keyspace)
            .field("durability", &self.durability)
            .field("retry", &self.retry)
            .field("chunk_size", &self.chunk_size)
            .field("verify_checksums", &self.verify_checksums)
            .field("chunked_types", &self.chunked.len())
            .field("quota_scopes", &self.scope.is_some())
            .field("spaces", &self.spaces)
            .finish_non_exhaustive()
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self::new(Limits::FOUNDATIONDB)
    }
}

impl StoreOptions {
    /// Options with `limits` and every other setting at its default.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            data_keyspace: "data".to_owned(),
            system_keyspace: "strata.system".to_owned(),
            durability: Durability::Immediate,
            retry: RetryPolicy::default(),
            chunk_size: None,
            verify_checksums: true,
            chunked: Vec::new(),
            scope: None,
            scope_rule: None,
            spaces: Vec::new(),
        }
    }

    /// Values of key type `K` larger than the value limit are stored in
    /// chunks (a metadata row plus chunk rows, in one commit) instead of
    /// being refused. Writes of a chunked type read the old value first, to
    /// remove its chunks. A key type can say so itself where it is declared
    /// (`Name -> chunked Value = (...)`, [`Key::CHUNKED`]); this is for key
    /// types declared elsewhere.
    #[must_use]
    pub fn chunked<K: Key + 'static>(mut self) -> Self {
        self.chunked.push(TypeId::of::<K>());
        self
    }

    /// Charges every data key for which `scope` returns `Some(s)` to quota
    /// scope `s`, whose usage may not exceed [`Limits::quota_bytes`]. Writes
    /// to a scoped key read the old value first, to charge net growth.
    #[must_use]
    pub fn quota_scope(
        mut self,
        scope: impl Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync + 'static,
    ) -> Self {
        self.scope = Some(Arc::new(scope));
        self.scope_rule = None;
        self
    }

    /// Charges every data key of at least `elements` FoundationDB tuple
    /// elements to the quota scope of its first `elements` elements (their
    /// packed bytes); other keys are not charged. A key whose tuples nest
    /// deeper than [`MAX_TUPLE_DEPTH`](strata_keys::tuple::MAX_TUPLE_DEPTH)
    /// (too deep to unpack) is charged all the same, its first elements
    /// read without unpacking the rest. Unlike a scope function,
    /// this rule is recorded in the catalog by
    /// [`Store::publish_catalog`](crate::Store::publish_catalog), so a tool
    /// (`strata verify`) can recount the quota without the application's
    /// code ([`StoreOptions::from_catalog`]).
    ///
    /// ```
    /// use strata_codec::Limits;
    /// use strata_store::StoreOptions;
    ///
    /// // Every key under ("actor", id) is one actor's scope.
    /// let options = StoreOptions::new(Limits::FOUNDATIONDB.with_quota(1 << 20))
    ///     .quota_scope_tuple_prefix(2);
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn quota_scope_tuple_prefix(mut self, elements: usize) -> Self {
        self.scope = Some(Arc::new(move |key: &[u8]| tuple_prefix(key, elements)));
        self.scope_rule = Some(elements);
        self
    }

    /// With this durability.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// With this retry policy.
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// With or without checksum verification on read.
    #[must_use]
    pub fn verify_checksums(mut self, on: bool) -> Self {
        self.verify_checksums = on;
        self
    }

    /// With this chunk size.
    #[must_use]
    pub fn chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = Some(bytes);
        self
    }

    /// Declares a space: an engine keyspace named `name` with `profile`
    /// for an extension's own rows, not charged to quota scopes (see
    /// [`Space`](crate::Space)). Its handle is [`Store::space`](crate::Store::space).
    #[must_use]
    pub fn space(mut self, name: impl Into<String>, profile: Profile) -> Self {
        self.declare_space(name.into(), profile, false);
        self
    }

    /// As [`StoreOptions::space`], with each row's bytes charged to the
    /// quota scope the scope function gives its key, like a data row.
    #[must_use]
    pub fn charged_space(mut self, name: impl Into<String>, profile: Profile) -> Self {
        self.declare_space(name.into(), profile, true);
        self
    }

    fn declare_space(&mut self, name: String, profile: Profile, charged: bool) {
        self.spaces.retain(|s| s.name != name);
        self.spaces.push(crate::space::SpaceSpec {
            name,
            profile,
            charged,
        });
    }

    /// The keyspaces to open the engine with: the data keyspace
    /// (`PointLookup`), the system keyspace (`General`), then every
    /// declared space.
    pub fn keyspace_specs(&self) -> Vec<KeyspaceSpec> {
        let mut specs = vec![
            KeyspaceSpec::new(self.data_keyspace.clone(), Profile::PointLookup),
            KeyspaceSpec::new(self.system_keyspace.clone(), Profile::General),
        ];
        specs.extend(
            self.spaces
                .iter()
                .map(|s| KeyspaceSpec::new(s.name.clone(), s.profile)),
        );
        specs
    }

    pub(crate) fn decode_options(&self) -> strata_codec::DecodeOptions {
        // The store writes a checksum on every envelope, so one without is
        // damaged (a flipped `checksum` flag bit would otherwise turn the
        // checksum into body bytes).
        strata_codec::DecodeOptions::checksum(if self.verify_checksums {
            strata_codec::ChecksumCheck::Require
        } else {
            strata_codec::ChecksumCheck::Skip
        })
    }

    pub(crate) fn is_chunked<K: Key + 'static>(&self) -> bool {
        K::CHUNKED || self.chunked.contains(&TypeId::of::<K>())
    }

    /// Options that describe the store recorded in `catalog` (as
    /// [`Store::catalog`](crate::Store::catalog) lists it, written by
    /// [`Store::publish_catalog`](crate::Store::publish_catalog)): its data
    /// and system keyspaces, its spaces with their profiles and whether
    /// they are charged, and a quota scope given by
    /// [`StoreOptions::quota_scope_tuple_prefix`]. The rest (limits,
    /// chunked types, a scope function, durability) is the application's
    /// and stays as `self` has it. Returns whether the catalog described a
    /// store (its data and system keyspaces); when not, `self` is
    /// unchanged.
    pub fn from_catalog(&mut self, catalog: &[crate::CatalogEntry]) -> bool {
        let mut data = None;
        let mut system = None;
        let mut spaces = Vec::new();
        for entry in catalog {
            match entry.kind.as_str() {
                "keyspace" => {
                    let Ok((role, profile, charged)) =
                        strata_keys::tuple::unpack::<(String, String, bool)>(&entry.detail)
                            .or_else(|_| {
                                strata_keys::tuple::unpack::<(String, String)>(&entry.detail)
                                    .map(|(r, p)| (r, p, false))
                            })
                    else {
                        continue;
                    };
                    match role.as_str() {
                        "data" => data = Some(entry.name.clone()),
                        "system" => system = Some(entry.name.clone()),
                        _ => spaces.push((
                            entry.name.clone(),
                            crate::space::profile_of(&profile),
                            charged,
                        )),
                    }
                }
                "quota" if entry.name == "scope" => {
                    if let Ok(("tuple-prefix", n)) =
                        strata_keys::tuple::unpack::<(String, u64)>(&entry.detail)
                            .as_ref()
                            .map(|(k, n)| (k.as_str(), *n))
                        && let Ok(n) = usize::try_from(n)
                    {
                        *self = std::mem::take(self).quota_scope_tuple_prefix(n);
                    }
                }
                _ => {}
            }
        }
        let (Some(data), Some(system)) = (data, system) else {
            return false;
        };
        self.data_keyspace = data;
        self.system_keyspace = system;
        for (name, profile, charged) in spaces {
            self.declare_space(name, profile, charged);
        }
        true
    }

    pub(crate) fn has_scope(&self) -> bool {
        self.scope.is_some()
    }

    pub(crate) fn scope_of(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.scope.as_ref().and_then(|f| f(key))
    }

    pub(crate) fn effective_chunk_size(&self) -> usize {
        // A size the user gave is used as given: 0 or more than u32::MAX
        // is refused at open (`StoreError::InvalidOptions`), not adjusted.
        self.chunk_size
            .unwrap_or_else(|| self.limits.max_value_bytes.clamp(1, 1 << 20))
    }
}
