//! Session log durability under kill -9: agentd is killed (SIGKILL) at 20 moments of a scripted
//! session — tool calls, knob switches by `session/set_mode` and `session/set_config_option`,
//! approval answers — and each time a fresh agentd loads the session. The load succeeds; the log
//! and what the load replays are each a prefix of what an uninterrupted run of the same script
//! leaves (the control); and every knob switch and approval decision the client saw acknowledged
//! before the kill is in it.
//!
//! "Acknowledged" follows from when agentd appends and syncs (RFCs 0003 to 0005):
//! - a switch while a turn is open is appended, synced, before its answer: the answer
//!   acknowledges it;
//! - a switch while the session is idle is answered at once but held in memory, and written
//!   (synced) when the next prompt opens its turn, before that turn shows anything. RFC 0005
//!   decided that a crash before then forgets it; the first update of the next prompt
//!   acknowledges it. Until then a kill may leave either mode, and the loaded session shows the
//!   one its log holds;
//! - an answer to a permission request is appended as `approval/decided`, synced, before the call
//!   runs or is refused: the next update of that call (it runs, or its refused result)
//!   acknowledges it.
//!
//! A kill moment is a count of wire messages, never a time: "right after the client sent or
//! received its Nth message". The moments are drawn with a seeded generator (the seed is printed,
//! and `AGENTD_DURABILITY_SEED` draws the same ones again), always including the moments right
//! after each permission answer was sent and right after each acknowledgement arrived.
//!
//! SIGKILL ends the process, not the machine: what agentd wrote reaches the file whether it synced
//! or not, so the kills show the order of appends and acknowledgements. That each acknowledged
//! record was also synced before its acknowledgement left is shown by
//! `every_acknowledgement_follows_the_sync_of_what_it_acknowledges`, which watches agentd's system
//! calls with strace (skipped, saying so, where strace is not installed).

mod support;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch, normalized_updates};

/// How many kills.
const KILLS: usize = 20;

/// How long any one answer of agentd may take.
const ANSWER: Duration = Duration::from_secs(60);

/// The model's side: three prompts' worth of tool calls and answers. `write_file` asks first
/// (see [`CONFIG`]); the last write is of the file the "always" answer covers, so the rule
/// decides it.
const SCRIPT: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf a > a.txt" }

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "b.txt", content = "b" }

[[turn]]
text = "First prompt done."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "c.txt", content = "c" }

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf d > d.txt" }

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "e.txt", content = "e" }

[[turn]]
text = "Second prompt done."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "e.txt", content = "f" }

[[turn]]
text = "Third prompt done."
"#;

const CONFIG: &str = "[approval]\nask_before = [\"write_file\"]\n";

const ARGS: [&str; 2] = ["--sandbox-mode", "workspace-write"];

/// A knob switch the client asks for.
#[derive(Debug, Clone, Copy)]
enum Knob {
    /// `session/set_mode` to this mode.
    Mode(&'static str),
    /// `session/set_config_option` of this option to this value.
    Option(&'static str, &'static str),
}

/// The client's side, in order: each prompt with what the client does at each permission
/// request of that prompt (switch knobs, then answer with an option kind), and the switches it
/// asks for while the session is idle after the prompt.
struct Step {
    prompt: &'static str,
    at_permissions: &'static [(&'static [Knob], &'static str)],
    idle_after: &'static [Knob],
}

const STEPS: [Step; 3] = [
    Step {
        prompt: "one",
        at_permissions: &[(&[], "allow_once")],
        idle_after: &[Knob::Mode("read-only")],
    },
    Step {
        prompt: "two",
        at_permissions: &[
            (
                &[Knob::Option("sandbox-mode", "workspace-write")],
                "reject_once",
            ),
            (&[Knob::Mode("read-only")], "allow_always"),
        ],
        idle_after: &[Knob::Option("sandbox-mode", "workspace-write")],
    },
    Step {
        prompt: "three",
        at_permissions: &[],
        idle_after: &[],
    },
];

/// agentd was killed at the chosen moment.
struct Killed;

/// One scripted run of [`STEPS`], killed right after its `kill_at`th wire message (either way;
/// never when `None`), with what the client was told on the way.
struct Run {
    client: AcpClient,
    kill_at: Option<usize>,
    /// The id of the `session/new` request, whose answer names the session.
    new_request: Option<u64>,
    session: Option<String>,
    /// Whether a prompt is running (sent, not answered).
    in_prompt: bool,
    /// Each switch in the order asked, and the message that acknowledged it.
    switches: Vec<(Knob, Option<Value>)>,
    /// Switches asked for during a turn, by request id: their answer acknowledges them.
    awaiting: HashMap<u64, usize>,
    /// Switches held while idle: the next prompt's first update acknowledges them.
    held: Vec<usize>,
    /// Each permission answer in order: the call it answered, the option kind, and the message
    /// that acknowledged it.
    answers: Vec<(Value, &'static str, Option<Value>)>,
    /// The moments right after a permission answer was sent or an acknowledgement arrived.
    marked: BTreeSet<usize>,
}

impl Run {
    fn start(scratch: &Scratch, script: &Path, kill_at: Option<usize>) -> Run {
        Run::with(AcpClient::start(scratch, script, &ARGS), kill_at)
    }

