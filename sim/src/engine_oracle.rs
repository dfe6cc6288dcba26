//! The engine workload's oracle: the engine against the model after every
//! step, the crash contract after every crash, snapshot isolation, and the
//! reported durable version.

use strata_engine::{Engine, RangeSpec, Snapshot};
use strata_engine_testkit::Model;

use crate::engine_workload::Run;
use crate::faults::FaultyEngine;
use crate::run::{Contents, Violation, fail, first_difference};
use crate::targets::Target;

/// Everything the engine holds, read without faults: the sim's own view,
/// bypassing the fault wrapper.
pub(crate) fn engine_state<E: Target>(e: &FaultyEngine<E>) -> Result<Contents, String> {
    crate::run::contents(e.inner())
}

fn model_state(m: &Model) -> Contents {
    m.maps
        .iter()
        .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .collect()
}

impl Run {
    pub(crate) fn check_state<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
        when: &str,
    ) -> Result<(), Violation> {
        self.frame.checks += 1;
        let got = engine_state(e).map_err(|why| fail(step, format!("{when}: {why}")))?;
        let want = model_state(&self.model);
        if let Some(diff) = first_difference(&got, &want) {
            return Err(fail(
                step,
                format!(
                    "{when}: engine differs from the model at version {}: {diff}",
                    self.model.version
                ),
            ));
        }
        if e.last_version() != self.model.version {
            return Err(fail(
                step,
                format!(
                    "{when}: engine at version {}, model at {}",
                    e.last_version(),
                    self.model.version
                ),
            ));
        }
        Ok(())
    }

    /// A snapshot taken before a commit must not see it.
    pub(crate) fn isolation<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
    ) -> Result<(), Violation> {
        let snap = e
            .inner()
            .snapshot()
            .map_err(|err| fail(step, format!("a fault-free snapshot failed: {err}")))?;
        let before = self.model.clone();
        let crashes = e.server_crashes();
        self.commit(e, step, 0)?;
        if e.server_crashes() != crashes {
            // The server crashed inside that commit: the snapshot's
            // session went with it.
            return Ok(());
        }
        self.frame.checks += 1;
        let rows: Vec<_> = snap
            .range(self.ks[0], RangeSpec::all())
            .and_then(Iterator::collect)
            .map_err(|err| fail(step, format!("a fault-free read failed: {err}")))?;
        let want = before.range(0, &RangeSpec::all());
        if rows != want {
            return Err(fail(
                step,
                "a snapshot taken before a commit sees a different state".to_owned(),
            ));
        }
        // Point reads through the old snapshot, of every key either side
        // holds: a get must not see the commit either.
        let keys: std::collections::BTreeSet<&Vec<u8>> = before.maps[0]
            .keys()
            .chain(self.model.maps[0].keys())
            .collect();
        for key in keys {
            self.frame.checks += 1;
            let got = snap
                .get(self.ks[0], key)
                .map_err(|err| fail(step, format!("a fault-free read failed: {err}")))?;
            if got.as_ref() != before.maps[0].get(key) {
                return Err(fail(
                    step,
                    format!(
                        "a snapshot taken before a commit reads key {} as {:?}, not as before it",
                        crate::run::show_bytes(key),
                        got.as_deref().map(crate::run::show_bytes)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Crashes and restarts; the restarted engine comes back whatever the
    /// check finds, so the run can still report its counters.
    pub(crate) fn crash<E: Target>(
        &mut self,
        e: FaultyEngine<E>,
        step: usize,
    ) -> (FaultyEngine<E>, Result<(), Violation>) {
        let floor = self.floor.max(e.durable_version());
        let pending = self.model.version.saturating_sub(floor);
        let e = e.crash_restart(&mut self.frame.rng);
        let e = self.reopened(e);
        let got = match engine_state(&e) {
            Ok(got) => got,
            Err(why) => return (e, Err(fail(step, format!("after a crash: {why}")))),
        };
        let version = e.last_version();
        self.frame.checks += 1;
        let found = self
            .history
            .iter()
            .find(|m| m.version == version && model_state(m) == got);
        self.frame.trace.event(step, format!("crash with {pending} unsynced commits: recovered version {version}, durable floor {floor}"));
        let outcome = match found {
            Some(m) if m.version >= floor => {
                self.model = m.clone();
                self.history = vec![self.model.clone()];
                self.floor = version;
                self.acked = version;
                for c in &mut self.clients {
                    c.reads.clear();
                }
                Ok(())
            }
            Some(m) => Err(fail(
                step,
                format!(
                    "crash recovered version {}, before the durable floor {floor}: an acknowledged durable commit was lost",
                    m.version
                ),
            )),
            None => Err(fail(
                step,
                format!(
                    "crash recovered a state (version {version}) that is the state after no commit since the durable floor {floor}: a hole or half a commit"
                ),
            )),
        };
        (e, outcome)
    }

    /// A clean restart keeps everything.
    pub(crate) fn clean_restart<E: Target>(
        &mut self,
        e: FaultyEngine<E>,
        step: usize,
    ) -> (FaultyEngine<E>, Result<(), Violation>) {
        let e = self.reopened(e.clean_restart());
        self.floor = self.model.version;
        self.acked = self.model.version;
        self.history = vec![self.model.clone()];
        self.frame.trace.event(step, "clean restart".to_owned());
        let outcome = self.check_state(&e, step, "after clean restart");
        (e, outcome)
    }

    /// The reported durable version is at most the last version, and the
    /// next crash must honour it.
    pub(crate) fn durable_check<E: Target>(
        &mut self,
        e: &FaultyEngine<E>,
        step: usize,
    ) -> Result<(), Violation> {
        let reported = e.durable_version();
        self.frame.checks += 1;
        if reported > e.last_version() {
            return Err(fail(
                step,
                format!(
                    "durable version {reported} above the last version {}",
                    e.last_version()
                ),
            ));
        }
        if reported < self.acked {
            return Err(fail(
                step,
                format!(
                    "durable version {reported} below v{}, which immediate commits and syncs made durable",
                    self.acked
                ),
            ));
        }
        self.floor = self.floor.max(reported);
        self.frame
            .trace
            .event(step, format!("durable version {reported}"));
        Ok(())
    }
}
