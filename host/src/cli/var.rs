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
        /// Print only this item's value.
        #[arg(long)]
        item: Option<String>,
        /// Print the variable as JSON.
        #[arg(long)]
        json: bool,
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
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
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
            json,
            path,
        } => get(&api, &ns.namespace, item.as_deref(), json, &path).await,
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
            json,
            prefix,
        } => list(&api, &ns.namespace, json, prefix.as_deref().unwrap_or("")).await,
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

async fn get(
    api: &ApiArgs,
    namespace: &str,
    item: Option<&str>,
    json: bool,
    path: &str,
) -> anyhow::Result<i32> {
    let v = api.get(&var_url(namespace, path, None)).await?;
    if json {
        super::print_json(&v);
    } else if let Some(item) = item {
        let Some(value) = v["Items"][item].as_str() else {
            eprintln!("Variable {path:?} has no item {item:?}");
            return Ok(1);
        };
        println!("{value}");
    } else {
        print_var(&v);
    }
    Ok(0)
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

async fn list(api: &ApiArgs, namespace: &str, json: bool, prefix: &str) -> anyhow::Result<i32> {
    let list = api
        .get(&format!(
            "/v1/vars?namespace={}&prefix={}",
            enc(namespace),
            enc(prefix)
        ))
        .await?;
    if json {
        super::print_json(&list);
        return Ok(0);
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
    print!(
        "{}",
        key_values(&[
            ("Namespace", v["Namespace"].as_str().unwrap_or("").into()),
            ("Path", v["Path"].as_str().unwrap_or("").into()),
            ("Create Time", format_time(&v["CreateTime"])),
            ("Check Index", v["ModifyIndex"].to_string()),
        ])
    );
    println!("\nItems");
    let items: Vec<(&str, String)> = v["Items"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, x)| (k.as_str(), x.as_str().unwrap_or("").to_string()))
        .collect();
    print!("{}", key_values(&items));
}
