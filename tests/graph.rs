//! `toolwarden graph`: the decision graph as DOT and Mermaid.

use std::process::Command;

use toolwarden::analysis::graph::{render, GraphFormat};
use toolwarden::Policy;

fn small() -> Policy {
    Policy::from_file("tests/fixtures/graph_small.warden").unwrap()
}

#[test]
fn small_policy_dot() {
    insta::assert_snapshot!(render(&small(), GraphFormat::Dot));
}

#[test]
fn small_policy_mermaid() {
    insta::assert_snapshot!(render(&small(), GraphFormat::Mermaid));
}

/// The table rows of one mode in the DOT output, as `intent: cell cell …`.
fn mode_rows(dot: &str, mode: &str) -> Vec<String> {
    let marker = format!("mode <b>{mode}</b>");
    let line = dot.lines().find(|l| l.contains(&marker)).unwrap();
    line.split("<tr>")
        .skip(3)
        .map(|row| {
            let cells: Vec<&str> = row
                .split("</td>")
                .filter(|c| c.contains("<td"))
                .filter_map(|c| c.rsplit('>').next())
                .filter(|c| !c.is_empty())
                .collect();
            format!("{}: {}", cells[0], cells[1..].join(" "))
        })
        .collect()
}

#[test]
fn finance_modes_aggregate_cells_into_effective_decisions() {
    let p = Policy::from_file("policies/finance.warden").unwrap();
    let dot = render(&p, GraphFormat::Dot);
    assert_eq!(
        mode_rows(&dot, "analyzer"),
        [
            "destructive: allow ceiling ceiling ceiling ceiling",
            "execute: allow ceiling ceiling ceiling ceiling",
            "export: allow ceiling ceiling ceiling ceiling",
            "write: allow ceiling ceiling ceiling ceiling",
            "read: allow ceiling ceiling ceiling ceiling",
        ]
    );
    assert_eq!(
        mode_rows(&dot, "supervised"),
        [
            "destructive: allow deny confirm deny deny",
            "execute: allow deny deny deny confirm",
            "export: allow deny deny confirm deny",
            "write: allow confirm deny deny deny",
            "read: allow deny deny deny deny",
        ]
    );
    assert_eq!(
        mode_rows(&dot, "autonomous"),
        [
            "destructive: allow deny allow deny deny",
            "execute: allow deny deny deny confirm",
            "export: allow deny deny confirm deny",
            "write: allow allow deny deny deny",
            "read: allow deny deny deny deny",
        ]
    );
    // One node per tool, effect, role and permission; no node per cell.
    let nodes = |prefix: &str| {
        dot.lines()
            .filter(|l| {
                let t = l.trim_start();
                t.starts_with(prefix)
                    && t[prefix.len()..].starts_with(|c: char| c.is_ascii_digit())
                    && t.contains(" [")
                    && !t.contains("->")
            })
            .count()
    };
    assert_eq!(nodes("t"), 8);
    assert_eq!(nodes("e"), 5);
    assert_eq!(nodes("m"), 3);
    assert_eq!(nodes("r"), 3);
    assert_eq!(nodes("q"), 8);
    assert!(dot.contains("  t3 -> e2;\n"), "delete_invoice -> delete");
    assert!(
        dot.contains("  t3 -> r1 [style=dashed"),
        "delete_invoice accepts accountant"
    );
    assert!(
        dot.contains("    q0 -> q2;\n"),
        "invoices.manage implies invoices.delete"
    );
}

#[test]
fn cli_graph_formats() {
    let bin = env!("CARGO_BIN_EXE_toolwarden");
    let out = Command::new(bin)
        .args([
            "graph",
            "-p",
            "tests/fixtures/graph_small.warden",
            "--format",
            "mermaid",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        render(&small(), GraphFormat::Mermaid)
    );
    let out = Command::new(bin)
        .args([
            "graph",
            "-p",
            "tests/fixtures/graph_small.warden",
            "--format",
            "png",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: unknown graph format `png`; use dot or mermaid\n"
    );
}

/// The test runner's fixture: `send_money` has two argument rules, and a `rules` block applies
/// one to every tool.
fn money() -> Policy {
    Policy::from_file("tests/fixtures/testrun/money.warden").unwrap()
}

#[test]
fn dot_draws_argument_rules_as_nodes_of_their_tool() {
    let dot = render(&money(), GraphFormat::Dot);
    let lines: Vec<&str> = dot.lines().collect();
    let has = |l: &str| assert!(lines.contains(&l), "missing {l:?} in\n{dot}");
    // The rule for every tool comes first (a0), then send_money's (t0) in source order.
    has("    a1 [label=\"confirm when recipient not in context.contacts\", shape=note, fontsize=9, fillcolor=\"#fff3b0\"];");
    has("    a2 [label=\"deny when amount > 10000\", shape=note, fontsize=9, fillcolor=\"#ffcdd2\"];");
    has("  t0 -> a1 [style=dotted, arrowhead=none, label=\"confirm\"];");
    has("  t0 -> a2 [style=dotted, arrowhead=none, label=\"deny\"];");
    has("  subgraph cluster_rules {");
    has("    a0 [label=\"deny when any =~ \\\"AKIA[0-9A-Z]{16}\\\"\", shape=note, fontsize=9, fillcolor=\"#ffcdd2\"];");
    // get_balance (t1) has no rule of its own; the rule for every tool has no edge.
    assert!(!dot.contains("  t1 -> a"), "{dot}");
    assert!(!dot.contains("-> a0"), "{dot}");
    // The rule nodes of a tool sit in the tools cluster.
    let tools = dot.find("subgraph cluster_tools").unwrap();
    let effects = dot.find("subgraph cluster_effects").unwrap();
    let a1 = dot.find("    a1 [").unwrap();
    assert!(tools < a1 && a1 < effects, "{dot}");
}

#[test]
fn mermaid_draws_argument_rules_as_nodes_of_their_tool() {
    let m = render(&money(), GraphFormat::Mermaid);
    let lines: Vec<&str> = m.lines().collect();
    let has = |l: &str| assert!(lines.contains(&l), "missing {l:?} in\n{m}");
    has("    a1>\"confirm when recipient not in context.contacts\"]");
    has("    a2>\"deny when amount #gt; 10000\"]");
    has("  t0 -.-|confirm| a1");
    has("  t0 -.-|deny| a2");
    has("  subgraph rules[\"argument rules for every tool\"]");
    has("    a0>\"deny when any =~ #quot;AKIA[0-9A-Z]{16}#quot;\"]");
}

#[test]
fn a_policy_without_rules_draws_no_rule_node() {
    let dot = render(&small(), GraphFormat::Dot);
    assert!(!dot.contains("shape=note"), "{dot}");
    assert!(!dot.contains("cluster_rules"), "{dot}");
    let m = render(&small(), GraphFormat::Mermaid);
    assert!(!m.contains("subgraph rules"), "{m}");
}
