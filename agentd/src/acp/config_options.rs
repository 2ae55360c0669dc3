//! A session's knobs as ACP session config options: `sandbox-mode` and `approval-policy`, two
//! selects, and `model`, a third one offered only when more than one model is configured, in
//! the `session/new` and `session/load` answers and set with `session/set_config_option`.
//!
//! A value is checked against the closed vocabulary of its knob (for `model`, the configured
//! models), and an invalid request is answered `-32602` with one of these messages, each naming
//! what may be given instead:
//!
//! - `config option <id> is a select; boolean values are not accepted: give one of its values`
//! - `unknown sandbox-mode value "<v>"; the values are: read-only, workspace-write,
//!   danger-full-access` / `unknown approval-policy value "<v>"; the values are: ask, never`
//! - `unknown model value "<v>"; the models are: <names>`
//! - `unknown config option "<id>"; the options are: sandbox-mode, approval-policy` (and
//!   `model` when it is offered; when it is not, `model` is unknown too)

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SessionMode, SessionModeState,
};
use confine_protocol::Mode;
use confine_protocol::vocabulary::UnknownWord;

use crate::words::ApprovalPolicy;

/// The id of the sandbox mode option.
pub const SANDBOX_MODE: &str = "sandbox-mode";
/// The id of the approval policy option.
pub const APPROVAL_POLICY: &str = "approval-policy";
/// The id of the model option.
pub const MODEL: &str = "model";

const SANDBOX_DESCRIPTION: &str = "The file sandbox mode bash commands in this session run under.";
const APPROVAL_DESCRIPTION: &str =
    "ask: permission prompts reach you; never: they are rejected automatically.";
const MODEL_DESCRIPTION: &str = "The model that answers this session's next requests.";

/// A switch of one knob, as the editor asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Switch {
    Mode(Mode),
    Policy(ApprovalPolicy),
    /// A configured model, by name.
    Model(String),
}

/// Every option, with these current values: the complete list the protocol answers. The
/// sandbox-mode select lists `modes` only: those the helper would run (see
/// [`crate::composition::Composition::modes`]).
pub fn options(mode: Mode, modes: &[Mode], approval: ApprovalPolicy) -> Vec<SessionConfigOption> {
    let modes: Vec<SessionConfigSelectOption> = modes
        .iter()
        .map(|m| {
            SessionConfigSelectOption::new(m.as_str(), mode_name(*m))
                .description(mode_description(*m).to_owned())
        })
        .collect();
    let policies: Vec<SessionConfigSelectOption> = ApprovalPolicy::ALL
        .iter()
        .map(|p| {
            let (name, description) = policy_words(*p);
            SessionConfigSelectOption::new(p.as_str(), name).description(description.to_owned())
        })
        .collect();
    vec![
        SessionConfigOption::select(SANDBOX_MODE, "Sandbox", mode.as_str(), modes)
            .description(SANDBOX_DESCRIPTION)
            .category(SessionConfigOptionCategory::Mode),
        SessionConfigOption::select(APPROVAL_POLICY, "Approvals", approval.as_str(), policies)
            .description(APPROVAL_DESCRIPTION),
    ]
}

/// The `model` select: every configured model as `(name, label)`, the label what the editor
/// shows (`fast (qwen3)`), `current` selected. Listed after the other two options, and only when
/// there is a choice of models.
pub fn model_option(current: &str, models: &[(&str, &str)]) -> SessionConfigOption {
    let choices: Vec<SessionConfigSelectOption> = models
        .iter()
        .map(|(name, label)| SessionConfigSelectOption::new(name.to_string(), label.to_string()))
        .collect();
    SessionConfigOption::select(MODEL, "Model", current.to_owned(), choices)
        .description(MODEL_DESCRIPTION)
        .category(SessionConfigOptionCategory::Model)
}

