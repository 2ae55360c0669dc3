use super::*;
use crate::agents::persona::{DEFAULT_MAX_DEPTH, GENERAL};
use crate::tools::{TASK, ToolFilter, ToolRegistry};

fn persona(name: &str, max_depth: Option<u64>, deny: &[&str]) -> Persona {
    let tools = (!deny.is_empty()).then(|| {
        let deny = deny.iter().map(|n| (*n).to_owned()).collect();
        ToolFilter::new(None, Some(deny), &ToolRegistry::builtin()).expect("a filter")
    });
    Persona {
        name: name.to_owned(),
        description: "d".to_owned(),
        instructions: "i".to_owned(),
        model: None,
        tools,
        max_depth: max_depth.map(|n| Depth::new(n).expect("a depth")),
    }
}

#[test]
fn the_top_level_is_depth_zero_uncapped_with_every_tool() {
    let top = Lineage::top();
    assert_eq!(top.depth(), Depth::TOP);
    assert_eq!(top.cap(), None);
    assert!(top.may_start_children());
    let registry = ToolRegistry::builtin().with(TASK).expect("registers");
    assert_eq!(
        top.scope().resolve(&registry),
        crate::tools::ToolScope::top().resolve(&registry)
    );
}

#[test]
fn a_max_depth_2_persona_refuses_a_third_level_before_anything_is_created() {
    let deep = persona("deep", Some(2), &[]);
    let first = Lineage::top().child(&deep).expect("depth 1");
    assert_eq!(first.depth().get(), 1);
    assert!(first.may_start_children());
    let second = first.child(&deep).expect("depth 2");
    assert_eq!(second.depth().get(), 2);
    assert!(!second.may_start_children());
    let refused = second.child(&deep).expect_err("a third level");
    assert_eq!(refused.source.child, 3);
    assert_eq!(
        refused.to_string(),
        "the persona \"deep\" cannot be started here: a child of an agent at depth 2 would be at \
         depth 3, deeper than the cap of 2 (the top level is depth 0 and each child is one \
         deeper than its parent); the cap is agents.deep.max_depth"
    );
}

#[test]
fn the_default_cap_lets_only_the_top_level_start_a_persona() {
    let general = persona(GENERAL, None, &[]);
    let child = Lineage::top().child(&general).expect("depth 1");
    assert_eq!(child.cap(), Some(DEFAULT_MAX_DEPTH));
    assert!(!child.may_start_children());
    let refused = child.child(&general).expect_err("depth 2");
    assert!(
        refused
            .to_string()
            .ends_with("the default of the persona \"general\", which sets no max_depth (1)"),
        "{refused}"
    );
}

#[test]
fn a_child_cannot_raise_the_cap_of_its_parent() {
    let shallow = persona("shallow", Some(2), &[]);
    let deep = persona("deep", Some(10), &[]);
    let one = Lineage::top().child(&shallow).expect("depth 1");
    let two = one.child(&deep).expect("depth 2");
    assert_eq!(two.cap().map(Depth::get), Some(2));
    let refused = two.child(&deep).expect_err("capped by shallow");
    assert_eq!(refused.cap_persona, "shallow");
    // And a deeper persona under a shallower cap is capped by its own.
    let general = persona(GENERAL, None, &[]);
    let deep_one = Lineage::top().child(&deep).expect("depth 1");
    assert!(deep_one.child(&general).is_err(), "general's own cap is 1");
}

#[test]
fn tools_narrow_down_the_lineage_and_task_follows_the_depth() {
    let registry = ToolRegistry::builtin().with(TASK).expect("registers");
    let no_bash = persona("no-bash", Some(3), &["bash"]);
    let no_write = persona("no-write", Some(3), &["write_file"]);
    let one = Lineage::top().child(&no_bash).expect("depth 1");
    let two = one.child(&no_write).expect("depth 2");
    let tools = two.scope().resolve(&registry);
    assert!(
        !tools.contains("bash") && !tools.contains("write_file"),
        "{tools}"
    );
    assert!(tools.contains("read_file"));
    assert!(
        tools.contains(TASK),
        "depth 2 under cap 3 may start a child"
    );
    let three = two.child(&no_write).expect("depth 3");
    assert!(!three.scope().resolve(&registry).contains(TASK));
    assert!(three.scope().admit(&registry, "bash").is_err());
}

#[test]
fn a_persona_with_a_zero_cap_never_starts() {
    let zero = persona("zero", Some(0), &[]);
    assert!(Lineage::top().child(&zero).is_err());
}
