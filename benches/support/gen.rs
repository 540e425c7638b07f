//! The generated policy shared by the benches, `tests/alloc.rs` and the peers crate: 8 roles
//! in a hierarchy, 40 permissions with implications, the standard 5×5 matrix, 3 modes, 3
//! tiers, the shipped lexicon, and N tools with mixed effects, permissions and
//! `mcp__<server>__` names. Included with `#[path]`, so every item may be unused somewhere.
#![allow(dead_code)]

use std::fmt::Write as _;

use toolwarden::{Policy, Request};

/// The five effects, in declaration order.
pub const EFFECTS: [&str; 5] = ["none", "write", "delete", "export", "execute"];
/// The connector servers tool names mention.
pub const SERVERS: [&str; 4] = ["github", "slack", "drive", "jira"];
/// The roles, highest first.
pub const ROLES: [&str; 8] = [
    "owner",
    "admin",
    "manager",
    "accountant",
    "clerk",
    "viewer",
    "auditor",
    "support",
];
/// The intents, highest priority first.
pub const INTENTS: [&str; 5] = ["destructive", "execute", "export", "write", "read"];
/// The modes.
pub const MODES: [&str; 3] = ["analyzer", "supervised", "autonomous"];
/// The tiers, highest precedence first.
pub const TIERS: [&str; 3] = ["task", "session", "project"];

/// The standard matrix: `MATRIX[intent][effect]` (intents and effects as above), 0 deny,
/// 1 allow.
pub const MATRIX: [[u8; 5]; 5] = [
    // none write delete export execute
    [1, 0, 1, 0, 0], // destructive
    [1, 0, 0, 0, 1], // execute
    [1, 0, 0, 1, 0], // export
    [1, 1, 0, 0, 0], // write
    [1, 0, 0, 0, 0], // read
];

/// One generated tool's facts.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// `tool_<i>`, or `mcp__<server>__tool_<i>` for every 3rd tool.
    pub name: String,
    /// Index into [`EFFECTS`] (`i % 5`).
    pub effect: usize,
    /// The permission it requires, e.g. `area3.add`.
    pub permission: String,
    /// `Some("accountant")` for every 7th tool.
    pub role: Option<&'static str>,
    /// The server of an `mcp__<server>__` name.
    pub server: Option<&'static str>,
}

/// The `i`th generated tool.
pub fn tool(i: usize) -> ToolSpec {
    let effect = i % 5;
    let area = i % 8;
    let perm = match EFFECTS[effect] {
        "none" => "view",
        "write" => "add",
        "delete" => "delete",
        _ => "export",
    };
    let (name, server) = if i.is_multiple_of(3) {
        let s = SERVERS[i % 4];
        (format!("mcp__{s}__tool_{i}"), Some(s))
    } else {
        (format!("tool_{i}"), None)
    };
    ToolSpec {
        name,
        effect,
        permission: format!("area{area}.{perm}"),
        role: (i.is_multiple_of(7)).then_some("accountant"),
        server,
    }
}

/// Policy text with `n` tools.
pub fn policy_text(n: usize) -> String {
    let mut s = String::new();
    s.push_str("policy \"bench\" version 1\n");
    s.push_str("effects none, write, delete, export, execute\n");
    s.push_str("intents destructive > execute > export > write > read\nfallback read\n");
    s.push_str("include \"lexicon/standard.warden\"\n");
    s.push_str(
        "matrix standard {\n              none   write  delete export execute\n  read        allow  deny   deny   deny   deny\n  write       allow  allow  deny   deny   deny\n  destructive allow  deny   allow  deny   deny\n  export      allow  deny   deny   allow  deny\n  execute     allow  deny   deny   deny   allow\n}\n",
    );
    s.push_str("mode analyzer { matrix standard restrict none }\n");
    s.push_str("mode supervised { matrix standard confirm write, delete, export, execute }\n");
    s.push_str("mode autonomous { matrix standard confirm export, execute }\n");
    s.push_str("default mode supervised\n");
    s.push_str("roles { owner > admin > manager > accountant > clerk > viewer, auditor > viewer, support > viewer }\n");
    for g in 0..8 {
        let _ = writeln!(
            s,
            "permission \"area{g}.manage\" implies \"area{g}.add\", \"area{g}.delete\", \"area{g}.view\", \"area{g}.export\""
        );
    }
    s.push_str("tiers task > session > project\nconnectors prefix \"mcp__\"\nunknown deny\n");
    s.push_str("confirm fields \"confirmed\"\ntenant arg \"business_id\"\nlimit transactional 1 per turn\n");
    for i in 0..n {
        let t = tool(i);
        let roles = t.role.map_or(String::new(), |r| format!(" roles {r}"));
        let _ = writeln!(
            s,
            "tool {} {{ effect {} permissions \"{}\" tenant required{roles} }}",
            t.name, EFFECTS[t.effect], t.permission
        );
    }
    s
}

/// [`policy_text`] with three argument rules on every tool: a directory (`under`), an amount
/// (`>`) and, in turn, a recipient (`in context.contacts, query`), recipients (`[*] matches`),
/// a statement (`=~`) or a host (`host() in`).
pub fn policy_text_with_rules(n: usize) -> String {
    let mut s = policy_text(0);
    s.push_str("context contacts\n");
    let third = [
        "confirm when recipient not in context.contacts, query",
        "confirm when to[*] not matches \"*@example.com\"",
        "deny when statement =~ \"(?i)\\\\b(drop|truncate)\\\\b\"",
        "deny when host(url) not in \"github.com\", \"docs.rs\"",
    ];
    for i in 0..n {
        let t = tool(i);
        let roles = t.role.map_or(String::new(), |r| format!(" roles {r}"));
        let _ = writeln!(
            s,
            "tool {} {{\n  effect {}  permissions \"{}\"  tenant required{roles}\n  deny when path not under \"/workspace/area{}\"\n  confirm when amount > {}\n  {}\n}}",
            t.name,
            EFFECTS[t.effect],
            t.permission,
            i % 8,
            100 + i,
            third[i % third.len()]
        );
    }
    s
}

/// The generated policy with `n` tools, loaded as if it were `<repo>/policies/bench.warden`
/// (so its `include "lexicon/standard.warden"` resolves); `repo` is the repository root.
pub fn load(n: usize, repo: &str) -> (Policy, Vec<String>) {
    let text = policy_text(n);
    let path = format!("{repo}/policies/bench.warden");
    let policy = match Policy::parse(&text, &path) {
        Ok(p) => p,
        Err(e) => panic!("generated policy must load: {e}"),
    };
    let names = policy.tools().map(str::to_string).collect();
    (policy, names)
}

/// The benches' request: an accountant with three areas managed and one viewed, tenant set,
/// session connectors github and drive, in supervised mode.
pub fn request() -> Request {
    Request::new("supervised")
        .roles(["accountant"])
        .permissions(["area0.manage", "area1.manage", "area2.view", "area3.manage"])
        .tenant("b-42")
        .connectors("session", ["github", "drive"])
}
