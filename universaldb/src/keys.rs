//! The key-space constants of UniversalDB's prelude: `usize` tuple
//! elements, every one of the public source's key list
//! (`engine/packages/universaldb/src/utils/keys.rs` in rivet-dev/rivet, at
//! commit `0a07455d95180af07f14a9d61be7735115ed415a`: 105 constants, 60
//! and 100 to 105 unused), so keys built from them have that system's
//! bytes, and their names both ways ([`name_of`], [`by_name`]) for tools
//! that print keys.
//!
//! ```
//! use strata_universaldb::keys::{self, ACTOR_KV, PEGBOARD};
//! assert_eq!((PEGBOARD, ACTOR_KV), (3, 72));
//! assert_eq!(keys::name_of(72), Some("actor_kv"));
//! assert_eq!(keys::by_name("pegboard"), Some(PEGBOARD));
//! assert_eq!(keys::name_of(60), None);
//! ```

/// Declares each constant and the table of names.
macro_rules! key_list {
    ($($konst:ident = $value:literal, $text:literal;)*) => {
        $(
            #[doc = concat!("`", $text, "` (", stringify!($value), ").")]
            pub const $konst: usize = $value;
        )*

        /// Every constant with its name, in ascending order.
        pub const KEY_NAMES: &[(usize, &str)] = &[$(($value, $text)),*];
    };
}

key_list! {
    RIVET = 0, "rivet";
    GASOLINE = 1, "gasoline";
    KV = 2, "kv";
    PEGBOARD = 3, "pegboard";
    DATA = 4, "data";
    WORKFLOW = 5, "workflow";
    SIGNAL = 6, "signal";
    BODY = 7, "body";
    LEASE = 8, "lease";
    TAG = 9, "tag";
    INPUT = 10, "input";
    OUTPUT = 11, "output";
    WAKE_SIGNAL = 12, "wake_signal";
    WAKE_DEADLINE = 13, "wake_deadline";
    ACK_TS = 14, "ack_ts";
    CREATE_TS = 15, "create_ts";
    SILENCE_TS = 16, "silence_ts";
    PENDING = 17, "pending";
    RAY_ID = 18, "ray_id";
    NAME = 19, "name";
    WORKFLOW_ID = 20, "workflow_id";
    WAKE = 21, "wake";
    SUB_WORKFLOW = 22, "sub_workflow";
    WORKER = 23, "worker";
    LAST_PING_TS = 24, "last_ping_ts";
    METRICS_LOCK = 25, "metrics_lock";
    ERROR = 26, "error";
    WAKE_SUB_WORKFLOW_ID = 27, "wake_sub_workflow_id";
    BY_NAME_AND_TAG = 28, "by_name_and_tag";
    HAS_WAKE_CONDITION = 29, "has_wake_condition";
    WORKER_ID = 30, "worker_id";
    DBS = 31, "dbs";
    ACTOR = 32, "actor";
    BY_NAME = 33, "by_name";
    DEFAULT = 34, "default";
    REMAINING_MEMORY = 35, "remaining_memory";
    REMAINING_CPU = 36, "remaining_cpu";
    TOTAL_MEMORY = 37, "total_memory";
    TOTAL_CPU = 38, "total_cpu";
    NAMESPACE = 39, "namespace";
    HIBERNATING_REQUEST = 40, "hibernating_request";
    DISPLAY_NAME = 41, "display_name";
    CONNECTABLE = 42, "connectable";
    SLEEP_TS = 43, "sleep_ts";
    METADATA = 44, "metadata";
    COMPRESSED_DATA = 45, "compressed_data";
    RUNNER = 46, "runner";
    RUNNER_ALLOC_IDX = 47, "runner_alloc_idx";
    REMAINING_SLOTS = 48, "remaining_slots";
    TOTAL_SLOTS = 49, "total_slots";
    STATE = 50, "state";
    RUNNER_ID = 51, "runner_id";
    NAMESPACE_ID = 52, "namespace_id";
    PENDING_ACTOR_BY_RUNNER_NAME_SELECTOR = 53, "pending_actor_by_runner_name_selector";
    CONTAINER = 54, "container";
    HISTORY = 55, "history";
    ACTIVE = 56, "active";
    FORGOTTEN = 57, "forgotten";
    EVENT_TYPE = 58, "event_type";
    VERSION = 59, "version";
    SIGNAL_ID = 61, "signal_id";
    SUB_WORKFLOW_ID = 62, "sub_workflow_id";
    ITERATION = 63, "iteration";
    DEADLINE_TS = 64, "deadline_ts";
    SLEEP_STATE = 65, "sleep_state";
    INNER_EVENT_TYPE = 66, "inner_event_type";
    ALL = 67, "all";
    BY_NAME_AND_KEY = 68, "by_name_and_key";
    DESTROY_TS = 69, "destroy_ts";
    EPOXY = 70, "epoxy";
    PEER_STATE = 71, "peer_state";
    ACTOR_KV = 72, "actor_kv";
    STOP_TS = 73, "stop_ts";
    DRAIN_TS = 74, "drain_ts";
    LAST_RTT = 75, "last_rtt";
    CONNECTED_TS = 76, "connected_ts";
    EXPIRED_TS = 77, "expired_ts";
    KEY = 78, "key";
    VALUE = 79, "value";
    COMMITTED_VALUE = 80, "committed_value";
    OPTIMISTIC_CACHE = 81, "optimistic_cache";
    OPTIMISTIC_CACHED_VALUE = 82, "optimistic_cached_value";
    RESERVATION = 83, "reservation";
    INSTANCE = 84, "instance";
    LOG = 85, "log";
    ENTRY = 86, "entry";
    KEY_INSTANCE = 87, "key_instance";
    INSTANCE_NUMBER = 88, "instance_number";
    REPLICA = 89, "replica";
    CONFIG = 90, "config";
    METRIC = 91, "metric";
    CURRENT_BALLOT = 92, "current_ballot";
    INSTANCE_BALLOT = 93, "instance_ballot";
    SERVERLESS = 94, "serverless";
    DESIRED_SLOTS = 95, "desired_slots";
    BY_VARIANT = 96, "by_variant";
    ACL = 97, "acl";
    TOKEN = 98, "token";
    SECRET = 99, "secret";
    PROTOCOL_VERSION = 106, "protocol_version";
    LAST_COMMAND_IDX = 107, "last_command_idx";
    COMMAND = 108, "command";
    RUNNER_NAME_SELECTOR = 109, "runner_name_selector";
    BACKFILL = 110, "backfill";
    COMPLETE = 111, "complete";
}

/// The name of the constant `value` (`"actor_kv"` for 72), if there is one.
pub fn name_of(value: usize) -> Option<&'static str> {
    KEY_NAMES
        .binary_search_by_key(&value, |&(v, _)| v)
        .ok()
        .map(|i| KEY_NAMES[i].1)
}

/// The constant named `name` (`72` for `"actor_kv"`), if there is one.
pub fn by_name(name: &str) -> Option<usize> {
    KEY_NAMES.iter().find(|&&(_, n)| n == name).map(|&(v, _)| v)
}
