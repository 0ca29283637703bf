//! od's own capabilities as `api` tools: each names the `/api/*` route that does it and the `od`
//! subcommand that does the same (path parameters are `{name}` segments filled from the input;
//! the rest of the input is the query string of a GET/DELETE or the JSON body otherwise;
//! `api.bodyField` names an input field sent as the raw body instead).

use serde_json::{json, Value};

fn obj(props: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": props, "required": required })
}

fn tool(name: &str, description: &str, schema: Value, method: &str, route: &str, cli: &str, read_only: bool) -> Value {
    json!({ "name": name, "description": description, "inputSchema": schema, "surface": "api",
            "api": { "method": method, "route": route }, "cli": { "subcommand": cli }, "readOnly": read_only })
}

fn s(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

/// The descriptors of od's own tools (validated by [`super::descriptor::parse`] when registered).
pub fn descriptors() -> Vec<Value> {
    let inputs = json!({ "type": "object", "description": "Plugin inputs by name." });
    let mut all = project_tools(&inputs);
    all.extend(run_tools(&inputs));
    all.extend(plugin_tools(&inputs));
    all.extend(file_tools());
    all.extend(catalog_tools());
    all
}

fn project_tools(inputs: &Value) -> Vec<Value> {
    let project = s("Project id.");
    vec![
        tool(
            "projects.list",
            "List projects with their conversations and run counts.",
            obj(json!({}), &[]),
            "GET",
            "/api/projects",
            "project list",
            true,
        ),
        tool(
            "projects.create",
            "Create a project, optionally applying a plugin with inputs (the capability gate applies).",
            obj(json!({ "name": s("Project name."), "pluginId": s("Plugin to apply."), "inputs": inputs }), &[]),
            "POST",
            "/api/projects",
            "project create",
            false,
        ),
        tool(
            "projects.get",
            "Show one project: directory, pinned snapshot, conversations.",
            obj(json!({ "projectId": project }), &["projectId"]),
            "GET",
            "/api/projects/{projectId}",
            "project info",
            true,
        ),
    ]
}

fn run_tools(inputs: &Value) -> Vec<Value> {
    let (project, run) = (s("Project id."), s("Run id."));
    vec![
        tool(
            "runs.start",
            "Start a run of a plugin's pipeline in a project (default agent: the daemon's — OD_AGENT, else exec when OD_AGENT_CMD is set, else the deterministic dry-run agent; agentId names another: a catalog agent such as claude, see GET /api/agents).",
            obj(
                json!({ "projectId": project, "pluginId": s("Plugin to run."), "message": s("The brief."), "inputs": inputs,
                        "agentId": s("exec, dry-run or a catalog agent's id (claude, codex, …)."),
                        "model": s("A catalog agent's model."),
                        "permissionMode": s("accept-edits (default), bypass (needs the exec right) or ask.") }),
                &[],
            ),
            "POST",
            "/api/runs",
            "run start",
            false,
        ),
        tool(
            "runs.list",
            "List runs, filtered by project, conversation or status (queued, running, awaiting-input, succeeded, failed, canceled, active).",
            obj(json!({ "projectId": project, "status": s("Status filter.") }), &[]),
            "GET",
            "/api/runs",
            "run list",
            true,
        ),
        tool("runs.get", "Show one run: status, current stage, iteration, failure.", obj(json!({ "runId": run }), &["runId"]), "GET", "/api/runs/{runId}", "run info", true),
        tool("runs.cancel", "Cancel a run; its agent is stopped and the run ends canceled.", obj(json!({ "runId": run }), &["runId"]), "POST", "/api/runs/{runId}/cancel", "run cancel", false),
        tool("runs.logs", "What a run's agent said: text, status, stdout and stderr, in order.", obj(json!({ "runId": run }), &["runId"]), "GET", "/api/runs/{runId}/logs", "run logs", true),
        tool(
            "runs.signal",
            "Report a devloop signal for a run, e.g. critique.score 4 or tests.passing true.",
            obj(json!({ "runId": run, "name": s("Signal name."), "value": { "description": "Number or boolean." } }), &["runId", "name", "value"]),
            "POST",
            "/api/runs/{runId}/signals",
            "run signal",
            false,
        ),
    ]
}

fn plugin_tools(inputs: &Value) -> Vec<Value> {
    let run = s("Run id.");
    vec![
        tool(
            "plugins.list",
            "List installed and bundled plugins with trust and granted capabilities.",
            obj(json!({}), &[]),
            "GET",
            "/api/plugins",
            "plugin list",
            true,
        ),
        tool(
            "plugins.apply",
            "Apply a plugin with inputs: the resolved query, context and capability check, without writing anything.",
            obj(json!({ "pluginId": s("Plugin id."), "inputs": inputs }), &["pluginId"]),
            "POST",
            "/api/plugins/{pluginId}/apply",
            "plugin apply",
            true,
        ),
        tool(
            "ui.respond",
            "Answer a GenUI surface a run waits on (checked against the surface's schema).",
            obj(
                json!({ "runId": run, "surfaceId": s("Surface id."), "value": { "description": "The answer." } }),
                &["runId", "surfaceId"],
            ),
            "POST",
            "/api/runs/{runId}/genui/{surfaceId}/respond",
            "ui respond",
            false,
        ),
        tool(
            "ui.request",
            "Ask the person through a GenUI surface the run's plugin declares (refused and recorded otherwise). For a choice whose options the plugin leaves to you (the direction picker), give 2 to 12 `options`: strings or {value, label, description}.",
            obj(
                json!({ "runId": run, "surfaceId": s("Surface id (declared by the run's plugin)."),
                        "kind": s("The surface's kind, when you want it checked."),
                        "atom": s("The atom asking, when the surface's trigger names one."),
                        "options": { "type": "array", "description": "A choice's options, when the plugin leaves them to you.",
                                     "items": { "type": ["string", "object"] } } }),
                &["runId", "surfaceId"],
            ),
            "POST",
            "/api/runs/{runId}/genui/{surfaceId}/request",
            "ui request",
            false,
        ),
    ]
}

fn file_tools() -> Vec<Value> {
    let project = s("Project id.");
    let mut files_write = tool(
        "files.write",
        "Write a text file into a project (creating folders); the path must stay inside the project.",
        obj(
            json!({ "projectId": project, "path": s("Path relative to the project."), "content": s("The file's text.") }),
            &["projectId", "path", "content"],
        ),
        "PUT",
        "/api/projects/{projectId}/files/{path}",
        "files write",
        false,
    );
    files_write["api"]["bodyField"] = json!("content");
    vec![
        tool(
            "files.list",
            "List a project's files with sizes.",
            obj(json!({ "projectId": project }), &["projectId"]),
            "GET",
            "/api/projects/{projectId}/files",
            "files list",
            true,
        ),
        tool(
            "files.read",
            "Read a project file as text.",
            obj(json!({ "projectId": project, "path": s("Path relative to the project.") }), &["projectId", "path"]),
            "GET",
            "/api/projects/{projectId}/files/{path}",
            "files read",
            true,
        ),
        files_write,
    ]
}

fn catalog_tools() -> Vec<Value> {
    vec![
        tool(
            "atoms.list",
            "List the bundled atoms (pipeline building blocks) with their descriptions.",
            obj(json!({}), &[]),
            "GET",
            "/api/atoms",
            "atoms list",
            true,
        ),
        tool(
            "tools.search",
            "Search od's tool catalog by keywords over names, descriptions and parameters.",
            obj(
                json!({ "query": s("Keywords."), "limit": { "type": "integer" }, "cursor": s("From a previous page.") }),
                &[],
            ),
            "GET",
            "/api/tools/search",
            "tools search",
            true,
        ),
    ]
}
