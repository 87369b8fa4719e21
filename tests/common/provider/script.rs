//! What an accepted request is answered with, decided from the request
//! alone (the providers are stateless): each API module reads its request
//! into a [`View`], [`plan`] turns the script and the view into a [`Plan`],
//! and the API module writes the plan in its own format.

use serde_json::{Value, json};

/// The emulator's conversation script.
#[derive(Clone, Debug)]
pub enum Script {
    /// An agent's tool round trip: while the history holds no tool result,
    /// ask (after thinking, when the request turned it on) for `command`
    /// through the shell tool found in the request's tools; once it holds
    /// one, answer with text quoting the result's output. Requests without
    /// tools (title and quota probes) get a short text answer.
    RoundTrip { command: String },
    /// Always this text (after thinking, when turned on).
    Text(String),
    /// A web search: on a conversation's first turn, when the request
    /// offers the API's web search tool, search for `query` and answer
    /// with [`CITED`], citing the page found; on a later turn, answer
    /// without searching. Without the tool, say so.
    Search { query: String },
}

/// The page the scripted search finds, and the sentence of it the answer
/// cites.
pub const SEARCH_URL: &str = "https://weir.example/overload";
pub const SEARCH_TITLE: &str = "weir under overload";
pub const CITED: &str = "weir keeps serving under overload.";
/// The answer on a later turn of a search conversation.
pub const AFTER_SEARCH: &str = "As the search found, weir keeps serving.";
/// The answer when the request offers no web search.
pub const NO_SEARCH: &str = "I have no web search to answer with.";

/// The API-neutral reading of a request.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub model: String,
    pub stream: bool,
    /// Whether the request carried any tools.
    pub tools: bool,
    pub shell: Option<ShellTool>,
    /// The output of the tool result that ends the history, if any.
    pub result: Option<String>,
    /// Whether the request turned thinking / reasoning on.
    pub thinking: bool,
    /// The client's output limit.
    pub max_tokens: Option<u64>,
    /// Whether the request offers the API's web search tool.
    pub search: bool,
    /// Whether the history holds an answer already (a later turn).
    pub later: bool,
    pub input_tokens: u64,
}

impl View {
    /// The fields every API reads alike; `tools` are the request's.
    pub fn of(body: &Value, tools: &[Value]) -> View {
        View {
            model: body["model"].as_str().unwrap_or("").to_string(),
            stream: body["stream"].as_bool().unwrap_or(false),
            tools: !tools.is_empty(),
            input_tokens: super::approximate_tokens(body),
            ..View::default()
        }
    }
}

/// A shell tool found in a request's tools by its parameters schema,
/// whatever its name: Claude Code's `Bash` (`command: string`), Codex's
/// `shell` (`command: string[]`), `shell_command` (`command: string`) and
/// `exec_command` (`cmd: string`).
#[derive(Clone, Debug)]
pub struct ShellTool {
    pub name: String,
    form: ShellForm,
}

#[derive(Clone, Debug)]
enum ShellForm {
    Text(&'static str),
    Argv,
}

impl ShellTool {
    /// The tool in `name` with JSON-schema `parameters`, if it is a shell.
    pub fn recognise(name: &str, parameters: &Value) -> Option<ShellTool> {
        let props = &parameters["properties"];
        let form = match (&props["command"]["type"], &props["cmd"]["type"]) {
            (Value::String(t), _) if t == "string" => ShellForm::Text("command"),
            (Value::String(t), _)
                if t == "array" && props["command"]["items"]["type"] == "string" =>
            {
                ShellForm::Argv
            }
            (_, Value::String(t)) if t == "string" => ShellForm::Text("cmd"),
            _ => return None,
        };
        Some(ShellTool {
            name: name.to_string(),
            form,
        })
    }

    /// The call's arguments running `command`.
    pub fn arguments(&self, command: &str) -> Value {
        match self.form {
            ShellForm::Text(key) => json!({ key: command }),
            ShellForm::Argv => json!({"command": ["bash", "-lc", command]}),
        }
    }
}

/// What to answer.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The thinking / reasoning text, when the request turned it on.
    pub thinking: Option<String>,
    /// A tool call: the tool's name and its arguments.
    pub call: Option<(String, Value)>,
    pub text: Option<String>,
    /// A web search made before the text, which cites its page.
    pub search: Option<String>,
}

pub fn plan(script: &Script, view: &View) -> Plan {
    let thinking = |why: &str| view.thinking.then(|| why.to_string());
    match script {
        Script::Text(text) => Plan {
            thinking: thinking("The user wants a plain answer."),
            text: Some(text.clone()),
            ..Plan::default()
        },
        Script::Search { query } => match (view.search, view.later) {
            (true, false) => Plan {
                thinking: thinking("I should search the web."),
                text: Some(CITED.into()),
                search: Some(query.clone()),
                ..Plan::default()
            },
            (_, true) => Plan {
                thinking: thinking("The search already answered it."),
                text: Some(AFTER_SEARCH.into()),
                ..Plan::default()
            },
            (false, false) => Plan {
                thinking: thinking("There is no web search."),
                text: Some(NO_SEARCH.into()),
                ..Plan::default()
            },
        },
        Script::RoundTrip { command } => {
            if let Some(output) = &view.result {
                return Plan {
                    thinking: thinking("The command ran; I report its output."),
                    text: Some(format!("The command printed: {}", output.trim_end())),
                    ..Plan::default()
                };
            }
            match (&view.shell, view.tools) {
                (Some(shell), _) => Plan {
                    thinking: thinking("I should run the command with the shell tool."),
                    call: Some((shell.name.clone(), shell.arguments(command))),
                    ..Plan::default()
                },
                (None, true) => Plan {
                    thinking: thinking("There is no shell tool."),
                    text: Some("I have no shell tool to run the command with.".into()),
                    ..Plan::default()
                },
                (None, false) => Plan {
                    thinking: thinking("A short answer will do."),
                    text: Some("Shell command round trip".into()),
                    ..Plan::default()
                },
            }
        }
    }
}

/// The words of `text`, for usage counts.
pub fn words(text: &str) -> u64 {
    text.split_whitespace().count().max(1) as u64
}
