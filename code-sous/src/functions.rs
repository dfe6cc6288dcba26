//! Functions, their versions and aliases, and drafts published into versions.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The record of a function that exists and is not deleted.
pub(crate) fn live_function(
    meta: Option<FunctionMeta>,
    f: &FunctionId,
) -> Result<FunctionMeta, CodeSousError> {
    match meta {
        Some(meta) if meta.deleted_at_ms.is_none() => Ok(meta),
        _ => Err(CodeSousError::NoSuchFunction(f.clone())),
    }
}

/// The bundle of a draft's base64 files, checked against its SHA-256.
pub(crate) fn draft_to_bundle(draft: &DraftRecord) -> Result<Bundle, CodeSousError> {
    let files = draft
        .files
        .iter()
        .map(|(name, b64)| {
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(|bytes| (name.clone(), bytes))
                .map_err(|source| BundleError::Base64 {
                    file: name.clone(),
                    source,
                })
        })
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    let bundle = Bundle::from_files(files)?;
    if bundle.sha256()? != draft.sha256 {
        return Err(BundleError::Sha256Mismatch {
            draft_id: draft.draft_id.clone(),
        }
        .into());
    }
    Ok(bundle)
}

impl<E: Engine> CodeSous<E> {
    // ---- functions ----

    /// Creates the function record.
    ///
    /// # Errors
    /// [`CodeSousError::FunctionExists`] (a deleted function's record
    /// stays, so its name is taken).
    pub fn create_function(
        &self,
        f: &FunctionId,
        how: &NewFunction,
    ) -> Result<FunctionMeta, CodeSousError> {
        self.store.transact(|tx| {
            let meta = FunctionMeta {
                tenant: f.tenant.clone(),
                namespace: f.namespace.clone(),
                name: f.name.clone(),
                runtime: how.runtime.clone(),
                entry: how.entry.clone(),
                handler: how.handler.clone(),
                created_at_ms: tx.now_ms(),
                deleted_at_ms: None,
            };
            if !tx.put_if_absent(&f.key(), &meta)? {
                return Err(CodeSousError::FunctionExists(f.clone()));
            }
            Ok(meta)
        })
    }

    /// The function record, deleted or not.
    ///
    /// # Errors
    /// A store failure.
    pub fn function(&self, f: &FunctionId) -> Result<Option<FunctionMeta>, CodeSousError> {
        Ok(self.store.get(&f.key())?)
    }

    /// Marks the function deleted (`deleted_at_ms`); its versions stay.
    /// Publishing to it is then refused.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchFunction`], also when already deleted.
    pub fn delete_function(&self, f: &FunctionId) -> Result<FunctionMeta, CodeSousError> {
        self.store.transact(|tx| {
            let mut meta = live_function(tx.get(&f.key())?, f)?;
            meta.deleted_at_ms = Some(tx.now_ms());
            tx.put(&f.key(), &meta)?;
            Ok(meta)
        })
    }

    // ---- drafts ----

