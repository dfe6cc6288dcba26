//! The path index: whole paths resolved in one read, verified against a walk of the dentries.

use strata_engine::Engine;

use super::keys::{MountKey, PathKey};

#[allow(clippy::wildcard_imports)]
use super::*;

impl<E: Engine> Nokv<E> {
    // --- the path index ---

    /// Indexes `path` (`/a/b/c`, from the root) in `workspace`, with the
    /// dentry generation of every component.
    ///
    /// # Errors
    /// [`NokvError::NotFound`] when the path does not resolve; a store
    /// error.
    pub fn index_path(
        &self,
        mount: MountId,
        workspace: &str,
        path: &str,
    ) -> Result<InodeId, NokvError> {
        let (inode, components) = self.walk(mount, path)?;
        let m = self
            .store
            .get(&MountKey { mount })?
            .ok_or(NokvError::NoMount(mount))?;
        let (parent, generation) = components.last().map_or((ROOT, 0), |(p, _, g)| (*p, *g));
        self.store.put(
            &PathKey {
                mount,
                workspace: workspace.to_owned(),
                path: path.to_owned(),
            },
            &PathEntry {
                inode,
                parent,
                dentry_generation: generation,
                root_epoch: m.generation,
                components,
            },
        )?;
        Ok(inode)
    }

    /// Resolves `path` through the index, verified against the dentries of
    /// every component; a stale or missing entry falls back to the walk
    /// and is repaired.
    ///
    /// # Errors
    /// [`NokvError::NotFound`] when the path does not resolve; a store
    /// error.
    pub fn lookup_path(
        &self,
        mount: MountId,
        workspace: &str,
        path: &str,
    ) -> Result<PathHit, NokvError> {
        let key = PathKey {
            mount,
            workspace: workspace.to_owned(),
            path: path.to_owned(),
        };
        if let Some(entry) = self.store.get(&key)? {
            if self.verified(mount, &entry)? {
                return Ok(PathHit::Index(entry.inode));
            }
            let inode = self.index_path(mount, workspace, path)?;
            return Ok(PathHit::Walk(inode, true));
        }
        let (inode, _) = self.walk(mount, path)?;
        Ok(PathHit::Walk(inode, false))
    }

    pub(crate) fn verified(&self, mount: MountId, entry: &PathEntry) -> Result<bool, NokvError> {
        let view = self.store.read()?;
        let Some(m) = view.get(&MountKey { mount })? else {
            return Ok(false);
        };
        if m.generation != entry.root_epoch {
            return Ok(false);
        }
        let mut expect = ROOT;
        for (parent, name, generation) in &entry.components {
            if *parent != expect {
                return Ok(false);
            }
            match view.get(&dentry_key(mount, *parent, name))? {
                Some(d) if d.generation == *generation => expect = d.child,
                _ => return Ok(false),
            }
        }
        Ok(expect == entry.inode)
    }

    /// Resolves `path` from the root through the dentries.
    pub(crate) fn walk(
        &self,
        mount: MountId,
        path: &str,
    ) -> Result<(InodeId, Vec<Component>), NokvError> {
        let view = self.store.read()?;
        let mut at = ROOT;
        let mut components = Vec::new();
        for name in path.split('/').filter(|s| !s.is_empty()) {
            let d = view
                .get(&dentry_key(mount, at, name))?
                .ok_or_else(|| NokvError::NotFound(Missing::Path(path.to_owned())))?;
            components.push((at, name.to_owned(), d.generation));
            at = d.child;
        }
        Ok((at, components))
    }
}
