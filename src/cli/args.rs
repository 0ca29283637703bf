//! Command-line arguments several commands share: a plugin and its inputs (`od project create`,
//! `od run start`), `--inputs`/`--input` objects, and a value given as JSON, else text.

use serde_json::{json, Map, Value};

use super::error::{CliError, CliResult};

/// Plugin options shared by project and run creation.
#[derive(clap::Args, Debug, Default)]
pub struct PluginArgs {
    /// Plugin to apply (its snapshot is recorded and pinned).
    #[arg(long)]
    pub plugin: Option<String>,
    /// All plugin inputs as a JSON object.
    #[arg(long)]
    pub inputs: Option<String>,
    /// One input, `name=value` (repeatable).
    #[arg(long = "input")]
    pub input: Vec<String>,
    /// Capabilities granted for this call only.
    #[arg(long, value_delimiter = ',')]
    pub grant_caps: Vec<String>,
    #[arg(long)]
    pub locale: Option<String>,
    /// A context chip to go without, `<kind>:<ref>` as `od plugin apply` lists them
    /// (`design-system:DESIGN.md`, `mcp:figma`; repeatable).
    #[arg(long = "without")]
    pub without: Vec<String>,
    /// Use this recorded snapshot instead of applying.
    #[arg(long)]
    pub snapshot_id: Option<String>,
}

impl PluginArgs {
    /// Adds the plugin fields to a request body.
    pub fn fill(self, body: &mut Map<String, Value>) -> CliResult {
        let inputs = inputs_map(self.inputs, self.input)?;
        body.insert("pluginId".into(), json!(self.plugin));
        body.insert("pluginInputs".into(), json!(inputs));
        body.insert("grantCaps".into(), json!(self.grant_caps));
        body.insert("locale".into(), json!(self.locale));
        if !self.without.is_empty() {
            body.insert("excludeContext".into(), json!(self.without));
        }
        body.insert("appliedPluginSnapshotId".into(), json!(self.snapshot_id));
        Ok(())
    }
}

/// Builds an inputs object from `--inputs JSON` and repeated `--input name=value` (which win).
pub fn inputs_map(inputs: Option<String>, input: Vec<String>) -> CliResult<Map<String, Value>> {
    let mut map = match inputs {
        Some(raw) => match serde_json::from_str::<Value>(&raw) {
            Ok(Value::Object(m)) => m,
            _ => return Err(CliError::new("usage", "--inputs must be a JSON object")),
        },
        None => Map::new(),
    };
    for kv in input {
        let (k, v) =
            kv.split_once('=').ok_or_else(|| CliError::new("usage", format!("--input {kv:?}: expected name=value")))?;
        map.insert(k.to_string(), Value::String(v.to_string()));
    }
    Ok(map)
}

/// A value given on the command line (`--answer s=v`, `od run signal … VALUE`): JSON when it parses,
/// else the text itself.
pub fn parse_value(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| json!(raw))
}
