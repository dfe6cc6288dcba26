//! Verification of the whole agent-memory database: every event, TOC
//! version, latest pointer, grip and node-index row read back and checked
//! against the others, in one snapshot.

use std::collections::{BTreeMap, BTreeSet};

#[allow(clippy::wildcard_imports)]
use super::*;

/// Rows read per scan step.
const PAGE: usize = 1_024;

/// One thing [`verify`] found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryProblem {
    /// A row whose bytes do not decode (a flipped bit, a foreign value, a
    /// row moved to another key: the envelope binds the key).
    Undecodable {
        /// The keyspace.
        space: &'static str,
        /// The row's key.
        key: String,
        /// What the codec said.
        error: String,
    },
    /// A row that decodes, stored under a key its content does not give.
    MisKeyed {
        /// The keyspace.
        space: &'static str,
        /// The row's key.
        key: String,
        /// The key its content gives.
        expected: String,
    },
    /// A latest pointer that is not 4 bytes, or names a version that is
    /// not stored.
    Pointer {
        /// The pointer's key.
        key: String,
        /// What is wrong.
        problem: Inconsistency,
    },
    /// A latest pointer below the node's highest stored version.
    PointerBehind {
        /// The node.
        node_id: String,
        /// The version the pointer names.
        pointer: u32,
        /// The highest stored version.
        highest: u32,
    },
    /// Versions of a node stored with no latest pointer.
    NoPointer {
        /// The node.
        node_id: String,
    },
    /// A node-index row whose grip is not stored or names another node.
    IndexRowDangling {
        /// The index row's key.
        key: String,
    },
    /// A grip linked to a node without its node-index row.
    IndexRowMissing {
        /// The grip.
        grip_id: String,
        /// The node it names.
        node_id: String,
    },
    /// A value spilled past the limit whose row is not a pointer to it
    /// (the row gone or rewritten without it): left behind.
    SpillOrphaned {
        /// The keyspace of the row it belonged to.
        space: String,
        /// The row's key.
        key: String,
    },
}

impl std::fmt::Display for MemoryProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Undecodable { space, key, error } => {
                write!(f, "{space} {key:?}: does not decode: {error}")
            }
            Self::MisKeyed {
                space,
                key,
                expected,
            } => write!(f, "{space} {key:?}: its content belongs at {expected:?}"),
            Self::Pointer { key, problem } => write!(f, "{TOC_LATEST} {key:?}: {problem}"),
            Self::PointerBehind {
                node_id,
                pointer,
                highest,
            } => write!(
                f,
                "{TOC_LATEST} {:?}: points at version {pointer}, below the stored version {highest}",
                latest_key(node_id)
            ),
            Self::NoPointer { node_id } => {
                write!(
                    f,
                    "{TOC_NODES} {node_id:?}: versions stored without a latest pointer"
                )
            }
            Self::IndexRowDangling { key } => {
                write!(
                    f,
                    "{GRIPS} {key:?}: indexes a grip that is not stored under that node"
                )
            }
            Self::IndexRowMissing { grip_id, node_id } => write!(
                f,
                "{GRIPS} {grip_id:?}: linked to {node_id:?} without its index row"
            ),
            Self::SpillOrphaned { space, key } => write!(
                f,
                "{space} {key:?}: a value spilled past the limit, but the row does not point at it"
            ),
        }
    }
}

/// What [`verify`] read and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryCheck {
    /// Event rows read.
    pub events: u64,
    /// TOC node versions read.
    pub toc_versions: u64,
    /// Latest pointers read (one per node).
    pub nodes: u64,
    /// Grips read.
    pub grips: u64,
    /// Node-index rows read.
    pub index_rows: u64,
    /// Values spilled past the limit read (their manifests).
    pub spilled: u64,
    /// Everything wrong, in the order found (events, TOC, pointers, grips).
    pub problems: Vec<MemoryProblem>,
}

