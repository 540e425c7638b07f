//! What is not the user's request, against the shipped lexicon: far negators and verbs of
//! abstaining, quoted and embedded content, "instead" constructions, conditions and sequencing,
//! questions about the past, and words with two readings, in every shipped language. Every
//! query here was written for this file.

use std::sync::OnceLock;

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
