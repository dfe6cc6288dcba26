//! `strata scan` and `strata get`: rows of a keyspace, keys and values
//! decoded.

use super::*;

pub(super) fn range_of(args: &ScanArgs) -> Result<RangeSpec, Failure> {
    let parse = |s: &str| parse_key(s).map_err(Failure::Usage);
    let mut spec = if let Some(p) = &args.prefix {
        RangeSpec::prefix(&parse(p)?)
    } else if let Some(t) = &args.tuple_prefix {
        // A tuple prefix is a tuple: `am` would be taken as the bytes "am",
        // which begin no tuple, and find nothing without a word.
        if !t.trim_start().starts_with('(') {
            return Err(Failure::Usage(format!(
                "--tuple-prefix takes a tuple, as in ({t:?},) or (\"am\", 7); --prefix takes bytes"
            )));
        }
        RangeSpec::from(KeyRange::tuple_prefix(&parse(t)?))
    } else {
        RangeSpec {
            start: args
                .start
                .as_deref()
                .map(parse)
                .transpose()?
                .map_or(Bound::Unbounded, Bound::Included),
            end: args
                .end
                .as_deref()
                .map(parse)
                .transpose()?
                .map_or(Bound::Unbounded, Bound::Excluded),
            reverse: false,
            limit: None,
        }
    };
    spec.reverse = args.reverse;
    if args.limit > 0 {
        spec.limit = Some(args.limit);
    }
    Ok(spec)
}

/// What `strata scan` reports.
#[derive(Debug, Serialize)]
pub(super) struct ScanReport {
    keyspace: String,
    /// `envelope` (the store's data keyspace) or `raw`.
    decoded: &'static str,
    version: u64,
    rows: Vec<RowOut>,
}

/// A row, its key and value decoded as far as they go.
#[derive(Debug, Serialize)]
struct RowOut {
    key: Json,
    value: Json,
}

impl Output for ScanReport {
    fn text(&self) -> String {
        let mut s = String::new();
        if self.decoded == "raw" {
            let _ = writeln!(
                s,
                "# {}: not the store's data keyspace; values shown raw",
                self.keyspace
            );
        }
        for r in &self.rows {
            s.push_str(&row_text(&r.key, &r.value));
            s.push('\n');
        }
        let _ = write!(s, "({} rows)", self.rows.len());
        s
    }
}

/// What `strata get` reports.
#[derive(Debug, Serialize)]
pub(super) struct Got {
    keyspace: String,
    key: Json,
    pub(super) found: bool,
    value: Option<Json>,
}

impl Output for Got {
    fn text(&self) -> String {
        match &self.value {
            Some(v) => row_text(&self.key, v),
            None => format!("{} not found", self.key["key"].as_str().unwrap_or("")),
        }
    }
}

pub(super) fn scan<E: Engine>(db: &Db, e: &E, args: &ScanArgs) -> Result<ScanReport, Failure> {
    let ks = e.keyspace(&args.keyspace).map_err(|_| {
        Failure::Usage(format!(
            "no keyspace {:?}; the database has {:?}",
            args.keyspace, db.keyspaces
        ))
    })?;
    let spec = range_of(args)?;
    let store = store_on(db, e)?;
    let view = store
        .read()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let snap = e
        .snapshot()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let data = args.keyspace == db.options.data_keyspace;
    let mut rows = Vec::new();
    for row in snap
        .range(ks, spec)
        .map_err(|err| Failure::Usage(format!("bad range: {}", ErrorChain(&err))))?
    {
        if stopped() {
            return Err(Failure::Stopped);
        }
        let (k, v) = row.map_err(|err| Failure::failed("read", &err))?;
        let value = if data {
            data_value_json(&view, &k, &v, view.now_ms())
        } else {
            raw_value_json(&v)
        };
        rows.push(RowOut {
            key: key_json(&k),
            value,
        });
    }
    Ok(ScanReport {
        keyspace: args.keyspace.clone(),
        decoded: if data { "envelope" } else { "raw" },
        version: view.version().unwrap_or(0),
        rows,
    })
}

pub(super) fn get<E: Engine>(db: &Db, e: &E, keyspace: &str, key: &[u8]) -> Result<Got, Failure> {
    let ks = e.keyspace(keyspace).map_err(|_| {
        Failure::Usage(format!(
            "no keyspace {keyspace:?}; the database has {:?}",
            db.keyspaces
        ))
    })?;
    let store = store_on(db, e)?;
    let view = store
        .read()
        .map_err(|err| Failure::failed("snapshot", &err))?;
    let stored = e
        .snapshot()
        .and_then(|s| s.get(ks, key))
        .map_err(|err| Failure::failed("read", &err))?;
    let value = stored.map(|v| {
        if keyspace == db.options.data_keyspace {
            data_value_json(&view, key, &v, view.now_ms())
        } else {
            raw_value_json(&v)
        }
    });
    Ok(Got {
        keyspace: keyspace.to_owned(),
        key: key_json(key),
        found: value.is_some(),
        value,
    })
}
