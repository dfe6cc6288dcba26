//! Offline verification of a store's own rows: envelopes and their
//! checksums, chunked values, the expiry index and quota counters, at one
//! snapshot (see [`Store::verify`]).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;

use strata_codec::stored_size;
use strata_engine::{Engine, RangeSpec, Snapshot};

use crate::tx::counter_value;
use crate::{Store, StoreError, layout};

/// One thing [`Store::verify`] found wrong. Keys are the data keys they
/// concern, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// A data row whose envelope does not read, or whose checksum does not
    /// match (or is missing, when the store verifies checksums).
    Value {
        /// The data key.
        key: Vec<u8>,
        /// What the decoder said.
        error: String,
    },
    /// A chunked value that does not reassemble: a chunk missing, extra,
    /// of the wrong length, from another write, or a bad manifest.
    Chunks {
        /// The data key.
        key: Vec<u8>,
        /// What the assembler said.
        error: String,
    },
    /// A chunk row whose data row is absent, inline, or has fewer chunks.
    OrphanChunk {
        /// The data key it names.
        owner: Vec<u8>,
        /// Its chunk index.
        index: u32,
    },
    /// A value with an expiry but no expiry index entry: the sweeper would
    /// never remove it.
    ExpiryNotIndexed {
        /// The data key.
        key: Vec<u8>,
        /// Its expiry, Unix milliseconds.
        expires_at: u64,
    },
    /// A row of the system keyspace that is none of the store's kinds
    /// (chunk, quota counter, expiry entry, catalog row).
    UnknownSystemRow {
        /// The row's key, as stored.
        key: Vec<u8>,
    },
    /// A quota scope whose counter disagrees with a recount of its rows.
    Quota {
        /// The scope's bytes.
        scope: Vec<u8>,
        /// What the counter says.
        counted: i64,
        /// The recount.
        actual: u64,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |b: &[u8]| crate::error::show_key(b);
        match self {
            Self::Value { key, error } => write!(f, "value at {}: {error}", show(key)),
            Self::Chunks { key, error } => write!(f, "chunked value at {}: {error}", show(key)),
            Self::OrphanChunk { owner, index } => {
                write!(
                    f,
                    "chunk {index} of {} belongs to no chunked value",
                    show(owner)
                )
            }
            Self::ExpiryNotIndexed { key, expires_at } => write!(
                f,
                "value at {} expires at {expires_at} but is not in the expiry index",
                show(key)
            ),
            Self::UnknownSystemRow { key } => write!(f, "unknown system row {}", show(key)),
            Self::Quota {
                scope,
                counted,
                actual,
            } => write!(
                f,
                "quota scope {}: counter {counted}, recount {actual}",
                show(scope)
            ),
        }
    }
}

/// What [`Store::verify`] checked and found, at one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verification {
    /// The snapshot's commit version.
    pub version: u64,
    /// Data rows checked that hold values (envelopes).
    pub values: u64,
    /// Data rows checked that hold counters (8-byte engine counters, see
    /// [`counter_row`](crate::counter_row)): read as numbers, not envelopes.
    pub counters: u64,
    /// Of them, chunked values reassembled.
    pub chunked: u64,
    /// Chunk rows seen.
    pub chunk_rows: u64,
    /// Expiry index entries seen.
    pub expiry_entries: u64,
    /// Of them, entries whose value was since overwritten or deleted
    /// (harmless: the sweeper removes them).
    pub stale_expiry_entries: u64,
    /// Quota scopes recounted; `None` when the store has no quota scope
    /// function, so no counter can be checked.
    pub quota_scopes: Option<u64>,
    /// Whether every row was checked (`false`: stopped by the caller).
    pub complete: bool,
    /// What is wrong; empty for a sound store.
    pub problems: Vec<Problem>,
}

impl Verification {
    /// Whether the check ran to the end and found nothing wrong.
    pub fn is_ok(&self) -> bool {
        self.complete && self.problems.is_empty()
    }
}

impl<E: Engine> Store<E> {
    /// Checks the store's own rows at one snapshot: every data row's
    /// envelope and checksum (a counter row, 8 bytes, is counted as one), every chunked value reassembled (no chunk
    /// missing, extra, mixed from another write, or of the wrong length),
    /// chunk rows without their value, every expiring value present in the
    /// expiry index, and, when the options have a quota scope function,
    /// every scope's counter against a recount. Reads everything; writes
    /// nothing. Rows of declared spaces are the declaring crate's to check.
    ///
    /// # Errors
    /// An engine failure or a corrupt quota counter. Damage to values is
    /// reported in [`Verification::problems`], not as an error.
    pub fn verify(&self) -> Result<Verification, StoreError> {
        self.verify_with(&mut |_| ControlFlow::Continue(()))
    }

