//! A client that stops reading agentd's output holds agentd back, over the real wire (RFC 0003,
//! "Backpressure"; `docs/reliability.md`, "A client that stops reading").
//!
//! The model's answer comes from a FIFO the test writes (the scripted model's `stream` key),
//! so the test sees agentd stop taking it: the FIFO fills and the test's non-blocking write
//! fails with `EAGAIN`. Nothing waits on time: the test waits for agentd's one line on stderr
//! saying the client fell behind, then for its own writer to be blocked on the full FIFO, and
//! only then reads agentd's memory (`VmHWM`, `VmRSS`) and how much of the answer agentd took.
//! Then it reads everything: every byte of the answer arrives, in order, and the turn ends.
//!
//! A command that prints a lot while the client reads nothing runs to its end (it writes a file
//! last, which the test waits for): agentd does not hold a command back, whose output feeds the
//! model's copy and whose timeout runs, and keeps the editor's live copy bounded instead.
//!
//! The control of the first test is agentd with its gate taken out (`Outgoing::unbounded` in
//! `serve_on`), run by hand: agentd takes the whole answer while the client reads nothing, and
//! the test fails saying so (`docs/reliability.md` has the figures).

/// Reads memory figures of a process, as the soaks do.
#[path = "../../confine-helper/tests/support/proc_watch.rs"]
mod proc_watch;
mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use agentd::api::acp::OUTGOING_BUDGET;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch};

/// How long any one wait of the test may take before it fails.
const LIMIT: Duration = Duration::from_secs(120);
/// The model's answer: 32 MiB, eight times the budget.
const ANSWER_BYTES: usize = 32 << 20;
/// Each word of the answer, its space included: one text delta, one update.
const WORD: usize = 1024;
/// How much more of the answer than the budget agentd may hold while the client reads nothing:
/// the lines in its stdout pipe (whose costs came back when they were written there, 64 KiB),
/// the deltas' queue (64 words), the scripted model's read (64 KiB) and the word being shown.
const TAKEN_BEYOND_BUDGET: usize = 1 << 20;
/// How much agentd's peak resident memory may grow from before the prompt while the client reads
/// nothing: the budget's updates as the ACP crate holds them and as lines (about twice their
/// JSON, which the budget counts with `MESSAGE_OVERHEAD` each), the answer kept twice so far
/// (the turn's record of what was shown, and the model's answer being assembled), the line
/// writer's 1 MiB buffer, and the allocator's slack. `docs/reliability.md` has the figures.
const GROWTH_BOUND_KIB: u64 = 32 * 1024;

/// The answer the model streams: numbered words, so that an order or a byte out of place shows.
fn answer() -> Vec<u8> {
    let mut text = Vec::with_capacity(ANSWER_BYTES);
    for n in 0..ANSWER_BYTES / WORD {
        let word = format!("{n:08}{}", "x".repeat(WORD - 9));
        text.extend_from_slice(word.as_bytes());
        text.push(b' ');
    }
    text
}

/// `agentd acp` with stdout read only when the test says so.
struct Agentd {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// agentd's stderr, a line at a time, and the end of the test's writing of the FIFO.
    events: mpsc::Receiver<Event>,
    /// Where the FIFO's writer tells that it wrote everything.
    writer_done: mpsc::Sender<Event>,
    next_id: u64,
}

impl Agentd {
    fn start(scratch: &Scratch, script: &std::path::Path, extra: &[&str]) -> Agentd {
        let mut args: Vec<&std::ffi::OsStr> = vec!["--model-script".as_ref(), script.as_os_str()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let mut child = AcpClient::command(scratch, &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start agentd acp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let stderr = child.stderr.take().expect("stderr");
        let (tx, events) = mpsc::channel();
        let writer_done = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("agentd: {line}");
                if tx.send(Event::Stderr(line)).is_err() {
                    break;
                }
            }
        });
        Agentd {
            child,
            stdin,
            stdout,
            events,
            writer_done,
            next_id: 0,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").expect("write to agentd");
        self.stdin.flush().expect("flush");
        id
    }

