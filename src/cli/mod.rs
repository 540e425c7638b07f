//! Command definitions (clap) and dispatch. Each command reads policies from files, writes
//! human text by default and JSON with `--json`. Exit codes: 0 success, 1 a failed check
//! (`check` with errors), 2 a usage or input error (one clear line on stderr).

mod commands;
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
    /// Check policy files; print every diagnostic. Exit 1 when any has errors.
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
    /// Classify a query into the intent that gates tools.
    Classify {
        /// The policy file.
        #[arg(short = 'p', long = "policy")]
        policy: PathBuf,
        /// The query text.
        text: String,
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
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Keep running: watch the policy and its includes, and print the offer again after
        /// every reload (a broken edit is reported and the last good policy kept).
        #[arg(long)]
        watch: bool,
    },
    /// Judge one tool call (the execution guard).
    Guard {
        #[command(flatten)]
        req: RequestArgs,
        /// The tool called.
        #[arg(long)]
        tool: String,
        /// The call's arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Print the result as JSON (seed 004's result shape).
        #[arg(long)]
        json: bool,
    },
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
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Check {
            files,
            deny_warnings,
            json,
        } => commands::check(&files, deny_warnings, json),
        Command::Classify { policy, text, json } => commands::classify(&policy, &text, json),
        Command::Offer {
            req,
            tools,
            tools_file,
            json,
            watch: true,
        } => watch::offer(&req, tools, tools_file.as_deref(), json),
        Command::Offer {
            req,
            tools,
            tools_file,
            json,
            watch: false,
        } => commands::offer(&req, tools, tools_file.as_deref(), json),
        Command::Guard {
            req,
            tool,
            args,
            json,
        } => commands::guard(&req, &tool, &args, json),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            2
        }
    }
}
