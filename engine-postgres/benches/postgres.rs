//! `PostgresEngine` against the raw `postgres` crate on the same server and
//! data: one-put commits (durable and buffered) against a plain upsert,
//! get against a point select, a 1,000-row scan against a range select;
//! then commits per second of concurrent durable writers on PostgreSQL,
//! redb and RocksDB on this machine. The server is a throwaway one
//! (`testing::TestServer`, fsync on) on a Unix socket. Interleaved A/B
//! first (see `bench-support/ab.rs`), then criterion.

#![allow(clippy::many_single_char_names)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group};
use postgres::{Client, Statement};
use strata_engine::{
    Commit, Durability, Engine, Keyspace, KeyspaceSpec, Profile, RangeSpec, Rng, SeededRng,
    Snapshot,
};
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};

#[path = "../../bench-support/ab.rs"]
mod ab;
use ab::ab;

const N: usize = 10_000;

/// The raw side: one connection per durability, its statements prepared.
struct Raw {
    durable: Client,
    buffered: Client,
    upsert_d: Statement,
    upsert_b: Statement,
    get: Statement,
    scan: Statement,
}

struct Setup {
    raw: std::cell::RefCell<Raw>,
    ours: PostgresEngine,
    ks: Keyspace,
    keys: Vec<Vec<u8>>,
    value: Vec<u8>,
    config: postgres::Config,
    // Last: the engine and clients close before the server stops.
    server: TestServer,
}

const UPSERT: &str = "INSERT INTO raw_kv (key, value) VALUES ($1, $2) \
                      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";

fn setup() -> Setup {
    let server = TestServer::start().expect("a PostgreSQL server for the bench");
    let config = server.database("bench").unwrap();
    let mut rng = SeededRng::new(0x5EED);
    let mut keys: Vec<Vec<u8>> = (0..N)
        .map(|_| [b"user/".as_slice(), &rng.next_u64().to_be_bytes()].concat())
        .collect();
    keys.sort();
    let value = vec![0xAB; 100];
    let ours = PostgresEngine::open(
        config.clone(),
        vec![KeyspaceSpec::new("a", Profile::General)],
        PostgresOptions {
            pool_size: 20,
            ..PostgresOptions::default()
        },
    )
    .unwrap();
    let ks = ours.keyspace("a").unwrap();
    let mut durable = config.connect(postgres::NoTls).unwrap();
    durable
        .batch_execute("CREATE TABLE raw_kv (key bytea PRIMARY KEY, value bytea NOT NULL)")
        .unwrap();
    let mut buffered = config.connect(postgres::NoTls).unwrap();
    buffered
        .batch_execute("SET synchronous_commit = off")
        .unwrap();
    // Both sides load the same rows in the same ten transactions.
    for chunk in keys.chunks(1_000) {
        let mut txn = durable.transaction().unwrap();
        let stmt = txn.prepare(UPSERT).unwrap();
        for k in chunk {
            txn.execute(&stmt, &[&k, &value]).unwrap();
        }
        txn.commit().unwrap();
    }
    for chunk in keys.chunks(1_000) {
        let mut c = Commit::new();
        for k in chunk {
            c = c.put(ks, k.clone(), value.clone());
        }
        ours.commit(c).unwrap();
    }
    durable
        .batch_execute(
            "CREATE TABLE raw_meta (id int PRIMARY KEY, value bigint NOT NULL); \
             INSERT INTO raw_meta VALUES (1, 0); \
             CREATE TABLE raw_tokens (token bytea PRIMARY KEY, version bigint, \
             at timestamptz NOT NULL DEFAULT now()); \
             CREATE INDEX ON raw_tokens (at); \
             CREATE TABLE raw_flush (pid int PRIMARY KEY, n bigint NOT NULL)",
        )
        .unwrap();
    durable.batch_execute("VACUUM ANALYZE raw_kv").unwrap();
    strata_engine::Compact::compact(&ours).unwrap();
    let raw = Raw {
        upsert_d: durable.prepare(UPSERT).unwrap(),
        upsert_b: buffered.prepare(UPSERT).unwrap(),
        get: durable
            .prepare("SELECT value FROM raw_kv WHERE key = $1")
            .unwrap(),
        scan: durable
            .prepare("SELECT key, value FROM raw_kv WHERE key >= $1 ORDER BY key LIMIT 1000")
            .unwrap(),
        durable,
        buffered,
    };
    Setup {
        raw: std::cell::RefCell::new(raw),
        ours,
        ks,
        keys,
        value,
        config,
        server,
    }
}

/// This process's threads pinned to one CPU and the server's processes
/// (the postmaster and every backend) to another, with `taskset`; undone
/// (every process back on every CPU) when dropped.
struct Placement {
    server: Vec<String>,
    all: String,
}

