use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use tokio::sync::oneshot;

use super::*;
use crate::cancel;
use crate::session::{LogError, Record};
use crate::test_support::{MemoryLog, within};

/// A session for the seam: an in-memory log and a fixed policy.
struct TestAsker {
    log: MemoryLog,
    agent: String,
    policy: ApprovalPolicy,
}

impl TestAsker {
    fn new(policy: ApprovalPolicy) -> TestAsker {
        TestAsker {
            log: MemoryLog::new(),
            agent: "session-a".into(),
            policy,
        }
    }

    /// The `(asked id, decided id, outcome)` of every audit pair, checking the pairs are
    /// well formed: each `asked` directly followed by its `decided`.
    fn pairs(&self) -> Vec<(String, Outcome)> {
        let events = self.log.events();
        let audit: Vec<&Event> = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::ApprovalAsked { .. } | Event::ApprovalDecided { .. }
                )
            })
            .collect();
        assert_eq!(audit.len() % 2, 0, "{audit:?}");
        audit
            .chunks(2)
            .map(|pair| match (pair[0], pair[1]) {
                (
                    Event::ApprovalAsked { id: asked, .. },
                    Event::ApprovalDecided { id, outcome, .. },
                ) => {
                    assert_eq!(asked, id, "one id per pair");
                    (id.clone(), *outcome)
                }
                other => panic!("not an audit pair: {other:?}"),
            })
            .collect()
    }
}

impl SessionLog for TestAsker {
    fn records(&self) -> Vec<Record> {
        self.log.records()
    }

    fn append(&self, event: Event, sync: bool) -> Result<Record, LogError> {
        self.log.append(event, sync)
    }
}

impl Asker for TestAsker {
    fn agent(&self) -> &str {
        &self.agent
    }

    fn policy(&self) -> ApprovalPolicy {
        self.policy
    }
}

fn ask() -> Ask {
    Ask {
        tool: "write_file".into(),
        call_id: Some("call_1".into()),
        reason: Some("listed in approval.ask_before".into()),
        question: Question::default(),
        scope: None,
    }
}

/// An escalation of `command` to workspace-write, which may be answered "always".
fn scoped(command: &str) -> Ask {
    Ask {
        tool: "bash".into(),
        scope: Some(Scope::command(
            "bash",
            command,
            Some(confine_protocol::Mode::WorkspaceWrite),
        )),
        ..ask()
    }
}

/// Answers with a fixed reply and counts its calls.
struct Fixed {
    reply: Reply,
    calls: AtomicUsize,
}

