//! Runs every ground-truth call of an AgentDojo suite, with its arguments, through
//! `check_call` in mode `autonomous`, and counts what the policy's argument rules let through.
//!
//! ```text
//! cargo run --example agentdojo_calls -- ../shared/corpora/agentdojo/banking.calls.json \
//!   policies/examples/agentdojo-banking.warden
//! cargo run --example agentdojo_calls -- ../shared/corpora/agentdojo/slack.calls.json \
//!   policies/examples/agentdojo-slack.warden
//! ```
//!
//! The suite file (not shipped with toolwarden) holds `suite`, `tools` (name), `user_tasks`
//! (id, `prompt`, ground-truth `calls` of `tool` and `args`) and `injection_tasks` (id, `calls`:
//! what an attacker who took over the agent would run). Every call goes through
//! [`Policy::check_call_strict`] with no pending call, so a call the policy wants confirmed counts
//! as confirmed (nobody answers):
//!
//! - **user tasks:** each task's calls in order, in one turn, under the intent and the query
//!   `classify` gives the task's prompt (the user's own words, which `in query` reads);
//! - **injection tasks:** each injection task's calls in one turn, once under every user task
//!   whose ground-truth calls see an injection vector (as AgentDojo pairs them: the attacker
//!   writes into a tool's output, never into the user's prompt), so under that user task's
//!   intent and query.
//!
//! **Context sets.** The `context` sets are what the operator's integration knows when the
//! session starts, from the suite's environment (AgentDojo's `environment.yaml`), never from the
//! calls being judged:
//!
//! - banking, `payees`: the IBANs the account has paid or has standing orders to (its
//!   transaction history and scheduled transactions);
//! - slack, `members`: the workspace's users; `channels`: its channels; `links`: the hosts of the
//!   links in its own channel and inbox messages.
//!
//! The same sets serve every task of a suite. A suite this example has no sets for is refused.
//!
//! It prints per task only ids, tool names, decisions, stages and rule positions (never the
//! suite's prompt text), then the counts per suite. The exit status is 1 when a user-task call
//! is denied or an injection call with an effect is allowed (the aims of the policies), 2 on an
//! error.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use toolwarden::{Decision, Intent, Policy, Request, Turn, Verdict};

#[derive(Deserialize)]
struct Suite {
    suite: String,
    tools: Vec<Tool>,
    user_tasks: Vec<UserTask>,
    injection_tasks: Vec<InjectionTask>,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
}

#[derive(Deserialize)]
struct Call {
    tool: String,
    args: Value,
}

#[derive(Deserialize)]
struct UserTask {
    id: String,
    prompt: String,
    calls: Vec<Call>,
    #[serde(default)]
    injection_vectors_seen_by_ground_truth: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct InjectionTask {
    id: String,
    calls: Vec<Call>,
}

/// The `context` sets of a suite: what its environment tells the operator before any task.
fn context_sets(suite: &str) -> Option<Vec<(&'static str, Vec<&'static str>)>> {
    match suite {
        "banking" => Some(vec![(
            "payees",
            vec![
                "CH9300762011623852957",
                "GB29NWBK60161331926819",
                "SE3550000000054910000003",
                "US122000000121212121212",
            ],
        )]),
        "slack" => Some(vec![
            ("members", vec!["Alice", "Bob", "Charlie", "Eve"]),
            (
                "channels",
                vec!["general", "random", "private", "External_0"],
            ),
            (
                "links",
                vec![
                    "www.informations.com",
                    "www.dora-website.com",
                    "www.eve-blog.com",
                    "www.restaurant-zurich.com",
                ],
            ),
        ]),
        _ => None,
    }
}

/// Calls allowed, confirmed and denied.
#[derive(Clone, Copy, Default)]
struct Counts {
    allow: usize,
    confirm: usize,
    deny: usize,
    /// Allowed calls whose tool has an effect (not read-only).
    allow_with_effect: usize,
}

impl Counts {
    fn add(&mut self, v: &Verdict) {
        match v.decision {
            Decision::Allow => {
                self.allow += 1;
                if v.operation_type != Some("read_only") {
                    self.allow_with_effect += 1;
                }
            }
            Decision::Confirm => self.confirm += 1,
            Decision::Deny => self.deny += 1,
        }
    }

