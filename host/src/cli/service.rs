//! `agent service list|info|delete`, as `nomad service …`: the Nomad-native service
//! registrations, listed by name, one name's registrations, and removing one.

use serde_json::Value;

use super::job::Namespace;
use super::{ApiArgs, FormatArgs, columns, enc, key_values, s, short_id};

/// Service commands.
#[derive(Debug, clap::Subcommand)]
pub enum ServiceCommand {
    /// The registered services with their tags (`-namespace '*'`: of every namespace).
    List {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// `-json`, or `-t TEMPLATE` over the list.
        #[command(flatten)]
        format: FormatArgs,
    },
    /// One service's registrations: job, address, tags, node and allocation.
    Info {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// Every field of each registration.
        #[arg(long)]
        verbose: bool,
        /// A go-bexpr filter over the registrations.
        #[arg(long)]
        filter: Option<String>,
        /// `-json`, or `-t TEMPLATE` over the registrations.
        #[command(flatten)]
        format: FormatArgs,
        /// The service's name (or a unique prefix of it).
        name: String,
    },
    /// Remove one registration.
    Delete {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        ns: Namespace,
        /// The service's name.
        name: String,
        /// The registration's id.
        id: String,
    },
}

pub(super) async fn run(cmd: ServiceCommand) -> anyhow::Result<i32> {
    match cmd {
        ServiceCommand::List { api, ns, format } => {
            let list = api
                .get(&format!("/v1/services?namespace={}", enc(&ns.namespace)))
                .await?;
            if list.as_array().is_none_or(Vec::is_empty) {
                println!("No service registrations found");
                return Ok(0);
            }
            if format.wanted() {
                return Ok(format.print(&list));
            }
            print!("{}", list_table(&ns.namespace, &list));
            Ok(0)
        }
        ServiceCommand::Info {
            api,
            ns,
            verbose,
            filter,
            format,
            name,
        } => info(&api, &ns.namespace, verbose, filter, &format, &name).await,
        ServiceCommand::Delete { api, ns, name, id } => {
            let path = format!(
                "/v1/service/{}/{}?namespace={}",
                enc(&name),
                enc(&id),
                enc(&ns.namespace)
            );
            api.call(reqwest::Method::DELETE, &path, None).await?;
            println!("Successfully deleted service registration");
            Ok(0)
        }
    }
}

/// Nomad's table: name (namespace with `*`), tags sorted in brackets.
fn list_table(namespace: &str, list: &Value) -> String {
    let all = namespace == "*";
    let mut header = vec!["Service Name".to_string()];
    if all {
        header.push("Namespace".into());
    }
    header.push("Tags".into());
    let mut rows = vec![header];
    for n in list.as_array().into_iter().flatten() {
        for svc in n["Services"].as_array().into_iter().flatten() {
            let mut tags: Vec<String> = svc["Tags"]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            tags.sort();
            let mut row = vec![s(&svc["ServiceName"])];
            if all {
                row.push(s(&n["Namespace"]));
            }
            row.push(format!("[{}]", tags.join(",")));
            rows.push(row);
        }
    }
    columns(&rows)
}

/// `service info`: a unique name prefix is enough, as Nomad's.
async fn info(
    api: &ApiArgs,
    namespace: &str,
    verbose: bool,
    filter: Option<String>,
    format: &FormatArgs,
    name: &str,
) -> anyhow::Result<i32> {
    let list = api
        .get(&format!(
            "/v1/services?namespace={}&prefix={}",
            enc(namespace),
            enc(name)
        ))
        .await?;
    let names: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["Services"].as_array().cloned().unwrap_or_default())
        .map(|svc| s(&svc["ServiceName"]))
        .collect();
    let name = if names.iter().any(|n| n == name) {
        name.to_string()
    } else if names.len() == 1 {
        names[0].clone()
    } else if names.is_empty() {
        println!("No service registrations found");
        return Ok(0);
    } else {
        eprintln!(
            "Prefix matched multiple services\n\n{}",
            list_table(namespace, &list)
        );
        return Ok(1);
    };
    let mut path = format!("/v1/service/{}?namespace={}", enc(&name), enc(namespace));
    if let Some(f) = filter {
        path.push_str(&format!("&filter={}", enc(&f)));
    }
    let regs = api.get(&path).await?;
    let mut regs = regs.as_array().cloned().unwrap_or_default();
    if regs.is_empty() {
        println!("No service registrations found");
        return Ok(0);
    }
    if format.wanted() {
        return Ok(format.print(&Value::Array(regs)));
    }
    regs.sort_by_key(|r| s(&r["JobID"]));
    let address = |r: &Value| match r["Port"].as_u64().unwrap_or(0) {
        0 => s(&r["Address"]),
        p => format!("{}:{p}", s(&r["Address"])),
    };
    let tags = |r: &Value| {
        let t: Vec<String> = r["Tags"].as_array().into_iter().flatten().map(s).collect();
        format!("[{}]", t.join(","))
    };
    if verbose {
        for r in &regs {
            print!(
                "{}\n\n",
                key_values(&[
                    ("ID", s(&r["ID"])),
                    ("Service Name", s(&r["ServiceName"])),
                    ("Namespace", s(&r["Namespace"])),
                    ("Job ID", s(&r["JobID"])),
                    ("Alloc ID", s(&r["AllocID"])),
                    ("Node ID", s(&r["NodeID"])),
                    ("Datacenter", s(&r["Datacenter"])),
                    ("Address", format!("{}:{}", s(&r["Address"]), r["Port"])),
                    ("Tags", tags(r)),
                ])
            );
        }
        return Ok(0);
    }
    let mut rows = vec![
        ["Job ID", "Address", "Tags", "Node ID", "Alloc ID"]
            .map(String::from)
            .to_vec(),
    ];
    for r in &regs {
        rows.push(vec![
            s(&r["JobID"]),
            address(r),
            tags(r),
            short_id(&s(&r["NodeID"])).to_string(),
            short_id(&s(&r["AllocID"])).to_string(),
        ]);
    }
    print!("{}", columns(&rows));
    Ok(0)
}
