//! The closed sets that event fields name (a run's status, a failure's category, an output
//! channel, a trust tier, …), as enums.
//!
//! Each set is stored and sent exactly as the string it was before it was typed: serde writes the
//! variant's name (`"succeeded"`, `"agent-crashed"`, `""` where the field may be empty), and rkyv
//! archives it as that same string, so neither the wire JSON nor the archived event bytes changed
//! and no event needed a new schema (`od-migrations/tests/vocab.rs` holds golden frames written
//! while the fields were strings). A value this build does not know never fails a read: it becomes
//! `Other(text)` and is written back byte for byte, so a newer build's log replays unchanged here.

use rkyv::rancor::{Fallible, Source};
use rkyv::string::{ArchivedString, StringResolver};
use rkyv::{Place, SerializeUnsized};

/// Defines a closed vocabulary: the enum, its `Other(String)` fallback, string conversions, and
/// the serde and rkyv impls that keep it the string it names.
macro_rules! vocab {
    ($(#[$meta:meta])* $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this build does not know, kept as written.
            Other(String),
        }

        impl $name {
            /// Every known value, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$( $text, )+];

            /// The string this value is stored and sent as.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Other(s) => s,
                }
            }

            /// The value named by `s` (`Other` when this build does not know it).
            pub fn parse(s: &str) -> Self {
                match s {
                    $( $text => $name::$variant, )+
                    other => $name::Other(other.to_string()),
                }
            }

            /// Whether this build knows the value.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::parse(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match Self::parse(&s) {
                    $name::Other(_) => $name::Other(s),
                    known => known,
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map(Self::from)
            }
        }

        impl rkyv::Archive for $name {
            type Archived = ArchivedString;
            type Resolver = StringResolver;

            fn resolve(&self, resolver: StringResolver, out: Place<ArchivedString>) {
                ArchivedString::resolve_from_str(self.as_str(), resolver, out);
            }
        }

        impl<S: Fallible + ?Sized> rkyv::Serialize<S> for $name
        where
            S::Error: Source,
            str: SerializeUnsized<S>,
        {
            fn serialize(&self, s: &mut S) -> Result<StringResolver, S::Error> {
                ArchivedString::serialize_from_str(self.as_str(), s)
            }
        }

        impl<D: Fallible + ?Sized> rkyv::Deserialize<$name, D> for ArchivedString {
            fn deserialize(&self, _: &mut D) -> Result<$name, D::Error> {
                Ok($name::parse(self.as_str()))
            }
        }
    };
}

vocab! {
    /// Where a run is: how it ended (`run_ended.status`: `succeeded`, `failed`, `canceled`), or,
    /// in the run's read model, `queued`, `running` or `awaiting-input` before that.
    RunStatus {
        Queued = "queued",
        Running = "running",
        /// A GenUI surface waits for its answer.
        AwaitingInput = "awaiting-input",
        Succeeded = "succeeded",
        Failed = "failed",
        Canceled = "canceled",
    }
}

impl RunStatus {
    /// Whether the run has ended: `succeeded`, `failed` or `canceled` (an unknown status does not
    /// count as an end, as before the status was typed).
    pub fn is_terminal(&self) -> bool {
        match self {
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Canceled => true,
            RunStatus::Queued | RunStatus::Running | RunStatus::AwaitingInput | RunStatus::Other(_) => false,
        }
    }
}

/// A new run's status.
impl Default for RunStatus {
    fn default() -> Self {
        RunStatus::Queued
    }
}

vocab! {
    /// Why a run failed (`run_ended.failureCategory`); `None` (`""`) on success.
    FailureCategory {
        /// Not a failure.
        None = "",
        AgentSpawnFailed = "agent-spawn-failed",
        AgentCrashed = "agent-crashed",
        AgentTimeout = "agent-timeout",
        AgentError = "agent-error",
        Canceled = "canceled",
        StageFailed = "stage-failed",
        DaemonRestart = "daemon-restart",
        DaemonLost = "daemon-lost",
        DaemonShutdown = "daemon-shutdown",
        RunSetup = "run-setup",
        Substrate = "substrate",
        Store = "store",
        PipelineConfig = "pipeline-config",
        Genui = "genui",
        /// The run was imported from a bundle, not run here.
        Imported = "imported",
    }
}

