//! The closed vocabularies a plugin manifest is checked against: the first-party atom catalog,
//! the capability vocabulary, and the `until` signals. Each list lives here once.

/// Where a first-party atom's behaviour comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomSource {
    /// A daemon built-in (tool or prompt policy); no bundled atom plugin carries its body.
    Builtin,
    /// A bundled atom plugin (`od.kind: "atom"`, a SKILL.md prompt fragment plus a manifest).
    BundledPlugin,
}

/// The first-party atom catalog of spec §10 (implemented + reserved): the ids
/// `od.pipeline.stages[*].atoms[]` and `od.context.atoms[]` must resolve against ("the atom registry
/// is closed", spec §22.4). The 13 `BundledPlugin` entries are the atom plugins of the reference
/// (§10 there); the `Builtin` ones are the daemon atoms the bundled scenarios use (`od-default`
/// runs `file-write`, `media-*` and `live-artifact`), so they must be known too.
pub const ATOMS: &[(&str, AtomSource)] = &[
    ("discovery-question-form", AtomSource::BundledPlugin),
    ("direction-picker", AtomSource::BundledPlugin),
    ("todo-write", AtomSource::BundledPlugin),
    ("critique-theater", AtomSource::BundledPlugin),
    ("code-import", AtomSource::BundledPlugin),
    ("design-extract", AtomSource::BundledPlugin),
    ("figma-extract", AtomSource::BundledPlugin),
    ("token-map", AtomSource::BundledPlugin),
    ("rewrite-plan", AtomSource::BundledPlugin),
    ("patch-edit", AtomSource::BundledPlugin),
    ("build-test", AtomSource::BundledPlugin),
    ("diff-review", AtomSource::BundledPlugin),
    ("handoff", AtomSource::BundledPlugin),
    ("file-read", AtomSource::Builtin),
    ("file-write", AtomSource::Builtin),
    ("file-edit", AtomSource::Builtin),
    ("research-search", AtomSource::Builtin),
    ("media-image", AtomSource::Builtin),
    ("media-video", AtomSource::Builtin),
    ("media-audio", AtomSource::Builtin),
    ("live-artifact", AtomSource::Builtin),
    ("connector", AtomSource::Builtin),
];

/// Whether `id` names an atom of the catalog.
pub fn is_known_atom(id: &str) -> bool {
    ATOMS.iter().any(|(known, _)| *known == id)
}

/// The capability vocabulary of spec §5.3 / §9 (exact ids).
pub const CAPABILITIES: &[&str] =
    &["prompt:inject", "fs:read", "fs:write", "mcp", "subprocess", "bash", "network", "connector"];

/// Scoped capability families: `connector:<id>`, `mcp:<server>`, `genui:<kind>` and `pipeline:*`.
pub const CAPABILITY_PREFIXES: &[&str] = &["connector:", "mcp:", "genui:", "pipeline:"];

/// Whether `cap` is in the capability vocabulary (an exact id, or a family prefix plus a non-empty
/// suffix).
pub fn is_known_capability(cap: &str) -> bool {
    CAPABILITIES.contains(&cap)
        || CAPABILITY_PREFIXES.iter().any(|p| cap.strip_prefix(p).is_some_and(|rest| !rest.is_empty()))
}

/// Maps a legacy SKILL.md `od.capabilities_required` entry onto the vocabulary. Only what can be
/// expressed is mapped (spec §5.4); `None` means the entry stays an adapter warning.
pub fn map_legacy_capability(raw: &str) -> Option<String> {
    let trimmed = raw.trim();
    if is_known_capability(trimmed) {
        return Some(trimmed.to_string());
    }
    let normalized = trimmed.to_ascii_lowercase().replace('_', "-");
    let mapped = match normalized.as_str() {
        "file-read" | "fs-read" => "fs:read",
        "file-write" | "fs-write" => "fs:write",
        "http-fetch" | "network" => "network",
        "prompt-inject" => "prompt:inject",
        "bash" | "subprocess" | "mcp" | "connector" => return Some(normalized),
        _ => return None,
    };
    Some(mapped.to_string())
}

/// The type of an `until` signal's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    /// Compared with any of `== != >= <= > <` against a number literal.
    Number,
    /// Compared with `==` or `!=` against `true` or `false`.
    Boolean,
}

/// The six `until` signals (spec §10.1 as extended by §22.4: `build.passing` and `tests.passing`
/// come from the `build-test` atom).
pub const UNTIL_SIGNALS: &[(&str, SignalKind)] = &[
    ("critique.score", SignalKind::Number),
    ("iterations", SignalKind::Number),
    ("user.confirmed", SignalKind::Boolean),
    ("preview.ok", SignalKind::Boolean),
    ("build.passing", SignalKind::Boolean),
    ("tests.passing", SignalKind::Boolean),
];

/// The `until` signals the daemon's built-in atoms emit (the bundled atom plugins declare theirs in
/// `od.atom.untilSignals`): a live artifact reports whether its preview rendered.
pub const BUILTIN_ATOM_SIGNALS: &[(&str, &[&str])] = &[("live-artifact", &["preview.ok"])];

/// The agent-side tool kinds `od.atom.toolGating[]` names (spec §23.3.1), and what od's tools are:
/// `files.*` reads are `file-read`, connector calls `connector`, a live browser session's actions
/// `browser`, a plugin MCP server's tools `mcp`. od's own control tools (runs, signals, answers)
/// are the kernel's and never gated.
pub const TOOL_GATING_KINDS: &[&str] = &["file-read", "file-write", "file-edit", "bash", "connector", "browser", "mcp"];

/// The kind of a known `until` signal.
pub fn signal_kind(name: &str) -> Option<SignalKind> {
    UNTIL_SIGNALS.iter().find(|(known, _)| *known == name).map(|(_, kind)| *kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thirteen_bundled_atoms_are_in_the_catalog() {
        let bundled = ATOMS.iter().filter(|(_, s)| *s == AtomSource::BundledPlugin).count();
        assert_eq!(bundled, 13);
        assert!(is_known_atom("file-write") && !is_known_atom("image-generate"));
    }

    #[test]
    fn capabilities() {
        assert!(is_known_capability("connector:slack") && is_known_capability("pipeline:*"));
        assert!(!is_known_capability("connector:") && !is_known_capability("media:image"));
        assert_eq!(map_legacy_capability("file_write").as_deref(), Some("fs:write"));
        assert_eq!(map_legacy_capability("node-runtime"), None);
    }
}
