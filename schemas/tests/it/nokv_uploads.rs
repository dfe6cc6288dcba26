//! NoKV uploads: a body's objects are stored before the `write` command
//! that names them, so every way that command can fail to come (refused,
//! a writer that dies, a writer slower than the grace) must leave no
//! objects behind, and nothing a file names may ever be collected; and a
//! body read while it is replaced and its old objects collected.

use std::sync::{Arc, Mutex, PoisonError};

use strata_engine::{Engine, Snapshot as _};
use strata_keys::KeyRange;
use strata_keys::tuple;
use strata_schemas::nokv::keys::UploadKey;
use strata_schemas::nokv::{
    BlobError, BlobStore, BodyProblem, MemBlobs, Nokv, NokvConfig, NokvError, ROOT, Upload,
};

use crate::nokv::{M, created, specs};
use crate::store_on;

const GRACE: u64 = 10_000;

type Hook = Box<dyn FnOnce() + Send>;

/// An in-memory object store that runs a hook once, at a chosen put,
/// before storing it.
#[derive(Default)]
struct HookBlobs {
    inner: MemBlobs,
    puts: Mutex<u64>,
    hook: Mutex<Option<(u64, Hook)>>,
}

impl HookBlobs {
    /// Runs `hook` at the `at`-th put from now (0: the next).
    fn at_put(&self, at: u64, hook: impl FnOnce() + Send + 'static) {
        let puts = *self.puts.lock().unwrap_or_else(PoisonError::into_inner);
        *self.hook.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((puts + at, Box::new(hook)));
    }

    fn keys(&self) -> Vec<String> {
        self.inner.keys()
    }
}

impl BlobStore for HookBlobs {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), BlobError> {
        let n = {
            let mut puts = self.puts.lock().unwrap_or_else(PoisonError::into_inner);
            *puts += 1;
            *puts - 1
        };
        let due = {
            let mut hook = self.hook.lock().unwrap_or_else(PoisonError::into_inner);
            match hook.take() {
                Some((at, h)) if at == n => Some(h),
                other => {
                    *hook = other;
                    None
                }
            }
        };
        if let Some(h) = due {
            h();
        }
        self.inner.put(key, bytes)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        self.inner.get(key)
    }

    fn delete(&self, key: &str) -> Result<(), BlobError> {
        self.inner.delete(key)
    }
}

struct Fs<E: Engine> {
    nokv: Arc<Nokv<E>>,
    blobs: Arc<HookBlobs>,
    clock: Arc<strata_engine::ManualClock>,
}

/// NoKV with chunks of 4 bytes and a grace of [`GRACE`], mount `M`, and
/// file `/f` holding `old!` (one object).
fn open<E: Engine>(engine: E) -> (Fs<E>, u64) {
    let (store, clock) = store_on(engine, Nokv::<E>::store_options());
    let blobs = Arc::new(HookBlobs::default());
    let config = NokvConfig {
        chunk_bytes: 4,
        upload_grace_ms: GRACE,
        ..NokvConfig::default()
    };
    let nokv = Arc::new(Nokv::open(store, blobs.clone(), config).unwrap());
    nokv.create_mount(M, "").unwrap();
    let f = created(&nokv.create(M, "c", ROOT, "f", 0o600).unwrap());
    nokv.write(M, "w0", f, b"old!").unwrap();
    (Fs { nokv, blobs, clock }, f)
}

/// Upload records of the mount: rows under the tuple prefix `("nokv",
/// "upload", M)` of the data keyspace (packed here by the tuple layer).
fn upload_rows<E: Engine>(fs: &Nokv<E>) -> usize {
    let engine = fs.store().engine();
    let data = engine.keyspace("data").unwrap();
    let range = KeyRange::tuple_prefix(&tuple::pack(&("nokv", "upload", M)));
    let snap = engine.snapshot().unwrap();
    snap.range(
        data,
        strata_engine::RangeSpec::half_open(range.start, range.end.unwrap()),
    )
    .unwrap()
    .count()
}