/// Not a failure.
impl Default for FailureCategory {
    fn default() -> Self {
        FailureCategory::None
    }
}

vocab! {
    /// Which agent a run uses (`run_created.agent`): od's two built-in ones, or a catalog agent's
    /// id (those are open: a catalog entry this build does not list is `Other`).
    AgentKind {
        /// No model: od's deterministic script.
        DryRun = "dry-run",
        /// A command speaking od's line protocol.
        Exec = "exec",
        /// A command speaking the Agent Client Protocol.
        Acp = "acp",
    }
}

/// The agent a run gets when it names none.
impl Default for AgentKind {
    fn default() -> Self {
        AgentKind::DryRun
    }
}

vocab! {
    /// Where an agent's output came from (`agent_output.channel`).
    Channel {
        /// A protocol event (payload tagged by `type`).
        Agent = "agent",
        Stdout = "stdout",
        Stderr = "stderr",
    }
}

vocab! {
    /// How a devloop ended (`devloop_iteration.termination`); `Continuing` (`""`) while it loops.
    Termination {
        Continuing = "",
        UntilSatisfied = "until-satisfied",
        IterationCap = "iteration-cap",
        LoopBroken = "loop-broken",
        NoLoop = "no-loop",
    }
}

/// Still looping.
impl Default for Termination {
    fn default() -> Self {
        Termination::Continuing
    }
}

vocab! {
    /// A trust tier: a marketplace's (`official`, `trusted`, `restricted`) or an installed
    /// plugin's (`bundled`, `trusted`, `restricted`).
    Trust {
        Official = "official",
        Bundled = "bundled",
        Trusted = "trusted",
        Restricted = "restricted",
    }
}

vocab! {
    /// Where an installed plugin came from (`plugin_installed.sourceKind`).
    SourceKind {
        Bundled = "bundled",
        User = "user",
        Project = "project",
        Marketplace = "marketplace",
        Github = "github",
        Url = "url",
        Local = "local",
        /// A folder linked for development (`od plugin link`), reloaded when it changes.
        Linked = "linked",
    }
}

vocab! {
    /// What the token budget did with a prompt part (`prompt_composed.sections[].status`).
    SectionStatus {
        Included = "included",
        Trimmed = "trimmed",
        Dropped = "dropped",
    }
}

vocab! {
    /// What a stage's `onFailure` made of a failed iteration (`stage_failed.action`).
    FailureAction {
        Abort = "abort",
        Skip = "skip",
        Retry = "retry",
    }
}

vocab! {
    /// What a user response asks of a run (`run_responded.action`).
    ResponseAction {
        /// Cancel the run (recorded by `od run cancel`).
        Cancel = "cancel",
        /// Leave the current devloop after the iteration in progress.
        BreakLoop = "break-loop",
    }
}

vocab! {
    /// Who said a conversation message (`conversation_message.role`).
    Role {
        User = "user",
        Agent = "agent",
    }
}

vocab! {
    /// Why a follow-up run runs the stages it runs (`follow_up_planned.rule`).
    FollowUpRule {
        /// The plugin declares its follow-up stages.
        Declared = "declared",
        /// The plugin declares none: only the pipeline's last stage.
        LastStage = "last-stage",
    }
}

vocab! {
    /// What a file staged into a run's folder is (`substrate_staged.files[].kind`).
    StagedKind {
        Asset = "asset",
        Context = "context",
        McpConfig = "mcp-config",
    }
}

vocab! {
    /// How the MCP configuration was written (`substrate_staged.mcpConfigMode`).
    McpConfigMode {
        Created = "created",
        Merged = "merged",
        BesideUserFile = "beside-user-file",
    }
}

vocab! {
    /// Why a blob or a snapshot was retired (`blob_expired.reason`, `snapshot_expired.reason`).
    ExpiryReason {
        /// Unreferenced past its TTL.
        Ttl = "ttl",
        /// Removed by a forced cleanup.
        Prune = "prune",
    }
}

vocab! {
    /// What a GenUI surface's timeout does (`surface_requested.onTimeout`,
    /// `surface_timed_out.resolution`).
    OnTimeout {
        Abort = "abort",
        Default = "default",
        Skip = "skip",
    }
}

