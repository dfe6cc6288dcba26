//! `strata outbox`: consumers, dead letters, re-drives, purges, trims,
//! resets.

use super::*;

/// What `strata outbox` reports, by action.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum OutboxOut {
    /// `list`: every registered consumer, and every topic holding
    /// entries.
    Consumers {
        /// Every registered consumer.
        consumers: Vec<ConsumerInfo>,
        /// Every topic holding entries, consumed or not.
        topics: Vec<TopicOut>,
    },
    /// `dead`: one consumer's dead letters.
    Dead {
        topic: String,
        consumer: String,
        dead_letters: Vec<DeadOut>,
    },
    /// `redrive`: how many were re-driven.
    Redriven {
        topic: String,
        consumer: String,
        redriven: usize,
    },
    /// `purge`: how many were purged.
    Purged {
        topic: String,
        consumer: String,
        purged: usize,
    },
    /// `unregister`: the consumer removed.
    Unregistered {
        topic: String,
        consumer: String,
        unregistered: bool,
    },
    /// `trim`: entries removed.
    Trimmed {
        topic: String,
        trimmed: u64,
        commits: u64,
    },
    /// `reset`: the consumer's new checkpoint.
    Reset {
        topic: String,
        consumer: String,
        checkpoint: String,
    },
}

/// A topic holding entries.
#[derive(Debug, Serialize)]
pub(super) struct TopicOut {
    topic: String,
    entries: u64,
    first: String,
    last: String,
    /// Registered consumers (none: nothing reads or trims it).
    consumers: usize,
}

/// A dead letter, its entry summarised.
#[derive(Debug, Serialize)]
pub(super) struct DeadOut {
    position: String,
    error: String,
    attempts: u32,
    first_failure_ms: u64,
    last_failure_ms: u64,
    ordering_key: Option<String>,
    entry_bytes: usize,
}

impl Output for OutboxOut {
    fn text(&self) -> String {
        match self {
            Self::Consumers { consumers, topics } => {
                let mut s = consumers_text(consumers);
                s.push_str(if topics.is_empty() {
                    "outbox topics: none\n"
                } else {
                    "outbox topics:\n"
                });
                for t in topics {
                    let _ = writeln!(
                        s,
                        "  {}: {} entries, {} to {}, {}",
                        t.topic,
                        t.entries,
                        t.first,
                        t.last,
                        match t.consumers {
                            0 => "no consumer (never trimmed)".to_owned(),
                            1 => "1 consumer".to_owned(),
                            n => format!("{n} consumers"),
                        }
                    );
                }
                s.trim_end().to_owned()
            }
            Self::Dead {
                topic,
                consumer,
                dead_letters,
            } => {
                let mut s = format!(
                    "{} dead letters of {topic}/{consumer}\n",
                    dead_letters.len()
                );
                for d in dead_letters {
                    let _ = writeln!(
                        s,
                        "  {}: {} attempts, last error {:?}",
                        d.position, d.attempts, d.error
                    );
                }
                s.trim_end().to_owned()
            }
            Self::Redriven {
                topic,
                consumer,
                redriven,
            } => format!("re-drove {redriven} dead letters of {topic}/{consumer}"),
            Self::Purged {
                topic,
                consumer,
                purged,
            } => format!("purged {purged} dead letters of {topic}/{consumer}"),
            Self::Unregistered {
                topic, consumer, ..
            } => format!("unregistered {topic}/{consumer}"),
            Self::Trimmed {
                topic,
                trimmed,
                commits,
            } => format!("trimmed {trimmed} entries of {topic} in {commits} commits"),
            Self::Reset {
                topic,
                consumer,
                checkpoint,
            } => format!("{topic}/{consumer} now at checkpoint {checkpoint}"),
        }
    }
}

