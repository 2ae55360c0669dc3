use std::fmt::Write as _;
use std::path::PathBuf;

use super::*;
use crate::tools::registry::{TASK, UPDATE_PLAN};

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

fn filter(allow: Option<&[&str]>, deny: Option<&[&str]>) -> ToolFilter {
    ToolFilter::new(allow.map(names), deny.map(names), &ToolRegistry::builtin())
        .expect("a valid filter")
}

fn visible(scope: &ToolScope, registry: &ToolRegistry) -> Vec<String> {
    scope.resolve(registry).names().map(str::to_owned).collect()
}

const ALL: [&str; 6] = [
    "bash",
    "bash_output",
    "bash_kill",
    "read_file",
    "write_file",
    "edit_file",
];

#[test]
fn without_a_filter_every_registered_tool_is_visible() {
    let registry = ToolRegistry::builtin();
    assert_eq!(visible(&ToolScope::top(), &registry), names(&ALL));
    assert_eq!(ToolScope::top().admit(&registry, "bash"), Ok(()));
}

#[test]
fn allow_comes_before_deny_and_keeps_the_registry_order() {
    let registry = ToolRegistry::builtin();
    let scope = ToolScope::top().child(
        Some(&filter(Some(&["read_file", "bash"]), Some(&["bash"]))),
        false,
    );
    assert_eq!(visible(&scope, &registry), names(&["read_file"]));
    let scope = ToolScope::top().child(Some(&filter(Some(&["read_file", "bash"]), None)), false);
    assert_eq!(visible(&scope, &registry), names(&["bash", "read_file"]));
}

#[test]
fn an_empty_allow_list_hides_every_tool() {
    let registry = ToolRegistry::builtin().with("lint").expect("registers");
    let scope = ToolScope::top().child(Some(&filter(Some(&[]), None)), false);
    assert!(scope.resolve(&registry).is_empty());
    let refused = scope.admit(&registry, "read_file").expect_err("hidden");
    assert_eq!(
        refused.to_string(),
        "the tool \"read_file\" is not available to this agent; its tools are: none"
    );
}

#[test]
fn a_deny_only_filter_admits_tools_registered_later() {
    let deny = filter(None, Some(&["bash"]));
    let allow = filter(Some(&["read_file"]), None);
    let registry = ToolRegistry::builtin().with("lint").expect("registers");
    let denying = ToolScope::top().child(Some(&deny), false);
    assert!(denying.resolve(&registry).contains("lint"));
    assert!(!denying.resolve(&registry).contains("bash"));
    let allowing = ToolScope::top().child(Some(&allow), false);
    assert!(!allowing.resolve(&registry).contains("lint"));
}

#[test]
fn a_child_never_sees_a_tool_its_parent_cannot() {
    let registry = ToolRegistry::builtin();
    let parent = ToolScope::top().child(Some(&filter(None, Some(&["bash"]))), true);
    // The child asks for bash; its parent's filter still applies.
    let child = parent.child(Some(&filter(Some(&["bash", "read_file"]), None)), false);
    assert_eq!(visible(&child, &registry), names(&["read_file"]));
    // A child without a filter of its own has its parent's tools.
    let same = parent.child(None, false);
    assert_eq!(visible(&same, &registry), visible(&parent, &registry));
    for scope in [&child, &same] {
        for tool in scope.resolve(&registry).names() {
            assert!(parent.resolve(&registry).contains(tool), "{tool}");
        }
    }
    let refused = child.admit(&registry, "bash").expect_err("hidden");
    assert!(matches!(refused, NotOffered::Hidden { .. }), "{refused}");
    assert_eq!(
        refused.to_string(),
        "the tool \"bash\" is not available to this agent; its tools are: read_file"
    );
}

#[test]
fn the_reserved_task_follows_delegation_not_filters() {
    let registry = ToolRegistry::builtin().with(TASK).expect("registers");
    let may = ToolScope::top().child(Some(&filter(Some(&[]), None)), true);
    assert_eq!(visible(&may, &registry), names(&[TASK]));
    let may_not = ToolScope::top().child(None, false);
    assert!(!may_not.resolve(&registry).contains(TASK));
    assert!(ToolScope::top().resolve(&registry).contains(TASK));
    // Unregistered, it is not there even where delegation is allowed.
    assert!(
        !ToolScope::top()
            .resolve(&ToolRegistry::builtin())
            .contains(TASK)
    );
}