vocab! {
    /// A GenUI surface's kind (`surface_*.kind`).
    SurfaceKind {
        Form = "form",
        Choice = "choice",
        Confirmation = "confirmation",
        OauthPrompt = "oauth-prompt",
    }
}

vocab! {
    /// How long a GenUI answer is remembered (`surface_*.persist`).
    Persist {
        Run = "run",
        Conversation = "conversation",
        Project = "project",
    }
}

vocab! {
    /// Who raised a GenUI surface (`surface_requested.requestedBy`).
    RequestedBy {
        /// The pipeline, at the surface's trigger.
        Pipeline = "pipeline",
        Agent = "agent",
        /// A fork raised it again with the answer it was given.
        Fork = "fork",
    }
}

vocab! {
    /// Who answered a GenUI surface (`surface_responded.respondedBy`).
    RespondedBy {
        User = "user",
        Agent = "agent",
        Auto = "auto",
        Cache = "cache",
        Timeout = "timeout",
        /// The answer a fork was given.
        Fork = "fork",
        /// A connected connector's stored account.
        Connector = "connector",
        /// An MCP server the run's plugin authorized.
        Mcp = "mcp",
    }
}

vocab! {
    /// Why remembered GenUI answers were invalidated (`surface_invalidated.reason`).
    InvalidationReason {
        SchemaDrift = "schema-drift",
        Expired = "expired",
    }
}

vocab! {
    /// Where an agent tool runs (`tool_registered.surface`).
    ToolSurface {
        Api = "api",
        Browser = "browser",
    }
}

vocab! {
    /// Why a tool left the catalog (`tool_removed.reason`).
    ToolRemovedReason {
        /// Asked for.
        Removed = "removed",
        BuiltinRetired = "builtin-retired",
        /// Its server no longer lists it.
        Reindexed = "reindexed",
    }
}

vocab! {
    /// What settled a browser action (`browser_action_resulted.resolvedBy`).
    ResolvedBy {
        Browser = "browser",
        Timeout = "timeout",
        Superseded = "superseded",
        DaemonRestart = "daemon-restart",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rkyv::rancor;

    macro_rules! round_trips {
        ($($t:ident),+) => {$(
            for s in $t::KNOWN {
                let v = $t::parse(s);
                assert!(v.is_known(), "{} {s:?}", stringify!($t));
                assert_eq!(v.as_str(), *s);
                assert_eq!(serde_json::to_string(&v).unwrap(), format!("{s:?}"));
                assert_eq!(serde_json::from_str::<$t>(&format!("{s:?}")).unwrap(), v);
            }
        )+};
    }

    #[test]
    fn every_known_value_round_trips_through_its_string() {
        round_trips!(
            RunStatus,
            FailureCategory,
            AgentKind,
            Channel,
            Termination,
            Trust,
            SourceKind,
            SectionStatus,
            FailureAction,
            ResponseAction,
            Role,
            FollowUpRule,
            StagedKind,
            McpConfigMode,
            ExpiryReason,
            OnTimeout,
            RequestedBy,
            RespondedBy,
            InvalidationReason,
            SurfaceKind,
            Persist,
            ToolSurface,
            ToolRemovedReason,
            ResolvedBy
        );
    }

    #[test]
    fn unknown_values_are_kept_not_refused() {
        let c: Channel = serde_json::from_str("\"telepathy\"").unwrap();
        assert_eq!(c, Channel::Other("telepathy".into()));
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"telepathy\"");
        assert_eq!(Channel::from("stdout".to_string()), Channel::Stdout);
    }

    #[test]
    fn archived_as_the_string_it_names() {
        #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, PartialEq)]
        struct Typed {
            status: RunStatus,
            channel: Channel,
        }
        #[derive(rkyv::Archive, rkyv::Serialize)]
        struct Strings {
            status: String,
            channel: String,
        }
        for (status, channel) in [("failed", "stderr"), ("a-status-longer-than-inline", "x")] {
            let typed = Typed { status: status.into(), channel: channel.into() };
            let a = rkyv::to_bytes::<rancor::Error>(&typed).unwrap();
            let b =
                rkyv::to_bytes::<rancor::Error>(&Strings { status: status.into(), channel: channel.into() }).unwrap();
            assert_eq!(a.as_slice(), b.as_slice());
            assert_eq!(rkyv::from_bytes::<Typed, rancor::Error>(&a).unwrap(), typed);
        }
    }
}
