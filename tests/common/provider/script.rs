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
}

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
}

pub fn plan(script: &Script, view: &View) -> Plan {
    let thinking = |why: &str| view.thinking.then(|| why.to_string());
    match script {
        Script::Text(text) => Plan {
            thinking: thinking("The user wants a plain answer."),
            call: None,
            text: Some(text.clone()),
        },
        Script::RoundTrip { command } => {
            if let Some(output) = &view.result {
                return Plan {
                    thinking: thinking("The command ran; I report its output."),
                    call: None,
                    text: Some(format!("The command printed: {}", output.trim_end())),
                };
            }
            match (&view.shell, view.tools) {
                (Some(shell), _) => Plan {
                    thinking: thinking("I should run the command with the shell tool."),
                    call: Some((shell.name.clone(), shell.arguments(command))),
                    text: None,
                },
                (None, true) => Plan {
                    thinking: thinking("There is no shell tool."),
                    call: None,
                    text: Some("I have no shell tool to run the command with.".into()),
                },
                (None, false) => Plan {
                    thinking: thinking("A short answer will do."),
                    call: None,
                    text: Some("Shell command round trip".into()),
                },
            }
        }
    }
}

/// The words of `text`, for usage counts.
pub fn words(text: &str) -> u64 {
    text.split_whitespace().count().max(1) as u64
}