    /// Stores `bundle` as a draft of `f`, expiring after the draft time to
    /// live; returns it with its new id (`drf_` and a ULID).
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchFunction`].
    pub fn create_draft(
        &self,
        f: &FunctionId,
        bundle: &Bundle,
    ) -> Result<DraftRecord, CodeSousError> {
        let sha256 = bundle.sha256()?;
        let files: BTreeMap<String, String> = bundle
            .files()
            .iter()
            .map(|(name, bytes)| {
                (
                    name.clone(),
                    base64::engine::general_purpose::STANDARD.encode(bytes),
                )
            })
            .collect();
        self.store.transact(|tx| {
            live_function(tx.get(&f.key())?, f)?;
            let now = tx.now_ms();
            let draft_id = self.draft_id(now)?;
            let draft = DraftRecord {
                draft_id: draft_id.clone(),
                sha256: sha256.clone(),
                files: files.clone(),
                created_at_ms: now,
                expires_at_ms: now.saturating_add(self.config.draft_ttl_ms),
            };
            if strata_engine::fault_point!("draft-never-expires") {
                tx.put(&f.draft(&draft_id), &draft)?;
            } else {
                tx.put_expiring_at(&f.draft(&draft_id), &draft, draft.expires_at_ms)?;
            }
            Ok(draft)
        })
    }

    /// A draft that has not expired.
    ///
    /// # Errors
    /// A store failure.
    pub fn draft(
        &self,
        f: &FunctionId,
        draft_id: &str,
    ) -> Result<Option<DraftRecord>, CodeSousError> {
        Ok(self.store.get(&f.draft(draft_id))?)
    }

    /// The bundle of a draft.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchDraft`]; [`CodeSousError::BadBundle`] when
    /// its files do not decode or do not match its SHA-256.
    pub fn draft_bundle(&self, f: &FunctionId, draft_id: &str) -> Result<Bundle, CodeSousError> {
        let draft = self
            .draft(f, draft_id)?
            .ok_or_else(|| CodeSousError::NoSuchDraft {
                draft_id: draft_id.to_owned(),
            })?;
        draft_to_bundle(&draft)
    }

    pub(crate) fn draft_id(&self, now: u64) -> Result<String, CodeSousError> {
        let mut ids = self
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (generator, rng) = &mut *ids;
        let ulid = generator
            .generate(now, || {
                (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
            })
            .map_err(CodeSousError::DraftId)?;
        let text = ulid.to_text();
        Ok(format!("drf_{}", String::from_utf8_lossy(&text)))
    }

    // ---- versions ----

    /// Publishes `bundle` as the function's next version, in one commit:
    /// increments `version_seq`, writes the version's metadata and bundle,
    /// and moves `alias` to it when given.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchFunction`] (also for a deleted function).
    pub fn publish(
        &self,
        f: &FunctionId,
        bundle: &Bundle,
        config: &serde_json::Value,
        alias: Option<&str>,
    ) -> Result<Published, CodeSousError> {
        let tar = bundle.to_tar()?;
        let sha256 = sha256_hex(&tar);
        self.store.transact(|tx| {
            live_function(tx.get(&f.key())?, f)?;
            let next = tx.increment(&f.seq(), 1)?;
            let version = u64::try_from(next).unwrap_or(0);
            let now = tx.now_ms();
            let meta = VersionMeta {
                version,
                sha256: sha256.clone(),
                config: config.clone(),
                published_at_ms: now,
            };
            tx.put(&f.version(version), &meta)?;
            tx.put(&f.bundle(version), &tar)?;
            if let Some(alias) = alias {
                tx.put(
                    &f.alias(alias),
                    &AliasRecord {
                        alias: alias.to_owned(),
                        version,
                        updated_at_ms: now,
                    },
                )?;
            }
            Ok(Published { version, meta })
        })
    }

    /// Publishes a draft's bundle (see [`CodeSous::publish`]); the draft
    /// stays until it expires.
    ///
    /// # Errors
    /// As [`CodeSous::publish`] and [`CodeSous::draft_bundle`].
    pub fn publish_draft(
        &self,
        f: &FunctionId,
        draft_id: &str,
        config: &serde_json::Value,
        alias: Option<&str>,
    ) -> Result<Published, CodeSousError> {
        let bundle = self.draft_bundle(f, draft_id)?;
        self.publish(f, &bundle, config, alias)
    }

    /// A version's metadata.
    ///
    /// # Errors
    /// A store failure.
    pub fn version(
        &self,
        f: &FunctionId,
        version: u64,
    ) -> Result<Option<VersionMeta>, CodeSousError> {
        Ok(self.store.get(&f.version(version))?)
    }

    /// A version's bundle, read from its tar archive.
    ///
    /// # Errors
    /// [`CodeSousError::BadBundle`] if the stored archive does not read.
    pub fn bundle(&self, f: &FunctionId, version: u64) -> Result<Option<Bundle>, CodeSousError> {
        self.store
            .get(&f.bundle(version))?
            .map(|tar| Bundle::from_tar(&tar))
            .transpose()
    }

    /// The last version published (0 before the first).
    ///
    /// # Errors
    /// A store failure.
    pub fn last_version(&self, f: &FunctionId) -> Result<u64, CodeSousError> {
        Ok(u64::try_from(self.store.counter(&f.seq())?).unwrap_or(0))
    }

    // ---- aliases ----

    /// Points `alias` at `version`, which must exist: one commit.
    ///
    /// # Errors
    /// [`CodeSousError::NoSuchVersion`].
    pub fn set_alias(
        &self,
        f: &FunctionId,
        alias: &str,
        version: u64,
    ) -> Result<AliasRecord, CodeSousError> {
        let unchecked = strata_engine::fault_point!("alias-unchecked");
        self.store.transact(|tx| {
            if !unchecked && tx.get(&f.version(version))?.is_none() {
                return Err(CodeSousError::NoSuchVersion {
                    function: f.to_string(),
                    version,
                });
            }
            let record = AliasRecord {
                alias: alias.to_owned(),
                version,
                updated_at_ms: tx.now_ms(),
            };
            tx.put(&f.alias(alias), &record)?;
            Ok(record)
        })
    }

    /// An alias.
    ///
    /// # Errors
    /// A store failure.
    pub fn alias(&self, f: &FunctionId, alias: &str) -> Result<Option<AliasRecord>, CodeSousError> {
        Ok(self.store.get(&f.alias(alias))?)
    }
}
