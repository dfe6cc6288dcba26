//! code-sous on an embedded redb database: a function, a draft, two
//! published versions with an alias, a schedule, a worker, an activation
//! with its log and a refused second ending.
//!
//! `cargo run -p strata-examples --example code_sous [DIR]` (a temporary
//! directory when none is given; it is removed at the end).

use std::collections::BTreeMap;

use serde_json::json;
use strata_engine::SystemRng;
use strata_engine_redb::{RedbEngine, RedbOptions};
use strata_schemas::code_sous::{
    ActivationRecord, ActivationStatus, Bundle, CodeSous, CodeSousConfig, CodeSousError,
    FunctionId, FunctionRef, NewFunction, ScheduleRecord, VersionRef, WorkerRecord,
};
use strata_store::Store;

#[allow(clippy::too_many_lines)] // a walk through, in order
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let given = std::env::args().nth(1);
    let dir = given.clone().map_or_else(
        || std::env::temp_dir().join(format!("strata-code-sous-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir)?;
    let options = CodeSous::<RedbEngine>::store_options();
    let engine = RedbEngine::open(
        dir.join("code-sous.redb"),
        options.keyspace_specs(),
        RedbOptions::default(),
    )?;
    let cs = CodeSous::open(
        Store::open(engine, options)?,
        CodeSousConfig::default(),
        Box::new(SystemRng::new()),
    )?;

    let f = FunctionId::new("t_abc123", "payments", "reconcile");
    if cs.function(&f)?.is_none() {
        cs.create_function(&f, &NewFunction::js())?;
    }
    let draft = cs.create_draft(
        &f,
        &Bundle::new("export default () => 'v1';", r#"{"name":"reconcile"}"#),
    )?;
    println!(
        "draft {} (sha256 {}), expires at {}",
        draft.draft_id, draft.sha256, draft.expires_at_ms
    );
    let v1 = cs.publish_draft(
        &f,
        &draft.draft_id,
        &json!({"memory_mb": 128}),
        Some("prod"),
    )?;
    let v2 = cs.publish(
        &f,
        &Bundle::new("export default () => 'v2';", r#"{"name":"reconcile"}"#),
        &json!({}),
        None,
    )?;
    println!("published v{} (prod) and v{}", v1.version, v2.version);
    cs.set_alias(&f, "prod", v2.version)?;
    println!(
        "prod -> v{}",
        cs.alias(&f, "prod")?.map_or(0, |a| a.version)
    );
    match cs.set_alias(&f, "prod", 99) {
        Err(CodeSousError::NoSuchVersion { version, .. }) => {
            println!("alias to v{version} refused: no such version");
        }
        other => println!("unexpected: {other:?}"),
    }

    let target = FunctionRef {
        function: "reconcile".into(),
        alias: "prod".into(),
    };
    let schedule = ScheduleRecord {
        name: "reconcile_30s".into(),
        every_seconds: 30,
        overlap_policy: "skip".into(),
        target: target.clone(),
        payload: json!({"source": "schedule"}),
        enabled: true,
        created_at_ms: 1_730_000_000_000,
    };
    if cs
        .schedule("t_abc123", "payments", &schedule.name)?
        .is_none()
    {
        cs.create_schedule("t_abc123", "payments", &schedule)?;
    }
    let worker = WorkerRecord {
        name: "payments-activities".into(),
        domain: "payments".into(),
        tasklist: "payments-activities".into(),
        worker_id: "cs-payments-01".into(),
        activity_map: BTreeMap::from([("SousInvokeActivity".to_owned(), target)]),
        pollers: BTreeMap::from([("activity".to_owned(), 8)]),
        limits: BTreeMap::from([("max_inflight_tasks".to_owned(), 256)]),
        enabled: true,
    };
    if cs.worker("t_abc123", "payments", &worker.name)?.is_none() {
        cs.create_worker("t_abc123", "payments", &worker)?;
    }
    println!(
        "schedules {:?}, workers {:?}",
        cs.schedules("t_abc123", "payments")?,
        cs.workers("t_abc123", "payments")?
    );

    let id = format!("act-{}", cs.last_version(&f)?);
    if cs.activation("t_abc123", &id)?.is_none() {
        cs.start_activation(&ActivationRecord {
            activation_id: id.clone(),
            tenant: "t_abc123".into(),
            namespace: "payments".into(),
            function: "reconcile".into(),
            target: VersionRef {
                alias: Some("prod".into()),
                version: v2.version,
            },
            trigger: json!({"type": "http"}),
            status: ActivationStatus::Running,
            start_ms: 1_730_000_000_000,
            end_ms: None,
            duration_ms: None,
            result_truncated: false,
            error: None,
        })?;
        cs.append_log("t_abc123", &id, "starting\n")?;
        cs.append_log("t_abc123", &id, "done\n")?;
        let done = cs.finish_activation(
            "t_abc123",
            &id,
            ActivationStatus::Success,
            1_730_000_000_012,
            None,
            false,
        )?;
        println!(
            "activation {id}: {:?} in {:?} ms",
            done.status, done.duration_ms
        );
    }
    match cs.finish_activation(
        "t_abc123",
        &id,
        ActivationStatus::Error,
        1_730_000_000_020,
        Some("late"),
        false,
    ) {
        Err(CodeSousError::AlreadyTerminal { status, .. }) => {
            println!("second ending refused: already {status:?}");
        }
        other => println!("unexpected: {other:?}"),
    }
    print!("log:\n{}", cs.read_log("t_abc123", &id)?);
    drop(cs);
    if given.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
