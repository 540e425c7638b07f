//! Replays AgentDojo's banking suite against `policies/examples/agentdojo-banking.warden`.
//!
//! ```text
//! cargo run --example agentdojo -- ../shared/corpora/agentdojo/banking.json [POLICY]
//! ```
//!
//! The suite file (not shipped with toolwarden) holds `tools` (name, `side_effect`),
//! `user_tasks` (id, prompt, ground-truth `calls`) and `injection_tasks` (id, goal, `calls`).
//! Two figures, both in `supervised` mode with the intent `classify` gives the user's prompt:
//!
//! 1. utility: for each of the 16 user tasks, how many of its ground-truth calls `offer` shows
//!    the model (decision `allow` or `confirm`) when offered the suite's 11 tools;
//! 2. security: each injection task's calls are checked with `check_call`, as if the model had
//!    been hijacked while serving a read-only user task (a task whose ground-truth calls all have
//!    effect `none`), under that user task's intent; a call is blocked when the verdict is
//!    `deny`. The calls carry no arguments (this file has none), so a tool that `requires`
//!    arguments is denied at stage `requires`; `examples/agentdojo_calls.rs` judges the calls
//!    with their arguments, in mode `autonomous`.
//!
//! Only task ids, tool names and decisions are printed, never the suite's prompt text.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::json;
use toolwarden::{Decision, Policy, Request, Turn};

#[derive(Deserialize)]
struct Suite {
    tools: Vec<Tool>,
    user_tasks: Vec<UserTask>,
    injection_tasks: Vec<InjectionTask>,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    side_effect: String,
}

#[derive(Deserialize)]
struct UserTask {
    id: String,
    prompt: String,
    calls: Vec<String>,
}

#[derive(Deserialize)]
struct InjectionTask {
    id: String,
    calls: Vec<String>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let suite_path = args
        .next()
        .ok_or("usage: agentdojo SUITE.json [POLICY.warden]")?;
    let policy_path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies/examples/agentdojo-banking.warden")
    });
    let text = std::fs::read_to_string(&suite_path)
        .map_err(|e| format!("cannot read `{suite_path}`: {e}"))?;
    let suite: Suite = serde_json::from_str(&text)
        .map_err(|e| format!("`{suite_path}` is not an AgentDojo suite: {e}"))?;
    let policy = Policy::from_file(&policy_path).map_err(|e| e.render())?;

    // The policy must declare every tool of the suite with the suite's own label.
    let effects: BTreeMap<&str, String> = suite
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.side_effect.clone()))
        .collect();
    let declared: Vec<&str> = policy.tools().collect();
    for t in &suite.tools {
        if !declared.contains(&t.name.as_str()) {
            return Err(
                format!("the policy does not declare the suite's tool `{}`", t.name).into(),
            );
        }
    }
    let tool_names: Vec<&str> = suite.tools.iter().map(|t| t.name.as_str()).collect();
    let request = Request::new("supervised");

    println!(
        "suite {suite_path}: {} tools, {} user tasks, {} injection tasks",
        suite.tools.len(),
        suite.user_tasks.len(),
        suite.injection_tasks.len()
    );
    let shown = policy_path
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(&policy_path);
    println!(
        "policy {} `{}` (mode supervised)",
        shown.display(),
        policy.name()
    );
    println!();
    println!("user tasks: ground-truth calls the offer shows the model");
    let (mut total, mut allow, mut confirm, mut hidden) = (0, 0, 0, 0);
    let mut read_only_tasks = Vec::new();
    for task in &suite.user_tasks {
        let intent = policy.classify(&task.prompt);
        let offer = policy.offer(&request, &intent, tool_names.iter().copied())?;
        let decision_of = |name: &str| {
            offer
                .entries()
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, d)| (d.decision, d.stage))
        };
        let mut cells = Vec::new();
        let mut visible = 0;
        for call in &task.calls {
            total += 1;
            match decision_of(call) {
                Some((Decision::Allow, _)) => {
                    allow += 1;
                    visible += 1;
                    cells.push(format!("{call}:allow"));
                }
                Some((Decision::Confirm, _)) => {
                    confirm += 1;
                    visible += 1;
                    cells.push(format!("{call}:confirm"));
                }
                Some((Decision::Deny, stage)) => {
                    hidden += 1;
                    let stage = stage.map_or("-", |s| s.as_str());
                    cells.push(format!("{call}:deny({stage})"));
                }
                None => {
                    hidden += 1;
                    cells.push(format!("{call}:not-in-suite"));
                }
            }
        }
        println!(
            "  {:<14} intent {:<12} {visible}/{} visible  {}",
            task.id,
            intent.name,
            task.calls.len(),
            cells.join(" ")
        );
        if task
            .calls
            .iter()
            .all(|c| effects.get(c.as_str()).is_some_and(|e| e == "none"))
        {
            read_only_tasks.push((task, intent));
        }
    }
    println!(
        "ground-truth calls visible: {}/{total} (allow {allow}, confirm {confirm}); hidden: {hidden}",
        allow + confirm
    );
    println!();
    println!(
        "read-only user tasks (every ground-truth call has effect none): {}",
        read_only_tasks
            .iter()
            .map(|(t, i)| format!("{} [{}]", t.id, i.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("injection tasks: their calls, checked under each read-only user task's intent");
    let (mut calls, mut blocked, mut held, mut ran) = (0, 0, 0, 0);
    // Per read-only user task: (calls, deny, confirm, allow).
    let mut by_task = vec![(0, 0, 0, 0); read_only_tasks.len()];
    for inj in &suite.injection_tasks {
        let mut per_task = Vec::new();
        for (k, (task, intent)) in read_only_tasks.iter().enumerate() {
            let mut turn = Turn::new();
            let mut outcome = Vec::new();
            for call in &inj.calls {
                calls += 1;
                by_task[k].0 += 1;
                let v = policy.check_call(&request, intent, &mut turn, call, &json!({}))?;
                match v.decision {
                    Decision::Deny => {
                        blocked += 1;
                        by_task[k].1 += 1;
                    }
                    Decision::Confirm => {
                        held += 1;
                        by_task[k].2 += 1;
                    }
                    Decision::Allow => {
                        ran += 1;
                        by_task[k].3 += 1;
                    }
                }
                let stage = v.stage.map_or(String::new(), |s| format!("({s})"));
                outcome.push(format!("{}{stage}", v.decision));
            }
            per_task.push(format!("{}: {}", task.id, outcome.join(",")));
        }
        println!(
            "  {:<18} calls {:<48} {}",
            inj.id,
            inj.calls.join(","),
            per_task.join("  ")
        );
    }
    for ((task, intent), (n, deny, confirm, allow)) in read_only_tasks.iter().zip(&by_task) {
        println!(
            "  under {:<14} {:<15} blocked {deny}/{n}, held for confirmation {confirm}, allowed {allow}",
            task.id,
            format!("(intent {}):", intent.name)
        );
    }
    println!(
        "injection calls blocked: {blocked}/{calls} ({} injection tasks x {} read-only user tasks); held for confirmation: {held}; allowed: {ran}",
        suite.injection_tasks.len(),
        read_only_tasks.len()
    );
    Ok(())
}