impl Placement {
    /// `None` when there is no second CPU or `taskset` fails.
    fn split(server: &TestServer) -> Option<Self> {
        let cpus = std::thread::available_parallelism().ok()?.get();
        if cpus < 2 {
            return None;
        }
        let pidfile = std::fs::read_to_string(server.data().join("postmaster.pid")).ok()?;
        let postmaster = pidfile.lines().next()?.trim().to_owned();
        let children = std::process::Command::new("pgrep")
            .args(["-P", &postmaster])
            .output()
            .ok()?;
        let mut pids = vec![postmaster];
        pids.extend(
            String::from_utf8_lossy(&children.stdout)
                .split_whitespace()
                .map(str::to_owned),
        );
        let placed = Self {
            server: pids,
            all: format!("0-{}", cpus - 1),
        };
        let own = std::process::id().to_string();
        (taskset("0", &own) && placed.server.iter().all(|pid| taskset("1", pid))).then_some(placed)
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        taskset(&self.all, &std::process::id().to_string());
        for pid in &self.server {
            taskset(&self.all, pid);
        }
    }
}

/// Pins every thread of process `pid` to `cpus`; whether it did.
fn taskset(cpus: &str, pid: &str) -> bool {
    std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, pid])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Lower-case hex, for a `bytea` literal.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn raw_put(s: &Setup, k: &[u8], durable: bool) {
    let raw = &mut *s.raw.borrow_mut();
    if durable {
        raw.durable.execute(&raw.upsert_d, &[&k, &s.value]).unwrap();
    } else {
        raw.buffered
            .execute(&raw.upsert_b, &[&k, &s.value])
            .unwrap();
    }
}

fn ours_put(s: &Setup, k: &[u8], durable: bool) {
    let d = if durable {
        Durability::Immediate
    } else {
        Durability::Buffered
    };
    s.ours
        .commit(
            Commit::new()
                .put(s.ks, k.to_vec(), s.value.clone())
                .durability(d),
        )
        .unwrap();
}

fn raw_get(s: &Setup, k: &[u8]) -> Option<Vec<u8>> {
    let raw = &mut *s.raw.borrow_mut();
    raw.durable
        .query_opt(&raw.get, &[&k])
        .unwrap()
        .map(|r| r.get(0))
}

fn raw_scan(s: &Setup, from: &[u8]) -> usize {
    let raw = &mut *s.raw.borrow_mut();
    let rows = raw.durable.query(&raw.scan, &[&from]).unwrap();
    let mut n = 0;
    for row in rows {
        black_box((row.get::<_, Vec<u8>>(0), row.get::<_, Vec<u8>>(1)));
        n += 1;
    }
    n
}

fn ours_scan(s: &Setup, from: &[u8]) -> usize {
    ours_scan_in(s, &s.ours.snapshot().unwrap(), from)
}

/// As [`ours_scan`], in an open snapshot `snap`.
fn ours_scan_in(s: &Setup, snap: &impl Snapshot, from: &[u8]) -> usize {
    let range = RangeSpec {
        start: std::ops::Bound::Included(from.to_vec()),
        ..RangeSpec::all()
    }
    .limit(1_000);
    let mut n = 0;
    for row in snap.range(s.ks, range).unwrap() {
        black_box(row.unwrap());
        n += 1;
    }
    n
}

/// Gets in one open snapshot of ours against the raw prepared select:
/// with the placement left to the scheduler, then fixed (the figure held
/// against the target).
fn open_snapshot_reads(s: &Setup) {
    let (mut i, mut j) = (0, 0);
    let next = |i: &mut usize| {
        *i = (*i + 7_919) % N;
        s.keys[*i].clone()
    };
    let snap = s.ours.snapshot().unwrap();
    let mut in_snapshot = |label: &str| {
        ab(
            label,
            15,
            2_000,
            1,
            || {
                black_box(raw_get(s, &next(&mut i)));
            },
            || {
                black_box(snap.get(s.ks, &next(&mut j)).unwrap());
            },
        )
    };
    // Where the scheduler puts this thread and the two server backends
    // (each side has its own) decides a round trip's cost: on two CPUs a
    // round runs at one of two speeds, by placement, not by the work.
    in_snapshot("get, in a snapshot (placement left to the scheduler)");
    // The figure held against the target: every client thread on one CPU,
    // every server process on the other, for both sides alike.
    if let Some(placed) = Placement::split(&s.server) {
        let r = in_snapshot("get, in a snapshot (client on CPU 0, server on CPU 1)");
        // A read on its own (`Store::get` reads this way): one statement.
        let (mut i, mut j) = (0, 0);
        ab(
            "get, on its own: get_latest (client on CPU 0, server on CPU 1)",
            15,
            2_000,
            1,
            || {
                black_box(raw_get(s, &next(&mut i)));
            },
            || {
                black_box(s.ours.get_latest(s.ks, &next(&mut j)).unwrap());
            },
        );
        drop(placed);
        ab::against(
            "get in an open snapshot / raw select (placement fixed)",
            r.ratio,
            1.1,
        );
    } else {
        ab::note("  (taskset or a second CPU missing: the placement could not be fixed)");
    }
    drop(snap);
}

