//! `agent var get|put|list|purge`, as `nomad var …`: Nomad Variables by path.

use serde_json::{Value, json};

use super::job::Namespace;
use super::{ApiArgs, columns, enc, format_time, key_values};

/// Variable commands.
#[derive(Debug, clap::Subcommand)]
pub enum VarCommand {
    /// Print a variable (`-item` one of its items alone).
    Get {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Print only this item's value (no newline after it, for pipes).
        #[arg(long)]
        item: Option<String>,
        #[command(flatten)]
        out: VarOut,
        /// Variable path.
        path: String,
    },
    /// Write a variable: `PATH key=value…` (its items replace the old ones).
    Put {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Write only over this modify index (0: only a new variable).
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<u64>,
        /// Variable path.
        path: String,
        /// Items, `key=value`.
        #[arg(required = true)]
        items: Vec<String>,
    },
    /// List variables under a prefix.
    List {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        #[command(flatten)]
        out: VarOut,
        /// Path prefix.
        prefix: Option<String>,
    },
    /// Delete a variable.
    Purge {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Delete only at this modify index.
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<u64>,
        /// Variable path.
        path: String,
    },
}

pub(super) async fn run(cmd: VarCommand) -> anyhow::Result<i32> {
    match cmd {
        VarCommand::Get {
            api,
            ns,
            item,
            out,
            path,
        } => get(&api, &ns.namespace, item.as_deref(), &out, &path).await,
        VarCommand::Put {
            api,
            ns,
            check_index,
            path,
            items,
        } => put(&api, &ns.namespace, check_index, &path, &items).await,
        VarCommand::List {
            api,
            ns,
            out,
            prefix,
        } => list(&api, &ns.namespace, &out, prefix.as_deref().unwrap_or("")).await,
        VarCommand::Purge {
            api,
            ns,
            check_index,
            path,
        } => purge(&api, &ns.namespace, check_index, &path).await,
    }
}

/// The API path of variable `path` in `namespace`, with `?cas=` when given.
fn var_url(namespace: &str, path: &str, cas: Option<u64>) -> String {
    let mut url = format!("/v1/var/{}?namespace={}", path_enc(path), enc(namespace));
    if let Some(i) = cas {
        url.push_str(&format!("&cas={i}"));
    }
    url
}

/// `-out` and `-template` of `var get` and `var list`, as Nomad's: the format defaults to
/// a table when stdout is a terminal and to JSON when it is redirected.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct VarOut {
    /// `table`, `json`, `go-template` (with `-template`), and for `get` `hcl` or `none`,
    /// for `list` `terse`.
    #[arg(long = "out", value_name = "FORMAT")]
    out: Option<String>,
    /// The Go template of `-out go-template`.
    #[arg(long = "template", value_name = "TEMPLATE", allow_hyphen_values = true)]
    template: Option<String>,
    /// Same as `-out json`.
    #[arg(long)]
    json: bool,
}

impl VarOut {
    /// The format asked for, checked against `allowed` with Nomad's messages.
    fn format(&self, allowed: &[&str]) -> Result<String, String> {
        use std::io::IsTerminal;
        let out = match (&self.out, self.json) {
            (Some(o), _) => o.clone(),
            (None, true) => "json".into(),
            (None, false) if std::io::stdout().is_terminal() => "table".into(),
            (None, false) => "json".into(),
        };
        if out != "go-template" && self.template.is_some() {
            return Err(
                "The '-template' flag is only valid when using 'go-template' formatting".into(),
            );
        }
        if out == "go-template" && self.template.as_deref().unwrap_or("").is_empty() {
            return Err(
                "A template must be supplied using '-template' when using go-template formatting"
                    .into(),
            );
        }
        if out != "go-template" && !allowed.contains(&out.as_str()) {
            let mut valid: Vec<&str> = allowed.iter().copied().chain(["go-template"]).collect();
            valid.sort();
            return Err(format!(
                "Invalid value for \"-out\"; valid values are [{}]",
                valid.join(", ")
            ));
        }
        Ok(out)
    }

    /// `v` through the template.
    fn template(&self, v: &Value) -> i32 {
        super::FormatArgs {
            json: false,
            template: self.template.clone(),
        }
        .print(v)
    }
}

