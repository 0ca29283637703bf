//! What the agent-config checks refuse: a malformed option, or one this agent cannot honour here.
//! Each names the request field; the engine maps it onto its own error (a 422 either way).

/// A refused agent option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentConfigError {
    /// The option is malformed (a wrong type, an unknown value, out of bounds).
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The option is well formed but this agent cannot honour it here (not available, a mode it
    /// lacks, a model not in its list).
    #[error("{field}: {message}")]
    Refused { field: String, message: String },
}

impl AgentConfigError {
    /// A malformed `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        AgentConfigError::Invalid { field: field.into(), message: message.into() }
    }

    /// A `field` this agent cannot honour.
    pub fn refused(field: &str, message: impl Into<String>) -> Self {
        AgentConfigError::Refused { field: field.into(), message: message.into() }
    }

    /// The field it names.
    pub fn field(&self) -> &str {
        match self {
            AgentConfigError::Invalid { field, .. } | AgentConfigError::Refused { field, .. } => field,
        }
    }

    /// Why, without the field.
    pub fn message(&self) -> &str {
        match self {
            AgentConfigError::Invalid { message, .. } | AgentConfigError::Refused { message, .. } => message,
        }
    }
}
