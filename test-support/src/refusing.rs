//! An engine that refuses its next commits (or snapshots) on request: a
//! concurrent writer's conflicts, or a backend that fails (a full disk, a
//! lost server), for tests of what the layers above do with them.

use std::sync::Mutex;

use strata_engine::{
    BackendError, Commit, CommitError, CommitInfo, Engine, EngineError, Keyspaces, Predicate,
    ReadError,
};

/// How [`Refusing`] refuses a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `CommitError::Conflict` (a predicate of the first keyspace), as if
    /// a concurrent writer had changed what the commit read.
    Conflict,
    /// `CommitError::Backend`: the engine failed and wrote nothing.
    Backend,
    /// `CommitError::Backend` whose source is a
    /// [`ReopenRequired`](strata_engine::ReopenRequired): an engine that
    /// takes no more writes until it is reopened (after a full disk).
    Reopen,
}

/// `inner`, with its next commits refused as [`Refusing::refuse_next`]
/// says and snapshots as [`Refusing::refuse_reads_after`] says; everything
/// else passes through.
#[derive(Debug)]
pub struct Refusing<E> {
    inner: E,
    next: Mutex<(u32, Refusal)>,
    /// Snapshots to let through, then snapshots to refuse.
    reads: Mutex<(u32, u32)>,
}

impl<E> Refusing<E> {
    /// `inner`, refusing nothing yet.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            next: Mutex::new((0, Refusal::Conflict)),
            reads: Mutex::new((0, 0)),
        }
    }

    /// Refuses the next `n` commits as `how` (`n = 0`: none; `u32::MAX`:
    /// every one, in practice).
    pub fn refuse_next(&self, n: u32, how: Refusal) {
        *self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (n, how);
    }

    /// Lets the next `pass` snapshots through, then refuses `n` with
    /// `ReadError::Backend` (a server that cannot be reached), then lets
    /// every one through again.
    pub fn refuse_reads_after(&self, pass: u32, n: u32) {
        *self
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (pass, n);
    }

    /// How many of the snapshots asked to be refused are still to come.
    pub fn read_refusals_left(&self) -> u32 {
        self.reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
    }

    /// How many of the commits asked to be refused are still to come.
    pub fn refusals_left(&self) -> u32 {
        self.next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
    }

    /// The wrapped engine.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: Engine> Engine for Refusing<E> {
    type Snapshot<'e>
        = E::Snapshot<'e>
    where
        Self: 'e;

    fn keyspaces(&self) -> &Keyspaces {
        self.inner.keyspaces()
    }

    fn snapshot(&self) -> Result<Self::Snapshot<'_>, ReadError> {
        let refused = {
            let mut reads = self
                .reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if reads.0 > 0 {
                reads.0 -= 1;
                false
            } else if reads.1 > 0 {
                reads.1 -= 1;
                true
            } else {
                false
            }
        };
        if refused {
            return Err(ReadError::Backend(BackendError::from(
                "read refused by the test (Refusing::refuse_reads_after)",
            )));
        }
        self.inner.snapshot()
    }

    fn commit(&self, commit: Commit) -> Result<CommitInfo, CommitError> {
        let refusal = {
            let mut next = self
                .next
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (next.0 > 0).then(|| {
                next.0 -= 1;
                next.1
            })
        };
        match refusal {
            None => self.inner.commit(commit),
            Some(Refusal::Conflict) => {
                let ks = self.inner.keyspaces().at(0).expect("a keyspace");
                Err(CommitError::Conflict {
                    index: 0,
                    predicate: Predicate::Absent {
                        ks,
                        key: Vec::new(),
                    },
                })
            }
            Some(Refusal::Backend) => Err(CommitError::Backend(BackendError::from(
                "refused by the test (Refusing::refuse_next)",
            ))),
            Some(Refusal::Reopen) => Err(CommitError::Backend(BackendError::from(
                strata_engine::ReopenRequired::new(
                    "Refusing",
                    "refused by the test (Refusing::refuse_next)",
                ),
            ))),
        }
    }

    fn sync(&self) -> Result<u64, EngineError> {
        self.inner.sync()
    }

    fn durable_version(&self) -> u64 {
        self.inner.durable_version()
    }

    fn last_version(&self) -> u64 {
        self.inner.last_version()
    }
}
