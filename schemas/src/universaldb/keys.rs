//! The key-space constants of UniversalDB's prelude: `usize` tuple
//! elements, with the values of the public source's key list
//! (`engine/packages/universaldb/src/utils/keys.rs` in rivet-dev/rivet),
//! so keys built from them have that system's bytes. Those the document's
//! examples use, and their neighbours.

/// `rivet`: the root of the engine's keys.
pub const RIVET: usize = 0;
/// `pegboard`: the actor scheduler's keys.
pub const PEGBOARD: usize = 3;
/// `data`: an entity's data fields.
pub const DATA: usize = 4;
/// `workflow`.
pub const WORKFLOW: usize = 5;
/// `create_ts`: a creation time field.
pub const CREATE_TS: usize = 15;
/// `name`: a name field.
pub const NAME: usize = 19;
/// `workflow_id`: an entity's workflow id field.
pub const WORKFLOW_ID: usize = 20;
/// `actor`: actor keys.
pub const ACTOR: usize = 32;
/// `by_name`: indexes by name.
pub const BY_NAME: usize = 33;
/// `namespace`: namespace keys.
pub const NAMESPACE: usize = 39;
/// `metadata`.
pub const METADATA: usize = 44;
/// `actor_kv`: actors' key-value storage.
pub const ACTOR_KV: usize = 72;
