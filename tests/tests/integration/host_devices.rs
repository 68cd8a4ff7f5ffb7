//! The built-in `host-devices` device plugin: the real device nodes this machine has, as a
//! dev agent reports them, reserved into a raw_exec task; and a fake sysfs tree, granted
//! with `read_paths`, for what the machine lacks (a GPU, serial ports, a missing node).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{TestAgent, stdout_of};

fn groups(node: &Value) -> Vec<Value> {
    node["NodeResources"]["Devices"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn group<'a>(groups: &'a [Value], vendor: &str, name: &str) -> &'a Value {
    groups
        .iter()
        .find(|g| g["Vendor"] == vendor && g["Name"] == name)
        .unwrap_or_else(|| panic!("no {vendor}/{name} group: {groups:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_agent_reports_this_machines_devices_and_a_task_gets_the_node() {
    let present: Vec<&str> = ["kvm", "fuse", "tun"]
        .into_iter()
        .filter(|n| Path::new("/sys/class/misc").join(n).exists())
        .collect();
    assert!(
        !present.is_empty(),
        "this machine has none of /dev/kvm, /dev/fuse, /dev/net/tun"
    );
    let t = TestAgent::start("", vec![]).await;
    let groups = groups(&t.get("/v1/node/self").await);
    for name in &present {
        let g = group(&groups, "linux", name);
        assert_eq!(g["Type"], *name);
        let node = if *name == "tun" {
            "/dev/net/tun".to_string()
        } else {
            format!("/dev/{name}")
        };
        let healthy = Path::new(&node).exists();
        assert_eq!(g["Instances"][0]["ID"], *name);
        assert_eq!(g["Instances"][0]["Healthy"], healthy, "{g:#}");
        assert_eq!(
            g["Attributes"]["major"]["Int"], 10,
            "misc devices are major 10: {g:#}"
        );
    }
    // A raw_exec task that asks for the first one gets it, and its path in its env.
    let name = present[0];
    let var = format!("HOST_DEVICES_{}", name.to_uppercase());
    let job = json!({ "ID": "hostdev", "Type": "batch", "TaskGroups": [{ "Name": "g",
        "RestartPolicy": { "Attempts": 0 },
        "Tasks": [{ "Name": "t", "Driver": "raw_exec",
            "Config": { "command": "/bin/sh",
                "args": ["-c", format!("test -c \"${var}\" && echo \"char device ${var}\"")] },
            "Resources": { "CPU": 100, "MemoryMB": 64,
                "Devices": [{ "Name": format!("linux/{name}"), "Count": 1 }] } }] }] });
    t.post_job(job).await;
    let (alloc, out) = stdout_of(&t, "hostdev").await;
    assert_eq!(alloc["ClientStatus"], "complete", "{alloc:#}");
    let node = if name == "tun" {
        "/dev/net/tun".to_string()
    } else {
        format!("/dev/{name}")
    };
    assert_eq!(out, format!("char device {node}\n"));
    let assigned = &alloc["AllocatedResources"]["Tasks"]["t"]["Devices"][0];
    assert_eq!(assigned["DeviceIDs"], json!([name]), "{alloc:#}");
}

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A sysfs with an amdgpu render node behind its PCI device and two serial ports, a devfs
/// with the render node and one of the ports.
fn fake_tree(root: &Path) {
    let sys = root.join("sys");
    let pci = sys.join("devices/pci0000:00/0000:03:00.0");
    write(pci.join("vendor"), "0x1002\n");
    write(pci.join("device"), "0x73bf\n");
    write(pci.join("mem_info_vram_total"), "17163091968\n");
    symlink("../../../bus/pci/drivers/amdgpu", pci.join("driver")).unwrap();
    let render = sys.join("class/drm/renderD128");
    write(
        render.join("uevent"),
        "MAJOR=226\nMINOR=128\nDEVNAME=dri/renderD128\n",
    );
    symlink(
        "../../../devices/pci0000:00/0000:03:00.0",
        render.join("device"),
    )
    .unwrap();
    for tty in ["ttyUSB0", "ttyUSB1"] {
        write(
            sys.join(format!("class/tty/{tty}/uevent")),
            &format!("MAJOR=188\nDEVNAME={tty}\n"),
        );
    }
    write(root.join("dev/dri/renderD128"), "");
    write(root.join("dev/ttyUSB0"), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_tree_gives_gpus_with_their_memory_and_nodes_that_are_missing_are_unhealthy() {
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path());
    let root = dir.path().display();
    let config = format!(
        r#"
plugin "host-devices" {{
  grant {{
    read_paths = ["{root}"]
  }}
  config {{
    sysfs   = "{root}/sys"
    devfs   = "{root}/dev"
    misc    = []
    classes = [{{ class = "tty", pattern = "ttyUSB*", vendor = "usb", type = "serial", name = "tty" }}]
  }}
}}
"#
    );
    let t = TestAgent::start(&config, vec![]).await;
    let groups = groups(&t.get("/v1/node/self").await);
    let gpu = group(&groups, "amd", "amdgpu-73bf");
    assert_eq!(gpu["Type"], "gpu");
    assert_eq!(gpu["Attributes"]["memory_mib"]["Int"], 16368, "{gpu:#}");
    assert_eq!(gpu["Attributes"]["driver"]["String"], "amdgpu", "{gpu:#}");
    assert_eq!(gpu["Instances"][0]["ID"], "renderD128");
    assert_eq!(gpu["Instances"][0]["Healthy"], true);
    let tty = group(&groups, "usb", "tty");
    assert_eq!(tty["Instances"][0]["Healthy"], true, "{tty:#}");
    assert_eq!(tty["Instances"][1]["Healthy"], false, "{tty:#}");
    let reason = tty["Instances"][1]["HealthDescription"].as_str().unwrap();
    assert_eq!(reason, format!("no device node {root}/dev/ttyUSB1"));
    // Nothing of the real machine: the plugin saw only the granted tree.
    assert!(
        !groups.iter().any(|g| g["Vendor"] == "linux"),
        "{groups:#?}"
    );
}