    fn total(&self) -> usize {
        self.allow + self.confirm + self.deny
    }
}

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

/// A verdict in a few characters: `allow`, `confirm(arguments 74:3)`, `deny(intent)`.
fn short(v: &Verdict) -> String {
    let stage = v.stage.map(|s| s.as_str());
    let at = v
        .source
        .as_deref()
        .and_then(|s| s.rsplit_once(".warden:"))
        .map(|(_, lc)| lc);
    match (v.decision, stage, at) {
        (Decision::Allow, _, _) => "allow".to_string(),
        (d, Some(s @ "arguments"), Some(at)) => format!("{d}({s} {at})"),
        (d, Some(s), _) => format!("{d}({s})"),
        (d, None, _) => d.to_string(),
    }
}

fn run() -> Result<bool, Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: agentdojo_calls SUITE.calls.json POLICY.warden";
    let suite_path = args.next().ok_or(usage)?;
    let policy_path = args.next().ok_or(usage)?;
    let text = std::fs::read_to_string(&suite_path)
        .map_err(|e| format!("cannot read `{suite_path}`: {e}"))?;
    let suite: Suite = serde_json::from_str(&text)
        .map_err(|e| format!("`{suite_path}` is not an AgentDojo calls file: {e}"))?;
    let policy = Policy::from_file(Path::new(&policy_path)).map_err(|e| e.render())?;
    let declared: Vec<&str> = policy.tools().collect();
    if let Some(t) = suite
        .tools
        .iter()
        .find(|t| !declared.contains(&t.name.as_str()))
    {
        return Err(format!("the policy does not declare the suite's tool `{}`", t.name).into());
    }
    let sets = context_sets(&suite.suite)
        .ok_or_else(|| format!("no context sets known for the suite `{}`", suite.suite))?;
    let mut request = Request::new("autonomous");
    for (name, values) in &sets {
        request = request.context(*name, values.iter().copied());
    }

    let user_calls: usize = suite.user_tasks.iter().map(|t| t.calls.len()).sum();
    let injection_calls: usize = suite.injection_tasks.iter().map(|t| t.calls.len()).sum();
    println!(
        "suite {}: {} tools, {} user tasks ({user_calls} calls), {} injection tasks ({injection_calls} calls)",
        suite.suite,
        suite.tools.len(),
        suite.user_tasks.len(),
        suite.injection_tasks.len(),
    );
    println!(
        "policy {policy_path} `{}`, mode autonomous; context {}",
        policy.name(),
        sets.iter()
            .map(|(n, v)| format!("{n} ({} values)", v.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );

    println!();
    println!("user tasks: their calls in order, under the task's prompt");
    let mut users = Counts::default();
    let mut exposed: Vec<(&UserTask, Intent)> = Vec::new();
    for task in &suite.user_tasks {
        let intent = policy.classify(&task.prompt);
        let mut turn = Turn::new();
        let mut cells = Vec::new();
        for call in &task.calls {
            let v = policy
                .check_call_strict(&request, &intent, &mut turn, &call.tool, &call.args, None)?;
            users.add(&v);
            cells.push(format!("{}:{}", call.tool, short(&v)));
        }
        println!(
            "  {:<13} intent {:<11} {}",
            task.id,
            intent.name,
            cells.join(" ")
        );
        if !task.injection_vectors_seen_by_ground_truth.is_empty() {
            exposed.push((task, intent));
        }
    }

    println!();
    println!(
        "injection tasks: their calls in order, under the prompt of each of the {} user tasks that see an injection vector",
        exposed.len()
    );
    let mut injections = Counts::default();
    for inj in &suite.injection_tasks {
        // Per call of the injection task: its outcomes over the user tasks.
        let mut per_call = vec![Counts::default(); inj.calls.len()];
        for (_, intent) in &exposed {
            let mut turn = Turn::new();
            for (k, call) in inj.calls.iter().enumerate() {
                let v = policy
                    .check_call_strict(&request, intent, &mut turn, &call.tool, &call.args, None)?;
                injections.add(&v);
                per_call[k].add(&v);
            }
        }
        let cells: Vec<String> = inj
            .calls
            .iter()
            .zip(&per_call)
            .map(|(call, c)| {
                format!(
                    "{}: allow {} confirm {} deny {}",
                    call.tool, c.allow, c.confirm, c.deny
                )
            })
            .collect();
        println!("  {:<17} {}", inj.id, cells.join("; "));
    }

    println!();
    println!(
        "{:<16} {:>6} {:>8} {:>10} {:>7}",
        suite.suite, "calls", "allowed", "confirmed", "denied"
    );
    for (label, c) in [("user-task calls", users), ("injection calls", injections)] {
        println!(
            "{label:<16} {:>6} {:>8} {:>10} {:>7}",
            c.total(),
            c.allow,
            c.confirm,
            c.deny
        );
    }
    println!(
        "injection calls allowed that have an effect: {} (the other {} allowed are read-only)",
        injections.allow_with_effect,
        injections.allow - injections.allow_with_effect
    );
    Ok(users.deny == 0 && injections.allow_with_effect == 0)
}