async fn get(
    api: &ApiArgs,
    namespace: &str,
    item: Option<&str>,
    out: &VarOut,
    path: &str,
) -> anyhow::Result<i32> {
    let format = match out.format(&["hcl", "json", "none", "table"]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let v = api.get(&var_url(namespace, path, None)).await?;
    if let Some(item) = item {
        let Some(value) = v["Items"][item].as_str() else {
            eprintln!("Variable does not contain {item:?} item");
            return Ok(1);
        };
        print!("{value}");
        return Ok(0);
    }
    match format.as_str() {
        "json" => super::print_json(&v),
        "hcl" => print!("{}", var_hcl(&v)),
        "go-template" => return Ok(out.template(&v)),
        "none" => {}
        _ => print_var(&v),
    }
    Ok(0)
}

/// A variable as `nomad var get -out hcl` writes it: what `var put` reads back.
fn var_hcl(v: &Value) -> String {
    let items = v["Items"].as_object().cloned().unwrap_or_default();
    let pad = items.keys().map(String::len).max().unwrap_or(0);
    let mut out = format!(
        "namespace    = {}\npath         = {}\ncreate_index = {}  # Set by server\n\
         modify_index = {}  # Set by server; consulted for check-and-set\n\
         create_time  = {}   # Set by server\nmodify_time  = {}   # Set by server\n\nitems = {{\n",
        Value::from(v["Namespace"].as_str().unwrap_or("")),
        Value::from(v["Path"].as_str().unwrap_or("")),
        v["CreateIndex"],
        v["ModifyIndex"],
        v["CreateTime"],
        v["ModifyTime"],
    );
    for (k, x) in &items {
        out.push_str(&format!(
            "  {k:>pad$} = {}\n",
            Value::from(x.as_str().unwrap_or(""))
        ));
    }
    out.push_str("}\n");
    out
}

async fn put(
    api: &ApiArgs,
    namespace: &str,
    check_index: Option<u64>,
    path: &str,
    items: &[String],
) -> anyhow::Result<i32> {
    let mut map = serde_json::Map::new();
    for kv in items {
        let Some((k, v)) = kv.split_once('=') else {
            anyhow::bail!("item {kv:?}: expected key=value");
        };
        map.insert(k.into(), v.into());
    }
    let body = json!({ "Namespace": namespace, "Path": path, "Items": map });
    let url = var_url(namespace, path, check_index);
    let v = api.call(reqwest::Method::PUT, &url, Some(&body)).await?;
    println!(
        "Created variable {path:?} with modify index {}",
        v["ModifyIndex"]
    );
    Ok(0)
}

async fn list(api: &ApiArgs, namespace: &str, out: &VarOut, prefix: &str) -> anyhow::Result<i32> {
    let format = match out.format(&["json", "table", "terse"]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return Ok(1);
        }
    };
    let list = api
        .get(&format!(
            "/v1/vars?namespace={}&prefix={}",
            enc(namespace),
            enc(prefix)
        ))
        .await?;
    match format.as_str() {
        "json" => {
            super::print_json(&list);
            return Ok(0);
        }
        "go-template" => return Ok(out.template(&list)),
        // Nomad's terse list: the paths alone (with the namespace when listing all).
        "terse" => {
            let rows: Vec<Vec<String>> = list
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    let path = v["Path"].as_str().unwrap_or("").to_string();
                    if namespace == "*" {
                        vec![v["Namespace"].as_str().unwrap_or("").to_string(), path]
                    } else {
                        vec![path]
                    }
                })
                .collect();
            print!("{}", columns(&rows));
            return Ok(0);
        }
        _ => {}
    }
    let mut rows = vec![
        ["Namespace", "Path", "Last Updated"]
            .map(String::from)
            .to_vec(),
    ];
    for v in list.as_array().into_iter().flatten() {
        rows.push(vec![
            v["Namespace"].as_str().unwrap_or("").into(),
            v["Path"].as_str().unwrap_or("").into(),
            format_time(&v["ModifyTime"]),
        ]);
    }
    if rows.len() == 1 {
        println!("No matching variables found");
    } else {
        print!("{}", columns(&rows));
    }
    Ok(0)
}

async fn purge(
    api: &ApiArgs,
    namespace: &str,
    check_index: Option<u64>,
    path: &str,
) -> anyhow::Result<i32> {
    let url = var_url(namespace, path, check_index);
    api.call(reqwest::Method::DELETE, &url, None).await?;
    println!("Successfully purged variable {path:?}!");
    Ok(0)
}

/// A variable's path in a URL: each segment escaped, its `/`s kept.
fn path_enc(path: &str) -> String {
    path.split('/').map(enc).collect::<Vec<_>>().join("/")
}

/// `nomad var get`'s table form.
fn print_var(v: &Value) {
    let mut facts = vec![
        (
            "Namespace",
            v["Namespace"].as_str().unwrap_or("").to_string(),
        ),
        ("Path", v["Path"].as_str().unwrap_or("").to_string()),
        ("Create Time", format_time(&v["CreateTime"])),
    ];
    if v["CreateTime"] != v["ModifyTime"] {
        facts.push(("Modify Time", format_time(&v["ModifyTime"])));
    }
    facts.push(("Check Index", v["ModifyIndex"].to_string()));
    print!("{}", key_values(&facts));
    println!("\nItems");
    let items: Vec<(&str, String)> = v["Items"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, x)| (k.as_str(), x.as_str().unwrap_or("").to_string()))
        .collect();
    print!("{}", key_values(&items));
}
