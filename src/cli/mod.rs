//! Command definitions (clap) and dispatch. Each command reads policies from files, writes
//! human text by default and JSON with `--json`. Exit codes: 0 success, 1 a failed check
//! (`check` with errors), 2 a usage or input error (one clear line on stderr).

mod analysis;
mod classify_eval;
mod commands;
mod ecosystem;
#[cfg(feature = "gateway")]
mod gateway;
mod guard;
mod proxy;
mod watch;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// toolwarden: decide which tools an AI agent may see and call.
#[derive(Parser, Debug)]
#[command(name = "toolwarden", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check policy files; print every diagnostic. Exit 1 when any has errors, 2 when a file
    /// cannot be read.
    Check {
        /// Policy files (`.warden`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also fail (exit 1) on warnings.
        #[arg(long)]
        deny_warnings: bool,
        /// Print diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Classify a query into the intent that gates tools, or evaluate the classifier on labeled
    /// queries (`--eval`).
    Classify {
        /// The policy file.
        #[arg(short = 'p', long = "policy")]
        policy: PathBuf,
        /// The query text; `-` reads it from standard input (which must be UTF-8).
        #[arg(required_unless_present = "eval", conflicts_with = "eval")]
        text: Option<String>,
        /// Evaluate on a JSON Lines file (`-` for standard input) of
        /// `{"text", "intent", "lang"?, "confidence"?}` rows: accuracy overall and per language
        /// (clear and ambiguous rows apart), confusion matrices and the misclassified rows.
        #[arg(long, value_name = "FILE.jsonl")]
        eval: Option<PathBuf>,
        /// With `--eval`: exit 1 when the accuracy on clear rows is below this. A fraction in
        /// 0..1 (`0.9`) or a percentage with a `%` sign (`90%`).
        #[arg(long, requires = "eval", value_name = "X")]
        min_accuracy: Option<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Decide which tools the model may see for a request and a query.
    Offer {
        #[command(flatten)]
        req: RequestArgs,
        /// Tool names (default: every tool the policy declares).
        tools: Vec<String>,
        /// Read tool names from a file: one name a line, or a JSON array of names.
        #[arg(long, conflicts_with = "tools")]
        tools_file: Option<PathBuf>,
        /// Read tool schemas (OpenAI, Anthropic or MCP, a JSON array) and print the visible
        /// ones unchanged, in order.
        #[arg(long, conflicts_with_all = ["tools", "tools_file"])]
        schemas: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Keep running: watch the policy and its includes, and print the offer again after
        /// every reload (a broken edit is reported and the last good policy kept).
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        log: AuditArgs,
    },
    /// Judge one tool call (the execution guard). With `--pending` and `--turn` a two-turn
    /// confirmation flow runs from a shell: see docs/guard.md.
    Guard {
        #[command(flatten)]
        req: RequestArgs,
        /// The tool called (needed unless `--declassify` is given).
        #[arg(long, required_unless_present = "declassify")]
        tool: Option<String>,
        /// The call's arguments, a JSON object (duplicated keys are rejected; at most 1 MiB and
        /// 64 levels deep); `-` reads them from standard input.
        #[arg(long, default_value = "{}", conflicts_with = "args_file")]
        args: String,
        /// Read the call's arguments from FILE (a regular file of at most 1 MiB), for arguments
        /// longer than one command-line string may be.
        #[arg(long, value_name = "FILE")]
        args_file: Option<PathBuf>,
        /// A pending-call file: written when the call needs confirmation, read (and checked
        /// against the call) when it exists, removed once the confirmed call is allowed. A
        /// confirmed call with no pending call in FILE is denied: only the user confirms. With
        /// `--turn`, a call held in this turn is confirmed only in a later one, and another call
        /// does not replace it in the same turn. Locked (FILE.lock) for the whole run, like
        /// `--turn`.
        #[arg(long, value_name = "FILE")]
        pending: Option<PathBuf>,
        /// A turn-state file counting this user turn's transactional calls (created when
        /// missing; delete it, or pass `--new-turn`, when a new user turn starts). Locked
        /// (FILE.lock) from reading to writing, so parallel runs share one count.
        #[arg(long, value_name = "FILE")]
        turn: Option<PathBuf>,
        /// Start a new user turn: ignore the turn file's count and the calls held in it (a call
        /// held in a turn is confirmed in a later one, and a call awaiting confirmation is not
        /// replaced by another in the same turn).
        #[arg(long)]
        new_turn: bool,
        /// A session file holding the session's flow labels (with the calls that put them
        /// there), its turn count and the call awaiting confirmation, in place of `--turn` and
        /// `--pending` (created when missing; written back through a temporary file and a
        /// rename). An allowed call of a tool that `taints` adds its labels; `--new-turn`
        /// starts a new turn (the labels stay). Locked (FILE.lock) for the whole run.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["pending", "turn"])]
        session: Option<PathBuf>,
        /// Take flow label LABEL off the session in `--session FILE` (the user's explicit
        /// reset), instead of judging a call; with `--audit`, the log records it. Needs
        /// `--session`.
        #[arg(long, value_name = "LABEL", requires = "session", conflicts_with_all = ["tool", "args_file", "new_turn"])]
        declassify: Option<String>,
        /// With a `tool_policies.yaml` as `-p`: the legacy tools.yaml catalog.
        #[arg(long, value_name = "TOOLS_YAML")]
        legacy: Option<PathBuf>,
        /// Print the result as JSON (seed 004's result shape).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        log: AuditArgs,
    },
    /// Translate tool catalogs and policies written in other formats into warden text.
    #[command(subcommand)]
    Import(ImportCommand),
    /// Rewrite policy files in the canonical layout (`--check`: print a diff, exit 1).
    Fmt {
        /// Policy files (`.warden`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Change nothing; exit 1 and print a unified diff when a file is not formatted.
        #[arg(long)]
        check: bool,
    },
    /// Print the compiled decision graph (Graphviz DOT or Mermaid).
    Graph {
        /// The policy file.
        #[arg(short = 'p', long = "policy")]
        policy: PathBuf,
        /// `dot` (render with `dot -Tsvg`) or `mermaid`.
        #[arg(long, default_value = "dot")]
        format: String,
    },
    /// Run policy test files (`*.test.yaml`); exit 1 when a case fails.
    Test {
        /// Test files, or directories searched for `*.test.yaml` (default: `.`).
        paths: Vec<PathBuf>,
        /// Run only the cases whose name contains this text.
        #[arg(long)]
        filter: Option<String>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
        /// Also list the tools, patterns, matrix cells, keywords, modes, argument rules and `after`
        /// blocks no case exercised.
        #[arg(long)]
        coverage: bool,
    },
    /// Print the complete decision table of a policy (every tool and pattern × mode × intent).
    Table {
        /// The policy file.
        #[arg(short = 'p', long = "policy")]
        policy: PathBuf,
        /// Only this mode.
        #[arg(long)]
        mode: Option<String>,
        /// Layout: text, json or csv.
        #[arg(long, default_value = "text")]
        format: String,
        /// The table for a session holding exactly these flow labels (comma-separated; empty:
        /// none), instead of the table without labels and the cells each label set changes.
        #[arg(long, value_delimiter = ',')]
        labels: Option<Vec<String>>,
    },
    /// Show every decision that changes between two versions of a policy.
    Diff {
        /// The old policy file.
        old: PathBuf,
        /// The new policy file.
        new: PathBuf,
        /// Queries to reclassify: one a line, or JSON Lines with a "text" field.
        #[arg(long)]
        queries: Option<PathBuf>,
        /// Recorded calls to replay against both versions: JSON Lines of `{"tool", "args",
        /// "mode", "roles", "permissions", "tenant", "connectors", "forced", "query" or
        /// "intent", "context"}`; every call whose verdict moves is reported.
        #[arg(long, value_name = "FILE.jsonl")]
        calls: Option<PathBuf>,
        /// Exit 1 when anything changed (0 otherwise; 2 on an error).
        #[arg(long)]
        fail_on_change: bool,
        /// Print the diff as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Trace one tool's decision stage by stage, with the rules consulted.
    Explain {
        #[command(flatten)]
        req: RequestArgs,
        /// The tool name.
        #[arg(long)]
        tool: String,
        /// Also judge a call with these arguments (a JSON object): stages 8–13 of the guard.
        #[arg(long)]
        args: Option<String>,
        /// Explain for a session holding these flow labels (comma-separated): adds stage
        /// `flow`, the `after` blocks that apply.
        #[arg(long, value_delimiter = ',', conflicts_with = "session")]
        labels: Option<Vec<String>>,
        /// Explain for the session in FILE (as `guard --session` writes it): its labels, and
        /// with `--args` its turn and pending call. The file is not changed.
        #[arg(long, value_name = "FILE")]
        session: Option<PathBuf>,
        /// Print the trace as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run an MCP server (stdio transport) behind the policy: hide the tools it may not offer,
    /// refuse the calls it may not run, hold the ones that need confirmation. Exits with the
    /// server's exit code. See docs/mcp-proxy.md.
    #[command(name = "mcp-proxy")]
    McpProxy {
        #[command(flatten)]
        req: RequestArgs,
        /// Judge tools as `mcp__<NAME>__<tool>` (connector allowlists and `match` patterns see
        /// that name).
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// Append one JSON line per decision to FILE (flushed per line).
        #[arg(long, value_name = "FILE")]
        audit: Option<std::path::PathBuf>,
        /// Log decisions but hide nothing and forward every call. Needs `--audit`.
        #[arg(long, requires = "audit")]
        advisory: bool,
        /// The server command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// An MCP gateway: several upstream servers (stdio or Streamable HTTP) behind one, every
    /// tool named `mcp__<server>__<tool>` and every call judged, with identity from bearer
    /// tokens, sessions and the user's confirmation. See docs/gateway.md.
    #[cfg(feature = "gateway")]
    Gateway {
        /// The configuration file (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Stdio only: a role of the client (repeatable).
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Stdio only: a permission of the client (repeatable).
        #[arg(long = "permission")]
        permissions: Vec<String>,
        /// Stdio only: the client's tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Stdio only: the execution mode (default: the policy's `default mode`).
        #[arg(long)]
        mode: Option<String>,
    },
}

/// `toolwarden import ...`
#[derive(Subcommand, Debug)]
enum ImportCommand {
    /// An MCP tools/list result (or a JSON array of MCP tools) -> a policy declaring them, with
    /// effects from the tools' annotations.
    Mcp {
        /// The JSON file.
        file: PathBuf,
        /// Prefix names as `mcp__<server>__<tool>`.
        #[arg(long)]
        server: Option<String>,
        /// Print only the `tool` declarations, to include into a policy that declares the
        /// effects `none`, `write` and `delete`.
        #[arg(long)]
        tools_only: bool,
    },
    /// Seed 004's tool_policies.yaml (and the legacy tools.yaml catalog): print the
    /// equivalent warden policy.
    Yaml {
        /// The tool_policies.yaml file (when it does not exist, `--legacy` alone decides).
        file: PathBuf,
        /// The legacy tools.yaml catalog, for tools without an entry in `file`.
        #[arg(long, value_name = "TOOLS_YAML")]
        legacy: Option<PathBuf>,
    },
}

/// The decision-log flags of `offer` and `guard`.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct AuditArgs {
    /// Append one JSON line per decision to FILE (time, policy, request digest, tool,
    /// decision, stage, rule source, enforcement).
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// Advisory enforcement: log what would be blocked, but allow it (every record is marked
    /// `advisory`, with the decision enforcement would have made). Needs `--audit`.
    #[arg(long, requires = "audit")]
    advisory: bool,
}

/// The flags that describe a request.
#[derive(Args, Debug, Clone)]
pub(crate) struct RequestArgs {
    /// The policy file.
    #[arg(short = 'p', long = "policy")]
    policy: PathBuf,
    /// Execution mode (default: the policy's `default mode`).
    #[arg(long)]
    mode: Option<String>,
    /// A role of the principal (repeatable).
    #[arg(long = "role")]
    roles: Vec<String>,
    /// A permission of the principal (repeatable).
    #[arg(long = "permission")]
    permissions: Vec<String>,
    /// The session's tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// A connector allowlist for one tier: `TIER=server1,server2`; `TIER=` sets zero connectors
    /// (repeatable).
    #[arg(long = "connectors", value_name = "TIER=SERVERS")]
    connectors: Vec<String>,
    /// A tool name exempt from the intent stage (repeatable).
    #[arg(long = "forced")]
    forced: Vec<String>,
    /// A `context` set the argument rules read: `NAME=v1,v2`; `NAME=` is the empty set
    /// (repeatable, each name once).
    #[arg(long = "context", value_name = "NAME=VALUES")]
    contexts: Vec<String>,
    /// The user's query; its intent is classified.
    #[arg(long, conflicts_with = "intent")]
    query: Option<String>,
    /// An intent by name, instead of a query (default: the policy's fallback).
    #[arg(long)]
    intent: Option<String>,
}

/// Parses the command line and runs the command; returns the exit code.
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            if !e.use_stderr() {
                // --help, --version
                let _ = e.print();
                return 0;
            }
            if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // `toolwarden` alone: the full help is the clearest answer.
                let _ = e.print();
                return 2;
            }
            eprintln!("{}", one_line_usage_error(&e.render().to_string()));
            return 2;
        }
    };
    let result = match cli.command {
        Command::Check {
            files,
            deny_warnings,
            json,
        } => commands::check(&files, deny_warnings, json),
        Command::Classify {
            policy,
            text,
            eval,
            min_accuracy,
            json,
        } => match (eval, text) {
            (Some(file), _) => classify_eval::run(&policy, &file, min_accuracy.as_deref(), json),
            (None, Some(text)) => commands::classify(&policy, &text, json),
            (None, None) => Err("give a query text or --eval FILE.jsonl".to_string()),
        },
        Command::Offer {
            req,
            schemas: Some(schemas),
            json,
            ..
        } => ecosystem::offer_schemas(&req, &schemas, json),
        Command::Offer {
            req,
            tools,
            tools_file,
            json,
            watch: true,
            ..
        } => watch::offer(&req, tools, tools_file.as_deref(), json),
        Command::Offer {
            req,
            tools,
            tools_file,
            json,
            log,
            ..
        } => commands::offer(&req, tools, tools_file.as_deref(), json, &log),
        Command::Import(ImportCommand::Mcp {
            file,
            server,
            tools_only,
        }) => ecosystem::import_mcp(&file, server.as_deref(), tools_only),
        Command::Fmt { files, check } => ecosystem::fmt(&files, check),
        Command::Graph { policy, format } => ecosystem::graph(&policy, &format),
        Command::Guard {
            req,
            tool,
            args,
            args_file,
            pending,
            turn,
            new_turn,
            session,
            declassify,
            legacy,
            json,
            log,
        } => guard::guard(
            &req,
            &guard::CallArgs {
                tool,
                args,
                args_file,
                pending,
                turn,
                new_turn,
                session,
                declassify,
                legacy,
            },
            json,
            &log,
        ),
        Command::McpProxy {
            req,
            server,
            audit,
            advisory,
            command,
        } => proxy::run(
            &req,
            &proxy::ProxyArgs {
                server,
                audit,
                advisory,
                command,
            },
        ),
        #[cfg(feature = "gateway")]
        Command::Gateway {
            config,
            roles,
            permissions,
            tenant,
            mode,
        } => gateway::run(
            &config,
            gateway::StdioIdentity {
                roles,
                permissions,
                tenant,
                mode,
            },
        ),
        Command::Import(ImportCommand::Yaml { file, legacy }) => {
            guard::import_yaml(&file, legacy.as_deref())
        }
        Command::Test {
            paths,
            filter,
            json,
            coverage,
        } => analysis::test(&paths, filter.as_deref(), json, coverage),
        Command::Table {
            policy,
            mode,
            format,
            labels,
        } => analysis::table(&policy, mode.as_deref(), &format, labels.as_deref()),
        Command::Diff {
            old,
            new,
            queries,
            calls,
            fail_on_change,
            json,
        } => analysis::diff(
            &old,
            &new,
            &analysis::DiffInputs {
                queries: queries.as_deref(),
                calls: calls.as_deref(),
            },
            fail_on_change,
            json,
        ),
        Command::Explain {
            req,
            tool,
            args,
            labels,
            session,
            json,
        } => analysis::explain(
            &req,
            &tool,
            args.as_deref(),
            &analysis::Flow {
                labels,
                session: session.as_deref(),
            },
            json,
        ),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            2
        }
    }
}

/// Shortens clap's usage error to one line: its first paragraph (the error and, for missing
/// arguments, their names), without the usage block and tips, plus where to read more.
fn one_line_usage_error(rendered: &str) -> String {
    let first: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let mut line = first.join(" ");
    if line.is_empty() {
        line = "error: invalid command line".to_string();
    }
    format!("{line} (see `toolwarden --help`)")
}
