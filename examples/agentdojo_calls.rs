//! Runs every ground-truth call of an AgentDojo suite, with its arguments, through
//! `check_call` in mode `autonomous`: first each call on its own (what the policy's argument
//! rules let through), then within a [`Session`] (what its flow labels and `after` blocks add).
//!
//! ```text
//! cargo run --example agentdojo_calls -- ../shared/corpora/agentdojo/banking.calls.json \
//!   policies/examples/agentdojo-banking.warden
//! cargo run --example agentdojo_calls -- ../shared/corpora/agentdojo/slack.calls.json \
//!   policies/examples/agentdojo-slack.warden
//! ```
//!
//! The suite file (not shipped with toolwarden) holds `suite`, `tools` (name, `side_effect`: the
//! suite's label of what the tool does, `none` for a read), `user_tasks`
//! (id, `prompt`, ground-truth `calls` of `tool` and `args`, and
//! `injection_vectors_seen_by_ground_truth`: each injection vector the task's calls read, with
//! the tools whose output carries it) and `injection_tasks` (id, `calls`: what an attacker who
//! took over the agent would run).
//!
//! **Per call, no session.** Every call goes through [`Policy::check_call_strict`] with no
//! pending call, so a call the policy wants confirmed counts as confirmed (nobody answers):
//!
//! - **user tasks:** each task's calls in order, in one turn, under the intent and the query
//!   `classify` gives the task's prompt (the user's own words, which `in query` reads);
//! - **injection tasks:** each injection task's calls in one turn, once under every user task
//!   whose ground-truth calls see an injection vector (as AgentDojo pairs them: the attacker
//!   writes into a tool's output, never into the user's prompt), so under that user task's
//!   intent and query.
//!
//! **In a session.** Every call goes through [`Policy::check_call_session`], so an allowed call
//! of a tool that `taints` puts its labels on the session and the policy's `after` blocks
//! apply from then on. A call the policy wants confirmed counts as confirmed, and is taken to
//! be approved and run: its labels go on the session too ([`Session::record`]), since the
//! user approves the call, not the content it will return. A denied call never runs.
//!
//! - **user tasks alone:** each task's calls in order through one new session;
//! - **pairs:** for each user task that sees an injection vector and each injection task, one
//!   new session runs the user task's calls in order up to and including its first call of a
//!   tool whose output carries one of the vectors it sees (where the injected text arrives;
//!   these calls are not counted), then the injection task's calls, which are counted.
//!
//! Both run twice: **with** the policy's `after` blocks, and **without** them, which is the
//! same run with every label declassified ([`Session::declassify`]) after each call, so no
//! `after` block ever applies (the policy's other rules are unchanged).
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
//! suite's prompt text), then the counts per suite. The exit status is 1 when, per call, a
//! user-task call is denied or an injection call with an effect (by the suite's labels) is
//! allowed, or when, in a session with the `after` blocks, a user-task call is denied or any
//! injection call is allowed (the aims of the policies); 2 on an error.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use toolwarden::{Decision, Intent, Policy, Request, Session, Turn, Verdict};

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
    /// The suite's label of what the tool does: `none` for a read.
    side_effect: String,
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

impl Suite {
    /// Whether the suite labels `tool` read-only (`side_effect` `none`).
    fn read_only(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|t| t.name == tool && t.side_effect == "none")
    }
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
    /// Allowed calls whose tool has an effect by the suite's labels (`side_effect` not
    /// `none`).
    allow_with_effect: usize,
}

