//! The engine's server-side functions and procedure dropped by hand while
//! an engine is open: the next commit that needs one installs it again and
//! is applied once, under the next version, its first attempt claimed as
//! never applied.

use strata_engine::{
    Commit, CommitError, Durability, Engine, Keyspace, KeyspaceSpec, Mutation, Predicate, Profile,
    Snapshot,
};
use strata_engine_postgres::{PostgresEngine, PostgresOptions};

fn one(c: &mut postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// The text in the first column of the one row `sql` answers.
fn text(c: &mut postgres::Client, sql: &str) -> String {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Commit tokens claimed as never applied.
const CLAIMED: &str = "SELECT count(*) FROM strata_commits WHERE NOT applied";

fn one_keyspace() -> Vec<KeyspaceSpec> {
    vec![KeyspaceSpec::new("kv", Profile::General)]
}

/// An engine with keyspace `kv` on a new database (and the server, kept
/// running while held), an administrator's connection to it, and the
/// version of a first put (through the procedure: its call is prepared on
/// the connection it took, which goes back to the pool).
fn with_a_first_put(
    label: &str,
) -> (
    std::sync::Arc<strata_engine_postgres::testing::TestServer>,
    postgres::Config,
    PostgresEngine,
    Keyspace,
    postgres::Client,
    u64,
) {
    let (server, config, e) = super::open(label, one_keyspace(), PostgresOptions::default());
    let kv = e.keyspace("kv").unwrap();
    let admin = config.connect(postgres::NoTls).unwrap();
    let first = e
        .commit(Commit::new().put(kv, b"a".to_vec(), b"1".to_vec()))
        .unwrap()
        .version;
    (server, config, e, kv, admin, first)
}

#[test]
fn dropped_functions_are_installed_again_and_the_commit_applied_once() {
    let (_server, _, e, kv, mut admin, first) = with_a_first_put("dropped_functions");

    // The procedure dropped: the next put finds it missing.
    let procedure = text(
        &mut admin,
        "SELECT proname::text FROM pg_proc WHERE proname LIKE 'strata_ks_%_write_v2'",
    );
    admin
        .batch_execute(&format!("DROP PROCEDURE {procedure}"))
        .unwrap();
    let claimed = one(&mut admin, CLAIMED);
    let put = e
        .commit(
            Commit::new()
                .put(kv, b"b".to_vec(), b"2".to_vec())
                .delete(kv, b"a".to_vec())
                .durability(Durability::Immediate),
        )
        .unwrap_or_else(|err| panic!("a commit after the procedure was dropped: {err}"));
    assert_eq!(put.version, first + 1, "applied once, at the next version");
    assert!(put.durable);
    assert_eq!(
        one(&mut admin, CLAIMED),
        claimed + 1,
        "the first try's token claimed"
    );
    let installed = format!("SELECT count(*) FROM pg_proc WHERE proname = '{procedure}'");
    assert_eq!(one(&mut admin, &installed), 1, "the procedure is back");
    let snap = e.snapshot().unwrap();
    assert_eq!(snap.get(kv, b"a").unwrap(), None);
    assert_eq!(snap.get(kv, b"b").unwrap(), Some(b"2".to_vec()));
    drop(snap);

    // The predicate and counter functions dropped: a commit with a
    // predicate and a counter finds them missing.
    admin
        .batch_execute("DROP FUNCTION strata_check_v1; DROP FUNCTION strata_add_v1")
        .unwrap();
    let claimed = one(&mut admin, CLAIMED);
    let checked = e
        .commit(
            Commit::new()
                .require(Predicate::Absent {
                    ks: kv,
                    key: b"a".to_vec(),
                })
                .mutate(Mutation::Add {
                    ks: kv,
                    key: b"n".to_vec(),
                    delta: 5,
                }),
        )
        .unwrap_or_else(|err| panic!("a commit after the functions were dropped: {err}"));
    assert_eq!(checked.version, put.version + 1);
    assert_eq!(one(&mut admin, CLAIMED), claimed + 1);
    // Installed again, they work: a predicate that fails is a conflict
    // again, and the counter adds.
    let failing = e.commit(Commit::new().require(Predicate::Absent {
        ks: kv,
        key: b"b".to_vec(),
    }));
    assert!(
        matches!(failing, Err(CommitError::Conflict { index: 0, .. })),
        "{failing:?}"
    );
    e.commit(Commit::new().mutate(Mutation::Add {
        ks: kv,
        key: b"n".to_vec(),
        delta: -7,
    }))
    .unwrap();
    assert_eq!(
        e.snapshot().unwrap().get(kv, b"n").unwrap(),
        Some((-2i64).to_le_bytes().to_vec())
    );
}

/// Not every failure is a missing function: a keyspace table dropped by
/// hand fails the commit as not applied, with one token claimed (it is not
/// sent again), and reopening creates the table again.
#[test]
fn a_dropped_table_fails_the_commit_once_and_reopening_creates_it() {
    let (_server, config, e, kv, mut admin, first) = with_a_first_put("dropped_table");
    let table = text(
        &mut admin,
        "SELECT relname::text FROM pg_class WHERE relname LIKE 'strata_ks_%' AND relkind = 'r'",
    );
    admin.batch_execute(&format!("DROP TABLE {table}")).unwrap();
    let claimed = one(&mut admin, CLAIMED);
    let err = e
        .commit(
            Commit::new()
                .put(kv, b"b".to_vec(), b"2".to_vec())
                .durability(Durability::Immediate),
        )
        .unwrap_err();
    assert!(matches!(err, CommitError::Backend(_)), "{err}");
    assert_eq!(
        one(&mut admin, CLAIMED),
        claimed + 1,
        "claimed once: a failure that is not a missing function is not sent again"
    );
    drop(e);
    let e = PostgresEngine::open(config, one_keyspace(), PostgresOptions::default()).unwrap();
    let kv = e.keyspace("kv").unwrap();
    let next = e
        .commit(Commit::new().put(kv, b"c".to_vec(), b"3".to_vec()))
        .unwrap();
    assert_eq!(next.version, first + 1, "the failed commit took no version");
    assert_eq!(
        e.snapshot().unwrap().get(kv, b"c").unwrap(),
        Some(b"3".to_vec())
    );
    assert_eq!(e.snapshot().unwrap().get(kv, b"b").unwrap(), None);
}

/// A commit in one message that fails on the server with a statement
/// error (its keyspace's table dropped by hand) leaves its session rolled
/// back: the next commits on the engine, through the same pool, succeed.
#[test]
fn a_statement_error_leaves_the_session_usable() {
    let (_server, config, e) = super::open(
        "statement_error",
        vec![
            KeyspaceSpec::new("gone", Profile::General),
            KeyspaceSpec::new("kept", Profile::General),
        ],
        PostgresOptions::default(),
    );
    let (gone, kept) = (e.keyspace("gone").unwrap(), e.keyspace("kept").unwrap());
    let mut admin = config.connect(postgres::NoTls).unwrap();
    let id: i32 = admin
        .query_one(
            "SELECT id FROM strata_keyspaces WHERE name = 'gone'::bytea",
            &[],
        )
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!("DROP TABLE strata_ks_{id}"))
        .unwrap();
    // With a predicate: the commit goes as one message of SQL, inside a
    // transaction the server aborts at the missing table.
    let absent = |ks| Predicate::Absent {
        ks,
        key: b"never".to_vec(),
    };
    let err = e
        .commit(
            Commit::new()
                .require(absent(gone))
                .put(gone, b"a".to_vec(), b"1".to_vec()),
        )
        .unwrap_err();
    assert!(matches!(err, CommitError::Backend(_)), "{err}");
    for i in 0..4u8 {
        e.commit(
            Commit::new()
                .require(absent(kept))
                .put(kept, vec![i], vec![i]),
        )
        .unwrap_or_else(|err| panic!("commit {i} after the statement error: {err}"));
    }
    assert_eq!(
        e.snapshot().unwrap().get(kept, &[3]).unwrap(),
        Some(vec![3])
    );
}
