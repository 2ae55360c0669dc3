//! How `agentd exec` answers the agent's permission requests, with nobody to ask: the
//! `--approve` policy decides, by the kind of each offered option (`allow_once`, `reject_once`),
//! never by its id or its place in the list, and never picks an "always" option, so that a grant
//! stays one call's.

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome,
};
use serde_json::Value;

/// `--approve`: which permission requests `agentd exec` allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Approve {
    /// Reject every request.
    #[default]
    None,
    /// Allow (once) a request to run one command in a wider sandbox mode (its call's input
    /// carries `sandbox_permissions`); reject the rest.
    Escalations,
    /// Allow every request once.
    All,
}

confine_protocol::vocabulary!(Approve, "approval answer", APPROVE_WORDS, [
    None => "none",
    Escalations => "escalations",
    All => "all",
]);

/// What the policy answered to one request, and why, for the person reading stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub response: RequestPermissionResponse,
    /// `allowed once`, `rejected`, or `cancelled` and why.
    pub said: String,
}

/// The policy's answer to `request`, whose tool call's input is `input` (the request's own, else
/// the one its call was announced with).
pub fn decide(approve: Approve, request: &RequestPermissionRequest, input: &Value) -> Decision {
    let allow = match approve {
        Approve::None => false,
        Approve::Escalations => is_escalation(input),
        Approve::All => true,
    };
    let (kind, said) = if allow {
        (PermissionOptionKind::AllowOnce, "allowed once")
    } else {
        (PermissionOptionKind::RejectOnce, "rejected")
    };
    let offered = request
        .options
        .iter()
        .find(|option| option.kind == kind)
        .map(|option| option.option_id.clone());
    match offered {
        Some(id) => Decision {
            response: RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
                SelectedPermissionOutcome::new(id),
            )),
            said: said.to_owned(),
        },
        // Never an "always" option in its place: the request is dismissed, which runs nothing.
        None => Decision {
            response: RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled),
            said: format!(
                "cancelled (no option of kind {} was offered)",
                kind_word(kind)
            ),
        },
    }
}

/// Whether a call's input asks for a sandbox escalation.
pub fn is_escalation(input: &Value) -> bool {
    input
        .get("sandbox_permissions")
        .is_some_and(|value| !value.is_null())
}

fn kind_word(kind: PermissionOptionKind) -> &'static str {
    match kind {
        PermissionOptionKind::AllowOnce => "allow_once",
        PermissionOptionKind::RejectOnce => "reject_once",
        PermissionOptionKind::AllowAlways => "allow_always",
        PermissionOptionKind::RejectAlways => "reject_always",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        PermissionOption, ToolCallUpdate, ToolCallUpdateFields,
    };
    use serde_json::json;

    /// A request offering these options, in this order.
    fn request(options: &[(&str, PermissionOptionKind)]) -> RequestPermissionRequest {
        RequestPermissionRequest::new(
            "s",
            ToolCallUpdate::new("call_1_1", ToolCallUpdateFields::new()),
            options
                .iter()
                .map(|(id, kind)| PermissionOption::new(id.to_string(), id.to_string(), *kind))
                .collect(),
        )
    }

    fn chosen(decision: &Decision) -> Option<String> {
        match &decision.response.outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        }
    }

    /// Every kind offered, "always" first, under ids that say nothing.
    fn everything() -> RequestPermissionRequest {
        request(&[
            ("a", PermissionOptionKind::AllowAlways),
            ("b", PermissionOptionKind::RejectAlways),
            ("c", PermissionOptionKind::RejectOnce),
            ("d", PermissionOptionKind::AllowOnce),
        ])
    }

    #[test]
    fn the_option_is_chosen_by_its_kind_never_an_always_one() {
        let escalation = json!({"command": "x", "sandbox_permissions": "workspace-write"});
        let plain = json!({"command": "x"});
        let cases = [
            (Approve::None, &escalation, "c"),
            (Approve::None, &plain, "c"),
            (Approve::Escalations, &escalation, "d"),
            (Approve::Escalations, &plain, "c"),
            (Approve::All, &plain, "d"),
            (Approve::All, &escalation, "d"),
        ];
        for (approve, input, expected) in cases {
            let decision = decide(approve, &everything(), input);
            assert_eq!(
                chosen(&decision).as_deref(),
                Some(expected),
                "{approve} {input}"
            );
        }
        assert_eq!(
            decide(Approve::All, &everything(), &plain).said,
            "allowed once"
        );
        assert_eq!(
            decide(Approve::None, &everything(), &plain).said,
            "rejected"
        );
    }

    #[test]
    fn without_the_kind_it_needs_the_request_is_dismissed() {
        let only_always = request(&[
            ("allow-once", PermissionOptionKind::AllowAlways),
            ("reject-once", PermissionOptionKind::RejectAlways),
        ]);
        for approve in Approve::ALL {
            let decision = decide(*approve, &only_always, &json!({}));
            assert_eq!(
                decision.response.outcome,
                RequestPermissionOutcome::Cancelled,
                "{approve}"
            );
        }
        let decision = decide(Approve::All, &only_always, &json!({}));
        assert_eq!(
            decision.said,
            "cancelled (no option of kind allow_once was offered)"
        );
    }

    #[test]
    fn an_escalation_is_a_call_whose_input_carries_sandbox_permissions() {
        assert!(is_escalation(
            &json!({"sandbox_permissions": "danger-full-access"})
        ));
        assert!(!is_escalation(&json!({"sandbox_permissions": null})));
        assert!(!is_escalation(&json!({"command": "ls"})));
        assert!(!is_escalation(&json!("sandbox_permissions")));
    }

    #[test]
    fn the_policy_words_parse() {
        assert_eq!("escalations".parse::<Approve>(), Ok(Approve::Escalations));
        assert_eq!(APPROVE_WORDS, ["none", "escalations", "all"]);
        assert!("yes".parse::<Approve>().is_err());
    }
}
