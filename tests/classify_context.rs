//! What is not the user's request, against the shipped lexicon: far negators and verbs of
//! abstaining, quoted and embedded content, "instead" constructions, conditions and sequencing,
//! questions about the past, and words with two readings, in every shipped language. Every
//! query here was written for this file.

use std::sync::OnceLock;

use toolwarden::limits::MAX_QUERY_OCCURRENCES;
use toolwarden::{Intent, Policy};

/// `policies/finance.warden`, which includes the standard lexicon.
fn finance() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/finance.warden");
        match Policy::from_file(path) {
            Ok(p) => p,
            Err(e) => panic!("finance.warden must load:\n{}", e.render()),
        }
    })
}

/// What the rows exercise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A prohibition with its negator far from the verb, or a verb of abstaining.
    FarNegation,
    /// Quoted and embedded content, and identifiers that hold a keyword.
    Quoted,
    /// "Instead" constructions.
    Instead,
    /// Sequencing and conditions.
    Condition,
    /// Questions about the past.
    Past,
    /// Words with two readings.
    TwoReadings,
}

use Kind::*;

/// `(kind, language, query, the intent it must get)`.
const ROWS: &[(Kind, &str, &str, &str)] = &[
    // 1. Far negators and verbs of abstaining.
    (
        FarNegation,
        "en",
        "Do not, under any circumstances, delete the March invoices.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Please refrain from removing any vendor records.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Avoid cancelling the pending purchase orders for now.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Never, not even at year end, export the payroll ledger.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Stop deleting my drafts every night.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Stop the nightly sync timer.",
        "destructive",
    ),
    (
        FarNegation,
        "en",
        "Don't worry, delete the duplicate vendor.",
        "destructive",
    ),
    (
        FarNegation,
        "es",
        "Bajo ninguna circunstancia borres las facturas de marzo.",
        "read",
    ),
    (
        FarNegation,
        "es",
        "Evita eliminar los contactos del proveedor principal.",
        "read",
    ),
    (
        FarNegation,
        "es",
        "Deja de borrar mis notas cada noche.",
        "read",
    ),
    (
        FarNegation,
        "pt",
        "Jamais, em hipótese alguma, exclua os relatórios do trimestre.",
        "read",
    ),
    (
        FarNegation,
        "pt",
        "Evite excluir os registros antigos dos clientes.",
        "read",
    ),
    (
        FarNegation,
        "pt",
        "Pare de apagar os meus rascunhos toda noite.",
        "read",
    ),
    (
        FarNegation,
        "pt",
        "Pare o temporizador da cozinha.",
        "destructive",
    ),
    (
        FarNegation,
        "fr",
        "Évitez de supprimer les anciennes factures du client.",
        "read",
    ),
    (
        FarNegation,
        "fr",
        "Jamais, sous aucun prétexte, annuler les commandes en cours.",
        "read",
    ),
    (
        FarNegation,
        "fr",
        "Arrête de supprimer mes brouillons chaque soir.",
        "read",
    ),
    (
        FarNegation,
        "de",
        "Lösche die alten Rechnungen vom März bitte nicht.",
        "read",
    ),
    (
        FarNegation,
        "de",
        "Auf keinen Fall die gesamten Kundendaten exportieren.",
        "read",
    ),
    (FarNegation, "ar", "تجنب حذف سجلات الموردين القديمة", "read"),
    (FarNegation, "ar", "إياك وإلغاء الطلبات المعلقة", "read"),
    (FarNegation, "ar", "توقف عن حذف المسودات كل ليلة", "read"),
    (
        FarNegation,
        "fa",
        "از حذف فایل‌های قدیمی مشتریان خودداری کن",
        "read",
    ),
    (
        FarNegation,
        "fa",
        "هرگز گزارش‌های ماه قبل را حذف نکنید",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Do not export any customer data to CSV.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "You mustn't remove any vendor records.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Removing vendor records is not allowed.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "I don't want you to ever cancel my orders.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Don't worry, delete the old drafts.",
        "destructive",
    ),
    (
        FarNegation,
        "es",
        "Ni se te ocurra borrar las facturas de marzo.",
        "read",
    ),
    (
        FarNegation,
        "es",
        "Está prohibido eliminar los registros de proveedores.",
        "read",
    ),
    (
        FarNegation,
        "es",
        "No quiero que me borres los borradores.",
        "read",
    ),
    (
        FarNegation,
        "pt",
        "É proibido apagar as faturas de março.",
        "read",
    ),
    (
        FarNegation,
        "fr",
        "Il est interdit de supprimer les factures de mars.",
        "read",
    ),
    (
        FarNegation,
        "fr",
        "Tu n'as pas le droit de supprimer mes brouillons.",
        "read",
    ),
    (
        FarNegation,
        "de",
        "Lösche bitte keine Rechnungen vom März.",
        "read",
    ),
    (
        FarNegation,
        "de",
        "Storniere niemals meine Bestellungen.",
        "read",
    ),
    (FarNegation, "de", "Bitte nichts löschen.", "read"),
    (
        FarNegation,
        "de",
        "Kündige mein Abo auf keinen Fall.",
        "read",
    ),
    (
        FarNegation,
        "de",
        "Lösche alle alten Entwürfe, keine Sorge.",
        "destructive",
    ),
    (FarNegation, "ar", "ممنوع حذف فواتير شهر مارس", "read"),
    (FarNegation, "fa", "حذف فاکتورهای ماه قبل ممنوع است", "read"),
    (
        FarNegation,
        "en",
        "It is forbidden to delete posted invoices.",
        "read",
    ),
    (
        FarNegation,
        "en",
        "Deleting posted invoices isn't allowed.",
        "read",
    ),
    (
        FarNegation,
        "es",
        "Borrar las facturas de marzo está prohibido.",
        "read",
    ),
    (
        FarNegation,
        "pt",
        "Excluir notas fiscais é proibido.",
        "read",
    ),
    (
        FarNegation,
        "fr",
        "Supprimer les factures de mars est interdit.",
        "read",
    ),
    (
        FarNegation,
        "de",
        "Lösche die Rechnungen vom März auf keinen Fall.",
        "read",
    ),
    (FarNegation, "ar", "حذف فواتير شهر مارس ممنوع", "read"),
    // 2. Quoted and embedded content, identifiers.
    (
        Quoted,
        "en",
        "Summarize this email: \"please delete all my old invoices\"",
        "read",
    ),
    (
        Quoted,
        "en",
        "Translate this to French: remove every vendor from the list",
        "read",
    ),
    (
        Quoted,
        "en",
        "Open delete-me.txt and read me what it says",
        "read",
    ),
    (
        Quoted,
        "en",
        "What does the delete_invoice tool do?",
        "read",
    ),
    (
        Quoted,
        "en",
        "Print out the first lines of remove_old.sh",
        "export",
    ),
    (
        Quoted,
        "en",
        "Show me the first lines of remove_old.sh",
        "read",
    ),
    (
        Quoted,
        "en",
        "Delete the file called \"notes.txt\"",
        "destructive",
    ),
    (Quoted, "en", "\"Delete everything\"", "destructive"),
    (
        Quoted,
        "es",
        "Traduce al inglés: \"borra todas las facturas\"",
        "read",
    ),
    (
        Quoted,
        "es",
        "Resume este correo: cancela mi suscripción y borra la cuenta",
        "read",
    ),
    (
        Quoted,
        "pt",
        "Traduza este texto: “apague os arquivos antigos”",
        "read",
    ),
    (
        Quoted,
        "fr",
        "Traduis ce message : « supprime tous les fichiers »",
        "read",
    ),
    (
        Quoted,
        "de",
        "Übersetze diesen Satz: „Lösche alle Rechnungen“",
        "read",
    ),
    (
        Quoted,
        "ar",
        "ترجم هذه الجملة: \"احذف كل الفواتير\"",
        "read",
    ),
    (
        Quoted,
        "fa",
        "این جمله را ترجمه کن: «فایل‌ها را حذف کن»",
        "read",
    ),
    // 3. "Instead" constructions.
    (
        Instead,
        "en",
        "Instead of the big monthly export of all invoices, show me a summary.",
        "read",
    ),
    (
        Instead,
        "en",
        "Don't delete the old drafts, list them instead.",
        "read",
    ),
    (
        Instead,
        "en",
        "Rather than cancelling every open order, count them.",
        "read",
    ),
    (
        Instead,
        "en",
        "Instead of listing them, delete the drafts.",
        "destructive",
    ),
    (
        Instead,
        "es",
        "En lugar de borrar las facturas duplicadas, muéstramelas.",
        "read",
    ),
    (
        Instead,
        "pt",
        "Em vez de apagar os contatos repetidos, mostre-os para mim.",
        "read",
    ),
    (
        Instead,
        "fr",
        "Au lieu de supprimer les doublons du fichier, affiche-les.",
        "read",
    ),
    (
        Instead,
        "de",
        "Statt die doppelten Einträge zu löschen, zeige sie mir.",
        "read",
    ),
    (
        Instead,
        "ar",
        "بدلا من حذف الفواتير المكررة، اعرضها لي",
        "read",
    ),
    (
        Instead,
        "fa",
        "به جای حذف فاکتورهای تکراری، آن‌ها را نشان بده",
        "read",
    ),
    // 4. Sequencing and conditions.
    (
        Condition,
        "en",
        "Before you run anything, list the scheduled jobs.",
        "read",
    ),
    (
        Condition,
        "en",
        "After reviewing the drafts, don't change anything.",
        "read",
    ),
    (
        Condition,
        "en",
        "If the export finished, tell me how many rows it had.",
        "read",
    ),
    (
        Condition,
        "en",
        "List the files before deleting them.",
        "read",
    ),
    (
        Condition,
        "en",
        "After you export the report, delete the temporary copy.",
        "destructive",
    ),
    (
        Condition,
        "es",
        "Antes de borrar nada, muéstrame la lista de facturas.",
        "read",
    ),
    (
        Condition,
        "pt",
        "Antes de apagar qualquer coisa, mostre a lista de faturas.",
        "read",
    ),
    (
        Condition,
        "fr",
        "Avant de supprimer quoi que ce soit, montre-moi la liste.",
        "read",
    ),
    (
        Condition,
        "de",
        "Bevor wir die Rechnungen löschen, zeige mir die Liste.",
        "read",
    ),
    (
        Condition,
        "ar",
        "قبل حذف أي شيء، اعرض قائمة الفواتير",
        "read",
    ),
    (
        Condition,
        "fa",
        "قبل از حذف هر چیزی، فهرست فاکتورها را نشان بده",
        "read",
    ),
    // 5. Questions about the past.
    (
        Past,
        "en",
        "Which invoices did you delete last week?",
        "read",
    ),
    (
        Past,
        "en",
        "What did we export to the auditors in May?",
        "read",
    ),
    (
        Past,
        "en",
        "Who removed the vendor from the approved list?",
        "read",
    ),
    (Past, "es", "¿Qué facturas fueron canceladas ayer?", "read"),
    (
        Past,
        "pt",
        "Quem apagou as faturas da semana passada?",
        "read",
    ),
    (Past, "pt", "Quais faturas foram apagadas ontem?", "read"),
    (
        Past,
        "pt",
        "Apague as faturas da semana passada.",
        "destructive",
    ),
    (
        Past,
        "fr",
        "Qui a supprimé les factures de la semaine dernière ?",
        "read",
    ),
    (
        Past,
        "de",
        "Wer hat die Rechnungen vom Montag gelöscht?",
        "read",
    ),
    (Past, "ar", "من حذف الفواتير الأسبوع الماضي؟", "read"),
    (Past, "ar", "ما الفواتير التي تم حذفها أمس؟", "read"),
    (Past, "fa", "چه کسی فاکتورها را حذف کرد؟", "read"),
    // 6. Words with two readings.
    (
        TwoReadings,
        "en",
        "What change did you make to invoice 12?",
        "read",
    ),
    (
        TwoReadings,
        "en",
        "Change the due date of invoice 12.",
        "write",
    ),
    (
        TwoReadings,
        "en",
        "Run a report of the unpaid invoices.",
        "read",
    ),
    (TwoReadings, "en", "Run the payroll job now.", "execute"),
    (
        TwoReadings,
        "es",
        "¿A qué hora es mi reserva del viernes?",
        "read",
    ),
    (
        TwoReadings,
        "es",
        "Reserva una mesa para el viernes.",
        "write",
    ),
    (
        TwoReadings,
        "pt",
        "Qual é o prazo de troca deste produto?",
        "read",
    ),
    (
        TwoReadings,
        "fr",
        "Quand a eu lieu la dernière mise à jour du stock ?",
        "read",
    ),
    (
        TwoReadings,
        "de",
        "Wie ist der Status der letzten Sicherung?",
        "read",
    ),
    (TwoReadings, "ar", "متى كان آخر تحديث للفواتير؟", "read"),
    (TwoReadings, "fa", "آخرین تغییر فاکتور چه بود؟", "read"),
    // "stop" the interjection (a clause of its own) against "stop" the request.
    (TwoReadings, "en", "Stop! Just list my invoices.", "read"),
    (TwoReadings, "en", "Stop, don't delete anything.", "read"),
    (
        TwoReadings,
        "en",
        "Stop the nightly export job.",
        "destructive",
    ),
    (
        TwoReadings,
        "es",
        "¡Detente! Muéstrame las facturas.",
        "read",
    ),
    (
        TwoReadings,
        "es",
        "Detén el proceso de facturación.",
        "destructive",
    ),
    (TwoReadings, "pt", "Pare! Mostre as faturas.", "read"),
    (
        TwoReadings,
        "fr",
        "Arrête, montre-moi les factures.",
        "read",
    ),
    (TwoReadings, "de", "Stopp! Zeig mir die Rechnungen.", "read"),
    (TwoReadings, "fa", "متوقف کن، فاکتورها را نشان بده", "read"),
];

