//! Config errors: each one a single line an operator can act on.

/// Why a config could not be used. Both kinds print as one line that names
/// the key at fault; callers only print them, so two kinds are enough.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A file, environment variable or flag could not be read or parsed, or
    /// named a key that does not exist.
    #[error("{0}")]
    Load(String),
    /// Every value parsed but some break a rule; one message per problem.
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// Collects every rule a config breaks, so an operator fixes them all in one
/// round instead of one per restart.
#[derive(Debug, Default)]
pub struct Problems(Vec<String>);

impl Problems {
    /// Records a problem; the message must name the key(s) involved.
    pub fn push(&mut self, message: impl Into<String>) {
        self.0.push(message.into());
    }

    /// Records `message` unless `ok`.
    pub fn check(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.push(message());
        }
    }

    /// `Ok` when nothing was recorded.
    pub fn into_result(self) -> Result<(), ConfigError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(self.0))
        }
    }
}
