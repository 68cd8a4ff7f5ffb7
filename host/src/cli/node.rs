//! `agent node status [-self] [-json] [ID]`, as `nomad node status`.

use serde_json::Value;

use super::{ApiArgs, s};

/// Node commands.
#[derive(Debug, clap::Subcommand)]
pub enum NodeCommand {
    /// List nodes, or show one: drivers with health, devices, resources, allocations.
    Status {
        /// API address and token.
        #[command(flatten)]
        api: ApiArgs,
        /// Show the node this agent runs.
        #[arg(long = "self")]
        this: bool,
        /// `-json`, or `-t TEMPLATE` (a Go template over the same data).
        #[command(flatten)]
        format: super::FormatArgs,
        /// Node id or prefix.
        id: Option<String>,
    },
}

pub(super) async fn run(cmd: NodeCommand) -> anyhow::Result<i32> {
    let NodeCommand::Status {
        api,
        this,
        format,
        id,
    } = cmd;
    let nodes = api.get("/v1/nodes").await?;
    let id = match (this, id) {
        (true, _) => Some("self".to_string()),
        (false, Some(prefix)) => {
            let found = nodes
                .as_array()
                .and_then(|l| {
                    l.iter()
                        .find(|n| n["ID"].as_str().is_some_and(|i| i.starts_with(&prefix)))
                })
                .and_then(|n| n["ID"].as_str().map(str::to_string));
            match found {
                Some(id) => Some(id),
                None => anyhow::bail!("No node(s) with prefix {prefix:?} found"),
            }
        }
        (false, None) => None,
    };
    let Some(id) = id else {
        if format.wanted() {
            return Ok(format.print(&nodes));
        }
        print_nodes(&nodes);
        return Ok(0);
    };
    let node = api.get(&format!("/v1/node/{id}")).await?;
    if format.wanted() {
        return Ok(format.print(&node));
    }
    print_node(&node);
    let allocs = api.get(&format!("/v1/node/{id}/allocations")).await?;
    print_resources(&node, &allocs);
    print_allocs(&allocs);
    Ok(0)
}

/// The node list, one line each.
fn print_nodes(nodes: &Value) {
    println!(
        "{:<10} {:<10} {:<12} {:<20} {:<8} {:<12} Status",
        "ID", "Node Pool", "DC", "Name", "Drain", "Eligibility"
    );
    for n in nodes.as_array().cloned().unwrap_or_default() {
        println!(
            "{:<10} {:<10} {:<12} {:<20} {:<8} {:<12} {}",
            super::short_id(n["ID"].as_str().unwrap_or("")),
            n["NodePool"].as_str().unwrap_or(""),
            n["Datacenter"].as_str().unwrap_or(""),
            n["Name"].as_str().unwrap_or(""),
            n["Drain"].to_string(),
            n["SchedulingEligibility"].as_str().unwrap_or(""),
            n["Status"].as_str().unwrap_or("")
        );
    }
}

/// One node: identity, drivers, devices, node events.
fn print_node(node: &Value) {
    for (k, v) in [
        ("ID", s(&node["ID"])),
        ("Name", s(&node["Name"])),
        ("Node Pool", s(&node["NodePool"])),
        ("Class", s(&node["NodeClass"])),
        ("DC", s(&node["Datacenter"])),
        ("Drain", node["Drain"].to_string()),
        ("Eligibility", s(&node["SchedulingEligibility"])),
        ("Status", s(&node["Status"])),
    ] {
        println!("{k:<11} = {v}");
    }
    print_drivers(node);
    print_devices(node);
    print_events(node);
}