    /// The next message agentd wrote, waiting at most [`LIMIT`] for it.
    fn message(&mut self) -> Value {
        if self.stdout.buffer().is_empty() {
            let fd = self.stdout.get_ref().as_fd();
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
            let ready = poll(&mut fds, PollTimeout::try_from(LIMIT).expect("a timeout"))
                .expect("poll agentd's stdout");
            assert!(ready > 0, "agentd wrote nothing within {LIMIT:?}");
        }
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("read agentd's stdout");
        assert!(!line.is_empty(), "agentd's stdout ended");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Reads until the response to `id`; returns it and the updates before it.
    fn until_response(&mut self, id: u64) -> (Value, Vec<Value>) {
        let mut updates = Vec::new();
        loop {
            let message = self.message();
            if message.get("method").is_none() && message["id"] == json!(id) {
                return (message, updates);
            }
            if message["method"] == "session/update" {
                updates.push(message["params"]["update"].clone());
            }
        }
    }

    /// `initialize` and `session/new` in the workspace; the session's id.
    fn open_session(&mut self, scratch: &Scratch) -> String {
        let init = self.send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        self.until_response(init);
        let new = self.send(
            "session/new",
            json!({"cwd": scratch.ws(), "mcpServers": []}),
        );
        let (answer, _) = self.until_response(new);
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {answer}"))
            .to_owned()
    }

    /// Waits for a line of agentd's stderr that contains `text`, or for the test's writer to
    /// have written all it had: which came first.
    fn said_or_taken(&self, text: &str) -> Event {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(Event::Stderr(line)) if !line.contains(text) => {}
                Ok(event) => return event,
                Err(_) => panic!("neither agentd's line nor the writer's end within {LIMIT:?}"),
            }
        }
    }
}

impl Drop for Agentd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the test waits for.
#[derive(Debug)]
enum Event {
    /// A line agentd wrote to stderr.
    Stderr(String),
    /// The test's writer wrote the whole answer into the FIFO.
    WriterDone,
}

/// `VmHWM` and `VmRSS` of process `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    (
        proc_watch::status_kib(pid, "VmHWM"),
        proc_watch::status_kib(pid, "VmRSS"),
    )
}

/// Where the test's writer of the FIFO is.
#[derive(Debug, Default, Clone, Copy)]
struct Writing {
    /// Bytes written into the FIFO so far.
    written: usize,
    /// Whether the writer waits for room in a full FIFO right now.
    blocked: bool,
    /// Whether everything was written and the FIFO closed.
    done: bool,
}

/// Writes `text` into the FIFO at `path` without blocking, waiting on `poll` for room whenever
/// it is full, then closes it; tells every change through the shared state.
fn write_fifo(
    path: std::path::PathBuf,
    text: Vec<u8>,
    done: mpsc::Sender<Event>,
) -> Arc<(Mutex<Writing>, Condvar)> {
    let state = Arc::new((Mutex::new(Writing::default()), Condvar::new()));
    let shared = state.clone();
    std::thread::spawn(move || {
        // Opening blocks until agentd opens the FIFO to read it: when the turn asks the model.
        let file = File::options()
            .write(true)
            .open(&path)
            .expect("open the FIFO");
        let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL).expect("flags");
        let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(flags)).expect("O_NONBLOCK");
        let (lock, changed) = &*shared;
        let set = |f: &dyn Fn(&mut Writing)| {
            f(&mut lock.lock().expect("state"));
            changed.notify_all();
        };
        let mut at = 0;
        while at < text.len() {
            let end = (at + 64 * 1024).min(text.len());
            match (&file).write(&text[at..end]) {
                Ok(n) => {
                    at += n;
                    set(&|w| w.written = at);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    set(&|w| w.blocked = true);
                    let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLOUT)];
                    poll(&mut fds, PollTimeout::NONE).expect("poll the FIFO");
                    set(&|w| w.blocked = false);
                }
                Err(e) => panic!("writing the FIFO: {e}"),
            }
        }
        // agentd's read ends once no writer holds the FIFO.
        drop(file);
        set(&|w| w.done = true);
        let _ = done.send(Event::WriterDone);
    });
    state
}

/// Bytes in the FIFO not read yet, as `probe` (a read end nobody reads from) sees them.
fn unread(probe: &File) -> usize {
    let mut bytes: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points at `bytes`.
    let done = unsafe { nix::libc::ioctl(probe.as_raw_fd(), nix::libc::FIONREAD, &mut bytes) };
    assert_eq!(done, 0, "FIONREAD on the FIFO");
    usize::try_from(bytes).expect("a count")
}

