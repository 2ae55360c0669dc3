//! The escalation gate: a `bash` call may ask to run under a wider sandbox mode than its
//! session's, with a justification. [`requested_escalation`] reads the request as the call would
//! be read; [`escalation_gate`] checks, before anything runs or anyone is asked, that it may be
//! put to an approver at all.

use confine_protocol::Mode;

use super::args::{self, ArgsError, ESCALATION_NOT_OFFERED, Escalation};
use super::env::ToolEnv;
use super::spec::ESCALATING;
use crate::model::ToolCall;

/// The wider mode a call of an escalating tool (`bash`, `write_file`, `edit_file`) asks for,
/// checked as `run` would check it: `Ok(None)` for any other call or a plain one, `Err` (the text for the model) when the request is malformed or
/// not offered. The caller gates and asks for approval before running the call under the mode.
pub fn requested_escalation(
    env: &ToolEnv,
    call: &ToolCall,
) -> Result<Option<Escalation>, ArgsError> {
    if !ESCALATING.contains(&call.name.as_str()) {
        return Ok(None);
    }
    match args::parse(&call.name, &call.arguments, env.spec_options())? {
        args::Call::Bash(args) => Ok(args.escalation),
        args::Call::WriteFile(args) => Ok(args.escalation),
        args::Call::EditFile(args) => Ok(args.escalation),
        _ => Ok(None),
    }
}

/// Why the escalation gate refuses a request, before anything runs or anyone is asked. The text
/// is for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The tools do not offer escalation.
    #[error("{ESCALATION_NOT_OFFERED}")]
    NotOffered,
    /// The requested mode is not wider than the call's.
    #[error(
        "sandbox escalation to \"{}\" is not strictly wider than this call's current \"{}\" mode",
        requested.as_str(),
        effective.as_str()
    )]
    NotWider { requested: Mode, effective: Mode },
    /// The helper would not run the requested mode; `why` says why.
    #[error("sandbox escalation to \"{}\" cannot be granted: {why}", requested.as_str())]
    NotGranted { requested: Mode, why: String },
    /// No approval service is composed to ask.
    #[error(
        "sandbox escalation to \"{}\" requires approval, but no approval service is composed",
        requested.as_str()
    )]
    NoApprovalService { requested: Mode },
    /// The call has no agent (session) to route the question through.
    #[error(
        "sandbox escalation to \"{}\" requires approval, but the call has no agent to route it through",
        requested.as_str()
    )]
    NoAgent { requested: Mode },
}

/// Escalation must widen: read-only → workspace-write or danger-full-access; workspace-write
/// → danger-full-access. Anything else fails without asking anyone.
pub fn strictly_widens(requested: Mode, effective: Mode) -> Result<(), GateError> {
    if requested > effective {
        Ok(())
    } else {
        Err(GateError::NotWider {
            requested,
            effective,
        })
    }
}

/// What the escalation gate checks besides the request itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateContext {
    /// The tools offer escalation (the executor confines, and the helper grants a wider mode).
    pub offered: bool,
    /// The session's effective mode for this call.
    pub effective: Mode,
    /// Why the helper would not run the requested mode, if it would not.
    pub refusal: Option<String>,
    /// An approval service is composed.
    pub approval_service: bool,
    /// The call has an agent (a session) to route the question through.
    pub agent: bool,
}

