//! The `agent` command line, shaped like `nomad`'s: `run` starts the daemon; the other
//! commands talk to a running agent at `--address` / `NOMAD_ADDR`. Nomad's single-dash
//! long flags (`-address`, `-detach`) are accepted too.

// The CLI's own output goes to stdout; everything else logs through `tracing`.
#![allow(clippy::print_stdout)]

mod acl;
mod alloc;
mod alloc_exec;
mod component;
mod component_call;
mod component_check;
mod component_new;
mod component_oci;
mod deployment;
mod eval;
pub mod job;
mod job_more;
mod log;
mod node;
mod operator;
mod placement;
mod run;
mod service;
mod var;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Paddock: a Nomad-style client agent whose drivers, hooks and device plugins are
/// sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "agent", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent.
    Run(run::RunArgs),
    /// Submit and inspect jobs on a running agent.
    #[command(subcommand)]
    Job(job::JobCommand),
    /// Inspect and act on allocations.
    #[command(subcommand)]
    Alloc(alloc::AllocCommand),
    /// Show the node.
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Inspect and validate components.
    #[command(subcommand)]
    Component(component::ComponentCommand),
    /// Deployments of service jobs: list, status, promote, fail, pause, resume.
    #[command(subcommand)]
    Deployment(deployment::DeploymentCommand),
    /// Nomad's ACL system: bootstrap, policies, tokens.
    #[command(subcommand)]
    Acl(acl::AclCommand),
    /// Nomad Variables: get, put, list, purge.
    #[command(subcommand)]
    Var(var::VarCommand),
    /// Nomad-native service registrations: list, info, delete.
    #[command(subcommand)]
    Service(service::ServiceCommand),
    /// Evaluations: list, status.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Namespaces: list, status, apply, delete.
    #[command(subcommand)]
    Namespace(eval::NamespaceCommand),
    /// The cluster's housekeeping: `gc`.
    #[command(subcommand)]
    System(eval::SystemCommand),
    /// Operator tools: a raw API call, metrics, the raft peers, the scheduler's configuration.
    #[command(subcommand)]
    Operator(operator::OperatorCommand),
    /// Print a completion script for a shell: `source <(agent completions bash)`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// The task executor the agent starts for itself (not for people).
    #[command(hide = true)]
    Executor {
        /// Socket to listen on.
        #[arg(long)]
        socket: PathBuf,
        /// Where exits are recorded.
        #[arg(long)]
        dir: PathBuf,
    },
}

/// Where the agent's HTTP API is.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// Address of the agent's HTTP API.
    #[arg(long, env = "NOMAD_ADDR", default_value = "http://127.0.0.1:4646")]
    pub address: String,
    /// ACL token.
    #[arg(long, env = "NOMAD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl ApiArgs {
    pub(crate) fn url(&self, path: &str) -> String {
        let base = self.address.trim_end_matches('/');
        let base = if base.starts_with("http://") || base.starts_with("https://") {
            base.to_string()
        } else {
            format!("http://{base}")
        };
        format!("{base}{path}")
    }

    /// Send a request and decode its JSON answer; a refusal is an error carrying the
    /// agent's message.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<serde_json::Value> {
        let mut req = self.client()?.request(method.clone(), self.url(path));
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("contacting the agent at {}: {e}", self.address))?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            anyhow::bail!("{method} {path}: {} ({})", text.trim(), status.as_u16());
        }
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{method} {path}: the agent's answer is not JSON: {e}"))
    }

    /// `GET` a JSON resource.
    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub(crate) fn client(&self) -> anyhow::Result<reqwest::Client> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(t) = &self.token {
            headers.insert("X-Nomad-Token", t.parse()?);
        }
        Ok(reqwest::Client::builder()
            .default_headers(headers)
            .build()?)
    }
}