/// The objects whose names say request `request` wrote them.
fn objects_of(blobs: &HookBlobs, request: &str) -> Vec<String> {
    blobs
        .keys()
        .into_iter()
        .filter(|k| k.split('/').nth(2) == Some(request))
        .collect()
}

/// A write the command would refuse is refused before anything is
/// stored; a command refused after the upload (the file unlinked while
/// its objects were being stored) deletes them before returning.
fn a_refused_write_leaves_no_objects<E: Engine + Send + Sync + 'static>(engine: E) {
    let (fs, f) = open(engine);
    let before = fs.blobs.keys();
    assert!(matches!(
        fs.nokv.write(M, "w1", 999, b"abcdefgh"),
        Err(NokvError::NotFound(_))
    ));
    let dir = created(&fs.nokv.mkdir(M, "d", ROOT, "d", 0o755).unwrap());
    assert!(matches!(
        fs.nokv.write(M, "w2", dir, b"abcdefgh"),
        Err(NokvError::IsADirectory(d)) if d == dir
    ));
    assert_eq!(fs.blobs.keys(), before);
    assert_eq!(upload_rows(&fs.nokv), 0);
    // Unlinked while the second of three objects is stored.
    let nokv = fs.nokv.clone();
    fs.blobs.at_put(1, move || {
        nokv.unlink(M, "u", ROOT, "f").unwrap();
    });
    assert!(matches!(
        fs.nokv.write(M, "w3", f, b"abcdefghij"),
        Err(NokvError::NotFound(_))
    ));
    assert!(
        objects_of(&fs.blobs, "w3").is_empty(),
        "{:?}",
        fs.blobs.keys()
    );
    assert_eq!(upload_rows(&fs.nokv), 0);
}

/// A writer that dies between its upload and its command (a panic in the
/// object store, here) leaves its record and objects; `collect_uploads`
/// leaves them while the upload is younger than the grace and deletes
/// them once it is not, and the request can be sent again.
fn an_upload_left_by_a_dead_writer_is_collected_after_its_grace<E: Engine>(engine: E) {
    let (fs, f) = open(engine);
    let clean = fs.nokv.check(M).unwrap();
    assert_eq!((clean.uploads, clean.oldest_upload_ms), (0, None));
    fs.blobs.at_put(2, || panic!("the writer dies"));
    let began = strata_engine::Clock::now_ms(&*fs.clock);
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fs.nokv.write(M, "w1", f, b"abcdefghijkl")
    }));
    assert!(died.is_err());
    // The check counts the record left, with when it began; not a problem.
    fs.clock.advance(5);
    let check = fs.nokv.check(M).unwrap();
    assert_eq!((check.uploads, check.oldest_upload_ms), (1, Some(began)));
    assert!(check.is_ok(), "{:?}", check.problems);
    assert_eq!(
        objects_of(&fs.blobs, "w1").len(),
        2,
        "two stored before it died"
    );
    assert_eq!(upload_rows(&fs.nokv), 1);
    fs.clock.advance(GRACE - 1 - 5);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 0);
    assert_eq!(
        objects_of(&fs.blobs, "w1").len(),
        2,
        "not yet past the grace"
    );
    fs.clock.advance(1);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 1);
    assert!(objects_of(&fs.blobs, "w1").is_empty());
    assert_eq!(upload_rows(&fs.nokv), 0);
    let collected = fs.nokv.check(M).unwrap();
    assert_eq!((collected.uploads, collected.oldest_upload_ms), (0, None));
    assert_eq!(fs.nokv.read(M, f).unwrap(), b"old!");
    // Sent again, it stores objects of its own and applies.
    fs.nokv.write(M, "w1", f, b"abcdefghijkl").unwrap();
    assert_eq!(fs.nokv.read(M, f).unwrap(), b"abcdefghijkl");
    assert_eq!(objects_of(&fs.blobs, "w1").len(), 3);
}

