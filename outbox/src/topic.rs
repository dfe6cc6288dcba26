//! Topics: typed names of entry streams.

use std::fmt;
use std::marker::PhantomData;

use strata_codec::Value;

#[allow(clippy::wildcard_imports)]
use crate::*;

/// A topic of entries of type `T`.
pub struct Topic<T> {
    pub(crate) name: String,
    /// A new entry's key before its commit's versionstamp, and where the
    /// stamp goes in it: the same for every entry of the topic, packed
    /// once (packed per entry it was a tenth of a push).
    pub(crate) new_entry_key: (Vec<u8>, usize),
    pub(crate) _entry: PhantomData<fn() -> T>,
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            new_entry_key: self.new_entry_key.clone(),
            _entry: PhantomData,
        }
    }
}

// The packed key template is the name's, packed: the name says it all.
#[allow(clippy::missing_fields_in_debug)]
impl<T> fmt::Debug for Topic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic").field("name", &self.name).finish()
    }
}

impl<T: Value> Topic<T> {
    /// The topic named `name` (1 to 64 bytes).
    ///
    /// # Errors
    /// [`OutboxError::BadName`].
    pub fn new(name: &str) -> Result<Self, OutboxError> {
        check_name("topic", name)?;
        Ok(Self {
            name: name.to_owned(),
            new_entry_key: layout::new_entry_key(name),
            _entry: PhantomData,
        })
    }

    /// The name it was created with, the prefix of its entries' keys.
    pub fn name(&self) -> &str {
        &self.name
    }
}

pub(crate) fn check_name(what: &'static str, name: &str) -> Result<(), OutboxError> {
    if name.is_empty() || name.len() > 64 {
        return Err(OutboxError::BadName {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}