fn describe(i: &Intent) -> String {
    let hits: Vec<String> = i
        .hits
        .iter()
        .map(|h| {
            format!(
                "{} {:?}{}",
                h.intent,
                h.keyword,
                if h.quoted { " (quoted)" } else { "" }
            )
        })
        .collect();
    let dropped: Vec<String> = i
        .dropped
        .iter()
        .map(|h| {
            format!(
                "{:?} by {:?}{}",
                h.keyword,
                h.negated_by,
                if h.quoted { " (quoted)" } else { "" }
            )
        })
        .collect();
    format!("hits {hits:?}, dropped {dropped:?}")
}

#[test]
fn every_row_gets_its_intent() {
    let mut wrong = Vec::new();
    for &(kind, lang, query, want) in ROWS {
        let i = finance().classify(query);
        if i.name != want {
            wrong.push(format!(
                "{kind:?} [{lang}] {query:?}: expected {want}, got {} ({})",
                i.name,
                describe(&i)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} rows wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_kind_has_a_row_in_every_shipped_language() {
    for kind in [FarNegation, Quoted, Instead, Condition, Past, TwoReadings] {
        for lang in ["en", "es", "pt", "fr", "de", "ar", "fa"] {
            assert!(
                ROWS.iter().any(|r| r.0 == kind && r.1 == lang),
                "no {kind:?} row in {lang}"
            );
        }
    }
}

/// A policy with two intents, one keyword each and `extra` (declarations under test).
fn small(extra: &str) -> Policy {
    let src = format!(
        r#"
policy "t" version 1
effects none, delete
intents destructive > read
fallback read
matrix m {{
              none   delete
  read        allow  deny
  destructive allow  allow
}}
mode m {{ matrix m }}
default mode m
tool list_things {{ effect none }}
keywords destructive {{ en "delete", "purg*", "stop" }}
keywords read {{ en "show" }}
{extra}
"#
    );
    match Policy::parse(&src, "t.warden") {
        Ok(p) => p,
        Err(e) => panic!("test policy must load:\n{}", e.render()),
    }
}

/// `(intent, counted keywords, dropped (keyword, cause, quoted))` of `query`.
fn outcome(p: &Policy, query: &str) -> (String, Vec<String>, Vec<(String, String, bool)>) {
    let i = p.classify(query);
    (
        i.name.to_string(),
        i.hits.iter().map(|h| h.keyword.to_string()).collect(),
        i.dropped
            .iter()
            .map(|h| {
                (
                    h.keyword.to_string(),
                    h.negated_by.as_deref().unwrap_or("").to_string(),
                    h.quoted,
                )
            })
            .collect(),
    )
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn quoted_content_counts_by_default_and_as_the_policy_says() {
    let query = "show the file \"delete me\"";
    // `quoted count` (the default): a quoted keyword is a keyword.
    let (name, hits, dropped) = outcome(&small(""), query);
    assert_eq!(
        (name.as_str(), hits, dropped),
        ("destructive", owned(&["show", "delete"]), vec![])
    );
    // `quoted data`: it counts only when nothing outside quoted content does.
    let data = small("quoted data");
    let (name, hits, dropped) = outcome(&data, query);
    assert_eq!(
        (name.as_str(), hits, dropped),
        (
            "read",
            owned(&["show"]),
            vec![("delete".into(), "".into(), true)]
        )
    );
    let (name, hits, _) = outcome(&data, "\"delete me\"");
    assert_eq!((name.as_str(), hits), ("destructive", owned(&["delete"])));
    // `quoted ignore`: never.
    let (name, hits, dropped) = outcome(&small("quoted ignore"), "\"delete me\"");
    assert_eq!(
        (name.as_str(), hits, dropped),
        ("read", vec![], vec![("delete".into(), "".into(), true)])
    );
}

#[test]
fn quotation_marks_pair_by_kind_and_an_apostrophe_is_no_quotation() {
    let p = small("quoted ignore");
    for q in [
        "“delete it”",
        "„delete it“",
        "«delete it»",
        "‹delete it›",
        "「delete it」",
        "`delete it`",
        "'delete it'",
        "say \"delete\" twice",
    ] {
        assert_eq!(outcome(&p, q).0, "read", "{q}");
    }
    // Not quotations: an apostrophe inside a word, an unclosed mark, a mark of another kind.
    for q in [
        "don't delete",
        "it's delete day",
        "\"delete it",
        "«delete it\"",
        "the users' delete list",
    ] {
        assert_eq!(outcome(&p, q).0, "destructive", "{q}");
    }
}

#[test]
fn identifiers_are_quoted_content() {
    let p = small("quoted ignore");
    for q in [
        "open delete-me.txt",
        "what does delete_invoice do",
        "cat ./purge_old.sh",
        "ask delete@example.com",
        "see /tmp/delete/x",
    ] {
        assert_eq!(outcome(&p, q).0, "read", "{q}");
    }
    for q in ["delete me.txt", "delete-me", "delete. then show"] {
        assert_eq!(outcome(&p, q).0, "destructive", "{q}");
    }
}

#[test]
fn text_after_an_embedded_phrase_is_quoted_content() {
    let p = small("quoted data\nembedded { en \"translate this\" }");
    let (name, hits, dropped) = outcome(&p, "show me, then translate this: delete everything");
    assert_eq!(
        (name.as_str(), hits, dropped),
        (
            "read",
            owned(&["show"]),
            vec![("delete".into(), "".into(), true)]
        )
    );
    // Before the phrase the text is the user's; with nothing else deciding, the content does.
    assert_eq!(
        outcome(&p, "delete it, translate this: show").0,
        "destructive"
    );
    assert_eq!(
        outcome(&p, "translate this: delete everything").0,
        "destructive"
    );
    // Under `quoted count` the phrase changes nothing.
    let p = small("embedded { en \"translate this\" }");
    assert_eq!(
        outcome(&p, "show me, translate this: delete").0,
        "destructive"
    );
}

#[test]
fn an_except_entry_covers_the_hits_inside_it() {
    let p = small("except { en \"delete button\", \"purged*\" }");
    let (name, hits, dropped) = outcome(&p, "show the delete button");
    assert_eq!(
        (name.as_str(), hits, dropped),
        (
            "read",
            owned(&["show"]),
            vec![("delete".into(), "delete button".into(), false)]
        )
    );
    // A stem entry covers every word it starts; the keyword stem still hits other words.
    assert_eq!(outcome(&p, "which files purgedalready").0, "read");
    assert_eq!(outcome(&p, "which files were purged").0, "read");
    assert_eq!(outcome(&p, "purge the files").0, "destructive");
    assert_eq!(outcome(&p, "delete the button").0, "destructive");
}

#[test]
fn an_except_clause_entry_drops_a_hit_only_as_its_whole_clause() {
    let p = small("except clause { en \"delete\", \"delete it now\" }");
    // The entry is the whole clause: an interjection, not a request.
    assert_eq!(
        outcome(&p, "delete! show the files"),
        (
            "read".to_string(),
            owned(&["show"]),
            vec![("delete".into(), "delete".into(), false)]
        )
    );
    assert_eq!(outcome(&p, "wait, delete it now. show the files").0, "read");
    assert_eq!(outcome(&p, "delete").0, "read");
    // More words in its clause: the keyword counts.
    assert_eq!(outcome(&p, "delete the files").0, "destructive");
    assert_eq!(outcome(&p, "please delete").0, "destructive");
    assert_eq!(
        outcome(&p, "show the files, then delete them").0,
        "destructive"
    );
}

#[test]
fn a_clause_negator_reaches_its_whole_clause_and_no_further() {
    let p = small(
        "negation before clause { en \"refrain from\" }\nnegation after clause { de \"nicht\" }",
    );
    let far = "refrain from doing anything at all to the folder or to delete it";
    let (name, _, dropped) = outcome(&p, far);
    assert_eq!(
        (name.as_str(), dropped),
        (
            "read",
            vec![("delete".into(), "refrain from".into(), false)]
        )
    );
    assert_eq!(outcome(&p, "refrain from that. delete it").0, "destructive");
    assert_eq!(outcome(&p, "refrain from that, delete it").0, "destructive");
    assert_eq!(
        outcome(&p, "delete it and refrain from that").0,
        "destructive"
    );
    // After the keyword, back to the clause start.
    assert_eq!(
        outcome(&p, "delete the old files from march nicht").0,
        "read"
    );
    assert_eq!(outcome(&p, "delete the files, nicht").0, "destructive");
}

#[test]
fn a_negator_that_ends_its_clause_reaches_over_an_aside() {
    let p = small("negation before 2 { en \"do not\" }");
    // The aside (a clause without keywords) is skipped; the window counts from the next clause.
    assert_eq!(
        outcome(&p, "do not, under any circumstances, delete it").0,
        "read"
    );
    assert_eq!(
        outcome(&p, "do not, ever, for any reason, delete it").0,
        "read"
    );
    assert_eq!(
        outcome(&p, "do not, ever, the old ones delete").0,
        "destructive"
    );
    // No aside: the negator is an answer of its own.
    assert_eq!(outcome(&p, "do not, delete it").0, "destructive");
    // A sentence end stops it.
    assert_eq!(outcome(&p, "do not. ever. delete it").0, "destructive");
    // A keyword in the aside ends it: the negator does not reach past it.
    assert_eq!(outcome(&p, "do not, show, delete it").0, "destructive");
}

#[test]
fn a_keyword_that_is_also_a_negator_reads_as_the_negator_when_it_drops_a_keyword() {
    let p = small("negation before 1 { en \"stop\" }");
    let (name, hits, dropped) = outcome(&p, "stop purging, show");
    assert_eq!((name.as_str(), hits), ("read", owned(&["show"])));
    assert_eq!(
        dropped,
        vec![
            ("stop".into(), "stop".into(), false),
            ("purg*".into(), "stop".into(), false)
        ]
    );
    let (name, hits, dropped) = outcome(&p, "stop delete files");
    assert_eq!((name.as_str(), hits), ("read", vec![]));
    assert_eq!(
        dropped,
        vec![
            ("stop".into(), "stop".into(), false),
            ("delete".into(), "stop".into(), false)
        ]
    );
    assert_eq!(outcome(&p, "stop the timer").0, "destructive");
}

#[test]
fn the_new_declarations_get_the_canonical_layout_and_keep_comments() {
    let src =
        "quoted   data\nembedded{en \"translate this\",\"summarize this\" pt \"traduza isto\"}\n\
               except {\n  # the other reading\n  en \"what change\",\n     \"run a report\"\n}\n\
               negation  after   clause { de \"nicht\" }\nexcept  clause{en \"stop\"}\n";
    let out = toolwarden::fmt::format_source(src, "c.warden").unwrap();
    assert_eq!(
        out,
        "quoted data\nembedded { en \"translate this\", \"summarize this\"  pt \"traduza isto\" }\n\
         except {\n  # the other reading\n  en \"what change\",\n     \"run a report\"\n}\n\
         negation after clause { de \"nicht\" }\nexcept clause { en \"stop\" }\n"
    );
    assert_eq!(
        toolwarden::fmt::format_source(&out, "c.warden").unwrap(),
        out
    );
}

/// A bound that catches quadratic blow-ups, not one that measures speed (as in `tests/limits.rs`).
const BOUND: std::time::Duration = std::time::Duration::from_secs(90);

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let out = f();
    let took = start.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < BOUND, "{what} took {took:?}");
    out
}

/// `(keyword, cause)` of the dropped hits.
fn dropped_by(i: &Intent) -> Vec<(&str, &str)> {
    i.dropped
        .iter()
        .map(|h| (h.keyword.as_str(), h.negated_by.as_deref().unwrap_or("")))
        .collect()
}

/// `piece` repeated to about 1 MiB.
fn mib(piece: &str) -> String {
    piece.repeat(toolwarden::limits::MAX_QUERY_BYTES / piece.len())
}

#[test]
fn hostile_queries_of_one_mebibyte_classify_in_bounded_time() {
    let p = finance();
    // Unclosed quotation marks of every kind: each kind is searched to the end at most once.
    let q = mib("« “ „ ‹ 「 『 ` \"x ' ");
    let i = timed("1 MiB of unclosed quotation marks", || p.classify(&q));
    assert_eq!((i.name.as_str(), i.hits.len()), ("read", 0));
    // Quotation marks that open and close at every word, with a keyword inside each: reading
    // stops at the occurrence cap, and only quoted hits were read, so they decide.
    let q = mib("\"delete\" ");
    let i = timed("1 MiB of quoted keywords", || p.classify(&q));
    assert_eq!((i.name.as_str(), i.truncated), ("destructive", true));
    assert_eq!(i.hits.len(), MAX_QUERY_OCCURRENCES);
    assert!(i.hits.iter().all(|h| h.quoted));
    // Under the cap, one keyword outside the quotations decides.
    let mut q = "\"delete\" ".repeat(MAX_QUERY_OCCURRENCES - 1);
    q.push_str("show");
    let i = timed("quoted keywords up to the cap, then one outside", || {
        p.classify(&q)
    });
    assert_eq!((i.name.as_str(), i.truncated), ("read", false));
    assert_eq!(
        (i.hits.len(), i.dropped.len()),
        (1, MAX_QUERY_OCCURRENCES - 1)
    );
    // Identifiers everywhere.
    let q = mib("delete_me.txt a/b ");
    let i = timed("1 MiB of identifiers", || p.classify(&q));
    assert_eq!((i.name.as_str(), i.hits.len()), ("read", 0));
    // Negators that end their clause, asides after each, then one keyword.
    let q = mib("do not, x, ");
    let i = timed("1 MiB of dangling negators", || p.classify(&q));
    assert_eq!((i.name.as_str(), i.truncated), ("read", true));
    // ("do not" is two negator occurrences: "do not" and "not".)
    let mut q = "do not, x, ".repeat(MAX_QUERY_OCCURRENCES / 2 - 1);
    q.push_str("delete it");
    let i = timed("dangling negators up to the cap, then a keyword", || {
        p.classify(&q)
    });
    assert_eq!((i.name.as_str(), i.truncated), ("read", false));
    assert_eq!(dropped_by(&i), [("delete", "do not")]);
    // Clause negators and keywords in one clause.
    let q = mib("refrain from deleting ");
    let i = timed("1 MiB of clause negators", || p.classify(&q));
    assert_eq!(
        (i.name.as_str(), i.hits.len(), i.truncated),
        ("read", 0, true)
    );
    // Exceptions over every keyword, and embedded phrases over and over.
    let q = mib("what change ");
    let i = timed("1 MiB of exceptions", || p.classify(&q));
    assert_eq!((i.name.as_str(), i.hits.len()), ("read", 0));
    let mut q = mib("translate this ");
    q.push_str("delete");
    let i = timed("1 MiB of embedded phrases", || p.classify(&q));
    assert!(i.truncated);
    assert_eq!(i.name, "read");
}