/// What a file names is never collected: a write that applied deletes
/// its record in its command's commit, so `collect_uploads` long after
/// finds nothing, and the body reads back.
fn a_written_body_is_never_collected<E: Engine>(engine: E) {
    let (fs, f) = open(engine);
    fs.nokv.write(M, "w1", f, b"abcdefgh").unwrap();
    assert_eq!(upload_rows(&fs.nokv), 0);
    fs.clock.advance(GRACE * 10);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 0);
    assert_eq!(fs.nokv.read(M, f).unwrap(), b"abcdefgh");
    assert_eq!(objects_of(&fs.blobs, "w1").len(), 2);
}

/// A writer slower than the grace: its upload is collected while its
/// last object is being stored. Its command is refused
/// (`UploadAbandoned`, nothing applied), and the object it stored after
/// the collection is deleted too: the file keeps its body, no object of
/// the write is left.
fn a_write_outliving_its_grace_is_refused_and_leaves_nothing<E: Engine + Send + Sync + 'static>(
    engine: E,
) {
    let (fs, f) = open(engine);
    let (nokv, clock) = (fs.nokv.clone(), fs.clock.clone());
    fs.blobs.at_put(2, move || {
        clock.advance(GRACE);
        assert_eq!(nokv.collect_uploads(M, 10).unwrap(), 1);
    });
    match fs.nokv.write(M, "w1", f, b"abcdefghijkl") {
        Err(NokvError::UploadAbandoned { request_id }) => assert_eq!(request_id, "w1"),
        other => panic!("a write whose upload was collected: {other:?}"),
    }
    assert!(
        objects_of(&fs.blobs, "w1").is_empty(),
        "{:?}",
        fs.blobs.keys()
    );
    assert_eq!(upload_rows(&fs.nokv), 0);
    assert_eq!(fs.nokv.read(M, f).unwrap(), b"old!");
    assert_eq!(fs.blobs.keys().len(), 1, "the old body's object only");
}

/// `collect_uploads` takes at most `max` uploads a call, oldest first.
fn collect_uploads_takes_at_most_max<E: Engine>(engine: E) {
    let (fs, f) = open(engine);
    for request in ["w1", "w2", "w3"] {
        fs.blobs.at_put(0, || panic!("the writer dies"));
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fs.nokv.write(M, request, f, b"abcd")
        }));
        assert!(died.is_err());
        fs.clock.advance(1);
    }
    // Each died before its one object was stored: three records.
    assert_eq!(upload_rows(&fs.nokv), 3);
    // Recorded at T, T + 1 and T + 2; now T + GRACE: only the oldest is
    // past the grace.
    fs.clock.advance(GRACE - 3);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 1);
    fs.clock.advance(GRACE);
    assert_eq!(fs.nokv.collect_uploads(M, 1).unwrap(), 1);
    assert_eq!(upload_rows(&fs.nokv), 1);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 1);
    assert_eq!(upload_rows(&fs.nokv), 0);
}

/// NoKV on a `MemEngine` whose commits are buffered (a crash keeps only
/// what was synced), mount `M` and file `/f` made durable; and a way to
/// crash it and open it again over the same objects.
struct Buffered {
    nokv: Nokv<strata_engine::MemEngine>,
    blobs: Arc<HookBlobs>,
    f: u64,
}

impl Buffered {
    fn options() -> strata_store::StoreOptions {
        Nokv::<strata_engine::MemEngine>::store_options()
            .durability(strata_engine::Durability::Buffered)
    }

    fn config() -> NokvConfig {
        NokvConfig {
            chunk_bytes: 4,
            upload_grace_ms: GRACE,
            ..NokvConfig::default()
        }
    }

    fn new() -> Self {
        Self::with_clock().0
    }

