//! The approval seam: how something that is about to act asks a human first.
//!
//! [`Approvals::request`] is the one entry point. It always resolves to an [`Outcome`] —
//! `allowed-once`, `rejected`, `cancelled` or `unavailable` — and never fails:
//!
//! - Under the approval policy `never` ([`crate::knobs::policy`]) it rejects before any answerer runs.
//! - A cancel before the request is dispatched, or while it waits, gives `cancelled`; an answer
//!   that arrives after the cancel is discarded.
//! - Otherwise the request goes down a chain of [`Answerer`]s. The first that decides wins; an
//!   answerer may hand the request to the next one ([`Reply::Next`]), which is what an answerer
//!   does with a request it does not own (another session's, say). No answerer, or none that
//!   decides, gives `unavailable`.
//! - An answerer that panics, or that answers a word outside the vocabulary, gives
//!   `unavailable`: the chain runs in its own task, so a panic is contained there.
//!
//! Every request appends the log-only pair `approval/asked {id, tool, call_id, reason}` and
//! `approval/decided {id, outcome}` to the asking session's log, with the same fresh id,
//! whatever the outcome. The pair is an audit trail: it is neither part of the model's history
//! nor replayed to an editor. If the log cannot take the pair, nothing is granted
//! (`unavailable`).
//!
//! `allowed-once` lets the one action that asked go ahead and is stored nowhere; the next action
//! asks again. A request with a [`Scope`] may also be answered `allowed-always` or
//! `rejected-always`: the seam records that answer as an `approval/rule` (durable, before the
//! `approval/decided`), and from then on a request of the same scope in the session is decided
//! by that rule — after the policy `never`, before any answerer — with `approval/decided`
//! naming the rule (see [`rules`]). An "always" answer to a request without a scope counts once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cancel::Cancel;
use crate::session::{Event, SessionLog};
use crate::words::ApprovalPolicy;

pub mod rules;

pub use crate::words::Outcome;
pub use rules::Scope;

/// What is asked: which tool, for which of its calls, why, what the person is shown, and what
/// an "always" answer would cover.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub tool: String,
    /// The tool call that asks, as it was already announced to the editor; an answerer that
    /// shows the question attaches it to that call.
    pub call_id: Option<String>,
    /// Why approval is needed, in words for the person asked and for the audit log.
    pub reason: Option<String>,
    /// The question as a person reads it, on its own.
    pub question: Question,
    /// What an "always" answer covers; `None` when only this request can be answered.
    pub scope: Option<Scope>,
}

/// A question as a person reads it without anything else on screen: the call as it was
/// announced and one line saying what would happen, how, and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Question {
    pub title: String,
    /// ACP's `ToolKind` name.
    pub kind: String,
    /// The call's arguments as announced.
    pub input: serde_json::Value,
    /// What a person reads first, e.g. ``Run `npm install` with workspace-write (now
    /// read-only): needs to write node_modules``.
    pub text: String,
    /// For a file tool's write, the change it will make, computed before anything is written:
    /// the write writes exactly this text to this file, or nothing.
    pub diff: Option<crate::session::LoggedDiff>,
}

/// One request as the answerers see it.
#[derive(Debug, Clone)]
pub struct Request {
    /// Who asks (a session id): an answerer answers only for the agents it serves.
    pub agent: String,
    /// What is asked.
    pub ask: Ask,
    /// The asking turn's cancel; an answerer may stop waiting on it (the seam does anyway).
    pub cancel: Cancel,
}

/// What an answerer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A decision, as a word of the vocabulary ([`Outcome::as_str`]). Any other word makes the
    /// request `unavailable`: a decision nobody can read grants nothing.
    Decided(String),
    /// Not mine: ask the next answerer.
    Next,
}

impl Reply {
    /// The reply that decides `outcome`.
    pub fn outcome(outcome: Outcome) -> Reply {
        Reply::Decided(outcome.as_str().to_owned())
    }
}

/// What [`Answerer::answer`] returns.
pub type ReplyFuture<'a> = Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

/// Something that can answer approval requests: a person behind an editor, a rule.
pub trait Answerer: Send + Sync {
    fn answer<'a>(&'a self, request: &'a Request) -> ReplyFuture<'a>;
}