/// Turn Nomad-style `-flag` into clap's `--flag` (single letters stay short flags, as do
/// `-i=false` and `-t=true`). The command of `alloc exec` (what follows the allocation) is
/// the user's, passed on as it is.
pub fn normalize_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let args: Vec<String> = args.into_iter().collect();
    let exec_at = args
        .windows(2)
        .position(|w| w[0] == "alloc" && w[1] == "exec")
        .map(|i| i + 2);
    let mut out = Vec::with_capacity(args.len());
    let mut verbatim_from = usize::MAX;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if i >= verbatim_from {
            out.push(a.clone());
            i += 1;
            continue;
        }
        if let Some(start) = exec_at
            && i >= start
        {
            if a == "--" {
                out.push(a.clone());
                verbatim_from = i + 2;
                i += 1;
                continue;
            }
            if !a.starts_with('-') {
                // The allocation: the command follows.
                verbatim_from = i + 1;
            }
        }
        // `alloc exec`'s `-i=false` and `-t=true` are short flags with a value.
        let short_with_value =
            exec_at.is_some_and(|s| i >= s) && a.len() > 2 && a.as_bytes().get(2) == Some(&b'=');
        let single_dash_long = i > 0
            && a.starts_with('-')
            && !a.starts_with("--")
            && a.len() > 2
            && !short_with_value
            && a.as_bytes()[1].is_ascii_alphabetic();
        let flag = if single_dash_long {
            format!("-{a}")
        } else {
            a.clone()
        };
        // A value-taking flag of `alloc exec` takes the next argument as it is.
        let takes_value = exec_at.is_some_and(|s| i >= s)
            && ["--task", "--address", "--token"].contains(&flag.as_str());
        out.push(flag);
        if takes_value && i + 1 < args.len() {
            out.push(args[i + 1].clone());
            i += 1;
        }
        i += 1;
    }
    out
}

/// Run the CLI; returns the process exit code.
pub async fn main(cli: Cli) -> anyhow::Result<i32> {
    if !matches!(cli.command, Command::Run(_) | Command::Executor { .. }) {
        // A command's output piped into `head` ends when the reader goes, as a Go
        // program's does (Rust ignores SIGPIPE, and a print to a closed pipe panics). The
        // agent and the executor keep ignoring it: a client that hangs up is no reason
        // to die.
        // SAFETY: setting a signal's disposition to its default, before any thread that
        // could be writing to a pipe exists for this command.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Executor { socket, dir } => {
            init_logging("info", false);
            tokio::task::spawn_blocking(move || crate::executor::server::serve(&socket, &dir))
                .await??;
            Ok(0)
        }
        Command::Job(cmd) => job::run(cmd).await,
        Command::Alloc(cmd) => alloc::run(cmd).await,
        Command::Node(cmd) => node::run(cmd).await,
        Command::Component(cmd) => component::run(cmd).await,
        Command::Acl(cmd) => acl::run(cmd).await,
        Command::Deployment(cmd) => deployment::run(cmd).await,
        Command::Var(cmd) => var::run(cmd).await,
        Command::Service(cmd) => service::run(cmd).await,
        Command::Eval(cmd) => eval::run_eval(cmd).await,
        Command::Namespace(cmd) => eval::run_namespace(cmd).await,
        Command::System(cmd) => eval::run_system(cmd).await,
        Command::Operator(cmd) => operator::run(cmd).await,
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "agent", &mut std::io::stdout());
            Ok(0)
        }
    }
}

/// A path segment or query value, percent-encoded (a child job's id holds a `/`).
pub(crate) fn enc(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Progress of a long step on stderr: on a terminal, the step and its seconds so far,
/// redrawn twice a second; elsewhere a line when it starts. Either way a line with its
/// time when it ends ([`Progress::done`]) or is dropped.
pub(crate) struct Progress {
    what: String,
    started: std::time::Instant,
    ticker: Option<tokio::task::JoinHandle<()>>,
    tty: bool,
}

impl Progress {
    pub(crate) fn start(what: impl Into<String>) -> Self {
        let what = what.into();
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let started = std::time::Instant::now();
        let ticker = if tty {
            let w = what.clone();
            Some(tokio::spawn(async move {
                loop {
                    eprint!("\r{w}… {} s", started.elapsed().as_secs());
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
            }))
        } else {
            eprintln!("{what}…");
            None
        };
        Self {
            what,
            started,
            ticker,
            tty,
        }
    }

    /// End the step, saying how long it took.
    pub(crate) fn done(self) {}
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
        let secs = self.started.elapsed().as_secs_f64();
        if self.tty {
            eprintln!("\r{}: {secs:.1} s", self.what);
        } else {
            eprintln!("{}: done in {secs:.1} s", self.what);
        }
    }
}

/// Rows as Nomad's CLI prints a table (columnize): the first row is the header, each
/// column padded to its widest cell plus two spaces, the last one not padded.
pub(crate) fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 < r.len() {
                line.push_str(&format!("{c:<w$}  ", w = widths[i]));
            } else {
                line.push_str(c);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Key-value lines as Nomad prints them (`Name = value`, the `=` aligned).
pub(crate) fn key_values(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<w$} = {v}\n"))
        .collect()
}

/// The first 8 characters of an id, as nomad's tables show ids.
pub(crate) fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// `-json` and `-t`: a command's answer as JSON or through a Go template, as Nomad's
/// commands offer them (its `command/data_format.go`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FormatArgs {
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the answer through a Go text/template (`{{.ID}}`, `{{range .}}…{{end}}`).
    #[arg(
        short = 't',
        long = "t",
        value_name = "TEMPLATE",
        allow_hyphen_values = true
    )]
    pub template: Option<String>,
}

