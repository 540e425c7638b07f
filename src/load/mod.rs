//! Loading policy text: the include walk (`include "file.warden"`, `include yaml`), the YAML
//! tool-policy files it reads and their conversion to tool declarations.
//!
//! It sits above the parser (`syntax`, text to tree) and below both the front door
//! (`policy`, which loads through it) and the importers (`import`, which use its
//! YAML reading to generate warden text), so neither the parser nor the loader knows that an
//! importer exists.

mod include;
pub(crate) mod yaml;
pub(crate) mod yaml_depth;
pub(crate) mod yaml_files;

pub(crate) use include::{load, Origin};

/// A short, lower-case reason for an I/O error.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
        // toolwarden's own reasons (`not a regular file (a FIFO)`) read as written.
        _ if e.get_ref().is_some() => e.to_string(),
        _ => {
            // Drop the platform's " (os error N)" suffix: the same failure reads the same
            // everywhere.
            let text = e.to_string().to_lowercase();
            match text.find(" (os error") {
                Some(i) => text[..i].to_string(),
                None => text,
            }
        }
    }
}