/// Who asks: a session, with its log (for the audit pair) and its effective policy.
pub trait Asker: SessionLog {
    /// The id answerers route by.
    fn agent(&self) -> &str;
    /// The session's effective approval policy now.
    fn policy(&self) -> ApprovalPolicy;
}

/// The chain of answerers, first to last.
#[derive(Clone, Default)]
pub struct Approvals {
    chain: Arc<[Arc<dyn Answerer>]>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("answerers", &self.chain.len())
            .finish()
    }
}

impl Approvals {
    /// A chain of these answerers, asked in this order.
    pub fn new(chain: Vec<Arc<dyn Answerer>>) -> Approvals {
        Approvals {
            chain: chain.into(),
        }
    }

    /// Asks for approval of `ask` on behalf of `asker`, and records the audit pair in its log.
    /// See the module documentation for every way this ends; it never fails.
    #[cfg(test)]
    pub async fn request(&self, asker: &dyn Asker, ask: Ask, cancel: &Cancel) -> Outcome {
        self.decision(asker, ask, cancel).await.outcome
    }

    /// As [`Approvals::request`], and whether the approval policy `never` decided (nobody was
    /// asked), which the refusal told to the model says.
    pub async fn decision(&self, asker: &dyn Asker, ask: Ask, cancel: &Cancel) -> Decision {
        let id = fresh_id();
        let asked = asker.append(
            Event::ApprovalAsked {
                id: id.clone(),
                tool: ask.tool.clone(),
                call_id: ask.call_id.clone(),
                reason: ask.reason.clone(),
            },
            false,
        );
        if let Err(e) = asked {
            eprintln!(
                "agentd: session {}: cannot record an approval request ({e}); nothing is granted",
                asker.agent()
            );
            return Decision::asked(self.decided(asker, id, Outcome::Unavailable, None, None));
        }
        let scope = ask.scope.clone();
        let request = Request {
            agent: asker.agent().to_owned(),
            ask,
            cancel: cancel.clone(),
        };
        // The policy `never` decides here, before any rule or answerer, so nothing can bypass it.
        let by_policy = !request.cancel.is_cancelled() && asker.policy() == ApprovalPolicy::Never;
        let (outcome, rule) = if by_policy {
            (Outcome::Rejected, None)
        } else {
            self.decide(asker, request).await
        };
        let outcome = match (rule.is_none(), outcome.always(), scope) {
            // A person's "always": the rule is durable before the decision it records.
            (true, Some(allow), Some(scope)) => {
                match asker.append(rules::record(&scope, &id, allow), true) {
                    Ok(_) => outcome,
                    Err(e) => {
                        eprintln!(
                            "agentd: session {}: cannot record an approval rule ({e}); nothing is \
                         granted",
                            asker.agent()
                        );
                        if allow {
                            Outcome::Unavailable
                        } else {
                            Outcome::Rejected
                        }
                    }
                }
            }
            (true, Some(_), None) => outcome.once(),
            _ => outcome,
        };
        Decision {
            outcome: self.decided(
                asker,
                id,
                outcome,
                rule,
                by_policy.then_some(ApprovalPolicy::Never),
            ),
            by_policy,
        }
    }

    /// Records how request `id` ended, and the rule or the policy that decided it when one
    /// did, durable before whatever the decision lets happen.
    fn decided(
        &self,
        asker: &dyn Asker,
        id: String,
        outcome: Outcome,
        rule: Option<String>,
        policy: Option<ApprovalPolicy>,
    ) -> Outcome {
        let event = Event::ApprovalDecided {
            id,
            outcome,
            rule,
            policy,
        };
        match asker.append(event, true) {
            Ok(_) => outcome,
            Err(e) => {
                eprintln!(
                    "agentd: session {}: cannot record an approval decision ({e}); nothing is \
                     granted",
                    asker.agent()
                );
                if outcome.allows() {
                    Outcome::Unavailable
                } else {
                    outcome
                }
            }
        }
    }

