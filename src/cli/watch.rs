//! `toolwarden offer --watch`: print the offer, then print it again after every reload of the
//! policy (or one of its includes); a broken edit is reported on stderr and the last good
//! policy stays in use. Runs until interrupted.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use toolwarden::watch::{PolicyWatcher, ReloadEvent};

use super::commands;
use super::RequestArgs;

/// How long to wait for an editor's burst of file events to settle before printing.
const SETTLE: Duration = Duration::from_millis(150);

pub(crate) fn offer(
    req: &RequestArgs,
    tools: Vec<String>,
    tools_file: Option<&Path>,
    json: bool,
) -> Result<i32, String> {
    let (tx, rx) = mpsc::channel::<Result<u64, (u64, String)>>();
    let watcher = PolicyWatcher::new(&req.policy, move |event: &ReloadEvent| {
        let _ = tx.send(match event {
            ReloadEvent::Reloaded { generation } => Ok(*generation),
            ReloadEvent::Rejected { generation, error } => Err((*generation, error.render())),
        });
    })
    .map_err(|e| e.to_string())?;
    println!("== generation {}", watcher.generation());
    commands::offer(req, tools.clone(), tools_file, json, &Default::default())?;
    while let Ok(mut event) = rx.recv() {
        // Several events arrive per save; report the last one.
        std::thread::sleep(SETTLE);
        while let Ok(later) = rx.try_recv() {
            event = later;
        }
        match event {
            Ok(generation) => {
                println!("== generation {generation}");
                if let Err(message) =
                    commands::offer(req, tools.clone(), tools_file, json, &Default::default())
                {
                    eprintln!("error: {message}");
                }
            }
            Err((generation, rendered)) => {
                eprintln!("{rendered}");
                eprintln!("policy edit rejected; still serving generation {generation}");
            }
        }
    }
    drop(watcher);
    Ok(0)
}