#[test]
fn update_plan_is_the_top_levels_alone_whatever_the_filters() {
    let registry = ToolRegistry::builtin()
        .with(UPDATE_PLAN)
        .expect("registers");
    assert!(ToolScope::top().resolve(&registry).contains(UPDATE_PLAN));
    // A child has it neither by delegation nor without a filter.
    for child in [
        ToolScope::top().child(None, true),
        ToolScope::top().child(None, false),
    ] {
        assert!(!child.resolve(&registry).contains(UPDATE_PLAN));
        let refused = child.admit(&registry, UPDATE_PLAN).expect_err("hidden");
        assert!(matches!(refused, NotOffered::Hidden { .. }), "{refused}");
    }
    // No filter may name it.
    let err = ToolFilter::new(None, Some(names(&[UPDATE_PLAN])), &registry).expect_err("reserved");
    assert!(
        err.to_string()
            .contains("only the top-level agent has update_plan"),
        "{err}"
    );
}

#[test]
fn an_unknown_tool_is_refused_with_the_text_the_top_level_has_always_answered() {
    let refused = ToolScope::top()
        .admit(&ToolRegistry::builtin(), "rm")
        .expect_err("unknown");
    assert_eq!(
        refused.to_string(),
        "unknown tool \"rm\"; the tools are: bash, bash_output, bash_kill, read_file, \
         write_file, edit_file"
    );
}

#[test]
fn bad_filters_fail_when_made() {
    let registry = ToolRegistry::builtin();
    let make = |allow: Option<&[&str]>, deny: Option<&[&str]>| {
        ToolFilter::new(allow.map(names), deny.map(names), &registry)
    };
    assert_eq!(make(None, None), Err(FilterError::Empty));
    assert_eq!(make(None, Some(&[])), Err(FilterError::Empty));
    assert!(make(Some(&[]), None).is_ok());
    assert!(make(Some(&[]), Some(&[])).is_ok());
    match make(Some(&["read_file"]), Some(&["bash", "bsh"])) {
        Err(FilterError::Unknown {
            list: FilterList::Deny,
            index: 1,
            name,
            known,
        }) => {
            assert_eq!(name, "bsh");
            assert_eq!(known, ALL.join(", "));
        }
        other => panic!("{other:?}"),
    }
    for (allow, deny) in [(Some(&[TASK][..]), None), (None, Some(&["bash", TASK][..]))] {
        let err = make(allow, deny).expect_err("reserved");
        assert!(matches!(err, FilterError::Reserved { .. }), "{err}");
        assert!(err.to_string().contains("max_depth"), "{err}");
    }
    // Registered, task is still reserved.
    let with_task = ToolRegistry::builtin().with(TASK).expect("registers");
    let err = ToolFilter::new(None, Some(names(&[TASK])), &with_task).expect_err("reserved");
    assert!(matches!(err, FilterError::Reserved { .. }), "{err}");
    // A tool only registered later cannot be named when the filter is made.
    let err = make(Some(&["lint"]), None).expect_err("unknown");
    assert!(matches!(err, FilterError::Unknown { .. }), "{err}");
}

#[test]
fn a_filter_displays_as_a_configuration_file_writes_it() {
    assert_eq!(
        filter(Some(&["read_file"]), Some(&["bash"])).to_string(),
        "{ allow = [\"read_file\"], deny = [\"bash\"] }"
    );
    assert_eq!(filter(Some(&[]), None).to_string(), "{ allow = [] }");
}

// ---- the resolution table in docs/tool-filter.md ----

/// A filter as written: its `allow` and `deny` lists, each optional.
type Lists = (
    Option<&'static [&'static str]>,
    Option<&'static [&'static str]>,
);

/// One row of the table: a registry, the filters from the top level down, and whether the agent
/// may start children.
struct Case {
    case: &'static str,
    later: &'static [&'static str],
    filters: &'static [Lists],
    delegation: bool,
}

