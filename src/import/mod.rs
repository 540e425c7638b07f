//! Importers: tool catalogs from other formats into warden text.

pub mod mcp;