/// The sandbox mode as ACP session modes, for clients that switch modes rather than config
/// options: the same knob, listing the same `modes` (those the helper would run), `mode`
/// current. Each mode's id is its name.
pub fn session_modes(mode: Mode, modes: &[Mode]) -> SessionModeState {
    let available = modes
        .iter()
        .map(|m| SessionMode::new(m.as_str(), mode_name(*m)).description(mode_description(*m)))
        .collect();
    SessionModeState::new(mode.as_str(), available)
}

/// A sandbox mode's name, for the person choosing it (its id is the configuration's word).
fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::ReadOnly => "Read only",
        Mode::WorkspaceWrite => "Workspace write",
        Mode::DangerFullAccess => "Full access (no sandbox)",
    }
}

/// An approval policy's name and what it means, for the person choosing it.
fn policy_words(policy: ApprovalPolicy) -> (&'static str, &'static str) {
    match policy {
        ApprovalPolicy::Ask => ("Ask", "Permission prompts reach you."),
        ApprovalPolicy::Never => (
            "Never ask",
            "Nobody is asked: what needs approval is rejected automatically.",
        ),
    }
}

/// What a session mode means, for the person choosing it.
fn mode_description(mode: Mode) -> &'static str {
    match mode {
        Mode::ReadOnly => "Commands may read files but change nothing.",
        Mode::WorkspaceWrite => "Commands may change files inside the workspace only.",
        Mode::DangerFullAccess => "Commands run without the file sandbox.",
    }
}

/// The switch a `session/set_mode` asks for: a sandbox mode by its name, refused with the
/// `sandbox-mode` option's message otherwise.
pub fn parse_mode_id(id: &str) -> Result<Switch, ConfigOptionError> {
    id.parse()
        .map(Switch::Mode)
        .map_err(|unknown: UnknownWord| ConfigOptionError::UnknownValue {
            option: SANDBOX_MODE,
            value: id.to_owned(),
            expected: unknown.expected,
        })
}

/// Why a `session/set_config_option` asks for no switch: the message of its `-32602` error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigOptionError {
    /// The id names no option; `known` lists those there are.
    #[error("unknown config option \"{id}\"; the options are: {known}")]
    UnknownOption { id: String, known: String },
    /// The option (its id) is a select, and the value is not a value id.
    #[error(
        "config option {0} is a select; boolean values are not accepted: give one of its values"
    )]
    NotAValueId(&'static str),
    /// The value is not a word of the option's (its id's) vocabulary, `expected`.
    #[error("unknown {option} value \"{value}\"; the values are: {}", expected.join(", "))]
    UnknownValue {
        option: &'static str,
        value: String,
        expected: &'static [&'static str],
    },
    /// The value names no configured model; `known` lists them.
    #[error("unknown model value \"{value}\"; the models are: {known}")]
    UnknownModel { value: String, known: String },
}