/// `Allocated Resources`: what the live allocations hold of what the node offers, as
/// `nomad node status` shows it.
fn print_resources(node: &Value, allocs: &Value) {
    let live: Vec<&Value> = allocs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| {
            !matches!(
                a["ClientStatus"].as_str(),
                Some("complete" | "failed" | "lost")
            )
        })
        .collect();
    let (mut cpu, mut mem, mut disk) = (0u64, 0u64, 0u64);
    for a in &live {
        let r = &a["AllocatedResources"];
        for t in r["Tasks"].as_object().into_iter().flatten().map(|(_, t)| t) {
            cpu += t["Cpu"]["CpuShares"].as_u64().unwrap_or(0);
            mem += t["Memory"]["MemoryMB"].as_u64().unwrap_or(0);
        }
        disk += r["Shared"]["DiskMB"].as_u64().unwrap_or(0);
    }
    let n = &node["NodeResources"];
    let total = |v: &Value| v.as_u64().unwrap_or(0);
    let rows = [
        ["CPU", "Memory", "Disk"].map(String::from).to_vec(),
        vec![
            format!("{cpu}/{} MHz", total(&n["Cpu"]["CpuShares"])),
            format!("{}/{}", mib(mem), mib(total(&n["Memory"]["MemoryMB"]))),
            format!("{}/{}", mib(disk), mib(total(&n["Disk"]["DiskMB"]))),
        ],
    ];
    print!("\nAllocated Resources\n{}", super::columns(&rows));
}

/// Megabytes as Nomad's CLI prints sizes: `64 MiB`, `23 GiB`.
fn mib(mb: u64) -> String {
    if mb >= 1024 && mb.is_multiple_of(1024) || mb >= 10 * 1024 {
        format!("{} GiB", mb / 1024)
    } else if mb >= 1024 {
        format!("{:.1} GiB", mb as f64 / 1024.0)
    } else {
        format!("{mb} MiB")
    }
}

fn print_drivers(node: &Value) {
    let drivers = node["Drivers"].as_object().cloned().unwrap_or_default();
    println!(
        "\nDrivers\n{:<14} {:<9} {:<8} Description",
        "Name", "Detected", "Healthy"
    );
    for (name, d) in &drivers {
        println!(
            "{:<14} {:<9} {:<8} {}",
            name,
            d["Detected"].to_string(),
            d["Healthy"].to_string(),
            d["HealthDescription"].as_str().unwrap_or("")
        );
    }
}

fn print_devices(node: &Value) {
    let devices = node["NodeResources"]["Devices"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !devices.is_empty() {
        println!("\nDevices\n{:<32} {:<8} Instances", "Device", "Healthy");
        for g in &devices {
            let inst = g["Instances"].as_array().cloned().unwrap_or_default();
            let healthy = inst.iter().filter(|i| i["Healthy"] == true).count();
            println!(
                "{:<32} {:<8} {}",
                format!("{}/{}/{}", s(&g["Vendor"]), s(&g["Type"]), s(&g["Name"])),
                format!("{healthy}/{}", inst.len()),
                inst.iter()
                    .map(|i| s(&i["ID"]))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}

fn print_events(node: &Value) {
    let events = node["Events"].as_array().cloned().unwrap_or_default();
    if !events.is_empty() {
        println!("\nNode Events\n{:<22}  {:<10} Message", "Time", "Subsystem");
        for e in events.iter().rev() {
            let details: Vec<String> = e["Details"]
                .as_object()
                .map(|d| {
                    d.iter()
                        .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            println!(
                "{:<22}  {:<10} {} ({})",
                super::format_time(&e["Timestamp"]),
                s(&e["Subsystem"]),
                s(&e["Message"]),
                details.join(", ")
            );
        }
    }
}

/// The node's allocations.
fn print_allocs(allocs: &Value) {
    println!(
        "\nAllocations\n{:<10} {:<20} {:<12} {:<9} {:<9}",
        "ID", "Job ID", "Task Group", "Desired", "Status"
    );
    for a in allocs.as_array().cloned().unwrap_or_default() {
        println!(
            "{:<10} {:<20} {:<12} {:<9} {:<9}",
            super::short_id(a["ID"].as_str().unwrap_or("")),
            s(&a["JobID"]),
            s(&a["TaskGroup"]),
            s(&a["DesiredStatus"]),
            s(&a["ClientStatus"])
        );
    }
}
