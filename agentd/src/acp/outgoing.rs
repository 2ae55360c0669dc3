//! The one gate of agentd's `session/update` notifications: a budget of bytes that every update
//! takes before it is handed to the connection, and that the line writer gives back once the
//! update's line is written to stdout.
//!
//! The ACP crate queues what agentd sends without bound (an unbounded channel between the
//! connection handle and its I/O task, another between its protocol and transport layers), so
//! a client that stops reading its input would let the model's stream, a replay and live output
//! pile up in agentd's memory. Here every update first takes its cost out of
//! [`OUTGOING_BUDGET`]; once the client is that far behind, the next update waits, and so does
//! what feeds it: the model's stream is no longer read, a replay stops, a running command's live
//! copy keeps only its newest state. Nothing is dropped: each waits its turn.
//!
//! Responses and agentd's requests to the client take nothing from the budget: each answers or
//! asks one thing the client sent or must answer, and a gate on them could hold a response that
//! a client waits for behind updates that it reads only after. Updates never wait for anything
//! but the client's reading: the writer gives their costs back as it writes, whatever else the
//! connection does, and when the writer ends (the client went away) the gate closes and every
//! waiting sender gives up.
//!
//! How the writer knows what a line cost: updates are handed to the connection in the order
//! their costs are queued here (one lock around both), the connection keeps its order to
//! stdout, and the writer knows an update's line by its start ([`UPDATE_LINE_START`], the form
//! the crate writes; its unit test holds it); for each such line it gives back the oldest cost.
//! A cost is the update's JSON size plus [`MESSAGE_OVERHEAD`], and at most the whole budget: an
//! update larger than the budget waits until nothing else is queued, then goes alone.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionNotification, SessionUpdate};
use agent_client_protocol::{Client, Error, ErrorCode};
use tokio::sync::Semaphore;

/// The most bytes of `session/update` notifications agentd keeps queued for a client that does
/// not read them (their JSON, plus [`MESSAGE_OVERHEAD`] each).
pub const OUTGOING_BUDGET: usize = 4 << 20;

/// What one queued update costs beyond its JSON: the crate keeps it as a tree of JSON values
/// until it is written. A text chunk of a few words, about 150 bytes of JSON, took about 1.4 KiB
/// of memory queued (`tests/tests/acp_backpressure.rs`, with the gate taken out).
pub const MESSAGE_OVERHEAD: usize = 1024;

/// How the line of a `session/update` notification starts, as the ACP crate writes it.
const UPDATE_LINE_START: &str = r#"{"jsonrpc":"2.0","method":"session/update","#;

/// Where agentd's updates for one connection go through: a byte budget when a line writer
/// gives costs back, or nothing to wait for when the client is in this process (`agentd exec`)
/// and reads every message as it is sent.
#[derive(Debug)]
pub struct Outgoing {
    budget: Option<Budget>,
}

#[derive(Debug)]
struct Budget {
    /// The whole budget, in bytes.
    size: usize,
    /// The bytes not taken: one permit a byte.
    free: Semaphore,
    /// The costs of the updates handed to the connection and not yet written, oldest first.
    queued: Mutex<VecDeque<u32>>,
    /// Whether a sender has waited yet, for the one line that tells the person running agentd.
    told: AtomicBool,
}

impl Outgoing {
    /// A gate of [`OUTGOING_BUDGET`] bytes, for a connection whose line writer calls
    /// [`Outgoing::written`] and [`Outgoing::close`].
    pub fn bounded() -> Arc<Outgoing> {
        Outgoing::with_budget(OUTGOING_BUDGET)
    }

    fn with_budget(bytes: usize) -> Arc<Outgoing> {
        Arc::new(Outgoing {
            budget: Some(Budget {
                size: bytes,
                free: Semaphore::new(bytes),
                queued: Mutex::new(VecDeque::new()),
                told: AtomicBool::new(false),
            }),
        })
    }

    /// No gate: every update is handed over at once.
    pub fn unbounded() -> Arc<Outgoing> {
        Arc::new(Outgoing { budget: None })
    }

