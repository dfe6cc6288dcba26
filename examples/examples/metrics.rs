//! The toolkit's metrics, exported: a Prometheus recorder is installed
//! (the libraries only emit through the `metrics` facade), an agent-memory
//! store on redb takes grips, a value over the limit is refused, the
//! search index catches up and its consumer's lag is measured; then the
//! exposition Prometheus would scrape is printed.
//!
//! `cargo run -p strata-examples --example metrics`

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusBuilder;
use strata_engine::{Engine, SeededRng, SystemClock};
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_outbox::{Outbox, OutboxConfig};
use strata_schemas::agent_memory::{AgentMemory, EventRef, Grip};
use strata_search::{Indexer, IndexerConfig, Location};
use strata_store::{Store, StoreOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The application picks the exporter; here, Prometheus's text format
    // rendered on demand (a service would serve it over HTTP).
    let prometheus = PrometheusBuilder::new().install_recorder()?;

    let dir = std::env::temp_dir().join(format!("strata-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let limits = strata_codec::Limits {
        max_value_bytes: 2_048,
        ..strata_codec::Limits::FOUNDATIONDB
    };
    let options = AgentMemory::<RedbEngine>::declare(StoreOptions::new(limits));
    let engine = RedbEngine::open(
        dir.join("memory.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )?;
    let clock = Arc::new(SystemClock);
    let store = Store::open(engine, options)?;
    let outbox = Outbox::new(
        &store,
        OutboxConfig::default(),
        clock.clone(),
        Box::new(SeededRng::new(1)),
    )?;
    let memory = AgentMemory::open(&store, &outbox)?;
    let grip = |i: u64, excerpt: String| {
        let at = EventRef {
            timestamp_ms: 1_706_540_400_000 + i,
            event_id: format!("01HNA{i:021}"),
        };
        Grip {
            salience: strata_schemas::agent_memory::Salience::default(),
            grip_id: format!("grip:{:013}:g{i}", 1_706_540_400_000 + i),
            excerpt,
            start: at.clone(),
            end: at,
            source: "metrics example".into(),
            toc_node_id: None,
        }
    };
    for i in 0..20 {
        memory.put_grip(&grip(i, format!("grip number {i} about tokens")))?;
    }
    // Refused before anything is written: counted by limit.
    let refused = memory.put_grip(&grip(99, "x".repeat(4_096)));
    println!(
        "an oversized grip: {}",
        refused.map_or_else(|e| e.to_string(), |()| "stored".into())
    );

    store.engine().sync()?;
    let topic = strata_schemas::agent_memory::search_spec()?.topic();
    let mut indexer = Indexer::open(
        &outbox,
        strata_schemas::agent_memory::search_spec()?,
        &Location::Dir(dir.join("index")),
        IndexerConfig::new("metrics-example"),
        clock,
    )?;
    indexer.catch_up()?;
    outbox.lag(topic.name(), "agent_memory")?;
    indexer.close()?;

    println!("{}", prometheus.render());
    drop(memory);
    drop(outbox);
    drop(store);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