#[test]
fn a_client_that_stops_reading_holds_the_models_stream_back_and_gets_all_of_it_once_it_reads() {
    let scratch = Scratch::new("backpressure-stream");
    let fifo = scratch.root.join("answer.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let script = scratch.script("[[turn]]\nstream = \"answer.fifo\"\n");
    let mut agentd = Agentd::start(&scratch, &script, &[]);
    let session = agentd.open_session(&scratch);
    let (before, _) = memory(agentd.pid());

    // The prompt, and from now on the client reads nothing.
    let prompt = agentd.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Talk."}]}),
    );
    let text = answer();
    // A read end that reads nothing, to count what the FIFO holds; it keeps no writer open.
    let probe = {
        use std::os::unix::fs::OpenOptionsExt;
        File::options()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&fifo)
            .expect("a read end of the FIFO")
    };
    let writing = write_fifo(fifo, text.clone(), agentd.writer_done.clone());
    if let Event::WriterDone = agentd.said_or_taken("has not read the last") {
        let (peak, resident) = memory(agentd.pid());
        panic!(
            "agentd took the whole answer ({ANSWER_BYTES} bytes) while the client read nothing, \
             and never said that the client fell behind; VmHWM {before} KiB before the prompt, \
             {peak} KiB now, VmRSS {resident} KiB"
        );
    }
    // Then the FIFO fills: agentd no longer reads the model's answer.
    let (lock, changed) = &*writing;
    let (guard, waited) = changed
        .wait_timeout_while(lock.lock().expect("state"), LIMIT, |w| {
            !w.blocked && !w.done
        })
        .expect("state");
    let state = *guard;
    drop(guard);
    assert!(!waited.timed_out(), "the FIFO never filled");
    let taken = state.written - unread(&probe);
    let (peak, resident) = memory(agentd.pid());
    eprintln!(
        "while the client read nothing: agentd took {taken} bytes of the answer; VmHWM {before} \
         KiB before the prompt, {peak} KiB now, VmRSS {resident} KiB"
    );
    assert!(
        !state.done,
        "agentd took the whole answer ({ANSWER_BYTES} bytes) while the client read nothing"
    );
    assert!(
        taken <= OUTGOING_BUDGET + TAKEN_BEYOND_BUDGET,
        "agentd took {taken} bytes of the answer while the client read nothing, more than the \
         budget ({OUTGOING_BUDGET}) and what the pipes and queues hold"
    );
    assert!(
        peak - before <= GROWTH_BOUND_KIB,
        "agentd's peak memory grew by {} KiB while the client read nothing (bound {GROWTH_BOUND_KIB} \
         KiB)",
        peak - before
    );

    // The client reads again: the whole answer arrives, in order, and the turn ends.
    let (answer, updates) = agentd.until_response(prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let shown: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().expect("text"))
        .collect();
    assert_eq!(shown.len(), text.len(), "every byte of the answer arrived");
    assert!(
        shown.as_bytes() == text,
        "the answer arrived as written, in order"
    );
    let (peak_end, resident_end) = memory(agentd.pid());
    eprintln!(
        "after the turn: VmHWM {peak_end} KiB, VmRSS {resident_end} KiB (the answer, {} KiB, is \
         kept in the session's records)",
        ANSWER_BYTES >> 10
    );
}

#[test]
fn a_command_that_prints_a_lot_while_the_client_reads_nothing_runs_to_its_end_in_bounded_memory() {
    let scratch = Scratch::new("backpressure-command");
    // 64 MiB of output in lines of 1 KiB, then a file that says it ended.
    let command = "head -c 67108864 /dev/zero | tr '\\\\0' a | fold -w 1023; : > printed";
    let script = scratch.script(&format!(
        "[[turn]]\n[[turn.tool_calls]]\nname = \"bash\"\narguments = {{ command = \"{command}\" }}\n\n\
         [[turn]]\ntext = \"It printed.\"\n"
    ));
    let mut agentd = Agentd::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = agentd.open_session(&scratch);
    let (before, _) = memory(agentd.pid());
    let prompt = agentd.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Print."}]}),
    );
    assert!(
        support::wait_for_file(&scratch.ws(), "printed", LIMIT),
        "the command did not run to its end while the client read nothing"
    );
    let (peak, resident) = memory(agentd.pid());
    eprintln!(
        "a command printed 64 MiB while the client read nothing: VmHWM {before} KiB before the \
         prompt, {peak} KiB after it ended, VmRSS {resident} KiB"
    );
    assert!(
        peak - before <= GROWTH_BOUND_KIB,
        "agentd's peak memory grew by {} KiB (bound {GROWTH_BOUND_KIB} KiB)",
        peak - before
    );

    let (answer, updates) = agentd.until_response(prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let result = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .unwrap_or_else(|| panic!("the call's result: {updates:?}"));
    let output: String = result["content"]
        .as_array()
        .expect("the result's content")
        .iter()
        .filter_map(|block| block["content"]["text"].as_str())
        .collect();
    assert!(output.contains("output truncated"), "{output:.300}");
    assert!(output.contains(&"a".repeat(1023)), "the output's end");
    // Its live output, if any came, is bounded like every live copy (64 KiB and a marker line).
    for live in updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_none())
    {
        let text = live["content"][0]["content"]["text"].as_str().unwrap_or("");
        assert!(
            text.len() <= 65 * 1024,
            "a live update of {} bytes",
            text.len()
        );
    }
}