impl FormatArgs {
    /// Whether the answer goes out as data rather than as the command's table.
    pub fn wanted(&self) -> bool {
        self.json || self.template.is_some()
    }

    /// Print `v` as asked: exit 0, or 1 with Nomad's message when the template does not
    /// parse or run, or both `-json` and `-t` were given.
    pub fn print(&self, v: &serde_json::Value) -> i32 {
        match self.render(v) {
            Ok(text) => {
                print!("{text}");
                if self.json {
                    println!();
                }
                0
            }
            Err(e) => {
                eprintln!("Error formatting the data: {e}");
                1
            }
        }
    }

    /// The text `print` writes.
    pub fn render(&self, v: &serde_json::Value) -> Result<String, String> {
        match (&self.template, self.json) {
            (Some(_), true) => Err("Both json and template formatting are not allowed".into()),
            (None, _) => Ok(serde_json::to_string_pretty(v).expect("JSON values print")),
            (Some(t), false) if t.is_empty() => {
                Err("template needs to be specified in golang's text/template format.".into())
            }
            (Some(t), false) => {
                let data = gotmpl::to_value(v).map_err(|e| e.to_string())?;
                gotmpl::Template::new("")
                    .parse(t)
                    .and_then(|t| t.execute_to_string(&data))
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// A string field of an API answer ("" when it is missing or not a string).
pub(crate) fn s(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// Print a value as indented JSON (the `-json` output).
pub(crate) fn print_json(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("JSON values print")
    );
}

/// A time from the API as Nomad's CLI prints it (`2006-01-02T15:04:05Z07:00`: RFC 3339 in
/// UTC, whole seconds, so columns line up): integer nanoseconds (Nomad's `int64` times) or
/// an RFC 3339 string (its `time.Time` fields) alike.
pub(crate) fn format_time(v: &serde_json::Value) -> String {
    let ns = match v {
        serde_json::Value::String(s) => crate::util::parse_go_time(s).unwrap_or(0),
        other => other.as_u64().unwrap_or(0),
    };
    crate::util::go_time(ns - ns % 1_000_000_000)
}

/// Set up `tracing`: text by default, JSON on request (hclog's keys, as Nomad's
/// `log_json`), level from flag or config.
pub fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{level},cranelift_codegen=warn,wasmtime=warn"))
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = if json {
        builder.event_format(log::HclogJson).try_init()
    } else {
        builder.try_init()
    };
}

/// Read a job file: Nomad JSON (`{"Job": ...}` or the bare job) or Nomad HCL, told apart by
/// the first non-blank character. `vars` are `-var name=value` flags and `var_files`
/// `-var-file` files for the HCL file.
pub(crate) fn read_job_file(
    path: &PathBuf,
    vars: &[String],
    var_files: &[PathBuf],
) -> anyhow::Result<crate::jobspec::Job> {
    read_job_source(path, vars, var_files).map(|(job, _)| job)
}

/// The `NOMAD_VAR_<name>` variables of an environment, by name: HCL variables' values
/// under var files and `-var` flags, as Nomad's CLI reads them.
fn nomad_var_env(
    env: impl Iterator<Item = (String, String)>,
) -> std::collections::BTreeMap<String, String> {
    env.filter_map(|(k, v)| {
        k.strip_prefix("NOMAD_VAR_")
            .filter(|name| !name.is_empty())
            .map(|name| (name.to_string(), v))
    })
    .collect()
}

/// [`read_job_file`], with the file's text as Nomad's CLI submits it beside the job
/// (`Submission`: format `hcl2` or `json`, the `-var` flags, and the `-var-file` files'
/// text one after the other, each ended by a newline), so the agent keeps the source
/// with the job's version. As in Nomad, a later var file overrides an earlier one, a
/// `-var` flag overrides them all, and `NOMAD_VAR_<name>` environment variables give the
/// values none of them gives (they are not part of the submission, as in Nomad).
pub(crate) fn read_job_source(
    path: &PathBuf,
    vars: &[String],
    var_files: &[PathBuf],
) -> anyhow::Result<(crate::jobspec::Job, crate::structs::JobSubmission)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let mut values = std::collections::BTreeMap::new();
    let mut var_file_text = String::new();
    for f in var_files {
        let t = std::fs::read_to_string(f)
            .map_err(|e| anyhow::anyhow!("reading var file {}: {e}", f.display()))?;
        let parsed = crate::jobspec::parse_var_file(&t)
            .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        values.extend(parsed);
        var_file_text.push_str(&t);
        var_file_text.push('\n');
    }
    let mut flags = std::collections::BTreeMap::new();
    for v in vars {
        let (k, val) = v
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("-var {v:?}: expected name=value"))?;
        flags.insert(k.trim().to_string(), val.to_string());
    }
    values.extend(flags.clone());
    let json = text.trim_start().starts_with('{');
    let parsed = if json {
        if !values.is_empty() {
            anyhow::bail!(
                "{}: -var and -var-file apply to HCL job files, not JSON",
                path.display()
            );
        }
        crate::jobspec::parse_job_json(text.as_bytes())
    } else {
        crate::jobspec::parse_job_hcl_with_env(&text, &values, &nomad_var_env(std::env::vars()))
    };
    let job = parsed.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let submission = crate::structs::JobSubmission {
        format: if json { "json" } else { "hcl2" }.into(),
        variable_flags: (!flags.is_empty()).then_some(flags),
        variables: var_file_text,
        source: text,
        ..Default::default()
    };
    Ok((job, submission))
}

#[cfg(test)]
mod tests {
    #[test]
    fn nomad_var_environment_variables_are_read_by_name() {
        let env = [
            ("NOMAD_VAR_region", "eu"),
            ("NOMAD_VAR_", "nameless"),
            ("NOMAD_ADDR", "http://x"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let got = super::nomad_var_env(env.into_iter());
        assert_eq!(got.len(), 1);
        assert_eq!(got["region"], "eu");
    }

    #[test]
    fn alloc_exec_keeps_its_command_as_typed() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let cli = super::Cli::try_parse_from(super::normalize_args(
                args.iter().map(|a| a.to_string()),
            ))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let super::Command::Alloc(super::alloc::AllocCommand::Exec(a)) = cli.command else {
                panic!("{args:?}");
            };
            a
        };
        let a = parse(&[
            "agent", "alloc", "exec", "-i=false", "-t", "-task", "web", "ab12", "ls", "-la",
            "--color", "-task",
        ]);
        assert!(!a.stdin);
        assert_eq!(a.tty, Some(true));
        assert_eq!(a.task.as_deref(), Some("web"));
        assert_eq!(a.id, "ab12");
        assert_eq!(a.command, ["ls", "-la", "--color", "-task"]);
        let a = parse(&["agent", "alloc", "exec", "-job", "web", "/bin/sh", "-job"]);
        assert!(a.job);
        assert_eq!(
            (a.id.as_str(), a.command.as_slice()),
            ("web", &["/bin/sh".to_string(), "-job".to_string()][..])
        );
        let a = parse(&["agent", "alloc", "exec", "ab12", "/bin/sh"]);
        assert!(a.stdin && !a.job);
        assert_eq!(a.tty, None);
        assert_eq!(a.command, ["/bin/sh"]);
        let a = parse(&["agent", "alloc", "exec", "-t=false", "ab12", "--", "-weird"]);
        assert_eq!(a.tty, Some(false));
        assert_eq!(a.command, ["--", "-weird"].map(String::from)[1..]);
    }