impl MemoryCheck {
    /// Nothing wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Each row of `space`, in key order, in `tx`'s snapshot, a page at a
/// time.
fn each_row<E: Engine>(
    tx: &mut Tx<'_, E>,
    space: &Space,
    mut f: impl FnMut(&mut Tx<'_, E>, Vec<u8>, Vec<u8>) -> Result<(), MemoryError>,
) -> Result<(), MemoryError> {
    let mut range = KeyRange::prefix(&[]);
    loop {
        let page = tx.snapshot_scan_in(space, &range, Some(PAGE), false)?;
        let next = page.rows.last().map(|(k, _)| {
            let mut next = k.clone();
            next.push(0);
            next
        });
        for (k, v) in page.rows {
            f(tx, k, v)?;
        }
        match next {
            Some(next) if page.more => range.start = next,
            _ => return Ok(()),
        }
    }
}

/// The value of row `v` at `k` (its spill followed), or the problem that
/// it does not decode; a store failure is an error.
fn read<E: Engine, T: Value>(
    tx: &mut Tx<'_, E>,
    space: &'static str,
    k: &[u8],
    v: Vec<u8>,
) -> Result<Result<T, MemoryProblem>, MemoryError> {
    match AgentMemory::<E>::read_row(tx, space, k, v, false) {
        Ok(value) => Ok(Ok(value)),
        Err(MemoryError::Store(e)) => Err(MemoryError::Store(e)),
        Err(e) => Ok(Err(undecodable(space, k, &e))),
    }
}

fn text(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn undecodable(space: &'static str, key: &[u8], e: &MemoryError) -> MemoryProblem {
    MemoryProblem::Undecodable {
        space,
        key: text(key),
        error: match e {
            MemoryError::Corrupt { source, .. } => source.to_string(),
            other => other.to_string(),
        },
    }
}

/// Reads every row of the agent-memory keyspaces of `store` (opened with
/// [`AgentMemory::declare`]d options) in one snapshot and checks each:
/// events, TOC versions and grips decode (checksum and key binding) and sit
/// at the key their content gives; every latest pointer is 4 bytes and
/// names the node's highest stored version, and every node with versions
/// has one; every grip linked to a node has its index row, and every index
/// row names a stored grip linked to that node. Reads only; the outbox and
/// the search index have their own checks (`strata verify` runs all).
///
/// # Errors
/// A store error (a space not declared, a read that failed); damage is
/// reported in [`MemoryCheck::problems`], not as an error.
pub fn verify<E: Engine>(store: &Store<E>) -> Result<MemoryCheck, MemoryError> {
    let mut check = MemoryCheck::default();
    let mut tx = store.begin();
    check_events(&mut tx, &store.space(EVENTS)?, &mut check)?;
    let (toc, latest) = (store.space(TOC_NODES)?, store.space(TOC_LATEST)?);
    check_toc(&mut tx, &toc, &latest, &mut check)?;
    check_grips(&mut tx, &store.space(GRIPS)?, &mut check)?;
    check_spills(store, &mut tx, &mut check)?;
    Ok(check)
}

/// Every spilled value is pointed at by its row (read through the store,
/// which checks each value's chunks as it assembles it), a page at a time.
fn check_spills<E: Engine>(
    store: &Store<E>,
    tx: &mut Tx<'_, E>,
    check: &mut MemoryCheck,
) -> Result<(), MemoryError> {
    let range = KeyRange::tuple_prefix(&strata_keys::tuple::pack(&("am", "spill")));
    let mut scan = strata_store::Scan::range_of(range).limit(16);
    loop {
        let page = tx.scan::<spill::SpillKey>(&scan)?;
        for (spill, _) in &page.items {
            check.spilled += 1;
            let space = [EVENTS, TOC_NODES, GRIPS]
                .into_iter()
                .find(|s| *s == spill.space)
                .map(|s| store.space(s))
                .transpose()?;
            let pointed = match space {
                Some(space) => {
                    tx.snapshot_get_in(&space, spill.key.as_bytes())?.as_deref()
                        == Some(spill::POINTER)
                }
                None => false,
            };
            if !pointed {
                check.problems.push(MemoryProblem::SpillOrphaned {
                    space: spill.space.clone(),
                    key: spill.key.clone(),
                });
            }
        }
        match page.cursor {
            Some(cursor) if page.more => scan = scan.after(cursor),
            _ => return Ok(()),
        }
    }
}

fn check_events<E: Engine>(
    tx: &mut Tx<'_, E>,
    events: &Space,
    check: &mut MemoryCheck,
) -> Result<(), MemoryError> {
    each_row(tx, events, |tx, k, v| {
        check.events += 1;
        match read::<E, Event>(tx, EVENTS, &k, v)? {
            Err(p) => check.problems.push(p),
            Ok(event) => {
                let expected =
                    event_key(&event.event_id).unwrap_or_else(|e| format!("no key ({e})"));
                if expected.as_bytes() != k {
                    check.problems.push(MemoryProblem::MisKeyed {
                        space: EVENTS,
                        key: text(&k),
                        expected,
                    });
                }
            }
        }
        Ok(())
    })
}

fn check_toc<E: Engine>(
    tx: &mut Tx<'_, E>,
    toc: &Space,
    latest: &Space,
    check: &mut MemoryCheck,
) -> Result<(), MemoryError> {
    // Node id → highest version stored.
    let mut highest: BTreeMap<String, u32> = BTreeMap::new();
    each_row(tx, toc, |tx, k, v| {
        check.toc_versions += 1;
        match read::<E, TocNode>(tx, TOC_NODES, &k, v)? {
            Err(p) => check.problems.push(p),
            Ok(node) => {
                let expected = toc_key(&node.node_id, node.version);
                if expected.as_bytes() == k {
                    let h = highest.entry(node.node_id).or_default();
                    *h = (*h).max(node.version);
                } else {
                    check.problems.push(MemoryProblem::MisKeyed {
                        space: TOC_NODES,
                        key: text(&k),
                        expected,
                    });
                }
            }
        }
        Ok(())
    })?;
    let mut with_pointer: BTreeSet<String> = BTreeSet::new();
    each_row(tx, latest, |_, k, v| {
        check.nodes += 1;
        let key = text(&k);
        let node_id = key.strip_prefix("latest:").unwrap_or(&key).to_owned();
        with_pointer.insert(node_id.clone());
        let Ok(bytes) = <[u8; 4]>::try_from(v.as_slice()) else {
            check.problems.push(MemoryProblem::Pointer {
                key,
                problem: Inconsistency::PointerNotFourBytes,
            });
            return Ok(());
        };
        let version = u32::from_be_bytes(bytes);
        match highest.get(&node_id) {
            Some(&h) if version < h => check.problems.push(MemoryProblem::PointerBehind {
                node_id: node_id.clone(),
                pointer: version,
                highest: h,
            }),
            // Versions below the highest may have been pruned; the one
            // named must be the highest stored.
            Some(&h) if version == h => {}
            _ => check.problems.push(MemoryProblem::Pointer {
                key,
                problem: Inconsistency::VersionNotStored(version),
            }),
        }
        Ok(())
    })?;
    for node_id in highest.keys().filter(|n| !with_pointer.contains(*n)) {
        check.problems.push(MemoryProblem::NoPointer {
            node_id: node_id.clone(),
        });
    }
    Ok(())
}

fn check_grips<E: Engine>(
    tx: &mut Tx<'_, E>,
    grips: &Space,
    check: &mut MemoryCheck,
) -> Result<(), MemoryError> {
    // Grips (keys `grip:...`) and index rows (`node:{node}:{grip}`) share
    // the space: grip id → the node it names, and the index rows.
    let mut linked: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut index_rows: Vec<String> = Vec::new();
    each_row(tx, grips, |tx, k, v| {
        if k.starts_with(b"node:") {
            check.index_rows += 1;
            index_rows.push(text(&k));
            return Ok(());
        }
        check.grips += 1;
        match read::<E, Grip>(tx, GRIPS, &k, v)? {
            Err(p) => check.problems.push(p),
            Ok(grip) if grip.grip_id.as_bytes() != k => {
                check.problems.push(MemoryProblem::MisKeyed {
                    space: GRIPS,
                    key: text(&k),
                    expected: grip.grip_id,
                });
            }
            Ok(grip) => {
                linked.insert(grip.grip_id, grip.toc_node_id);
            }
        }
        Ok(())
    })?;
    let mut indexed: BTreeSet<&str> = BTreeSet::new();
    for key in &index_rows {
        // Any `:grip:` may split it (a suffix may hold one): the row is
        // sound when one split names a stored grip linked to that node.
        let rest = key.strip_prefix("node:").unwrap_or_default();
        let found = rest
            .match_indices(":grip:")
            .map(|(i, _)| (&rest[..i], &rest[i + 1..]))
            .find(|(node, grip)| {
                linked
                    .get(*grip)
                    .is_some_and(|n| n.as_deref() == Some(*node))
            });
        match found {
            Some((_, grip)) => {
                indexed.insert(grip);
            }
            None => check
                .problems
                .push(MemoryProblem::IndexRowDangling { key: key.clone() }),
        }
    }
    for (grip_id, node) in &linked {
        if let Some(node_id) = node
            && !indexed.contains(grip_id.as_str())
        {
            check.problems.push(MemoryProblem::IndexRowMissing {
                grip_id: grip_id.clone(),
                node_id: node_id.clone(),
            });
        }
    }
    Ok(())
}