const CASES: &[Case] = &[
    Case {
        case: "no filter (the top level)",
        later: &[],
        filters: &[],
        delegation: true,
    },
    Case {
        case: "allow list",
        later: &[],
        filters: &[(Some(&["read_file", "bash"]), None)],
        delegation: false,
    },
    Case {
        case: "deny list",
        later: &[],
        filters: &[(None, Some(&["bash"]))],
        delegation: false,
    },
    Case {
        case: "allow, then deny",
        later: &[],
        filters: &[(Some(&["bash", "read_file"]), Some(&["bash"]))],
        delegation: false,
    },
    Case {
        case: "allow = [] hides every tool",
        later: &[],
        filters: &[(Some(&[]), None)],
        delegation: false,
    },
    Case {
        case: "parent ∩ child: the child cannot allow what its parent denies",
        later: &[],
        filters: &[
            (None, Some(&["bash"])),
            (Some(&["bash", "read_file"]), None),
        ],
        delegation: false,
    },
    Case {
        case: "parent ∩ child: the child narrows its parent's allow list",
        later: &[],
        filters: &[
            (Some(&["read_file", "write_file", "edit_file"]), None),
            (None, Some(&["write_file"])),
        ],
        delegation: false,
    },
    Case {
        case: "three levels",
        later: &[],
        filters: &[
            (None, Some(&["bash"])),
            (None, Some(&["write_file"])),
            (Some(&["read_file", "write_file", "bash_kill"]), None),
        ],
        delegation: false,
    },
    Case {
        case: "tool registered later, no filter",
        later: &["lint"],
        filters: &[],
        delegation: false,
    },
    Case {
        case: "tool registered later, deny-only filter admits it",
        later: &["lint"],
        filters: &[(None, Some(&["bash"]))],
        delegation: false,
    },
    Case {
        case: "tool registered later, allow list does not",
        later: &["lint"],
        filters: &[(Some(&["read_file"]), None)],
        delegation: false,
    },
    Case {
        case: "tool registered later, parent ∩ child of deny-only filters",
        later: &["lint"],
        filters: &[(None, Some(&["bash"])), (None, Some(&["edit_file"]))],
        delegation: false,
    },
    Case {
        case: "reserved task, agent may start children, allow = []",
        later: &[TASK],
        filters: &[(Some(&[]), None)],
        delegation: true,
    },
    Case {
        case: "reserved task, agent may start children, deny list",
        later: &[TASK],
        filters: &[(None, Some(&["bash"]))],
        delegation: true,
    },
    Case {
        case: "reserved task, agent at its depth cap",
        later: &[TASK],
        filters: &[],
        delegation: false,
    },
];

/// Filters that fail when the configuration loads, against the built-in registry.
const REFUSED: &[Lists] = &[
    (None, None),
    (None, Some(&[])),
    (Some(&["bsh"]), None),
    (None, Some(&["read_file", "lint"])),
    (Some(&["read_file", TASK]), None),
    (None, Some(&[TASK])),
];

fn code(text: &str) -> String {
    format!("`{text}`")
}