    #[test]
    fn templates_parse_in_each_of_gos_flag_spellings() {
        use clap::Parser;
        for args in [
            &["agent", "job", "status", "-t", "{{.ID}}"][..],
            &["agent", "job", "status", "-t={{.ID}}"],
            &["agent", "job", "status", "--t", "{{.ID}}"],
        ] {
            let cli = super::Cli::try_parse_from(super::normalize_args(
                args.iter().map(|a| a.to_string()),
            ))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let super::Command::Job(super::job::JobCommand::Status { format, .. }) = cli.command
            else {
                panic!("{args:?}");
            };
            assert_eq!(format.template.as_deref(), Some("{{.ID}}"), "{args:?}");
        }
        let f = super::FormatArgs {
            json: false,
            template: Some("{{range .}}{{.A}},{{end}}".into()),
        };
        assert_eq!(
            f.render(&serde_json::json!([{ "A": 1 }, { "A": "x" }]))
                .unwrap(),
            "1,x,"
        );
        let both = super::FormatArgs {
            json: true,
            template: Some("{{.}}".into()),
        };
        assert!(
            both.render(&serde_json::json!({}))
                .unwrap_err()
                .contains("Both json and template")
        );
    }

    #[test]
    fn single_dash_flags() {
        let v = super::normalize_args(
            [
                "agent", "job", "run", "-address", "x", "-n", "3", "--dev", "-",
            ]
            .map(String::from),
        );
        assert_eq!(
            v,
            [
                "agent",
                "job",
                "run",
                "--address",
                "x",
                "-n",
                "3",
                "--dev",
                "-"
            ]
        );
    }
}