    /// As [`Store::verify`], calling `progress` with the number of rows
    /// read so far after each row; when it breaks, the check stops and
    /// returns what it found with [`Verification::complete`] false.
    ///
    /// # Errors
    /// As [`Store::verify`].
    #[allow(clippy::too_many_lines)] // one pass per keyspace, in order
    pub fn verify_with(
        &self,
        progress: &mut dyn FnMut(u64) -> ControlFlow<()>,
    ) -> Result<Verification, StoreError> {
        let snap = self.engine.snapshot()?;
        let mut out = Verification {
            version: snap.version()?,
            ..Verification::default()
        };
        let mut rows = 0u64;
        let mut tick = |rows: &mut u64| {
            *rows += 1;
            progress(*rows)
        };
        let decode = self.options.decode_options();
        let mut usage: BTreeMap<Vec<u8>, (i64, u64)> = BTreeMap::new();
        for row in snap.range(self.data, RangeSpec::all())? {
            let (k, v) = row?;
            if let Some(scope) = self.options.scope_of(&k) {
                usage.entry(scope).or_default().1 += stored_size(k.len(), v.len());
            }
            if crate::counter_row(&v).is_some() {
                out.counters += 1;
                if tick(&mut rows).is_break() {
                    return Ok(out);
                }
                continue;
            }
            out.values += 1;
            match strata_codec::envelope::open(&k, &v, decode) {
                Err(e) => out.problems.push(Problem::Value {
                    key: k.clone(),
                    error: strata_engine::ErrorChain(&e).to_string(),
                }),
                Ok((header, _)) => {
                    if header.chunked {
                        out.chunked += 1;
                        let rows = self.chunk_rows(&snap, &k)?;
                        if let Err(e) = self.planner.assemble(&k, &v, rows) {
                            out.problems.push(Problem::Chunks {
                                key: k.clone(),
                                error: strata_engine::ErrorChain(&e).to_string(),
                            });
                        }
                    }
                    if let Some(at) = header.expires_at
                        && snap
                            .get(self.system, &layout::expiry_key(at, &k))?
                            .is_none()
                    {
                        out.problems.push(Problem::ExpiryNotIndexed {
                            key: k.clone(),
                            expires_at: at,
                        });
                    }
                }
            }
            if tick(&mut rows).is_break() {
                return Ok(out);
            }
        }
        for space in self.charged_spaces() {
            for row in snap.range(space, RangeSpec::all())? {
                let (k, v) = row?;
                if let Some(scope) = self.options.scope_of(&k) {
                    usage.entry(scope).or_default().1 += stored_size(k.len(), v.len());
                }
                if tick(&mut rows).is_break() {
                    return Ok(out);
                }
            }
        }
        // The system keyspace: chunk rows, counters, expiry entries and the
        // catalog, nothing else.
        let catalog = crate::space::catalog_range();
        let mut owner_chunks: Option<(Vec<u8>, Option<u32>)> = None;
        for row in snap.range(self.system, RangeSpec::all())? {
            let (k, v) = row?;
            if let Some(owner) = layout::chunk_owner(&k) {
                out.chunk_rows += 1;
                if let Some(scope) = self.options.scope_of(&owner) {
                    usage.entry(scope).or_default().1 += stored_size(k.len(), v.len());
                }
                let index = layout::chunk_index(&k).unwrap_or(u32::MAX);
                if owner_chunks.as_ref().is_none_or(|(o, _)| *o != owner) {
                    let count = snap
                        .get(self.data, &owner)?
                        .and_then(|meta| self.planner.read_meta(&owner, &meta).ok().flatten())
                        .map(|m| m.chunk_count);
                    owner_chunks = Some((owner.clone(), count));
                }
                let count = owner_chunks.as_ref().and_then(|(_, c)| *c);
                if count.is_none_or(|c| index >= c) {
                    out.problems.push(Problem::OrphanChunk { owner, index });
                }
            } else if let Some(scope) = layout::quota_scope(&k) {
                usage.entry(scope).or_default().0 = counter_value(Some(&v))?;
            } else if let Some((at, key)) = layout::read_expiry(&k) {
                out.expiry_entries += 1;
                let live = snap
                    .get(self.data, &key)?
                    .and_then(|v| strata_codec::envelope::Header::read(&v).ok())
                    .and_then(|h| h.expires_at)
                    == Some(at);
                if !live {
                    out.stale_expiry_entries += 1;
                }
            } else if !catalog.contains(&k) {
                out.problems.push(Problem::UnknownSystemRow { key: k });
            }
            if tick(&mut rows).is_break() {
                return Ok(out);
            }
        }
        if self.options.has_scope() {
            out.quota_scopes = Some(usage.len() as u64);
            for (scope, (counted, actual)) in usage {
                if u64::try_from(counted).ok() != Some(actual) {
                    out.problems.push(Problem::Quota {
                        scope,
                        counted,
                        actual,
                    });
                }
            }
        }
        out.complete = true;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Problem;

    /// Each problem says what is wrong and where, in the words the tool
    /// prints (the key in tuple notation).
    #[test]
    fn problems_are_told_in_words() {
        let k = b"\x02k\x00".to_vec();
        let cases = [
            (
                Problem::Value {
                    key: k.clone(),
                    error: "bad".into(),
                },
                r#"value at ("k",): bad"#,
            ),
            (
                Problem::Chunks {
                    key: k.clone(),
                    error: "short".into(),
                },
                r#"chunked value at ("k",): short"#,
            ),
            (
                Problem::OrphanChunk {
                    owner: k.clone(),
                    index: 3,
                },
                r#"chunk 3 of ("k",) belongs to no chunked value"#,
            ),
            (
                Problem::ExpiryNotIndexed {
                    key: k.clone(),
                    expires_at: 42,
                },
                r#"value at ("k",) expires at 42 but is not in the expiry index"#,
            ),
            (
                Problem::UnknownSystemRow { key: k.clone() },
                r#"unknown system row ("k",)"#,
            ),
            (
                Problem::Quota {
                    scope: k,
                    counted: -1,
                    actual: 7,
                },
                r#"quota scope ("k",): counter -1, recount 7"#,
            ),
        ];
        for (problem, text) in cases {
            assert_eq!(problem.to_string(), text, "{problem:?}");
        }
    }
}