fn render_filter(allow: Option<&[&str]>, deny: Option<&[&str]>) -> String {
    // Written as a file writes it, including the filters that cannot be made.
    let list = |names: &[&str]| {
        let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let mut parts = Vec::new();
    if let Some(allow) = allow {
        parts.push(format!("allow = {}", list(allow)));
    }
    if let Some(deny) = deny {
        parts.push(format!("deny = {}", list(deny)));
    }
    if parts.is_empty() {
        "{}".to_owned()
    } else {
        format!("{{ {} }}", parts.join(", "))
    }
}

/// The text of `docs/tool-filter.md`, computed by the resolver.
fn render() -> String {
    let builtin = ToolRegistry::builtin();
    let mut out = String::new();
    out.push_str(
        "# Tool filters: which tools an agent has\n\
         \n\
         <!-- Generated from the resolver (agentd/src/tools/filter.rs) by its unit tests: \
         `UPDATE_DOCS=1 cargo test -p agentd --lib tools::filter` rewrites this file and then \
         fails on purpose; review the diff and rerun without the variable. `cargo test -p \
         agentd` fails when this text and the resolver disagree. Do not edit by hand. -->\n\
         \n\
         An agent's tools are its scope (the tool filters from the top level down to it, see \
         RFC 0007) resolved against the session's live tool registry. One resolver gives both \
         the schemas the model is offered and what a call may run. The rules:\n\
         \n\
         - a filter applies `allow`, then `deny`; without `allow` every filtered tool passes, \
         `allow = []` passes none;\n\
         - a scope passes a tool only if every filter on it does: a child never has a tool its \
         parent lacks;\n\
         - the order is the registry's, whatever the order of a list;\n\
         - the reserved `task` (starting a child agent) is never filtered: the agent has it \
         when it may start a child (its depth cap allows one more level);\n\
         - names are checked when the configuration loads, against the built-in tools.\n\
         \n",
    );
    render_cases(&mut out, &builtin);
    render_refused(&mut out, &builtin);
    render_hidden_calls(&mut out, &builtin);
    out
}

/// The table of [`CASES`]: for each, the registry, the filters and the tools the agent has.
fn render_cases(out: &mut String, builtin: &ToolRegistry) {
    let _ = writeln!(
        out,
        "The built-in registry: {}. A row with \"+ name\" registers that tool after the \
         filters were made.\n",
        builtin.names().map(code).collect::<Vec<_>>().join(", ")
    );
    out.push_str(
        "| case | registry | filters, top level first | may start children | tools the agent \
         has |\n|---|---|---|---|---|\n",
    );
    for case in CASES {
        render_case(out, case, builtin);
    }
}

/// One row of the table of [`CASES`].
fn render_case(out: &mut String, case: &Case, builtin: &ToolRegistry) {
    let mut registry = builtin.clone();
    for name in case.later {
        registry.register(name).expect("a new name");
    }
    let mut scope = ToolScope::top();
    for (allow, deny) in case.filters {
        let made =
            ToolFilter::new(allow.map(names), deny.map(names), builtin).expect("a valid filter");
        scope = scope.child(Some(&made), case.delegation);
    }
    if case.filters.is_empty() && !case.delegation {
        scope = scope.child(None, false);
    }
    let registry_cell = if case.later.is_empty() {
        "built-in".to_owned()
    } else {
        let later: Vec<String> = case
            .later
            .iter()
            .map(|n| format!("+ {}", code(n)))
            .collect();
        format!("built-in {}", later.join(" "))
    };
    let filters_cell = if scope.filters().is_empty() {
        "none".to_owned()
    } else {
        let filters: Vec<String> = scope
            .filters()
            .iter()
            .map(|f| code(&f.to_string()))
            .collect();
        filters.join(" ∩ ")
    };
    let tools = scope.resolve(&registry);
    let tools_cell = if tools.is_empty() {
        "none".to_owned()
    } else {
        tools.names().map(code).collect::<Vec<_>>().join(", ")
    };
    let _ = writeln!(
        out,
        "| {} | {registry_cell} | {filters_cell} | {} | {tools_cell} |",
        case.case,
        if scope.delegation() { "yes" } else { "no" },
    );
}

/// The table of [`REFUSED`]: each filter with the error it fails with.
fn render_refused(out: &mut String, builtin: &ToolRegistry) {
    out.push_str(
        "\nA filter that fails when the configuration loads, with its error (after the file and \
         the line):\n\n\
         | filter | error |\n|---|---|\n",
    );
    for (allow, deny) in REFUSED {
        let err = ToolFilter::new(allow.map(names), deny.map(names), builtin)
            .expect_err("refused at load");
        let message = match err {
            FilterError::Empty => {
                format!("agents.NAME.tools = {} {err}", render_filter(*allow, *deny))
            }
            _ => format!("agents.NAME.tools.{err}"),
        };
        let _ = writeln!(
            out,
            "| {} | {} |",
            code(&render_filter(*allow, *deny)),
            message
        );
    }
}

/// The table of calls of a tool the agent does not have, with the model's answer.
fn render_hidden_calls(out: &mut String, builtin: &ToolRegistry) {
    out.push_str(
        "\nA call of a tool the agent does not have is refused before anything runs, with \
         this text for the model:\n\n| scope | call | answer |\n|---|---|---|\n",
    );
    let hidden = ToolScope::top().child(Some(&filter(None, Some(&["bash"]))), false);
    for (scope, scope_cell, call) in [
        (ToolScope::top(), "none (the top level)", "rm"),
        (hidden.clone(), "`{ deny = [\"bash\"] }`", "bash"),
        (hidden, "`{ deny = [\"bash\"] }`", "rm"),
    ] {
        let err = scope.admit(builtin, call).expect_err("refused");
        let _ = writeln!(out, "| {scope_cell} | {} | {err} |", code(call));
    }
}

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("tool-filter.md")
}

/// `docs/tool-filter.md` is what the resolver computes. With `UPDATE_DOCS` set the file is
/// rewritten and the test fails on purpose, so a run with the variable never passes by
/// overwriting what it checks.
#[test]
fn the_resolution_table_in_docs_is_the_resolvers() {
    let rendered = render();
    let path = doc_path();
    if std::env::var_os("UPDATE_DOCS").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &rendered).expect("write docs/tool-filter.md");
        panic!(
            "rewrote {}; review the diff and rerun without UPDATE_DOCS",
            path.display()
        );
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == rendered,
        "{} differs from what the resolver computes; run `UPDATE_DOCS=1 cargo test -p agentd \
         --lib tools::filter`, review the diff and rerun without the variable.\n\
         --- computed ---\n{rendered}",
        path.display()
    );
}
