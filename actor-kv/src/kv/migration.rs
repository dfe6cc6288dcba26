//! Layouts: each actor's recorded physical layout, and migrations between them, resumable.

#[allow(clippy::wildcard_imports)]
use super::*;

/// An actor's layout state: its layout, and, while a migration runs, the
/// target and the last key already rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LayoutState {
    pub(crate) current: PhysicalLayout,
    pub(crate) migration: Option<(PhysicalLayout, Option<Vec<u8>>)>,
    pub(crate) recorded: bool,
}

impl LayoutState {
    pub(crate) fn layout_of(&self, key: &[u8]) -> PhysicalLayout {
        match &self.migration {
            Some((target, Some(through))) if key <= through.as_slice() => *target,
            _ => self.current,
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.current.code()];
        if let Some((target, through)) = &self.migration {
            out.push(target.code());
            match through {
                None => out.push(0),
                Some(k) => {
                    out.push(1);
                    out.extend_from_slice(k);
                }
            }
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let current = PhysicalLayout::from_code(*bytes.first()?)?;
        let migration = match bytes.get(1..)? {
            [] => None,
            [target, 0] => Some((PhysicalLayout::from_code(*target)?, None)),
            [target, 1, through @ ..] => {
                Some((PhysicalLayout::from_code(*target)?, Some(through.to_vec())))
            }
            _ => return None,
        };
        Some(Self {
            current,
            migration,
            recorded: true,
        })
    }
}

pub(crate) fn state_key(actor: ActorId) -> Vec<u8> {
    tuple::pack(&("layout", &actor.bytes()[..]))
}

impl<E: Engine> ActorKv<E> {
    /// The actor's layout: the layout its entries are in, or, during a
    /// migration, the target with the last key rewritten.
    ///
    /// # Errors
    /// [`ActorKvError::Corrupt`] for an unreadable state row; a store error.
    pub fn layout(
        &self,
        actor: ActorId,
    ) -> Result<(PhysicalLayout, Option<PhysicalLayout>), ActorKvError> {
        let mut tx = self.store.begin();
        let state = self.state(&mut tx, actor, false)?;
        Ok((state.current, state.migration.map(|(t, _)| t)))
    }

    /// One step of moving the actor's entries to layout `to`: up to
    /// `max_entries` entries (at least one) rewritten in one commit, with
    /// the position recorded in the same commit, so a migration stopped by
    /// a crash resumes where it was. The actor stays readable and writable
    /// throughout: each key is read in the layout its position says.
    ///
    /// # Errors
    /// [`ActorKvError::MigrationInProgress`] when a migration to the other
    /// layout is under way (finish it first: migrate to its target);
    /// [`ActorKvError::Corrupt`] for an entry that does not read in its
    /// layout (nothing of the step is written); a store error.
    pub fn migrate(
        &self,
        actor: ActorId,
        to: PhysicalLayout,
        max_entries: usize,
    ) -> Result<MigrationStep, ActorKvError> {
        let max = max_entries.max(1);
        self.store.transact(|tx| {
            let mut state = self.state(tx, actor, true)?;
            let through = match &state.migration {
                None if state.current == to => {
                    return Ok(MigrationStep {
                        migrated: 0,
                        done: true,
                    });
                }
                None => None,
                Some((target, _)) if *target != to => {
                    return Err(ActorKvError::MigrationInProgress { target: *target });
                }
                Some((_, through)) => through.clone(),
            };
            let sub = physical::subspace(actor);
            let mut range = KeyRange::prefix(&sub);
            if let Some(k) = &through {
                range.start = past_entry(&entry_base(actor, k));
            }
            let scanned = self.scan_entries(tx, actor, &state, range, false, Some(max), true)?;
            for (entry, rows) in &scanned.entries {
                self.write_entry(
                    tx,
                    to,
                    actor,
                    &entry.key,
                    &entry.metadata,
                    &entry.value,
                    rows,
                )?;
            }
            let migrated = scanned.entries.len();
            let done = !scanned.more;
            state = if done {
                LayoutState {
                    current: to,
                    migration: None,
                    recorded: true,
                }
            } else {
                let last = scanned.entries.last().map(|(e, _)| e.key.clone());
                LayoutState {
                    migration: Some((to, last.or(through))),
                    ..state
                }
            };
            tx.put_in(&self.meta, state_key(actor), state.encode())?;
            Ok(MigrationStep { migrated, done })
        })
    }

    /// Runs [`ActorKv::migrate`] steps of `max_entries` until the actor is
    /// wholly in layout `to`, returning the entries rewritten.
    ///
    /// # Errors
    /// As [`ActorKv::migrate`]; what the failed step would have done is not
    /// written, and calling again resumes.
    pub fn migrate_all(
        &self,
        actor: ActorId,
        to: PhysicalLayout,
        max_entries: usize,
    ) -> Result<usize, ActorKvError> {
        let mut total = 0;
        loop {
            let step = self.migrate(actor, to, max_entries)?;
            total += step.migrated;
            if step.done {
                return Ok(total);
            }
        }
    }

    // --- internals ---

    pub(crate) fn state(
        &self,
        tx: &mut Tx<'_, E>,
        actor: ActorId,
        pin: bool,
    ) -> Result<LayoutState, ActorKvError> {
        let key = state_key(actor);
        let row = if pin {
            tx.get_in(&self.meta, &key)?
        } else {
            tx.snapshot_get_in(&self.meta, &key)?
        };
        match row {
            None => Ok(LayoutState {
                current: self.config.layout,
                migration: None,
                recorded: false,
            }),
            Some(bytes) => {
                LayoutState::decode(&bytes).ok_or_else(|| corrupt(&key, DataProblem::LayoutState))
            }
        }
    }
}