impl Fixed {
    fn new(reply: Reply) -> Arc<Fixed> {
        Arc::new(Fixed {
            reply,
            calls: AtomicUsize::new(0),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Answerer for Fixed {
    fn answer<'a>(&'a self, _request: &'a Request) -> ReplyFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let reply = self.reply.clone();
        Box::pin(async move { reply })
    }
}

/// Answers only for one agent, and passes every other request on.
struct Owner {
    agent: String,
    outcome: Outcome,
}

impl Answerer for Owner {
    fn answer<'a>(&'a self, request: &'a Request) -> ReplyFuture<'a> {
        Box::pin(async move {
            if request.agent == self.agent {
                Reply::outcome(self.outcome)
            } else {
                Reply::Next
            }
        })
    }
}

/// Panics, either when called or in its future.
struct Panics {
    in_future: bool,
}

impl Answerer for Panics {
    fn answer<'a>(&'a self, _request: &'a Request) -> ReplyFuture<'a> {
        if !self.in_future {
            panic!("an answerer that panics when called");
        }
        Box::pin(async move { panic!("an answerer that panics while answering") })
    }
}

/// Waits for its answer from the test, and says when its wait was dropped.
struct Waits {
    answer: Mutex<Option<oneshot::Receiver<Reply>>>,
    started: Mutex<Option<oneshot::Sender<()>>>,
    dropped: Arc<AtomicUsize>,
}

struct DropFlag(Arc<AtomicUsize>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Answerer for Waits {
    fn answer<'a>(&'a self, _request: &'a Request) -> ReplyFuture<'a> {
        let answer = self.answer.lock().expect("lock").take();
        let started = self.started.lock().expect("lock").take();
        let flag = DropFlag(self.dropped.clone());
        Box::pin(async move {
            let _flag = flag;
            if let Some(started) = started {
                let _ = started.send(());
            }
            match answer {
                Some(answer) => answer.await.unwrap_or(Reply::Next),
                None => Reply::Next,
            }
        })
    }
}

#[tokio::test]
async fn with_no_answerer_a_request_is_unavailable_and_audited() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let outcome = within(Approvals::default().request(&asker, ask(), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Unavailable);
    let pairs = asker.pairs();
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].1, Outcome::Unavailable);
    match &asker.log.events()[1] {
        Event::ApprovalAsked {
            tool,
            call_id,
            reason,
            ..
        } => {
            assert_eq!(tool, "write_file");
            assert_eq!(call_id.as_deref(), Some("call_1"));
            assert_eq!(reason.as_deref(), Some("listed in approval.ask_before"));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn every_word_of_the_vocabulary_is_the_outcome_it_names() {
    for &outcome in Outcome::ALL {
        let asker = TestAsker::new(ApprovalPolicy::Ask);
        let approvals = Approvals::new(vec![Fixed::new(Reply::outcome(outcome))]);
        // A request that may be answered "always" (without a scope, "always" counts once).
        let got = within(approvals.request(&asker, scoped("make"), &Cancel::never())).await;
        assert_eq!(got, outcome);
        assert_eq!(asker.pairs()[0].1, outcome);
    }
}

#[tokio::test]
async fn the_first_answerer_that_decides_wins_and_one_may_delegate_to_the_next() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let delegates = Fixed::new(Reply::Next);
    let decides = Fixed::new(Reply::outcome(Outcome::Rejected));
    let never_reached = Fixed::new(Reply::outcome(Outcome::AllowedOnce));
    let approvals = Approvals::new(vec![
        delegates.clone(),
        decides.clone(),
        never_reached.clone(),
    ]);
    let outcome = within(approvals.request(&asker, ask(), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Rejected);
    assert_eq!(
        (delegates.calls(), decides.calls(), never_reached.calls()),
        (1, 1, 0)
    );
}

#[tokio::test]
async fn a_request_nobody_owns_goes_down_the_chain_and_ends_unavailable() {
    let other = Arc::new(Owner {
        agent: "session-b".into(),
        outcome: Outcome::AllowedOnce,
    });
    let mine = Arc::new(Owner {
        agent: "session-a".into(),
        outcome: Outcome::Rejected,
    });
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let approvals = Approvals::new(vec![other.clone(), mine]);
    assert_eq!(
        within(approvals.request(&asker, ask(), &Cancel::never())).await,
        Outcome::Rejected,
        "session-b's answerer passed session-a's request on"
    );
    let only_other = Approvals::new(vec![other]);
    assert_eq!(
        within(only_other.request(&asker, ask(), &Cancel::never())).await,
        Outcome::Unavailable,
        "nobody decided"
    );
}

#[tokio::test]
async fn a_panicking_answerer_makes_the_request_unavailable() {
    for in_future in [false, true] {
        let asker = TestAsker::new(ApprovalPolicy::Ask);
        let after = Fixed::new(Reply::outcome(Outcome::AllowedOnce));
        let approvals = Approvals::new(vec![Arc::new(Panics { in_future }), after.clone()]);
        let outcome = within(approvals.request(&asker, ask(), &Cancel::never())).await;
        assert_eq!(outcome, Outcome::Unavailable, "in_future: {in_future}");
        assert_eq!(after.calls(), 0, "a panic is not a delegation");
        assert_eq!(asker.pairs()[0].1, Outcome::Unavailable);
    }
}

#[tokio::test]
async fn an_answer_outside_the_vocabulary_makes_the_request_unavailable() {
    for rogue in ["allow-once", "allowed_once", "ALLOWED-ONCE", "", "yes"] {
        let asker = TestAsker::new(ApprovalPolicy::Ask);
        let approvals = Approvals::new(vec![Fixed::new(Reply::Decided(rogue.into()))]);
        let outcome = within(approvals.request(&asker, ask(), &Cancel::never())).await;
        assert_eq!(outcome, Outcome::Unavailable, "{rogue:?}");
        assert_eq!(asker.pairs()[0].1, Outcome::Unavailable);
    }
}

/// The policy the last `approval/decided` of `asker`'s log names as what decided.
fn deciding_policy(asker: &TestAsker) -> Option<ApprovalPolicy> {
    asker.log.events().iter().rev().find_map(|e| match e {
        Event::ApprovalDecided { policy, .. } => Some(*policy),
        _ => None,
    })?
}

#[tokio::test]
async fn under_never_the_seam_rejects_before_any_answerer_runs_and_still_audits() {
    let asker = TestAsker::new(ApprovalPolicy::Never);
    let allows = Fixed::new(Reply::outcome(Outcome::AllowedOnce));
    let approvals = Approvals::new(vec![allows.clone()]);
    let decision = within(approvals.decision(&asker, ask(), &Cancel::never())).await;
    assert_eq!(
        decision,
        Decision {
            outcome: Outcome::Rejected,
            by_policy: true
        }
    );
    assert_eq!(allows.calls(), 0);
    assert_eq!(asker.pairs()[0].1, Outcome::Rejected);
    // The log names the policy as what decided (the audit trail reads it there).
    assert_eq!(deciding_policy(&asker), Some(ApprovalPolicy::Never));
    // What the model is told names the policy, not a person who was never asked; the control:
    // a person's rejection under `ask` says the user rejected.
    assert_eq!(
        tool_refusal("write_file", decision).as_deref(),
        Some(
            "tool \"write_file\" was rejected by the approval policy (never): approval prompts \
             are disabled in this session"
        )
    );
    assert_eq!(
        escalation_refusal(confine_protocol::Mode::WorkspaceWrite, decision).as_deref(),
        Some(
            "escalating this command to \"workspace-write\" was rejected by the approval policy \
             (never): approval prompts are disabled in this session"
        )
    );
    let person = TestAsker::new(ApprovalPolicy::Ask);
    let rejects = Approvals::new(vec![Fixed::new(Reply::outcome(Outcome::Rejected))]);
    let decision = within(rejects.decision(&person, ask(), &Cancel::never())).await;
    assert!(!decision.by_policy);
    assert_eq!(deciding_policy(&person), None);
    assert_eq!(
        escalation_refusal(confine_protocol::Mode::WorkspaceWrite, decision).as_deref(),
        Some("the user rejected escalating this command to \"workspace-write\"")
    );
}

#[tokio::test]
async fn a_request_cancelled_before_it_is_made_is_cancelled_without_asking() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let allows = Fixed::new(Reply::outcome(Outcome::AllowedOnce));
    let approvals = Approvals::new(vec![allows.clone()]);
    let (canceller, cancel) = cancel::pair();
    canceller.cancel();
    let outcome = within(approvals.request(&asker, ask(), &cancel)).await;
    assert_eq!(outcome, Outcome::Cancelled);
    assert_eq!(allows.calls(), 0);
    assert_eq!(asker.pairs()[0].1, Outcome::Cancelled);
}

#[tokio::test]
async fn a_cancel_during_the_wait_is_cancelled_and_the_late_answer_is_discarded() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let (answer_tx, answer_rx) = oneshot::channel();
    let (started_tx, started_rx) = oneshot::channel();
    let dropped = Arc::new(AtomicUsize::new(0));
    let waits = Arc::new(Waits {
        answer: Mutex::new(Some(answer_rx)),
        started: Mutex::new(Some(started_tx)),
        dropped: dropped.clone(),
    });
    let approvals = Approvals::new(vec![waits]);
    let (canceller, cancel) = cancel::pair();
    let request = approvals.request(&asker, ask(), &cancel);
    let cancel_once_asked = async {
        started_rx.await.expect("the answerer was asked");
        canceller.cancel();
    };
    let (outcome, ()) = within(async { tokio::join!(request, cancel_once_asked) }).await;
    assert_eq!(outcome, Outcome::Cancelled);
    // The answerer's wait is dropped; an answer now reaches nobody.
    within(async {
        while dropped.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        answer_tx
            .send(Reply::outcome(Outcome::AllowedOnce))
            .is_err()
    );
    assert_eq!(asker.pairs().len(), 1);
    assert_eq!(asker.pairs()[0].1, Outcome::Cancelled);
}

#[tokio::test]
async fn each_request_has_its_own_fresh_id_and_grants_are_not_remembered() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let allows = Fixed::new(Reply::outcome(Outcome::AllowedOnce));
    let approvals = Approvals::new(vec![allows.clone()]);
    for _ in 0..3 {
        let outcome = within(approvals.request(&asker, ask(), &Cancel::never())).await;
        assert_eq!(outcome, Outcome::AllowedOnce);
    }
    assert_eq!(allows.calls(), 3, "every request asks again");
    let pairs = asker.pairs();
    assert_eq!(pairs.len(), 3);
    let mut ids: Vec<&String> = pairs.iter().map(|(id, _)| id).collect();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0].len(), 36, "{}", ids[0]);
}

/// A session whose log refuses the records `refuses` picks.
struct BrokenLog {
    inner: TestAsker,
    refuses: fn(&Event) -> bool,
}

impl BrokenLog {
    fn new(refuses: fn(&Event) -> bool) -> BrokenLog {
        BrokenLog {
            inner: TestAsker::new(ApprovalPolicy::Ask),
            refuses,
        }
    }
}

impl SessionLog for BrokenLog {
    fn records(&self) -> Vec<Record> {
        self.inner.records()
    }