    /// The outcome, and the rule that decided it when one did (the policy `never` has been
    /// applied already).
    async fn decide(&self, asker: &dyn Asker, request: Request) -> (Outcome, Option<String>) {
        if request.cancel.is_cancelled() {
            return (Outcome::Cancelled, None);
        }
        if let Some(scope) = &request.ask.scope
            && let Some((rule, allow)) =
                crate::session::read(asker, |records| rules::deciding(records, scope))
        {
            let outcome = if allow {
                Outcome::AllowedAlways
            } else {
                Outcome::RejectedAlways
            };
            return (outcome, Some(rule));
        }
        if self.chain.is_empty() {
            return (Outcome::Unavailable, None);
        }
        let chain = self.chain.clone();
        let cancel = request.cancel.clone();
        let agent = request.agent.clone();
        // Its own task: a panicking answerer ends that task, not the turn.
        let task = tokio::spawn(async move { ask_chain(&chain, &request).await });
        let abort = task.abort_handle();
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                // Whatever the answerers say from now on is discarded.
                abort.abort();
                Outcome::Cancelled
            }
            joined = task => match joined {
                Ok(outcome) => outcome,
                Err(e) => {
                    eprintln!(
                        "agentd: session {agent}: an approval answerer failed ({e}); the \
                         request is unavailable"
                    );
                    Outcome::Unavailable
                }
            },
        };
        // A cancel that came with the answer outranks it: a cancelled turn runs nothing more.
        if cancel.is_cancelled() {
            (Outcome::Cancelled, None)
        } else {
            (outcome, None)
        }
    }
}

/// How a request ended, and whether the approval policy `never` decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    /// The policy `never` rejected the request before anyone could be asked.
    pub by_policy: bool,
}

impl Decision {
    fn asked(outcome: Outcome) -> Decision {
        Decision {
            outcome,
            by_policy: false,
        }
    }
}

/// What the model is told when the policy `never` refused: nobody was asked.
const POLICY_NEVER_REFUSED: &str =
    "rejected by the approval policy (never): approval prompts are disabled in this session";

/// Asks each answerer in turn until one decides.
async fn ask_chain(chain: &[Arc<dyn Answerer>], request: &Request) -> Outcome {
    for answerer in chain {
        match answerer.answer(request).await {
            Reply::Next => continue,
            Reply::Decided(word) => {
                return word.parse().unwrap_or_else(|_| {
                    eprintln!(
                        "agentd: session {}: an approval answerer answered {word:?}, which is \
                         not an outcome; the request is unavailable",
                        request.agent
                    );
                    Outcome::Unavailable
                });
            }
        }
    }
    Outcome::Unavailable
}

/// What a tool call that needed approval answers the model when it was not allowed to run
/// (`None` when it was).
pub fn tool_refusal(tool: &str, decision: Decision) -> Option<String> {
    match decision.outcome {
        Outcome::AllowedOnce | Outcome::AllowedAlways => None,
        Outcome::Rejected if decision.by_policy => {
            Some(format!("tool \"{tool}\" was {POLICY_NEVER_REFUSED}"))
        }
        Outcome::Rejected | Outcome::RejectedAlways => {
            Some(format!("the user rejected tool \"{tool}\""))
        }
        Outcome::Cancelled => Some(format!("approval for tool \"{tool}\" was cancelled")),
        Outcome::Unavailable => Some(format!(
            "tool \"{tool}\" requires approval, but no approval channel is available"
        )),
    }
}

/// The text a refused escalation of one command to `mode` answers the model with; `None` when
/// it was allowed.
pub fn escalation_refusal(mode: confine_protocol::Mode, decision: Decision) -> Option<String> {
    let m = mode.as_str();
    match decision.outcome {
        Outcome::AllowedOnce | Outcome::AllowedAlways => None,
        Outcome::Rejected if decision.by_policy => Some(format!(
            "escalating this command to \"{m}\" was {POLICY_NEVER_REFUSED}"
        )),
        Outcome::Rejected | Outcome::RejectedAlways => Some(format!(
            "the user rejected escalating this command to \"{m}\""
        )),
        Outcome::Cancelled => Some(format!("approval for escalating to \"{m}\" was cancelled")),
        Outcome::Unavailable => Some(format!(
            "sandbox escalation to \"{m}\" requires approval, but no approval channel is available"
        )),
    }
}

/// A fresh request id, shaped like a random UUID.
pub fn fresh_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_ok();
    if !random {
        // Unique in this process even without randomness: the time and a counter.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        bytes[..8].copy_from_slice(&nanos.to_be_bytes());
        bytes[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests;