/// A scan of 1,000 rows against the raw range select: in a snapshot of
/// its own, then in one open snapshot with the placement fixed (the figure
/// held against the target).
fn scans(s: &Setup) {
    let from = s.keys[N / 3].clone();
    assert_eq!(raw_scan(s, &from), ours_scan(s, &from));
    ab(
        "scan 1,000 rows",
        7,
        30,
        1_000,
        || {
            raw_scan(s, &from);
        },
        || {
            ours_scan(s, &from);
        },
    );
    // The same in one open snapshot, the placement fixed as for the gets.
    let snap = s.ours.snapshot().unwrap();
    if let Some(placed) = Placement::split(&s.server) {
        let r = ab(
            "scan 1,000 rows, in a snapshot (client on CPU 0, server on CPU 1)",
            15,
            30,
            1_000,
            || {
                raw_scan(s, &from);
            },
            || {
                ours_scan_in(s, &snap, &from);
            },
        );
        drop(placed);
        ab::against(
            "scan of 1,000 rows in an open snapshot / raw range select (placement fixed)",
            r.ratio,
            1.1,
        );
    }
}

fn ab_report(s: &Setup) {
    ab::section("PostgresEngine vs the postgres crate");
    println!(
        "interleaved A/B, rounds in pairs (raw first, then ours first), medians per operation, ratio over the pairs:"
    );
    let (mut i, mut j) = (0, 0);
    let next = |i: &mut usize| {
        *i = (*i + 7_919) % N;
        s.keys[*i].clone()
    };
    let durable = ab(
        "commit, durable",
        7,
        100,
        1,
        || raw_put(s, &next(&mut i), true),
        || ours_put(s, &next(&mut j), true),
    );
    ab::against("durable one-put commit / raw upsert", durable.ratio, 1.3);
    // The rows every durable commit writes (the version row, the data row,
    // a commit token row, the session's flush row), sent by hand in one
    // message as SQL text: what the engine sent before its prepared call.
    let mut n = 0u64;
    ab(
        "commit, durable, vs the same rows as one SQL text message",
        7,
        100,
        1,
        || {
            n += 1;
            let k = next(&mut i);
            let sql = format!(
                "BEGIN; UPDATE raw_meta SET value = value + 1 WHERE id = 1 RETURNING value; \
                 INSERT INTO raw_kv (key, value) VALUES ('\\x{}', '\\x{}') \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value; \
                 INSERT INTO raw_tokens (token, version) VALUES ('\\x{n:032x}', \
                 (SELECT value FROM raw_meta WHERE id = 1)); \
                 SET LOCAL synchronous_commit TO off; COMMIT; \
                 BEGIN; SET LOCAL synchronous_commit TO on; \
                 INSERT INTO raw_flush (pid, n) VALUES (pg_backend_pid(), 1) \
                 ON CONFLICT (pid) DO UPDATE SET n = raw_flush.n + 1; COMMIT",
                hex(&k),
                hex(&s.value)
            );
            s.raw.borrow_mut().durable.simple_query(&sql).unwrap();
        },
        || ours_put(s, &next(&mut j), true),
    );
    ab(
        "commit, buffered",
        7,
        1_000,
        1,
        || raw_put(s, &next(&mut i), false),
        || ours_put(s, &next(&mut j), false),
    );
    // The commits above left dead rows on both sides: vacuum them now, so
    // that autovacuum does not wake in the middle of the reads' rounds.
    for sql in ["VACUUM ANALYZE raw_kv", "CHECKPOINT"] {
        // Each alone: VACUUM may not run in a transaction block.
        s.raw.borrow_mut().durable.batch_execute(sql).unwrap();
    }
    strata_engine::Compact::compact(&s.ours).unwrap();
    ab(
        "get, own snapshot",
        7,
        2_000,
        1,
        || {
            black_box(raw_get(s, &next(&mut i)));
        },
        || {
            black_box(s.ours.snapshot().unwrap().get(s.ks, &next(&mut j)).unwrap());
        },
    );
    open_snapshot_reads(s);
    scans(s);
}