    fn append(&self, event: Event, sync: bool) -> Result<Record, LogError> {
        if (self.refuses)(&event) {
            return Err(LogError::NotFound("broken".into()));
        }
        self.inner.append(event, sync)
    }
}

impl Asker for BrokenLog {
    fn agent(&self) -> &str {
        self.inner.agent()
    }

    fn policy(&self) -> ApprovalPolicy {
        self.inner.policy()
    }
}

#[tokio::test]
async fn nothing_is_granted_when_the_audit_cannot_be_written() {
    let allows = Fixed::new(Reply::outcome(Outcome::AllowedOnce));
    let approvals = Approvals::new(vec![allows.clone()]);
    let nothing = BrokenLog::new(|_| true);
    let outcome = within(approvals.request(&nothing, ask(), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Unavailable);
    assert_eq!(allows.calls(), 0, "not asked without an audit record");
    let no_decision = BrokenLog::new(|e| matches!(e, Event::ApprovalDecided { .. }));
    let outcome = within(approvals.request(&no_decision, ask(), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Unavailable);
}

#[test]
fn the_outcomes_are_spelt_as_the_vocabulary_in_the_log() {
    for &outcome in Outcome::ALL {
        let json = serde_json::to_value(outcome).expect("json");
        assert_eq!(json, serde_json::json!(outcome.as_str()));
        assert_eq!(outcome.as_str().parse::<Outcome>(), Ok(outcome));
    }
    let event = Event::ApprovalDecided {
        id: "x".into(),
        outcome: Outcome::AllowedOnce,
        rule: None,
        policy: None,
    };
    assert_eq!(
        serde_json::to_value(&event).expect("json"),
        serde_json::json!({"type": "approval/decided", "id": "x", "outcome": "allowed-once"})
    );
    let asked = Event::ApprovalAsked {
        id: "x".into(),
        tool: "write_file".into(),
        call_id: Some("c".into()),
        reason: None,
    };
    assert_eq!(
        serde_json::to_value(&asked).expect("json"),
        serde_json::json!({"type": "approval/asked", "id": "x", "tool": "write_file", "call_id": "c"})
    );
}

#[test]
fn a_tool_that_was_not_allowed_says_why() {
    assert_eq!(
        tool_refusal("write_file", Decision::asked(Outcome::AllowedOnce)),
        None
    );
    assert_eq!(
        tool_refusal("write_file", Decision::asked(Outcome::Rejected)).as_deref(),
        Some("the user rejected tool \"write_file\"")
    );
    assert_eq!(
        tool_refusal("write_file", Decision::asked(Outcome::Cancelled)).as_deref(),
        Some("approval for tool \"write_file\" was cancelled")
    );
    assert_eq!(
        tool_refusal("write_file", Decision::asked(Outcome::Unavailable)).as_deref(),
        Some("tool \"write_file\" requires approval, but no approval channel is available")
    );
}

/// The `approval/rule` records of the log, and the rule each decision names.
fn rules_and_deciders(asker: &TestAsker) -> (Vec<(String, bool)>, Vec<Option<String>>) {
    let events = asker.log.events();
    let rules = events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalRule { id, allow, .. } => Some((id.clone(), *allow)),
            _ => None,
        })
        .collect();
    let deciders = events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalDecided { rule, .. } => Some(rule.clone()),
            _ => None,
        })
        .collect();
    (rules, deciders)
}