    fn with_clock() -> (Self, Arc<strata_engine::ManualClock>) {
        let engine = strata_engine::MemEngine::open(specs()).unwrap();
        let (store, clock) = store_on(engine, Self::options());
        let blobs = Arc::new(HookBlobs::default());
        let nokv = Nokv::open(store, blobs.clone(), Self::config()).unwrap();
        nokv.create_mount(M, "").unwrap();
        let f = created(&nokv.create(M, "c", ROOT, "f", 0o600).unwrap());
        nokv.store().engine().sync().unwrap();
        (Self { nokv, blobs, f }, clock)
    }

    /// A crash keeping none of the commits not yet synced, then NoKV
    /// opened again; its clock.
    fn crash(self) -> (Self, Arc<strata_engine::ManualClock>) {
        let image = self.nokv.into_store().into_engine().crash_keeping(0);
        let engine = strata_engine::MemEngine::from_image(image).unwrap();
        let (store, clock) = store_on(engine, Self::options());
        let nokv = Nokv::open(store, self.blobs.clone(), Self::config()).unwrap();
        let blobs = self.blobs;
        (
            Self {
                nokv,
                blobs,
                f: self.f,
            },
            clock,
        )
    }
}

/// On a store whose commits are buffered, the upload record is still
/// made durable before any object is stored: a writer that dies after
/// storing objects, followed by a crash that keeps none of the buffered
/// commits, leaves a record that `collect_uploads` finds, so the objects
/// are deleted, not forgotten.
#[test]
fn an_upload_record_survives_a_crash_of_a_buffered_store() {
    let fs = Buffered::new();
    fs.blobs.at_put(1, || panic!("the writer dies"));
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fs.nokv.write(M, "w1", fs.f, b"abcdefgh")
    }));
    assert!(died.is_err());
    assert_eq!(objects_of(&fs.blobs, "w1").len(), 1);
    let (fs, clock) = fs.crash();
    assert_eq!(upload_rows(&fs.nokv), 1, "the record is durable");
    clock.advance(GRACE);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 1);
    assert!(objects_of(&fs.blobs, "w1").is_empty());
    assert_eq!(upload_rows(&fs.nokv), 0);
}

/// On a store whose commits are buffered, `collect_uploads` makes its
/// mark durable before it deletes an upload's objects: a crash right
/// after (keeping none of the buffered commits) brings the record back,
/// its deletion lost, but given up, so no command can name the deleted
/// objects.
#[test]
fn a_collected_upload_stays_given_up_after_a_crash() {
    let (fs, clock) = Buffered::with_clock();
    fs.blobs.at_put(1, || panic!("the writer dies"));
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fs.nokv.write(M, "w1", fs.f, b"abcdefgh")
    }));
    assert!(died.is_err());
    clock.advance(GRACE);
    assert_eq!(fs.nokv.collect_uploads(M, 10).unwrap(), 1);
    assert!(objects_of(&fs.blobs, "w1").is_empty());
    let (fs, _) = fs.crash();
    let prefix = tuple::pack(&("nokv", "upload", M));
    let records: Vec<Upload> = fs
        .nokv
        .store()
        .read()
        .unwrap()
        .scan::<UploadKey>(&strata_store::Scan::range_of(KeyRange::tuple_prefix(
            &prefix,
        )))
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect();
    assert_eq!(records.len(), 1, "its deletion was not synced");
    assert!(records[0].abandoned, "{:?}", records[0]);
    assert_eq!(records[0].request_id, "w1");
}