    /// Hands `update` of session `session_id` to the connection once its cost fits in the
    /// budget: the one way agentd sends a `session/update`. An error when the connection or its
    /// writer has ended.
    pub async fn send(
        &self,
        cx: &ConnectionTo<Client>,
        session_id: &str,
        update: SessionUpdate,
    ) -> Result<(), Error> {
        let note = SessionNotification::new(session_id.to_owned(), update);
        let Some(budget) = &self.budget else {
            return cx.send_notification(note);
        };
        let cost = cost_of(&note, budget.size);
        if budget.free.available_permits() < cost as usize
            && !budget.told.swap(true, Ordering::Relaxed)
        {
            eprintln!(
                "agentd: the client has not read the last {} KiB of session updates; agentd holds \
                 the model's stream, replays and live output back until it reads (said once)",
                OUTGOING_BUDGET >> 10
            );
        }
        budget
            .free
            .acquire_many(cost)
            .await
            .map_err(|_| Error::new(ErrorCode::INTERNAL_ERROR, writer_ended().to_string()))?
            .forget();
        let mut queued = budget.queued();
        queued.push_back(cost);
        let sent = cx.send_notification(note);
        if sent.is_err() {
            // Never queued: its line will not come.
            queued.pop_back();
            drop(queued);
            budget.free.add_permits(cost as usize);
        }
        sent
    }

    /// The line writer wrote `updates` more updates' lines (see [`is_update_line`]): their
    /// costs come back, oldest first.
    pub fn written(&self, updates: usize) {
        let Some(budget) = &self.budget else {
            return;
        };
        if updates == 0 {
            return;
        }
        let mut queued = budget.queued();
        let back: usize = (0..updates)
            .map_while(|_| queued.pop_front())
            .map(|cost| cost as usize)
            .sum();
        drop(queued);
        budget.free.add_permits(back);
    }

    /// The line writer has ended: no cost comes back any more, so no sender may wait for one.
    pub fn close(&self) {
        if let Some(budget) = &self.budget {
            budget.free.close();
        }
    }
}

impl Budget {
    fn queued(&self) -> MutexGuard<'_, VecDeque<u32>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What `note` takes from a budget of `capacity` bytes: its JSON's size and the overhead, at
/// most the whole budget (so that it can always be taken once nothing else is queued).
fn cost_of(note: &SessionNotification, capacity: usize) -> u32 {
    let mut size = ByteCount(0);
    // Serializing a schema type into a counter cannot fail; a failure would count what it
    // wrote so far, and the crate would not send such an update at all.
    let _ = serde_json::to_writer(&mut size, note);
    let cost = size.0.saturating_add(MESSAGE_OVERHEAD).min(capacity);
    u32::try_from(cost).unwrap_or(u32::MAX)
}

/// Whether `line`, as the ACP crate wrote it, is a `session/update` notification: one that took
/// its cost from a budget.
pub fn is_update_line(line: &str) -> bool {
    line.starts_with(UPDATE_LINE_START)
}

/// The error of a send after the line writer ended.
fn writer_ended() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "agentd's output writer has ended: the client went away",
    )
}

/// A writer that only counts what it is given.
struct ByteCount(usize);

impl io::Write for ByteCount {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Over the ACP crate's own connection and agentd's line transport (`stdio::lines`), with a
    //! client end the test reads or leaves unread: the lines are the crate's, so these tests
    //! also hold how an update's line starts.

    use agent_client_protocol::v1::schema::{InitializeRequest, InitializeResponse};
    use agent_client_protocol::{Agent, on_receive_request};
    use futures::FutureExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

    use super::*;
    use crate::acp::{stdio, updates};
    use crate::test_support::within;

    /// An agent's connection whose client has initialized it and reads nothing more yet.
    struct Connected {
        cx: ConnectionTo<Client>,
        outgoing: Arc<Outgoing>,
        /// The client's end of agentd's output: one byte of buffer, so that a line is written
        /// (and its cost given back) only once the client reads it.
        from_agent: BufReader<DuplexStream>,
        /// The client's end of agentd's input, kept open.
        _to_agent: DuplexStream,
    }