    fn with(mut client: AcpClient, kill_at: Option<usize>) -> Run {
        client.permission = Permission::Ignore;
        Run {
            client,
            kill_at,
            new_request: None,
            session: None,
            in_prompt: false,
            switches: Vec::new(),
            awaiting: HashMap::new(),
            held: Vec::new(),
            answers: Vec::new(),
            marked: BTreeSet::new(),
        }
    }

    /// How many wire messages have passed.
    fn moment(&self) -> usize {
        self.client.transcript.len()
    }

    /// Kills agentd if the chosen moment has come.
    fn check(&mut self) -> Result<(), Killed> {
        if self.kill_at == Some(self.moment()) {
            kill(&mut self.client);
            return Err(Killed);
        }
        Ok(())
    }

    fn send(&mut self, method: &str, params: Value) -> Result<u64, Killed> {
        let id = self.client.send(method, params);
        self.check()?;
        Ok(id)
    }

    /// The next message of agentd, noting what it acknowledges.
    fn next(&mut self) -> Result<Value, Killed> {
        let message = self
            .client
            .next(ANSWER)
            .unwrap_or_else(|| panic!("agentd said nothing within {ANSWER:?}"));
        self.acknowledge(&message);
        self.check()?;
        Ok(message)
    }

    fn acknowledged(&self) -> usize {
        let switches = self.switches.iter().filter(|s| s.1.is_some()).count();
        switches + self.answers.iter().filter(|a| a.2.is_some()).count()
    }

    fn acknowledge(&mut self, message: &Value) {
        let before = self.acknowledged();
        let response = message.get("method").is_none();
        let id = message["id"].as_u64();
        if response && id.is_some() && id == self.new_request {
            self.session = message["result"]["sessionId"].as_str().map(str::to_owned);
        }
        if let Some(index) = id
            .filter(|_| response)
            .and_then(|id| self.awaiting.remove(&id))
        {
            self.switches[index].1 = Some(message.clone());
        }
        let update = &message["params"]["update"];
        if message["method"] == "session/update" {
            if self.in_prompt {
                for index in std::mem::take(&mut self.held) {
                    self.switches[index].1 = Some(message.clone());
                }
            }
            if update.get("status").is_some() {
                let call = &update["toolCallId"];
                for answer in &mut self.answers {
                    if answer.2.is_none() && answer.0 == *call {
                        answer.2 = Some(message.clone());
                    }
                }
            }
        }
        if self.acknowledged() > before {
            self.marked.insert(self.moment());
        }
    }

    /// Reads until the answer to request `id`, which is returned.
    fn answer_to(&mut self, id: u64) -> Result<Value, Killed> {
        loop {
            let message = self.next()?;
            if message["id"] == json!(id) && message.get("method").is_none() {
                return Ok(message);
            }
            assert!(
                message.get("id").is_none(),
                "an unexpected request of agentd: {message}"
            );
        }
    }

    fn session(&self) -> String {
        self.session.clone().expect("the session was opened")
    }

