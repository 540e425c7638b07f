//! A scratch directory for one test, removed when dropped (shared by the suites that run the
//! CLI against state files).

use std::path::PathBuf;

/// A fresh directory under the system's temporary directory, unique to this process, this
/// moment and `name`; removed with everything in it when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates the directory; panics when it cannot (a test cannot run without it).
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "toolwarden-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Scratch(dir)
    }

    /// The directory itself.
    #[allow(dead_code, reason = "not every suite runs a command inside it")]
    pub fn dir(&self) -> &std::path::Path {
        &self.0
    }

    /// The path of `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
