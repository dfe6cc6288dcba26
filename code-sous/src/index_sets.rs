//! Schedules and workers, each name also in its namespace's index set.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(crate) fn schedule_keys(
    tenant: &str,
    namespace: &str,
    name: &str,
) -> (ScheduleKey, ScheduleIndexKey) {
    (
        ScheduleKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
            schedule: name.to_owned(),
        },
        ScheduleIndexKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
        },
    )
}

pub(crate) fn worker_keys(
    tenant: &str,
    namespace: &str,
    name: &str,
) -> (WorkerKey, WorkerIndexKey) {
    (
        WorkerKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        WorkerIndexKey {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
        },
    )
}

/// Removes `name` from the set at `index` (deleting the row when empty).
pub(crate) fn remove_name<E, K>(
    tx: &mut strata_store::Tx<'_, E>,
    index: &K,
    name: &str,
) -> Result<(), StoreError>
where
    E: Engine,
    K: strata_keys::Key<Value = NameSet> + 'static,
{
    let Some(mut names) = tx.get(index)? else {
        return Ok(());
    };
    if names.0.remove(name) {
        if names.0.is_empty() {
            tx.delete(index)?;
        } else {
            tx.put(index, &names)?;
        }
    }
    Ok(())
}

impl<E: Engine> CodeSous<E> {
    // ---- schedules and workers ----

    /// Creates a schedule and adds its name to the namespace's index set,
    /// in one commit.
    ///
    /// # Errors
    /// [`CodeSousError::Exists`].
    pub fn create_schedule(
        &self,
        tenant: &str,
        namespace: &str,
        schedule: &ScheduleRecord,
    ) -> Result<(), CodeSousError> {
        let (key, index) = schedule_keys(tenant, namespace, &schedule.name);
        self.create_indexed("schedule", &key, &index, schedule, &schedule.name)
    }

    /// Deletes a schedule and removes it from the index set, in one
    /// commit. Returns whether it existed.
    ///
    /// # Errors
    /// A store failure.
    pub fn delete_schedule(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, CodeSousError> {
        let (key, index) = schedule_keys(tenant, namespace, name);
        self.delete_indexed(&key, &index, name)
    }

    /// A schedule.
    ///
    /// # Errors
    /// A store failure.
    pub fn schedule(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ScheduleRecord>, CodeSousError> {
        Ok(self.store.get(&schedule_keys(tenant, namespace, name).0)?)
    }

    /// The names in the namespace's schedule index, sorted.
    ///
    /// # Errors
    /// A store failure.
    pub fn schedules(&self, tenant: &str, namespace: &str) -> Result<Vec<String>, CodeSousError> {
        self.names(&schedule_keys(tenant, namespace, "").1)
    }

    /// Creates a worker binding and adds it to the namespace's index set,
    /// in one commit.
    ///
    /// # Errors
    /// [`CodeSousError::Exists`].
    pub fn create_worker(
        &self,
        tenant: &str,
        namespace: &str,
        worker: &WorkerRecord,
    ) -> Result<(), CodeSousError> {
        let (key, index) = worker_keys(tenant, namespace, &worker.name);
        self.create_indexed("worker", &key, &index, worker, &worker.name)
    }

    /// Deletes a worker binding and removes it from the index set, in one
    /// commit. Returns whether it existed.
    ///
    /// # Errors
    /// A store failure.
    pub fn delete_worker(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<bool, CodeSousError> {
        let (key, index) = worker_keys(tenant, namespace, name);
        self.delete_indexed(&key, &index, name)
    }

    /// A worker binding.
    ///
    /// # Errors
    /// A store failure.
    pub fn worker(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<WorkerRecord>, CodeSousError> {
        Ok(self.store.get(&worker_keys(tenant, namespace, name).0)?)
    }

    /// The names in the namespace's worker index, sorted.
    ///
    /// # Errors
    /// A store failure.
    pub fn workers(&self, tenant: &str, namespace: &str) -> Result<Vec<String>, CodeSousError> {
        self.names(&worker_keys(tenant, namespace, "").1)
    }

    /// Writes `record` at `key` unless it exists, and adds `name` to the
    /// set at `index`, in one commit.
    pub(crate) fn create_indexed<K, I>(
        &self,
        kind: &'static str,
        key: &K,
        index: &I,
        record: &K::Value,
        name: &str,
    ) -> Result<(), CodeSousError>
    where
        K: strata_keys::Key + 'static,
        K::Value: strata_codec::Value,
        I: strata_keys::Key<Value = NameSet> + 'static,
    {
        self.store.transact(|tx| {
            if !tx.put_if_absent(key, record)? {
                return Err(CodeSousError::Exists {
                    kind,
                    name: name.to_owned(),
                });
            }
            let mut names = tx.get(index)?.unwrap_or_default();
            names.0.insert(name.to_owned());
            tx.put(index, &names)?;
            Ok(())
        })
    }

    /// Deletes `key` and removes `name` from the set at `index`, in one
    /// commit; whether `key` existed.
    pub(crate) fn delete_indexed<K, I>(
        &self,
        key: &K,
        index: &I,
        name: &str,
    ) -> Result<bool, CodeSousError>
    where
        K: strata_keys::Key + 'static,
        K::Value: strata_codec::Value,
        I: strata_keys::Key<Value = NameSet> + 'static,
    {
        self.store.transact(|tx| {
            let existed = tx.get(key)?.is_some();
            tx.delete(key)?;
            remove_name(tx, index, name)?;
            Ok(existed)
        })
    }

    /// The names of the set at `index`, sorted.
    pub(crate) fn names<I>(&self, index: &I) -> Result<Vec<String>, CodeSousError>
    where
        I: strata_keys::Key<Value = NameSet> + 'static,
    {
        Ok(self
            .store
            .get(index)?
            .map(|s| s.0.into_iter().collect())
            .unwrap_or_default())
    }
}