impl Counts {
    /// Counts `v`, a verdict on a call of a tool that the suite labels read-only when
    /// `read_only`.
    fn add(&mut self, v: &Verdict, read_only: bool) {
        match v.decision {
            Decision::Allow => {
                self.allow += 1;
                if !read_only {
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

/// A verdict in a few characters: `allow`, `confirm(arguments 74:3)`, `deny(flow 40:3)`,
/// `deny(intent)`.
fn short(v: &Verdict) -> String {
    let stage = v.stage.map(|s| s.as_str());
    let at = v
        .source
        .as_deref()
        .and_then(|s| s.rsplit_once(".warden:"))
        .map(|(_, lc)| lc);
    match (v.decision, stage, at) {
        (Decision::Allow, _, _) => "allow".to_string(),
        (d, Some(s @ ("arguments" | "flow")), Some(at)) => format!("{d}({s} {at})"),
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
            users.add(&v, suite.read_only(&call.tool));
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
                injections.add(&v, suite.read_only(&call.tool));
                per_call[k].add(&v, suite.read_only(&call.tool));
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
    let per_call_ok = users.deny == 0 && injections.allow_with_effect == 0;

    let mut rows = Vec::new();
    for after in [true, false] {
        println!();
        println!(
            "in a session, {}:",
            if after {
                "with the after blocks"
            } else {
                "without the after blocks (every label declassified after each call)"
            }
        );
        rows.push((after, in_session(&policy, &request, &suite, after)?));
    }
    println!();
    println!(
        "{:<26} {:>6} {:>8} {:>10} {:>7}   {:>6} {:>8} {:>10} {:>7}",
        format!("{} in a session", suite.suite),
        "user",
        "allowed",
        "confirmed",
        "denied",
        "inj.",
        "allowed",
        "confirmed",
        "denied"
    );
    for (after, (u, i)) in &rows {
        println!(
            "{:<26} {:>6} {:>8} {:>10} {:>7}   {:>6} {:>8} {:>10} {:>7}",
            if *after {
                "with after blocks"
            } else {
                "without after blocks"
            },
            u.total(),
            u.allow,
            u.confirm,
            u.deny,
            i.total(),
            i.allow,
            i.confirm,
            i.deny
        );
    }
    let session_ok = rows
        .iter()
        .filter(|(after, _)| *after)
        .all(|(_, (u, i))| u.deny == 0 && i.allow == 0);
    Ok(per_call_ok && session_ok)
}

/// Judges `call` within `session`. A confirmed call is taken to be approved and run, so the
/// labels its tool taints go on the session; with `after` false, every label is declassified
/// afterwards, so no `after` block applies to the next call.
fn session_call(
    policy: &Policy,
    request: &Request,
    intent: &Intent,
    session: &mut Session,
    call: &Call,
    after: bool,
) -> Result<Verdict, Box<dyn Error>> {
    let v = policy.check_call_session(request, intent, session, &call.tool, &call.args)?;
    if v.decision == Decision::Confirm {
        session.take_pending();
        session.record(policy, &call.tool)?;
    }
    if !after {
        let labels: Vec<String> = session.labels().iter().map(|l| l.label.clone()).collect();
        for l in &labels {
            session.declassify(l);
        }
    }
    Ok(v)
}

/// The index of the first call of `task` whose tool's output carries one of the injection
/// vectors the task sees: where the injected text reaches the agent.
fn vector_call(task: &UserTask) -> Option<usize> {
    task.calls.iter().position(|c| {
        task.injection_vectors_seen_by_ground_truth
            .values()
            .any(|tools| tools.contains(&c.tool))
    })
}

/// The session runs: each user task alone (its calls counted), then every pair of a user task
/// that sees an injection vector and an injection task (the user task's calls up to its
/// vector call, then the injection task's calls, which are counted). Returns the user-task
/// and the injection counts.
fn in_session(
    policy: &Policy,
    request: &Request,
    suite: &Suite,
    after: bool,
) -> Result<(Counts, Counts), Box<dyn Error>> {
    let mut users = Counts::default();
    let mut pairs = Vec::new();
    println!("  user tasks alone, one session each");
    for task in &suite.user_tasks {
        let intent = policy.classify(&task.prompt);
        let mut session = Session::new();
        let mut cells = Vec::new();
        for call in &task.calls {
            let v = session_call(policy, request, &intent, &mut session, call, after)?;
            users.add(&v, suite.read_only(&call.tool));
            cells.push(format!("{}:{}", call.tool, short(&v)));
        }
        println!("    {:<13} {}", task.id, cells.join(" "));
        if let Some(k) = vector_call(task) {
            pairs.push((task, intent, k));
        }
    }
    println!(
        "  injection tasks, each after each of the {} user tasks that see a vector, up to its vector call",
        pairs.len()
    );
    let mut injections = Counts::default();
    for inj in &suite.injection_tasks {
        let mut per_call = vec![Counts::default(); inj.calls.len()];
        for (task, intent, k) in &pairs {
            let mut session = Session::new();
            for call in &task.calls[..=*k] {
                session_call(policy, request, intent, &mut session, call, after)?;
            }
            for (j, call) in inj.calls.iter().enumerate() {
                let v = session_call(policy, request, intent, &mut session, call, after)?;
                injections.add(&v, suite.read_only(&call.tool));
                per_call[j].add(&v, suite.read_only(&call.tool));
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
        println!("    {:<17} {}", inj.id, cells.join("; "));
    }
    Ok((users, injections))
}