fn criterion_benches(c: &mut Criterion) {
    let s = setup();
    let mut i = 0;
    let mut next = || {
        i = (i + 7_919) % N;
        s.keys[i].clone()
    };
    let mut g = c.benchmark_group("commit_buffered");
    g.bench_function("raw", |b| b.iter(|| raw_put(&s, &next(), false)));
    g.bench_function("ours", |b| b.iter(|| ours_put(&s, &next(), false)));
    g.finish();
    let mut g = c.benchmark_group("get");
    g.bench_function("raw", |b| b.iter(|| raw_get(&s, &s.keys[N / 2])));
    g.bench_function("ours", |b| {
        b.iter(|| {
            s.ours
                .snapshot()
                .unwrap()
                .get(s.ks, &s.keys[N / 2])
                .unwrap()
        });
    });
    g.finish();
    let from = s.keys[N / 3].clone();
    let mut g = c.benchmark_group("scan_1000");
    g.bench_function("raw", |b| b.iter(|| raw_scan(&s, &from)));
    g.bench_function("ours", |b| b.iter(|| ours_scan(&s, &from)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = ab::criterion_config(20);
    targets = criterion_benches
}

/// Commits per second of 1, 4 and 16 concurrent durable writers, each
/// making one-put `Immediate` commits, on `e`.
fn writers<E: Engine + Sync>(name: &str, e: &E, ks: Keyspace) {
    let value = vec![0xCD; 100];
    let mut first = 1u64 << 40;
    let mut one = None;
    for n in [1u64, 4, 16] {
        let each = 1_024 / n;
        #[allow(clippy::disallowed_methods)] // a benchmark measures wall time
        let t = std::time::Instant::now();
        strata_engine_testkit::commit_in_parallel(e, ks, n, each, first, &value);
        #[allow(clippy::disallowed_methods)]
        let secs = t.elapsed().as_secs_f64();
        first += n * each;
        #[allow(clippy::cast_precision_loss)]
        let per_second = (n * each) as f64 / secs;
        let base = *one.get_or_insert(per_second);
        ab::note(&format!(
            "  {name}, {n} durable writers: {per_second:.0} commits/s ({:.2}x one writer)",
            per_second / base
        ));
    }
}

/// `writers` raw clients (one connection each, from `clients`) each
/// upserting `each` new keys (from `first` on, as `commit_in_parallel`
/// numbers them) in autocommit with a synchronous commit.
fn raw_writers(
    clients: &[std::sync::Mutex<Client>],
    writers: u64,
    each: u64,
    first: u64,
    value: &[u8],
) {
    std::thread::scope(|scope| {
        for (t, client) in clients
            .iter()
            .take(usize::try_from(writers).unwrap())
            .enumerate()
        {
            scope.spawn(move || {
                let mut client = client.lock().unwrap();
                let upsert = client.prepare(UPSERT).unwrap();
                let t = t as u64;
                for i in 0..each {
                    let key = (first + t * each + i).to_be_bytes();
                    client.execute(&upsert, &[&key.as_slice(), &value]).unwrap();
                }
            });
        }
    });
}

fn main() {
    ab::run(
        || {
            let s = setup();
            ab_report(&s);
            ab::section("concurrent durable writers");
            writers("PostgreSQL", &s.ours, s.ks);
            let clients: Vec<std::sync::Mutex<Client>> = (0..16)
                .map(|_| std::sync::Mutex::new(s.config.connect(postgres::NoTls).unwrap()))
                .collect();
            let value = vec![0xCD; 100];
            ab::writers_against(
                "vs raw upserting clients (target: 16 writers <= 1.25, at least 0.8x their rate)",
                1024,
                [None, None, Some(1.25)],
                |n, each, first| raw_writers(&clients, n, each, first, &value),
                |n, each, first| {
                    strata_engine_testkit::commit_in_parallel(
                        &s.ours, s.ks, n, each, first, &value,
                    );
                },
                || {
                    let g = s.ours.group_stats();
                    (g.syncs, g.commits)
                },
            );
            drop(clients);
            let dir = ab::BenchDir::new("postgres-writers");
            let specs = vec![KeyspaceSpec::new("a", Profile::General)];
            let redb = strata_engine_redb::RedbEngine::open(
                dir.join("w.redb"),
                specs.clone(),
                strata_engine_redb::RedbOptions::default(),
            )
            .unwrap();
            writers("redb", &redb, redb.keyspace("a").unwrap());
            drop(redb);
            let rocks = strata_engine_rocks::RocksEngine::open(
                dir.join("w.rocks"),
                specs,
                strata_engine_rocks::RocksOptions::default(),
            )
            .unwrap();
            writers("RocksDB", &rocks, rocks.keyspace("a").unwrap());
        },
        benches,
    );
}