    fn switch(&mut self, knob: Knob, idle: bool) -> Result<(), Killed> {
        let session = self.session();
        let (method, params) = match knob {
            Knob::Mode(mode) => (
                "session/set_mode",
                json!({"sessionId": session, "modeId": mode}),
            ),
            Knob::Option(id, value) => (
                "session/set_config_option",
                json!({"sessionId": session, "configId": id, "value": value}),
            ),
        };
        self.switches.push((knob, None));
        let index = self.switches.len() - 1;
        let id = self.send(method, params)?;
        if !idle {
            self.awaiting.insert(id, index);
        }
        let answer = self.answer_to(id)?;
        assert!(answer.get("result").is_some(), "{method}: {answer}");
        if idle {
            self.held.push(index);
        }
        Ok(())
    }

    /// The whole client side, up to the kill.
    fn drive(&mut self, cwd: &Path) -> Result<(), Killed> {
        let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
        let id = self.send("initialize", init)?;
        self.answer_to(id)?;
        let id = self.send("session/new", json!({"cwd": cwd, "mcpServers": []}))?;
        self.new_request = Some(id);
        let new = self.answer_to(id)?;
        assert!(self.session.is_some(), "session/new: {new}");
        for step in &STEPS {
            self.prompt(step)?;
            for knob in step.idle_after {
                self.switch(*knob, true)?;
            }
        }
        Ok(())
    }

    fn prompt(&mut self, step: &Step) -> Result<(), Killed> {
        let session = self.session();
        let text = [json!({"type": "text", "text": step.prompt})];
        let id = self.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": text}),
        )?;
        self.in_prompt = true;
        let mut permissions = step.at_permissions.iter();
        loop {
            let message = self.next()?;
            if message["method"] == "session/request_permission" {
                let (knobs, kind) = permissions
                    .next()
                    .unwrap_or_else(|| panic!("an unexpected permission request: {message}"));
                for knob in *knobs {
                    self.switch(*knob, false)?;
                }
                self.answer_permission(&message, kind)?;
            } else if message["id"] == json!(id) && message.get("method").is_none() {
                assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
                self.in_prompt = false;
                return Ok(());
            }
        }
    }

    fn answer_permission(&mut self, request: &Value, kind: &'static str) -> Result<(), Killed> {
        let option = request["params"]["options"]
            .as_array()
            .and_then(|options| options.iter().find(|o| o["kind"] == kind))
            .map(|o| o["optionId"].clone())
            .unwrap_or_else(|| panic!("no option {kind} in {request}"));
        let call = request["params"]["toolCall"]["toolCallId"].clone();
        self.answers.push((call, kind, None));
        let outcome = json!({"outcome": {"outcome": "selected", "optionId": option}});
        self.client.respond(&request["id"], outcome);
        self.marked.insert(self.moment());
        self.check()
    }

    /// How many of the switches, counted from the first, were acknowledged: the last one
    /// acknowledged and every one before it.
    fn switches_acknowledged(&self) -> usize {
        self.switches
            .iter()
            .rposition(|s| s.1.is_some())
            .map_or(0, |i| i + 1)
    }

    /// How many of the permission answers, counted from the first, were acknowledged.
    fn answers_acknowledged(&self) -> usize {
        self.answers
            .iter()
            .rposition(|a| a.2.is_some())
            .map_or(0, |i| i + 1)
    }
}

fn kill(client: &mut AcpClient) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(client.child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 agentd");
    let _ = client.child.wait();
}

/// What a fresh agentd shows and holds of `session`: the load's answer, its replay (see
/// [`normalized_updates`]) and the log (see [`normalized_log`]), each without what differs
/// between two runs of the script.
struct Loaded {
    answer: Value,
    replay: Vec<Value>,
    log: Vec<Value>,
}

fn load(scratch: &Scratch, script: &Path, session: &str) -> Loaded {
    let mut client = AcpClient::start(scratch, script, &ARGS);
    let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
    client.request("initialize", init);
    let params = json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []});
    let (answer, notes) = client.request("session/load", params);
    drop(client);
    let pairs = replacements(scratch, session);
    Loaded {
        answer,
        replay: normalized_updates(&notes)
            .into_iter()
            .map(|u| replaced(u, &pairs))
            .collect(),
        log: normalized_log(&scratch.log(session), &pairs),
    }
}

