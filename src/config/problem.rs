//! What a config check reports: each problem located in its file, with a
//! fix when there is an obvious one, all of them together.

use std::fmt;
use std::path::PathBuf;

/// One thing wrong with a config file, located as precisely as we can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) file: PathBuf,
    /// 1-based line and column; `None` when the problem has no single place.
    pub(crate) position: Option<(usize, usize)>,
    /// Dotted key path such as `route[2].upstream`.
    pub(crate) key: String,
    pub(crate) message: String,
    /// How to fix it, when there is an obvious fix.
    pub(crate) fix: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

/// Every problem found in one config, reported together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub(crate) Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} problem{} in the configuration:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.0 {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}