    async fn connected(budget: usize) -> Connected {
        let outgoing = Outgoing::with_budget(budget);
        let (agent_out, client_in) = tokio::io::duplex(1);
        let (mut client_out, agent_in) = tokio::io::duplex(64 * 1024);
        let transport = stdio::lines(agent_in, agent_out, outgoing.clone());
        let (give, take) = tokio::sync::oneshot::channel();
        let agent = Agent.v1().on_receive_request(
            async move |req: InitializeRequest, responder, _cx| {
                responder.respond(InitializeResponse::new(req.protocol_version))
            },
            on_receive_request!(),
        );
        tokio::spawn(
            agent.connect_with(transport, async move |cx: ConnectionTo<Client>| {
                let _ = give.send(cx);
                std::future::pending::<Result<(), Error>>().await
            }),
        );
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
        client_out
            .write_all(format!("{initialize}\n").as_bytes())
            .await
            .expect("write");
        let mut from_agent = BufReader::new(client_in);
        let answer = within(line(&mut from_agent)).await;
        assert!(answer.contains(r#""id":0,"result""#), "{answer}");
        Connected {
            cx: within(take).await.expect("the connection"),
            outgoing,
            from_agent,
            _to_agent: client_out,
        }
    }

    async fn line(from: &mut BufReader<DuplexStream>) -> String {
        let mut line = String::new();
        from.read_line(&mut line).await.expect("read");
        line
    }

    fn update(n: usize) -> SessionUpdate {
        updates::agent_text(&format!("chunk {n:04} {}", "x".repeat(1000)))
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_holds_updates_back_and_gets_each_once_it_reads() {
        let cost = cost_of(&SessionNotification::new("s", update(0)), usize::MAX) as usize;
        // Room for four updates, not five.
        let mut c = connected(4 * cost + cost / 2).await;
        for n in 0..4 {
            within(c.outgoing.send(&c.cx, "s", update(n)))
                .await
                .expect("sent");
        }
        // The client has read none of them: the fifth waits (polled once, then dropped).
        let fifth = c.outgoing.send(&c.cx, "s", update(4));
        assert!(fifth.now_or_never().is_none(), "the fifth update waits");
        // The control: the same update goes once the client reads.
        let reading = async {
            let mut lines = Vec::new();
            for _ in 0..5 {
                lines.push(line(&mut c.from_agent).await);
            }
            lines
        };
        let sending = c.outgoing.send(&c.cx, "s", update(4));
        let (lines, sent) = within(async { tokio::join!(reading, sending) }).await;
        sent.expect("sent once the client read");
        for (n, line) in lines.iter().enumerate() {
            assert!(is_update_line(line), "{line}");
            assert!(line.contains(&format!("chunk {n:04} ")), "in order: {line}");
        }
        // Every cost came back: an update as large as the whole budget goes now, alone.
        let whole = updates::agent_text(&"y".repeat(8 * cost));
        let (last, sent) = within(async {
            tokio::join!(line(&mut c.from_agent), c.outgoing.send(&c.cx, "s", whole))
        })
        .await;
        sent.expect("the largest update goes once nothing else is queued");
        assert!(last.contains("yyyy"), "{last}");
    }

    #[tokio::test]
    async fn a_client_gone_ends_the_wait_of_every_sender() {
        let cost = cost_of(&SessionNotification::new("s", update(0)), usize::MAX) as usize;
        let c = connected(cost + cost / 2).await;
        within(c.outgoing.send(&c.cx, "s", update(0)))
            .await
            .expect("sent");
        let waiting = c.outgoing.send(&c.cx, "s", update(1));
        drop(c.from_agent);
        let gone = within(waiting).await;
        assert!(gone.is_err(), "a send for a client that went away fails");
    }

    #[test]
    fn a_cost_is_the_json_and_the_overhead_at_most_the_whole_budget() {
        let note = SessionNotification::new("s", updates::agent_text("hi"));
        let json = serde_json::to_string(&note).expect("json").len();
        assert_eq!(cost_of(&note, usize::MAX) as usize, json + MESSAGE_OVERHEAD);
        assert_eq!(cost_of(&note, 100), 100);
    }
}