#[allow(clippy::too_many_lines)] // one arm per action
pub(super) fn outbox<E: Engine>(
    db: &Db,
    e: &E,
    action: &OutboxAction,
) -> Result<OutboxOut, Failure> {
    let store = store_on(db, e)?;
    let Some(outbox) = outbox_of(db, &store)? else {
        return Err(Failure::Usage(format!(
            "{} has no outbox (no {} keyspace)",
            db.path,
            strata_outbox::ENTRIES
        )));
    };
    let fail = |err: strata_outbox::OutboxError| Failure::failed("outbox", &err);
    let pair = |t: &str, c: &str| (t.to_owned(), c.to_owned());
    Ok(match action {
        OutboxAction::List => {
            let consumers = consumers(Some(&outbox))?;
            let topics = outbox
                .topics()
                .map_err(fail)?
                .into_iter()
                .map(|t| TopicOut {
                    consumers: consumers.iter().filter(|c| c.topic == t.topic).count(),
                    topic: t.topic,
                    entries: t.entries,
                    first: t.first.to_string(),
                    last: t.last.to_string(),
                })
                .collect();
            OutboxOut::Consumers { consumers, topics }
        }
        OutboxAction::Dead { topic, consumer } => {
            // An unknown consumer is an error here as for every action.
            outbox.checkpoint(topic, consumer).map_err(fail)?;
            let dead = outbox.dead_letters(topic, consumer).map_err(fail)?;
            let (topic, consumer) = pair(topic, consumer);
            OutboxOut::Dead {
                topic,
                consumer,
                dead_letters: dead
                    .iter()
                    .map(|d| DeadOut {
                        position: d.position.to_string(),
                        error: d.error.clone(),
                        attempts: d.attempts,
                        first_failure_ms: d.first_failure_ms,
                        last_failure_ms: d.last_failure_ms,
                        ordering_key: d.ordering_key.as_deref().map(render_key),
                        entry_bytes: d.envelope.len(),
                    })
                    .collect(),
            }
        }
        OutboxAction::Redrive { topic, consumer } | OutboxAction::Purge { topic, consumer } => {
            let dead = outbox.dead_letters(topic, consumer).map_err(fail)?;
            let redrive = matches!(action, OutboxAction::Redrive { .. });
            for d in &dead {
                if redrive {
                    outbox.redrive(topic, consumer, d.position).map_err(fail)?;
                } else {
                    outbox.purge(topic, consumer, d.position).map_err(fail)?;
                }
            }
            let (topic, consumer) = pair(topic, consumer);
            if redrive {
                OutboxOut::Redriven {
                    topic,
                    consumer,
                    redriven: dead.len(),
                }
            } else {
                OutboxOut::Purged {
                    topic,
                    consumer,
                    purged: dead.len(),
                }
            }
        }
        OutboxAction::Unregister { topic, consumer } => {
            if !outbox.unregister(topic, consumer).map_err(fail)? {
                return Err(fail(strata_outbox::OutboxError::UnknownConsumer {
                    topic: topic.clone(),
                    consumer: consumer.clone(),
                }));
            }
            let (topic, consumer) = pair(topic, consumer);
            OutboxOut::Unregistered {
                topic,
                consumer,
                unregistered: true,
            }
        }
        OutboxAction::Trim { topic, keep_ms } => {
            let t = outbox.trim(topic, *keep_ms, None).map_err(fail)?;
            OutboxOut::Trimmed {
                topic: topic.clone(),
                trimmed: t.entries,
                commits: t.commits,
            }
        }
        OutboxAction::Reset {
            topic,
            consumer,
            to,
        } => {
            let start = match to.as_str() {
                "beginning" => Start::Beginning,
                "end" => Start::End,
                v => Start::AfterVersion(v.parse().map_err(|_| {
                    Failure::Usage(format!("{v:?}: give beginning, end or a version"))
                })?),
            };
            outbox.reset(topic, consumer, start).map_err(fail)?;
            let now: Position = outbox.checkpoint(topic, consumer).map_err(fail)?;
            let (topic, consumer) = pair(topic, consumer);
            OutboxOut::Reset {
                topic,
                consumer,
                checkpoint: now.to_string(),
            }
        }
    })
}
