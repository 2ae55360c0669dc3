//! `update_plan`: the top-level agent's plan, whole each time, as the model sets it. Its
//! arguments are read here, with the same bounds the schema states ([`super::spec`]); the turn
//! records the plan and shows it to the editor as ACP's `plan` update (`acp::turn`).

use serde::Deserialize;

use super::spec::{MAX_PLAN_ENTRIES, MAX_PLAN_ENTRY_CHARS, UPDATE_PLAN};
use crate::session::{PlanItem, PlanPriority, PlanStatus};

/// The shape of the arguments, for the messages that refuse others.
const EXPECTED: &str = "expected {\"plan\": [{\"content\": string, \"priority\": \"high\" | \
     \"medium\" | \"low\", \"status\": \"pending\" | \"in_progress\" | \"completed\"}, ...]}";

/// Why an `update_plan` call was refused; the text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("invalid {UPDATE_PLAN} arguments: {detail}; {EXPECTED}")]
    Malformed { detail: String },
    #[error(
        "the plan has {count} steps; at most {MAX_PLAN_ENTRIES} are kept: merge steps and call \
         {UPDATE_PLAN} again"
    )]
    TooLong { count: usize },
    #[error(
        "step {number} of the plan has {chars} characters; at most {MAX_PLAN_ENTRY_CHARS}: say it \
         shorter and call {UPDATE_PLAN} again"
    )]
    EntryTooLong { number: usize, chars: usize },
    #[error("step {number} of the plan is empty: give each step a content")]
    EmptyEntry { number: usize },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    plan: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    content: String,
    priority: PlanPriority,
    status: PlanStatus,
}

/// The plan an `update_plan` call's `arguments` set.
pub fn parse(arguments: &str) -> Result<Vec<PlanItem>, PlanError> {
    let args: Args = serde_json::from_str(arguments).map_err(|e| PlanError::Malformed {
        detail: e.to_string(),
    })?;
    if args.plan.len() > MAX_PLAN_ENTRIES {
        return Err(PlanError::TooLong {
            count: args.plan.len(),
        });
    }
    let mut items = Vec::with_capacity(args.plan.len());
    for (index, entry) in args.plan.into_iter().enumerate() {
        let number = index + 1;
        let content = entry.content.trim().to_owned();
        let chars = content.chars().count();
        if chars == 0 {
            return Err(PlanError::EmptyEntry { number });
        }
        if chars > MAX_PLAN_ENTRY_CHARS {
            return Err(PlanError::EntryTooLong { number, chars });
        }
        items.push(PlanItem {
            content,
            priority: entry.priority,
            status: entry.status,
        });
    }
    Ok(items)
}

/// What the model reads once its plan was shown: how many steps stand where.
pub fn result_text(items: &[PlanItem]) -> String {
    let count = |status: PlanStatus| items.iter().filter(|i| i.status == status).count();
    format!(
        "Plan updated: {} steps ({} completed, {} in progress, {} pending).",
        items.len(),
        count(PlanStatus::Completed),
        count(PlanStatus::InProgress),
        count(PlanStatus::Pending)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_read_with_acps_words() {
        let items = parse(
            r#"{"plan":[{"content":" Read the notes ","priority":"high","status":"completed"},
                {"content":"Write out.txt","priority":"low","status":"in_progress"}]}"#,
        )
        .expect("a plan");
        assert_eq!(
            items,
            vec![
                PlanItem {
                    content: "Read the notes".into(),
                    priority: PlanPriority::High,
                    status: PlanStatus::Completed,
                },
                PlanItem {
                    content: "Write out.txt".into(),
                    priority: PlanPriority::Low,
                    status: PlanStatus::InProgress,
                },
            ]
        );
        assert_eq!(
            result_text(&items),
            "Plan updated: 2 steps (1 completed, 1 in progress, 0 pending)."
        );
        assert_eq!(parse(r#"{"plan":[]}"#), Ok(Vec::new()));
    }

    #[test]
    fn a_malformed_or_oversized_plan_is_refused_with_what_to_do() {
        let step = |content: &str| {
            format!(r#"{{"content":{content:?},"priority":"high","status":"pending"}}"#)
        };
        for (arguments, expected) in [
            ("{", "invalid update_plan arguments"),
            (r#"{"steps":[]}"#, "unknown field `steps`"),
            (
                r#"{"plan":[{"content":"x","priority":"urgent","status":"pending"}]}"#,
                "unknown variant `urgent`",
            ),
            (
                r#"{"plan":[{"content":"x","priority":"high","status":"done"}]}"#,
                "unknown variant `done`",
            ),
            (
                &format!(r#"{{"plan":[{}]}}"#, step("  ")),
                "step 1 of the plan is empty",
            ),
            (
                &format!(
                    r#"{{"plan":[{}]}}"#,
                    step(&"x".repeat(MAX_PLAN_ENTRY_CHARS + 1))
                ),
                "step 1 of the plan has 501 characters",
            ),
            (
                &format!(
                    r#"{{"plan":[{}]}}"#,
                    vec![step("x"); MAX_PLAN_ENTRIES + 1].join(",")
                ),
                "the plan has 51 steps",
            ),
        ] {
            let refused = parse(arguments).expect_err(arguments).to_string();
            assert!(refused.contains(expected), "{arguments}: {refused}");
        }
        // The control: the largest plan allowed is read.
        let largest = format!(
            r#"{{"plan":[{}]}}"#,
            vec![step(&"x".repeat(MAX_PLAN_ENTRY_CHARS)); MAX_PLAN_ENTRIES].join(",")
        );
        assert_eq!(parse(&largest).map(|p| p.len()), Ok(MAX_PLAN_ENTRIES));
    }
}
