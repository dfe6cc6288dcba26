//! What a service on the store and the outbox uses, in one import:
//! `use strata_outbox::prelude::*;` (the store's prelude and the outbox's
//! types).

pub use strata_store::prelude::*;

pub use crate::{
    Delivery, HandlerError, Lease, Outbox, OutboxConfig, OutboxError, Position, Registered, Start,
    Topic, Worker, WorkerConfig,
};