/// The switch a `session/set_config_option` asks for. `models` are the values of the `model`
/// option, empty when it is not offered.
pub fn parse(
    config_id: &str,
    value: &SessionConfigOptionValue,
    models: &[String],
) -> Result<Switch, ConfigOptionError> {
    let option = match config_id {
        SANDBOX_MODE => SANDBOX_MODE,
        APPROVAL_POLICY => APPROVAL_POLICY,
        MODEL if !models.is_empty() => MODEL,
        other => {
            let mut known = vec![SANDBOX_MODE, APPROVAL_POLICY];
            if !models.is_empty() {
                known.push(MODEL);
            }
            return Err(ConfigOptionError::UnknownOption {
                id: other.to_owned(),
                known: known.join(", "),
            });
        }
    };
    let SessionConfigOptionValue::ValueId { value } = value else {
        return Err(ConfigOptionError::NotAValueId(option));
    };
    let word: &str = &value.0;
    if option == MODEL {
        if !models.iter().any(|m| m == word) {
            return Err(ConfigOptionError::UnknownModel {
                value: word.to_owned(),
                known: models.join(", "),
            });
        }
        return Ok(Switch::Model(word.to_owned()));
    }
    let switch = if option == SANDBOX_MODE {
        word.parse().map(Switch::Mode)
    } else {
        word.parse().map(Switch::Policy)
    };
    switch.map_err(|unknown| ConfigOptionError::UnknownValue {
        option,
        value: word.to_owned(),
        expected: unknown.expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess];
    /// What an unknown sandbox-mode value is told.
    const MODES: &str = "read-only, workspace-write, danger-full-access";
    /// What an unknown option is told, when no model can be chosen.
    const OPTIONS: &str = "the options are: sandbox-mode, approval-policy";

    fn not_a_value_of_model() -> String {
        "config option model is a select; boolean values are not accepted: give one of its values"
            .into()
    }

    #[test]
    fn session_modes_are_the_sandbox_modes_given_with_the_current_one() {
        let wire = serde_json::to_value(session_modes(
            Mode::WorkspaceWrite,
            &[Mode::ReadOnly, Mode::WorkspaceWrite],
        ))
        .expect("json");
        assert_eq!(wire["currentModeId"], "workspace-write");
        let ids: Vec<&str> = wire["availableModes"]
            .as_array()
            .expect("modes")
            .iter()
            .filter_map(|m| m["id"].as_str())
            .collect();
        assert_eq!(ids, ["read-only", "workspace-write"]);
        assert_eq!(parse_mode_id("read-only"), Ok(Switch::Mode(Mode::ReadOnly)));
        assert_eq!(
            parse_mode_id("yolo").map_err(|e| e.to_string()),
            Err(format!(
                "unknown sandbox-mode value \"yolo\"; the values are: {MODES}"
            ))
        );
    }

    #[test]
    fn the_select_lists_only_the_modes_given() {
        let wire = serde_json::to_value(options(
            Mode::ReadOnly,
            &[Mode::ReadOnly],
            ApprovalPolicy::Ask,
        ))
        .expect("json");
        assert_eq!(
            wire[0]["options"],
            json!([{
                "value": "read-only",
                "name": "Read only",
                "description": "Commands may read files but change nothing."
            }])
        );
    }

    #[test]
    fn both_options_are_selects_with_their_vocabularies_and_current_values() {
        let wire =
            serde_json::to_value(options(Mode::ReadOnly, &ALL, ApprovalPolicy::Ask)).expect("json");
        assert_eq!(
            wire,
            json!([
                {
                    "id": "sandbox-mode",
                    "name": "Sandbox",
                    "description": "The file sandbox mode bash commands in this session run under.",
                    "category": "mode",
                    "type": "select",
                    "currentValue": "read-only",
                    "options": [
                        {
                            "value": "read-only",
                            "name": "Read only",
                            "description": "Commands may read files but change nothing.",
                        },
                        {
                            "value": "workspace-write",
                            "name": "Workspace write",
                            "description": "Commands may change files inside the workspace only.",
                        },
                        {
                            "value": "danger-full-access",
                            "name": "Full access (no sandbox)",
                            "description": "Commands run without the file sandbox.",
                        },
                    ],
                },
                {
                    "id": "approval-policy",
                    "name": "Approvals",
                    "description": "ask: permission prompts reach you; never: they are rejected automatically.",
                    "type": "select",
                    "currentValue": "ask",
                    "options": [
                        {
                            "value": "ask",
                            "name": "Ask",
                            "description": "Permission prompts reach you.",
                        },
                        {
                            "value": "never",
                            "name": "Never ask",
                            "description": "Nobody is asked: what needs approval is rejected automatically.",
                        },
                    ],
                },
            ])
        );
        let other =
            serde_json::to_value(options(Mode::DangerFullAccess, &ALL, ApprovalPolicy::Never))
                .expect("json");
        assert_eq!(other[0]["currentValue"], "danger-full-access");
        assert_eq!(other[1]["currentValue"], "never");
    }

    fn id(value: &str) -> SessionConfigOptionValue {
        SessionConfigOptionValue::value_id(value.to_owned())
    }

    #[test]
    fn valid_values_are_switches() {
        assert_eq!(
            parse("sandbox-mode", &id("workspace-write"), &[]),
            Ok(Switch::Mode(Mode::WorkspaceWrite))
        );
        assert_eq!(
            parse("sandbox-mode", &id("danger-full-access"), &[]),
            Ok(Switch::Mode(Mode::DangerFullAccess))
        );
        assert_eq!(
            parse("approval-policy", &id("never"), &[]),
            Ok(Switch::Policy(ApprovalPolicy::Never))
        );
        assert_eq!(
            parse("approval-policy", &id("ask"), &[]),
            Ok(Switch::Policy(ApprovalPolicy::Ask))
        );
    }

    /// The message of the error `parse` answers, if it answers one.
    fn message(config_id: &str, value: &SessionConfigOptionValue) -> Option<String> {
        parse(config_id, value, &[]).err().map(|e| e.to_string())
    }

    #[test]
    fn invalid_requests_get_the_specified_messages() {
        let not_a_value = |id: &str| {
            format!(
                "config option {id} is a select; boolean values are not accepted: give one of its \
                 values"
            )
        };
        assert_eq!(
            message("sandbox-mode", &SessionConfigOptionValue::boolean(true)),
            Some(not_a_value("sandbox-mode"))
        );
        assert_eq!(
            message("approval-policy", &SessionConfigOptionValue::boolean(false)),
            Some(not_a_value("approval-policy"))
        );
        assert_eq!(
            message("sandbox-mode", &id("yolo")),
            Some(format!(
                "unknown sandbox-mode value \"yolo\"; the values are: {MODES}"
            ))
        );
        assert_eq!(
            message("approval-policy", &id("on-request")),
            Some("unknown approval-policy value \"on-request\"; the values are: ask, never".into())
        );
        assert_eq!(
            message("sandbox-mode", &id("Read-Only")),
            Some(format!(
                "unknown sandbox-mode value \"Read-Only\"; the values are: {MODES}"
            ))
        );
        assert_eq!(
            message("reasoning-effort", &id("high")),
            Some(format!(
                "unknown config option \"reasoning-effort\"; {OPTIONS}"
            ))
        );
        assert_eq!(
            message("sandbox_mode", &SessionConfigOptionValue::boolean(true)),
            Some(format!("unknown config option \"sandbox_mode\"; {OPTIONS}")),
            "an unknown id is named before its value is looked at"
        );
    }

    fn models() -> Vec<String> {
        vec!["default".into(), "fast".into()]
    }

    #[test]
    fn the_model_option_is_a_select_of_the_models_with_their_labels() {
        let wire = serde_json::to_value(model_option(
            "fast",
            &[("default", "default (big)"), ("fast", "fast (qwen3)")],
        ))
        .expect("json");
        assert_eq!(
            wire,
            json!({
                "id": "model",
                "name": "Model",
                "description": "The model that answers this session's next requests.",
                "category": "model",
                "type": "select",
                "currentValue": "fast",
                "options": [
                    {"value": "default", "name": "default (big)"},
                    {"value": "fast", "name": "fast (qwen3)"},
                ],
            })
        );
    }

    #[test]
    fn a_model_switch_names_a_configured_model_and_only_when_offered() {
        assert_eq!(
            parse("model", &id("fast"), &models()),
            Ok(Switch::Model("fast".into()))
        );
        assert_eq!(
            parse("model", &id("slow"), &models()).map_err(|e| e.to_string()),
            Err("unknown model value \"slow\"; the models are: default, fast".into())
        );
        assert_eq!(
            parse("model", &SessionConfigOptionValue::boolean(true), &models())
                .map_err(|e| e.to_string()),
            Err(not_a_value_of_model())
        );
        assert_eq!(
            message("model", &id("default")),
            Some(format!("unknown config option \"model\"; {OPTIONS}")),
            "one model: no option"
        );
        assert_eq!(
            parse("effort", &id("high"), &models()).map_err(|e| e.to_string()),
            Err(format!(
                "unknown config option \"effort\"; {OPTIONS}, model"
            )),
            "several models: the option is listed"
        );
    }
}