#[tokio::test]
async fn an_always_answer_becomes_a_rule_that_decides_the_same_scope_without_asking() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let person = Fixed::new(Reply::outcome(Outcome::AllowedAlways));
    let approvals = Approvals::new(vec![person.clone()]);
    let first = within(approvals.request(&asker, scoped("npm install"), &Cancel::never())).await;
    assert_eq!(first, Outcome::AllowedAlways);
    let again = within(approvals.request(&asker, scoped("npm install"), &Cancel::never())).await;
    assert_eq!(again, Outcome::AllowedAlways);
    assert_eq!(person.calls(), 1, "the rule decided the second request");
    let pairs = asker.pairs();
    let (rules, deciders) = rules_and_deciders(&asker);
    assert_eq!(
        rules,
        vec![(pairs[0].0.clone(), true)],
        "named by the request"
    );
    assert_eq!(deciders, vec![None, Some(pairs[0].0.clone())]);
    // The rule is written before the decision it records.
    let events = asker.log.events();
    let rule_at = events
        .iter()
        .position(|e| matches!(e, Event::ApprovalRule { .. }));
    let decided_at = events
        .iter()
        .position(|e| matches!(e, Event::ApprovalDecided { .. }));
    assert!(rule_at < decided_at, "{events:?}");
    // Another command is asked: the control.
    let other = within(approvals.request(&asker, scoped("npm ci"), &Cancel::never())).await;
    assert_eq!(other, Outcome::AllowedAlways);
    assert_eq!(person.calls(), 2, "a different command is asked");
}