/// What differs between two runs in the text of what they show and log: the scratch area's
/// path and the session id.
fn replacements(scratch: &Scratch, session: &str) -> [(String, &'static str); 2] {
    [
        (scratch.root.display().to_string(), "<root>"),
        (session.to_owned(), "<session>"),
    ]
}

/// `value` with, in each string, the first of each pair replaced by the second.
fn replaced(value: Value, pairs: &[(String, &str)]) -> Value {
    match value {
        Value::String(s) => Value::String(
            pairs
                .iter()
                .fold(s, |s, (from, to)| s.replace(from.as_str(), to)),
        ),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| replaced(v, pairs)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, replaced(v, pairs)))
                .collect(),
        ),
        other => other,
    }
}

/// The records of a log without their times, with `pairs` replaced, and with the random
/// approval ids numbered in order of appearance instead.
fn normalized_log(log: &[Value], pairs: &[(String, &str)]) -> Vec<Value> {
    let mut ids: HashMap<String, String> = HashMap::new();
    log.iter()
        .map(|record| {
            let mut record = replaced(record.clone(), pairs);
            if let Some(fields) = record.as_object_mut() {
                fields.remove("at_ms");
                let approval = fields["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("approval/"));
                for key in ["id", "rule"].into_iter().filter(|_| approval) {
                    if let Some(Value::String(id)) = fields.get(key) {
                        let n = ids.len() + 1;
                        let named = ids.entry(id.clone()).or_insert(format!("<approval {n}>"));
                        fields.insert(key.to_owned(), json!(named));
                    }
                }
            }
            record
        })
        .collect()
}

/// The modes of the `sandbox/mode` records of a log, in order.
fn modes(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|r| r["type"] == "sandbox/mode")
        .map(|r| r["mode"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The outcomes of the `approval/decided` records of a log that a person's answer decided (not
/// a rule), in order.
fn answered(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|r| r["type"] == "approval/decided" && r.get("rule").is_none())
        .map(|r| r["outcome"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The mode a switch asks for.
fn mode_of(knob: Knob) -> &'static str {
    match knob {
        Knob::Mode(mode) | Knob::Option("sandbox-mode", mode) => mode,
        Knob::Option(id, _) => panic!("the script switches only the sandbox mode, not {id}"),
    }
}

/// The outcome an answer of option kind `kind` is recorded with.
fn outcome_of(kind: &str) -> &'static str {
    match kind {
        "allow_once" => "allowed-once",
        "allow_always" => "allowed-always",
        "reject_once" => "rejected",
        other => panic!("the script answers no {other}"),
    }
}

/// The `currentValue` of config option `id` in a `session/load` answer.
fn current(answer: &Value, id: &str) -> String {
    answer["result"]["configOptions"]
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .and_then(|o| o["currentValue"].as_str())
        .unwrap_or_else(|| panic!("no {id} in {answer}"))
        .to_owned()
}

/// A wire message in a few words, for failure messages.
fn describe((direction, message): &(&str, Value)) -> String {
    let what = match message["method"].as_str() {
        Some("session/update") => {
            let update = &message["params"]["update"];
            format!(
                "session/update {} {} {}",
                update["sessionUpdate"].as_str().unwrap_or_default(),
                update["toolCallId"].as_str().unwrap_or_default(),
                update["status"].as_str().unwrap_or_default()
            )
        }
        Some(method) => method.to_owned(),
        // agentd's own requests have random ids.
        None if message["id"].is_string() => "the answer to agentd's request".to_owned(),
        None => format!("the answer to request {}", message["id"]),
    };
    format!("{direction} {}", what.trim_end())
}

/// An uninterrupted run of the script, and what a fresh agentd loads of it.
struct Control {
    transcript: Vec<(&'static str, Value)>,
    marked: BTreeSet<usize>,
    loaded: Loaded,
}

fn control(script_text: &str) -> Control {
    let scratch = Scratch::new("durability-control");
    scratch.config(CONFIG);
    let script = scratch.script(script_text);
    let mut run = Run::start(&scratch, &script, None);
    assert!(run.drive(&scratch.ws()).is_ok());
    let session = run.session();
    let asked: Vec<&str> = run.switches.iter().map(|s| mode_of(s.0)).collect();
    let kinds: Vec<&str> = run.answers.iter().map(|a| outcome_of(a.1)).collect();
    assert_eq!(run.switches_acknowledged(), asked.len());
    assert_eq!(run.answers_acknowledged(), kinds.len());
    let transcript = std::mem::take(&mut run.client.transcript);
    let marked = std::mem::take(&mut run.marked);
    drop(run);
    let loaded = load(&scratch, &script, &session);
    assert!(loaded.answer.get("result").is_some(), "{}", loaded.answer);
    // Each switch is one record and each answer one decision, in order: the i-th acknowledged
    // switch of a killed run is the i-th `sandbox/mode` record of its log.
    assert_eq!(modes(&loaded.log), asked, "{:#?}", loaded.log);
    assert_eq!(answered(&loaded.log), kinds, "{:#?}", loaded.log);
    assert!(!loaded.replay.is_empty());
    Control {
        transcript,
        marked,
        loaded,
    }
}

/// The seed of the kill moments: `AGENTD_DURABILITY_SEED`, else the clock.
fn seed() -> u64 {
    match std::env::var("AGENTD_DURABILITY_SEED") {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("AGENTD_DURABILITY_SEED={text:?} is not a number")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    }
}

/// splitmix64: the next number of the sequence `state` is at.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// [`KILLS`] moments from the answer to `session/new` (the client knows the session from then
/// on) to the end: every marked one, and the rest drawn with `seed`.
fn kill_moments(control: &Control, seed: u64) -> Vec<usize> {
    let first = control
        .transcript
        .iter()
        .position(|(_, m)| m["result"]["sessionId"].is_string())
        .expect("session/new was answered")
        + 1;
    let last = control.transcript.len();
    let mut chosen: BTreeSet<usize> = control
        .marked
        .iter()
        .copied()
        .filter(|m| (first..=last).contains(m))
        .collect();
    assert!(
        chosen.len() <= KILLS && last + 1 - first >= KILLS,
        "{} marked moments of {first}..={last}",
        chosen.len()
    );
    let mut state = seed;
    while chosen.len() < KILLS {
        let span = (last + 1 - first) as u64;
        chosen.insert(first + (next_random(&mut state) % span) as usize);
    }
    chosen.into_iter().collect()
}

/// Where `prefix` stops being a prefix of `whole`, if it does.
fn not_a_prefix(prefix: &[Value], whole: &[Value]) -> Option<String> {
    let at = (0..prefix.len()).find(|&i| whole.get(i) != Some(&prefix[i]))?;
    Some(format!(
        "item {at} is {:#}\nwhere the control has {:#}",
        prefix[at],
        whole.get(at).unwrap_or(&Value::Null)
    ))
}

#[test]
fn kill_9_at_twenty_moments_leaves_a_loadable_prefix_with_every_acknowledged_switch_and_answer() {
    let control = control(SCRIPT);
    let seed = seed();
    let moments = kill_moments(&control, seed);
    eprintln!(
        "kill moments (seed {seed}; AGENTD_DURABILITY_SEED={seed} repeats them): {moments:?}"
    );
    for (n, &at) in moments.iter().enumerate() {
        let scratch = Scratch::new(&format!("durability-kill-{n}"));
        scratch.config(CONFIG);
        let script = scratch.script(SCRIPT);
        let mut run = Run::start(&scratch, &script, Some(at));
        let context = format!(
            "kill {n} right after wire message {at} ({}); seed {seed}, moments {moments:?}",
            describe(&control.transcript[at - 1])
        );
        assert!(
            run.drive(&scratch.ws()).is_err(),
            "{context}: the run ended before it"
        );
        // The same course as the control up to the kill: what the client did is comparable.
        let course = |t: &[(&str, Value)]| t.iter().map(describe).collect::<Vec<_>>();
        assert_eq!(
            course(&run.client.transcript),
            course(&control.transcript[..at]),
            "{context}: the run left the control's course"
        );
        let (switches, answers) = (run.switches_acknowledged(), run.answers_acknowledged());
        let session = run.session();
        drop(run);

        let loaded = load(&scratch, &script, &session);
        assert!(
            loaded.answer.get("result").is_some(),
            "{context}: session/load failed: {}",
            loaded.answer
        );
        if let Some(why) = not_a_prefix(&loaded.log, &control.loaded.log) {
            panic!("{context}: the log is not a prefix of the control's: {why}");
        }
        if let Some(why) = not_a_prefix(&loaded.replay, &control.loaded.replay) {
            panic!("{context}: the replay is not a prefix of the control's: {why}");
        }
        let logged = modes(&loaded.log);
        assert!(
            logged.len() >= switches,
            "{context}: {switches} switches were acknowledged, the log holds {logged:?}"
        );
        let decided = answered(&loaded.log);
        assert!(
            decided.len() >= answers,
            "{context}: {answers} answers were acknowledged, the log holds {decided:?}"
        );
        let mode = logged.last().map_or(ARGS[1], String::as_str);
        assert_eq!(
            current(&loaded.answer, "sandbox-mode"),
            mode,
            "{context}: the loaded session's mode is its log's"
        );
    }
}

/// One system call of agentd that matters here, from `strace`'s output.
#[derive(Debug)]
enum Call {
    /// A write of `bytes` to descriptor `fd`, open on `path` (strace's `-y`).
    Write {
        fd: u32,
        path: String,
        bytes: Vec<u8>,
    },
    /// An `fdatasync` or `fsync` of `path` returned 0.
    Synced { path: String },
}

/// The bytes of a C string as strace prints it (between the quotes, escapes undone).
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('r') => out.push(b'\r'),
            Some('v') => out.push(0x0b),
            Some('f') => out.push(0x0c),
            Some(d @ '0'..='7') => {
                let mut value = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(next) => {
                            value = value * 8 + next;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(value as u8);
            }
            Some(other) => out.push(other as u8),
            None => {}
        }
    }
    out
}

/// The quoted strings of a line of strace's output, unescaped and joined (a `writev` has several).
fn quoted(line: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('"') {
        let body = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        out.extend(unescape(&body[..end]));
        rest = &body[end + 1..];
    }
    out
}

/// The descriptor and path of the first `N<path>` after `(` in a line.
fn descriptor(line: &str) -> Option<(u32, String)> {
    let after = &line[line.find('(')? + 1..];
    let open = after.find('<')?;
    let fd = after[..open].trim().parse().ok()?;
    let path = &after[open + 1..open + after[open..].find('>')?];
    Some((fd, path.to_owned()))
}

/// The writes and completed syncs in the output of `strace -f -y`, in the order they happened
/// (a sync is placed where it returned).
fn calls(trace: &str) -> Vec<Call> {
    let mut out = Vec::new();
    // Syncs that have not returned yet, by thread.
    let mut syncing: HashMap<String, String> = HashMap::new();
    for line in trace.lines() {
        let (pid, call) = line.split_once(' ').unwrap_or(("", line));
        let call = call.trim_start();
        if let Some(resumed) = call.strip_prefix("<... ") {
            let done = resumed.trim_end().ends_with("= 0");
            if let Some(path) = syncing.remove(pid).filter(|_| done) {
                out.push(Call::Synced { path });
            }
            continue;
        }
        let Some((fd, path)) = descriptor(call) else {
            continue;
        };
        if call.starts_with("fdatasync(") || call.starts_with("fsync(") {
            if call.ends_with("<unfinished ...>") {
                syncing.insert(pid.to_owned(), path);
            } else if call.trim_end().ends_with("= 0") {
                out.push(Call::Synced { path });
            }
        } else if call.starts_with("write(") || call.starts_with("writev(") {
            out.push(Call::Write {
                fd,
                path,
                bytes: quoted(call),
            });
        }
    }
    out
}

/// The JSON lines of some bytes.
fn json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Where in `calls` the log (at a path ending in `log_name`) was written the record `seq`, where
/// the client was sent `acknowledgement`, and whether a sync of the log returned in between.
fn synced_before(calls: &[Call], log_name: &str, seq: u64, acknowledgement: &Value) -> String {
    let written = calls.iter().position(|c| {
        matches!(c, Call::Write { path, bytes, .. }
            if path.ends_with(log_name) && json_lines(bytes).iter().any(|r| r["seq"] == seq))
    });
    let sent = calls.iter().position(|c| {
        matches!(c, Call::Write { fd: 1, bytes, .. }
            if json_lines(bytes).iter().any(|m| m == acknowledgement))
    });
    let (Some(written), Some(sent)) = (written, sent) else {
        return format!(
            "not found in the trace: the record at {written:?}, the message at {sent:?}"
        );
    };
    let synced = calls[written..sent]
        .iter()
        .any(|c| matches!(c, Call::Synced { path } if path.ends_with(log_name)));
    match (written < sent, synced) {
        (true, true) => "synced".to_owned(),
        (false, _) => format!("sent (call {sent}) before the record was written (call {written})"),
        (true, false) => format!(
            "written (call {written}) and sent (call {sent}) with no sync of the log in between"
        ),
    }
}

/// The `seq` of each record of `log` that `pick` keeps, in order.
fn seqs(log: &[Value], pick: impl Fn(&Value) -> bool) -> Vec<u64> {
    log.iter()
        .filter(|r| pick(r))
        .filter_map(|r| r["seq"].as_u64())
        .collect()
}

/// Why strace cannot trace a program here, if it cannot.
fn strace_unavailable() -> Option<String> {
    let traced = std::process::Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdin(std::process::Stdio::null())
        .output();
    match traced {
        Err(e) => Some(format!("strace cannot be run ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "strace cannot trace here ({}): {:?}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => None,
    }
}

#[test]
fn every_acknowledgement_follows_the_sync_of_what_it_acknowledges() {
    if let Some(why) = strace_unavailable() {
        support::skip::skip(
            "every_acknowledgement_follows_the_sync_of_what_it_acknowledges",
            support::skip::Need::Strace,
            format!("{why}: the order of syncs and answers cannot be watched"),
        );
        return;
    }
    let scratch = Scratch::new("durability-strace");
    scratch.config(CONFIG);
    let script = scratch.script(SCRIPT);
    let trace = scratch.root.join("trace.txt");
    let args: Vec<&std::ffi::OsStr> = ["--model-script".as_ref(), script.as_os_str()]
        .into_iter()
        .chain(ARGS.iter().map(std::ffi::OsStr::new))
        .collect();
    // Every thread and child, only the calls that matter, with descriptors' paths and whole
    // strings.
    let strace: Vec<&std::ffi::OsStr> = [
        "strace",
        "-f",
        "-qq",
        "-y",
        "-s",
        "1000000",
        "-e",
        "signal=none",
        "-e",
        "trace=write,writev,fdatasync,fsync",
        "-o",
    ]
    .into_iter()
    .map(std::ffi::OsStr::new)
    .chain([trace.as_os_str()])
    .collect();
    let command = support::acp::wrapped(&AcpClient::command(&scratch, &args), &strace);
    let client = AcpClient::spawn_command(command, std::process::Stdio::inherit());
    let mut run = Run::with(client, None);
    assert!(run.drive(&scratch.ws()).is_ok());
    let session = run.session();
    // Every switch and answer of an uninterrupted run is acknowledged.
    let switches: Vec<Value> = run.switches.iter().filter_map(|s| s.1.clone()).collect();
    let answers: Vec<Value> = run.answers.iter().filter_map(|a| a.2.clone()).collect();
    assert_eq!(
        (switches.len(), answers.len()),
        (run.switches.len(), run.answers.len())
    );
    run.client.hang_up();
    let _ = run.client.child.wait();

    let log = scratch.log(&session);
    let calls = calls(&std::fs::read_to_string(&trace).expect("strace's output"));
    let log_name = format!("{session}.jsonl");
    let switched = seqs(&log, |r| r["type"] == "sandbox/mode");
    let decided = seqs(&log, |r| {
        r["type"] == "approval/decided" && r.get("rule").is_none()
    });
    let mut found = Vec::new();
    for (what, records, acknowledgements) in [
        ("switch", &switched, &switches),
        ("answer", &decided, &answers),
    ] {
        assert_eq!(records.len(), acknowledgements.len(), "{what}s: {log:#?}");
        for (i, (seq, acknowledgement)) in records.iter().zip(acknowledgements).enumerate() {
            found.push(format!(
                "{what} {i} (record {seq}): {}",
                synced_before(&calls, &log_name, *seq, acknowledgement)
            ));
        }
    }
    assert!(
        found.iter().all(|f| f.ends_with(": synced")),
        "each acknowledgement follows the sync of its record: {found:#?}"
    );
}