/// The escalation gate, in the specified order, before anything runs or anyone is asked: offered,
/// strictly widening, granted by the helper, an approval service, an agent.
pub fn escalation_gate(requested: Mode, ctx: &GateContext) -> Result<(), GateError> {
    if !ctx.offered {
        return Err(GateError::NotOffered);
    }
    strictly_widens(requested, ctx.effective)?;
    if let Some(why) = &ctx.refusal {
        return Err(GateError::NotGranted {
            requested,
            why: why.clone(),
        });
    }
    if !ctx.approval_service {
        return Err(GateError::NoApprovalService { requested });
    }
    if !ctx.agent {
        return Err(GateError::NoAgent { requested });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use confine_protocol::{BackendChoice, Network};
    use serde_json::json;

    use super::*;
    use crate::helper_client::HelperClient;
    use crate::tools::spec::{BASH, SpecOptions, spec_with};

    fn bash_call(arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: BASH.into(),
            arguments: arguments.into(),
        }
    }

    /// The escalation of a bash call, or its refusal.
    fn parse(arguments: &str, escalation: bool) -> Result<Option<Escalation>, ArgsError> {
        let options = if escalation {
            SpecOptions::confining()
        } else {
            SpecOptions::default()
        };
        match args::parse(BASH, arguments, &options)? {
            args::Call::Bash(args) => Ok(args.escalation),
            other => panic!("not bash: {other:?}"),
        }
    }

    #[test]
    fn the_escalation_fields_exist_only_when_the_executor_confines() {
        let with = spec_with(BASH, &SpecOptions::confining()).expect("bash");
        let props = &with.parameters["properties"];
        assert_eq!(
            props["sandbox_permissions"]["enum"],
            json!(["workspace-write", "danger-full-access"])
        );
        assert!(props.get("justification").is_some());
        assert!(with.description.contains("Sandbox escalation"));
        let without = spec_with(BASH, &SpecOptions::default()).expect("bash");
        assert!(
            without.parameters["properties"]
                .get("sandbox_permissions")
                .is_none()
        );
        assert!(
            without.parameters["properties"]
                .get("justification")
                .is_none()
        );
        assert!(!without.description.contains("escalat"));
    }

    #[test]
    fn escalation_fields_are_validated_with_the_specified_texts() {
        let only_mode = r#"{"command":"x","sandbox_permissions":"workspace-write"}"#;
        assert_eq!(
            parse(only_mode, true).unwrap_err().to_string(),
            "invalid escalation: sandbox_permissions requires a justification"
        );
        let only_why = r#"{"command":"x","justification":"because"}"#;
        assert_eq!(
            parse(only_why, true).unwrap_err().to_string(),
            "invalid escalation: justification is only valid together with sandbox_permissions"
        );
        let blank =
            r#"{"command":"x","sandbox_permissions":"workspace-write","justification":"  "}"#;
        assert_eq!(
            parse(blank, true).unwrap_err().to_string(),
            "invalid justification: expected a non-empty sentence"
        );
        let bad_mode = r#"{"command":"x","sandbox_permissions":"root","justification":"j"}"#;
        assert!(
            parse(bad_mode, true)
                .unwrap_err()
                .to_string()
                .contains("must be one of")
        );
        let good = r#"{"command":"x","sandbox_permissions":"danger-full-access","justification":" to install "}"#;
        assert_eq!(
            parse(good, true).expect("valid"),
            Some(Escalation {
                mode: Mode::DangerFullAccess,
                justification: "to install".into()
            })
        );
        assert_eq!(parse(r#"{"command":"x"}"#, true).expect("plain"), None);
    }

    #[test]
    fn escalation_not_offered_is_refused_with_its_own_text() {
        let asked =
            r#"{"command":"x","sandbox_permissions":"workspace-write","justification":"j"}"#;
        assert_eq!(
            parse(asked, false).unwrap_err().to_string(),
            ESCALATION_NOT_OFFERED
        );
        assert_eq!(
            parse(r#"{"command":"x","justification":"j"}"#, false)
                .unwrap_err()
                .to_string(),
            ESCALATION_NOT_OFFERED
        );
    }

    #[test]
    fn escalation_must_strictly_widen_the_effective_mode() {
        use Mode::*;
        assert!(strictly_widens(WorkspaceWrite, ReadOnly).is_ok());
        assert!(strictly_widens(DangerFullAccess, ReadOnly).is_ok());
        assert!(strictly_widens(DangerFullAccess, WorkspaceWrite).is_ok());
        assert_eq!(
            strictly_widens(WorkspaceWrite, WorkspaceWrite)
                .unwrap_err()
                .to_string(),
            "sandbox escalation to \"workspace-write\" is not strictly wider than this call's current \"workspace-write\" mode"
        );
        assert!(strictly_widens(WorkspaceWrite, DangerFullAccess).is_err());
    }

    #[test]
    fn the_gate_checks_in_order_and_each_failure_has_its_text() {
        let open = GateContext {
            offered: true,
            effective: Mode::ReadOnly,
            refusal: None,
            approval_service: true,
            agent: true,
        };
        assert_eq!(escalation_gate(Mode::WorkspaceWrite, &open), Ok(()));
        let closed = GateContext {
            offered: false,
            ..open.clone()
        };
        assert_eq!(
            escalation_gate(Mode::WorkspaceWrite, &closed)
                .unwrap_err()
                .to_string(),
            ESCALATION_NOT_OFFERED
        );
        let narrow = GateContext {
            effective: Mode::WorkspaceWrite,
            approval_service: false,
            ..open.clone()
        };
        assert!(
            escalation_gate(Mode::WorkspaceWrite, &narrow)
                .unwrap_err()
                .to_string()
                .contains("is not strictly wider"),
            "widening is checked before the approval service"
        );
        let ungranted = GateContext {
            refusal: Some("its ceiling allows at most read-only".into()),
            approval_service: false,
            ..open.clone()
        };
        assert_eq!(
            escalation_gate(Mode::WorkspaceWrite, &ungranted)
                .unwrap_err()
                .to_string(),
            "sandbox escalation to \"workspace-write\" cannot be granted: its ceiling allows at \
             most read-only",
            "the grant is checked before the approval service: nobody is asked for a dead lever"
        );
        let no_service = GateContext {
            approval_service: false,
            ..open.clone()
        };
        assert_eq!(
            escalation_gate(Mode::DangerFullAccess, &no_service)
                .unwrap_err()
                .to_string(),
            "sandbox escalation to \"danger-full-access\" requires approval, but no approval service is composed"
        );
        let no_agent = GateContext {
            agent: false,
            ..open
        };
        assert_eq!(
            escalation_gate(Mode::WorkspaceWrite, &no_agent)
                .unwrap_err()
                .to_string(),
            "sandbox escalation to \"workspace-write\" requires approval, but the call has no agent to route it through"
        );
    }

    #[test]
    fn requested_escalation_ignores_other_tools_and_reports_bad_requests() {
        let client = HelperClient::new(crate::helper_client::HelperEndpoint::Embedded(
            "/nonexistent/confine-helper".into(),
        ));
        let env = ToolEnv::new(
            client,
            std::env::temp_dir(),
            Vec::new(),
            Network::Deny,
            BackendChoice::Auto,
            None,
        )
        .with_spec_options(SpecOptions::confining());
        let read = ToolCall {
            id: "r".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        };
        assert!(matches!(requested_escalation(&env, &read), Ok(None)));
        let asked = bash_call(
            r#"{"command":"touch f","sandbox_permissions":"workspace-write","justification":"write f"}"#,
        );
        assert_eq!(
            requested_escalation(&env, &asked)
                .expect("valid")
                .map(|e| e.mode),
            Some(Mode::WorkspaceWrite)
        );
        let malformed = bash_call(r#"{"command":"x","justification":"j"}"#);
        assert!(requested_escalation(&env, &malformed).is_err());
        for (name, arguments) in [
            (
                "write_file",
                r#"{"path":"/srv/x","content":"y","sandbox_permissions":"danger-full-access","justification":"j"}"#,
            ),
            (
                "edit_file",
                r#"{"path":"/srv/x","old_string":"a","new_string":"b","sandbox_permissions":"danger-full-access","justification":"j"}"#,
            ),
        ] {
            let call = ToolCall {
                id: "f".into(),
                name: name.into(),
                arguments: arguments.into(),
            };
            assert_eq!(
                requested_escalation(&env, &call)
                    .expect("valid")
                    .map(|e| e.mode),
                Some(Mode::DangerFullAccess),
                "{name}"
            );
        }
    }

    #[test]
    fn file_tools_have_the_escalation_fields_exactly_when_bash_has_them() {
        for name in ["write_file", "edit_file"] {
            let with = spec_with(name, &SpecOptions::confining()).expect("spec");
            assert_eq!(
                with.parameters["properties"]["sandbox_permissions"]["enum"],
                json!(["workspace-write", "danger-full-access"]),
                "{name}"
            );
            assert!(with.description.contains("Sandbox escalation"), "{name}");
            let without = spec_with(name, &SpecOptions::default()).expect("spec");
            assert!(
                without.parameters["properties"]
                    .get("sandbox_permissions")
                    .is_none()
            );
            assert!(!without.description.contains("escalat"), "{name}");
            let asked = r#"{"path":"a","content":"x","sandbox_permissions":"workspace-write","justification":"j"}"#;
            let refused = args::parse("write_file", asked, &SpecOptions::default())
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(refused, Err(ESCALATION_NOT_OFFERED.to_owned()));
        }
    }
}