#[tokio::test]
async fn a_reject_always_rule_rejects_later_requests_of_its_scope() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let person = Fixed::new(Reply::outcome(Outcome::RejectedAlways));
    let approvals = Approvals::new(vec![person.clone()]);
    for _ in 0..2 {
        let outcome = within(approvals.request(&asker, scoped("rm -rf x"), &Cancel::never())).await;
        assert_eq!(outcome, Outcome::RejectedAlways);
        assert!(!outcome.allows());
    }
    assert_eq!(person.calls(), 1);
}

#[tokio::test]
async fn always_without_a_scope_counts_once_and_makes_no_rule() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let person = Fixed::new(Reply::outcome(Outcome::AllowedAlways));
    let approvals = Approvals::new(vec![person.clone()]);
    for _ in 0..2 {
        let outcome = within(approvals.request(&asker, ask(), &Cancel::never())).await;
        assert_eq!(outcome, Outcome::AllowedOnce);
    }
    assert_eq!(person.calls(), 2);
    assert_eq!(rules_and_deciders(&asker).0, vec![]);
}

#[tokio::test]
async fn the_policy_never_outranks_an_allow_rule() {
    let asker = TestAsker::new(ApprovalPolicy::Ask);
    let approvals = Approvals::new(vec![Fixed::new(Reply::outcome(Outcome::AllowedAlways))]);
    within(approvals.request(&asker, scoped("make"), &Cancel::never())).await;
    let never = TestAsker {
        policy: ApprovalPolicy::Never,
        ..TestAsker::new(ApprovalPolicy::Never)
    };
    for record in asker.log.records() {
        never.log.append(record.event, false).expect("copy");
    }
    let outcome = within(approvals.request(&never, scoped("make"), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Rejected);
}

#[tokio::test]
async fn an_always_allow_whose_rule_cannot_be_written_grants_nothing() {
    let asker = BrokenLog::new(|e| matches!(e, Event::ApprovalRule { .. }));
    let approvals = Approvals::new(vec![Fixed::new(Reply::outcome(Outcome::AllowedAlways))]);
    let outcome = within(approvals.request(&asker, scoped("make"), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Unavailable);
    let rejecting = Approvals::new(vec![Fixed::new(Reply::outcome(Outcome::RejectedAlways))]);
    let outcome = within(rejecting.request(&asker, scoped("make"), &Cancel::never())).await;
    assert_eq!(outcome, Outcome::Rejected);
}