/// On a store whose commits are buffered, a GC drain deletes a block only
/// once the commit that queued it is durable: an overwrite (queueing the
/// old body's blocks) drained and then lost in a crash leaves the old
/// body readable, every object it names still there.
#[test]
fn a_drain_before_a_crash_deletes_nothing_a_durable_manifest_names() {
    let fs = Buffered::new();
    fs.nokv.write(M, "w1", fs.f, b"old body").unwrap();
    fs.nokv.store().engine().sync().unwrap();
    fs.nokv.write(M, "w2", fs.f, b"new body").unwrap();
    assert_eq!(fs.nokv.drain_gc(M, 10).unwrap(), 2, "the old body's blocks");
    let (fs, _) = fs.crash();
    // Whichever body the crash kept reads back whole.
    let body = fs.nokv.read(M, fs.f).unwrap();
    assert!(body == b"old body" || body == b"new body", "{body:?}");
    assert_eq!(
        body, b"new body",
        "the drain made the overwrite durable first"
    );
}

/// A file read while another client replaces its body again and again
/// and drains the GC queue after each write reads back one of the bodies
/// written, whole, never an error: the inode and its manifest come from
/// one snapshot, and a read whose objects were collected under it (the
/// body replaced meanwhile) reads again.
fn a_read_racing_overwrites_and_drains_reads_a_whole_body<E: Engine + Send + Sync + 'static>(
    engine: E,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (fs, f) = open(engine);
    let bodies: Vec<Vec<u8>> = (0..60)
        .map(|i| format!("body {i:02}: {}", "x".repeat(i % 7 * 5)).into_bytes())
        .collect();
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        s.spawn(|| {
            for (i, body) in bodies.iter().enumerate() {
                fs.nokv.write(M, &format!("w{i}"), f, body).unwrap();
                fs.nokv.drain_gc(M, 100).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        let reader = s.spawn(|| {
            let mut reads = 0;
            while !done.load(Ordering::SeqCst) || reads < 10 {
                let got = fs.nokv.read(M, f).unwrap();
                assert!(
                    got == b"old!" || bodies.contains(&got),
                    "{}",
                    String::from_utf8_lossy(&got)
                );
                reads += 1;
            }
            reads
        });
        reader.join().unwrap()
    });
    assert!(reads >= 10);
    assert_eq!(fs.nokv.read(M, f).unwrap(), bodies[59]);
}

/// `check_bodies` reads every file's body: an object lost from the
/// object store and one changed there are reported against their files,
/// the other file reads whole.
fn check_bodies_reports_lost_and_changed_objects<E: Engine>(engine: E) {
    let (fs, f) = open(engine);
    let g = created(&fs.nokv.create(M, "c2", ROOT, "g", 0o600).unwrap());
    let h = created(&fs.nokv.create(M, "c3", ROOT, "h", 0o600).unwrap());
    fs.nokv.write(M, "wg", g, b"gggggggg").unwrap();
    fs.nokv.write(M, "wh", h, b"hhhh").unwrap();
    let whole = fs.nokv.check_bodies(M).unwrap();
    assert_eq!((whole.files, whole.bytes), (3, 16));
    assert!(whole.is_ok(), "{:?}", whole.problems);
    let lost = objects_of(&fs.blobs, "wg")[1].clone();
    fs.blobs.delete(&lost).unwrap();
    let changed = objects_of(&fs.blobs, "wh")[0].clone();
    fs.blobs.put(&changed, b"hhhH").unwrap();
    let check = fs.nokv.check_bodies(M).unwrap();
    assert_eq!((check.files, check.bytes), (3, 4), "f alone reads whole");
    assert_eq!(
        check.problems,
        [
            (g, BodyProblem::MissingObject(lost)),
            (h, BodyProblem::ObjectMismatch(changed)),
        ]
    );
    assert_eq!(fs.nokv.read(M, f).unwrap(), b"old!");
}

crate::on_each_engine!(
    a_read_racing_overwrites_and_drains_reads_a_whole_body,
    check_bodies_reports_lost_and_changed_objects,
    a_refused_write_leaves_no_objects,
    an_upload_left_by_a_dead_writer_is_collected_after_its_grace,
    a_written_body_is_never_collected,
    a_write_outliving_its_grace_is_refused_and_leaves_nothing,
    collect_uploads_takes_at_most_max,
);
