//! `toolwarden classify -p POLICY --eval FILE.jsonl [--min-accuracy X] [--json]`: evaluates the
//! policy's classifier on labeled queries (see [`toolwarden::classify_eval`]). Exit 0, or 1 when
//! `--min-accuracy` is given and the accuracy on clear rows is below it; 2 on bad input.

use std::io::Read;
use std::path::Path;

use toolwarden::classify_eval::{evaluate, parse_labeled, parse_min_accuracy, Confusion, Tally};

use super::commands::load_policy;

pub(crate) fn run(
    policy_path: &Path,
    file: &Path,
    min_accuracy: Option<&str>,
    json: bool,
) -> Result<i32, String> {
    let min = min_accuracy.map(parse_min_accuracy).transpose()?;
    let policy = load_policy(policy_path)?;
    let bytes = if file.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::stdin()
            .read_to_end(&mut b)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        b
    } else {
        toolwarden::limits::read_file(file, toolwarden::limits::MAX_DATA_BYTES)
            .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?
    };
    let rows = parse_labeled(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    let report = evaluate(&policy, &rows).map_err(|e| format!("{}: {e}", file.display()))?;
    let clear = report.overall.clear.accuracy;
    let pass = match (min, clear) {
        (None, _) => true,
        (Some(_), None) => {
            return Err(format!(
                "{}: no clear rows to compute --min-accuracy on",
                file.display()
            ))
        }
        (Some(m), Some(a)) => a >= m,
    };
    if json {
        let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("file".into(), file.display().to_string().into());
            obj.insert("rows".into(), rows.len().into());
            if let Some(m) = min {
                obj.insert("min_accuracy".into(), m.into());
                obj.insert("pass".into(), pass.into());
            }
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
        );
    } else {
        println!(
            "evaluated {} rows of {} with policy {}",
            rows.len(),
            file.display(),
            policy_path.display()
        );
        println!();
        println!(
            "{:<10} {:>16} {:>16} {:>16}",
            "language", "clear", "ambiguous", "all"
        );
        let line = |name: &str, t: &toolwarden::classify_eval::Tallies| {
            println!(
                "{:<10} {:>16} {:>16} {:>16}",
                name,
                fmt_tally(&t.clear),
                fmt_tally(&t.ambiguous),
                fmt_tally(&t.all)
            );
        };
        line("overall", &report.overall);
        for (lang, t) in &report.languages {
            line(lang, t);
        }
        println!();
        print_confusion("confusion matrix, clear rows", &report.confusion_clear);
        if report.overall.ambiguous.rows > 0 {
            println!();
            print_confusion(
                "confusion matrix, ambiguous rows",
                &report.confusion_ambiguous,
            );
        }
        println!();
        println!("misclassified rows: {}", report.misclassified.len());
        for m in &report.misclassified {
            println!(
                "  line {} [{}{}] expected {}, got {}{}",
                m.line,
                m.lang,
                if m.ambiguous { ", ambiguous" } else { "" },
                m.expected,
                m.got,
                if m.fallback { " (fallback)" } else { "" }
            );
            println!("    text: {}", m.text);
            for h in &m.hits {
                println!(
                    "    hit:     {} \"{}\" [{}] \"{}\"",
                    h.intent,
                    h.keyword,
                    h.lang,
                    m.text.get(h.span.0..h.span.1).unwrap_or("")
                );
            }
            for h in &m.dropped {
                println!(
                    "    dropped: {} \"{}\" [{}] \"{}\", {}",
                    h.intent,
                    h.keyword,
                    h.lang,
                    m.text.get(h.span.0..h.span.1).unwrap_or(""),
                    drop_reason(h)
                );
            }
        }
        if let (Some(m), Some(a)) = (min, clear) {
            println!();
            println!(
                "min accuracy {:.1}% on clear rows: {} ({:.1}%)",
                m * 100.0,
                if pass { "pass" } else { "FAIL" },
                a * 100.0
            );
        }
    }
    Ok(i32::from(!pass))
}

fn fmt_tally(t: &Tally) -> String {
    match t.accuracy {
        Some(a) => format!("{}/{} {:5.1}%", t.correct, t.rows, a * 100.0),
        None => "-".to_string(),
    }
}

fn print_confusion(title: &str, c: &Confusion) {
    println!("{title} (rows: expected, columns: got)");
    let w = c.labels.iter().map(String::len).max().unwrap_or(0).max(8) + 1;
    print!("{:<w$}", "");
    for l in &c.labels {
        print!("{l:>w$}");
    }
    println!();
    for (l, row) in c.labels.iter().zip(&c.counts) {
        print!("{l:<w$}");
        for n in row {
            print!("{n:>w$}");
        }
        println!();
    }
}

/// Why a hit was dropped, as the reports print it: `negated by "…"` (a negator, or the `except`
/// entry it stands in), or `quoted content`.
pub(super) fn drop_reason(h: &toolwarden::Hit) -> String {
    match (&h.negated_by, h.quoted) {
        (Some(n), _) => format!("negated by \"{n}\""),
        (None, true) => "quoted content".to_string(),
        (None, false) => "negated".to_string(),
    }
}
